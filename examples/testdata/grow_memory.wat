;; Grows its memory (declared without a maximum) 16 pages (1 MiB) at a time until
;; memory.grow fails, then answers 200 with the final size in 64 KiB pages as a 4-byte
;; little-endian body. With the maximum the node imposes (actors.max_memory_bytes, default
;; 64 MiB) the answer is that limit / 65536 (1024 by default): memory.grow beyond the limit
;; must return -1, not trap and not succeed (docs/abi.md "Limits").
(module
  (import "wasmkeep_v1" "response_write" (func $write (param i32 i32)))
  (memory (export "memory") 1)
  (func (export "wk_on_request") (result i32)
    (block $done
      (loop $grow
        (br_if $done (i32.eq (memory.grow (i32.const 16)) (i32.const -1)))
        (br $grow)))
    ;; Grows by 1 page at a time for the last partial step, so the answer is exact.
    (block $done1
      (loop $grow1
        (br_if $done1 (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $grow1)))
    (i32.store (i32.const 0) (memory.size))
    (call $write (i32.const 0) (i32.const 4))
    (i32.const 0)))
