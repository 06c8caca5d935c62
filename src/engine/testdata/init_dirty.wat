;; The memory pool's failed _initialize: it writes 9 at byte 200 and traps, unless byte 200 is
;; already non-zero (a memory that kept what the last one wrote), in which case it succeeds.
(module
  (memory (export "memory") 1 4)
  (func (export "_initialize")
    (if (i32.eqz (i32.load8_u (i32.const 200)))
      (then (i32.store8 (i32.const 200) (i32.const 9)) (unreachable))))
)
