;; A module importing a host function that ABI v1 does not have: the node must refuse it at
;; compile time, naming wasmkeep_v1.no_such_function (docs/abi.md "Host functions").
(module
  (import "wasmkeep_v1" "no_such_function" (func $nope (param i32) (result i32)))
  (memory (export "memory") 1 16)
  (func (export "wk_on_request") (result i32)
    (call $nope (i32.const 0))))
