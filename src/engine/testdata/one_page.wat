;; One page of linear memory, which is also its maximum: always "near its limit", never
;; grown. Its traps are traps, not out-of-memory (EngineTest.ATrapInAMemoryThatNeverGrewIsATrap).
(module
  (memory (export "memory") 1 1)
  (func $rec (result i32) (i32.add (call $rec) (i32.const 1)))
  (func (export "unreachable") (result i32) unreachable)
  (func (export "recurse") (result i32) (call $rec))
  (func (export "oob") (result i32) (i32.load (i32.const 65536))))
