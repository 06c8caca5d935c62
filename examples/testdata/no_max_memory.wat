;; A memory without a declared maximum: valid; the node imposes actors.max_memory_bytes as
;; its maximum at compile time (docs/abi.md "Exports", memory). The handler returns 0: the
;; default response, 200 with an empty body.
(module
  (memory (export "memory") 1)
  (func (export "wk_on_request") (result i32)
    i32.const 0))
