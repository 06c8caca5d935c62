;; Exports wk_on_request with the wrong type ((i32) -> i64 instead of () -> i32): the node
;; should refuse the module at compile time, naming the export and the expected type.
(module
  (memory (export "memory") 1 16)
  (func (export "wk_on_request") (param i32) (result i64) (i64.const 0)))
