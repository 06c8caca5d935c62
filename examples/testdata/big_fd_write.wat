;; fd_write of one 8 MiB iovec to stdout: the host must take a bounded part (a short write
;; of 65536 bytes) instead of pushing megabytes through the log inside one host call, which
;; the CPU watchdog cannot interrupt. Answers 200 if nwritten was 65536, else fails (returns 1).
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 129 129)
  (func (export "wk_on_request") (result i32)
    ;; iovec at 8 MiB: {ptr 0, len 8 MiB}; nwritten at 8 MiB + 16
    (i32.store (i32.const 8388608) (i32.const 0))
    (i32.store (i32.const 8388612) (i32.const 8388608))
    (drop (call $fd_write (i32.const 1) (i32.const 8388608) (i32.const 1) (i32.const 8388624)))
    (if (result i32) (i32.eq (i32.load (i32.const 8388624)) (i32.const 65536))
      (then (i32.const 0)) (else (i32.const 1)))))
