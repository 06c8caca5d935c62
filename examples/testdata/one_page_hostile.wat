;; A hostile module of one page of linear memory (its declared maximum too), for the
;; quarantine's strike rules (docs/security.md, "Poisoned actors"). The request's method
;; picks what an event does:
;;   GET     traps at once (unreachable): with one page that is also its maximum, the trap
;;           happens "near the memory limit", which once counted as an out-of-memory strike
;;   POST    recurses without end (a stack overflow: a trap the engine contains)
;;   PATCH   grows its table 100,000 elements at a time until table.grow fails (at
;;           actors.max_table_elements; 1,000,000 elements are 8 MB of the worker's V8 heap,
;;           so a few such actors fill a small actors.isolate_heap_limit_bytes)
;;   OPTIONS grows it the same way, then traps: each such event starts from a new instance
;;           and allocates its table again (beside others' tables: the heap's limit, a strike)
;;   DELETE  answers 200 with nothing
(module
  (import "wasmkeep_v1" "request_get" (func $request_get (param i32) (result i32)))
  (memory (export "memory") 1 1)
  (table $a 0 1000000 funcref)
  (func $recurse (result i32) (i32.add (call $recurse) (i32.const 1)))
  (func $grow_table
    (block $done
      (loop $more
        (br_if $done (i32.eq (table.grow $a (ref.null func) (i32.const 100000)) (i32.const -1)))
        (br $more))))
  (func (export "wk_on_request") (result i32) (local $method i32)
    ;; The method's length: GET 3, POST 4, PATCH 5, DELETE 6, OPTIONS 7.
    (local.set $method (call $request_get (i32.const 0)))
    (if (i32.eq (local.get $method) (i32.const 3)) (then unreachable))
    (if (i32.eq (local.get $method) (i32.const 4)) (then (drop (call $recurse))))
    (if (i32.eq (local.get $method) (i32.const 5)) (then (call $grow_table)))
    (if (i32.eq (local.get $method) (i32.const 7)) (then (call $grow_table) unreachable))
    (i32.const 0)))
