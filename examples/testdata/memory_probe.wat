;; The memory the runtime charges an actor (docs/architecture.md, "Memory"): 16 pages (1 MiB)
;; of linear memory, none of it touched when instantiated (no data segment, no stack in
;; linear memory), and a table that can grow. The request's method picks what an event does:
;;   GET     touches nothing
;;   POST    writes one byte in every 4 KiB page: all of it
;;   DELETE  reads one byte of every 4 KiB page (reads map pages too: still charged)
;;   PATCH   grows the table by 1000 elements
(module
  (import "wasmkeep_v1" "request_get" (func $request_get (param i32) (result i32)))
  (memory (export "memory") 16 16)
  (table 1 funcref)
  (func $touch (param $write i32) (local $at i32) (local $sum i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $at) (i32.const 1048576)))
        (if (local.get $write)
          (then (i32.store8 (local.get $at) (i32.const 1)))
          (else (local.set $sum (i32.add (local.get $sum) (i32.load8_u (local.get $at))))))
        (local.set $at (i32.add (local.get $at) (i32.const 4096)))
        (br $next))))
  (func (export "wk_on_request") (result i32) (local $method i32)
    ;; The method's length: GET 3, POST 4, PATCH 5, DELETE 6.
    (local.set $method (call $request_get (i32.const 0)))
    (if (i32.eq (local.get $method) (i32.const 4)) (then (call $touch (i32.const 1))))
    (if (i32.eq (local.get $method) (i32.const 6)) (then (call $touch (i32.const 0))))
    (if (i32.eq (local.get $method) (i32.const 5))
      (then (drop (table.grow 0 (ref.null func) (i32.const 1000)))))
    (i32.const 0)))
