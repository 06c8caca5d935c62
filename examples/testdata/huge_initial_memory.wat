;; Initial memory of 2048 pages (128 MiB), over the default actors.max_memory_bytes
;; (64 MiB): the node must refuse the module at compile time (docs/abi.md "Exports").
(module
  (memory (export "memory") 2048)
  (func (export "wk_on_request") (result i32) (i32.const 0)))
