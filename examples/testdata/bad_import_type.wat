;; Imports wasmkeep_v1.now_ms with the wrong type (() -> i32 instead of () -> i64): the node
;; should refuse the module at compile time rather than fail at instantiation or call time.
(module
  (import "wasmkeep_v1" "now_ms" (func $now (result i32)))
  (memory (export "memory") 1 16)
  (func (export "wk_on_request") (result i32)
    (drop (call $now))
    (i32.const 0)))
