;; actor_bench's host-call module: the cost of a trivial export call and of one call into
;; the host, measured without the ABI. `call_host_1000` and `loop_1000` run the same loop
;; (1000 rounds, a running i32 sum); the first calls the imported host function each round,
;; the second adds in wasm instead, so their difference is 1000 host calls.
(module
  (import "bench" "add_one" (func $add_one (param i32) (result i32)))
  (memory (export "memory") 1 1)
  (func (export "noop") (result i32) (i32.const 0))
  (func (export "call_host_1000") (result i32)
    (local $i i32) (local $acc i32)
    (loop $l
      (local.set $acc (call $add_one (local.get $acc)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))
    ;; 0 when all 1000 calls ran and returned their argument plus one.
    (i32.sub (local.get $acc) (i32.const 1000)))
  (func (export "loop_1000") (result i32)
    (local $i i32) (local $acc i32)
    (loop $l
      (local.set $acc (i32.add (local.get $acc) (i32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))
    (i32.sub (local.get $acc) (i32.const 1000)))
)
