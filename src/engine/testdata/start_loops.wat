;; A start function that never returns: instantiation must be bounded too.
(module
  (memory (export "memory") 1 1)
  (func $start (loop $l (br $l)))
  (start $start)
  (func (export "run") (result i32) (i32.const 0)))
