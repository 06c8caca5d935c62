;; The memory pool's failed instantiations: the start function writes 7 at byte 100 and
;; traps, unless byte 100 is already non-zero (a memory that kept what the last one wrote),
;; in which case the instantiation succeeds.
(module
  (memory (export "memory") 1 4)
  (func $start
    (if (i32.eqz (i32.load8_u (i32.const 100)))
      (then (i32.store8 (i32.const 100) (i32.const 7)) (unreachable))))
  (start $start)
)
