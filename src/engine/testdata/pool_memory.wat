;; The memory pool (WorkerOptions::memory_pool_size): a data segment, writes near and far in
;; memory, and growth, to tell a reused memory from a new one.
(module
  (memory (export "memory") 1 4)
  (data (i32.const 16) "\2a")
  (func (export "dirty") (result i32)
    (i32.store8 (i32.const 16) (i32.const 99))
    (i32.store (i32.const 40000) (i32.const 12345))
    (i32.const 0))
  (func (export "read_segment") (result i32) (i32.load8_u (i32.const 16)))
  (func (export "read_far") (result i32) (i32.load (i32.const 40000)))
  (func (export "grow") (result i32) (memory.grow (i32.const 1)))
)
