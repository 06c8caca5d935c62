(module
  (import "test" "no_such_function" (func))
  (memory (export "memory") 1 1)
  (func (export "run") (result i32) (i32.const 0)))
