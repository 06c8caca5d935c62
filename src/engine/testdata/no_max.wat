;; Memory without a declared maximum: the engine must impose one.
(module
  (memory (export "memory") 1)
  (func (export "grow_big") (result i32) (memory.grow (i32.const 5000)))
  (func (export "run") (result i32) (i32.const 0)))
