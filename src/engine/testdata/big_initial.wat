;; 2000 pages (125 MiB) initial memory: over a 64 MiB limit.
(module
  (memory (export "memory") 2000)
  (func (export "run") (result i32) (i32.const 0)))
