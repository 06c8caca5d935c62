;; Imports a WASI preview 1 function outside docs/abi.md's table (sock_accept): the node must
;; refuse the module at compile time, naming wasi_snapshot_preview1.sock_accept.
(module
  (import "wasi_snapshot_preview1" "sock_accept" (func $accept (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1 16)
  (func (export "wk_on_request") (result i32)
    (call $accept (i32.const 3) (i32.const 0) (i32.const 0))))
