;; Imports a host function with the wrong signature.
(module
  (import "test" "add" (func (param i64) (result i32)))
  (memory (export "memory") 1 1)
  (func (export "run") (result i32) (i32.const 0)))
