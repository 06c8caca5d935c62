;; A module with memory but no wk_on_request export: the node must refuse it at compile
;; time, naming the missing export (docs/abi.md "Exports").
(module
  (memory (export "memory") 1 16)
  (func (export "wk_on_alarm") (result i32) (i32.const 0)))
