;; Linear memory as the kernel holds it (Instance::ResidentMemoryBytes): 16 pages (1 MiB) of
;; memory, none of it touched at instantiation (no data segment), and exports that write,
;; read or touch nothing of it, one byte per 4 KiB page; plus a table that can grow.
(module
  (memory (export "memory") 16 16)
  (table 4 funcref)
  ;; Writes one byte in each 4 KiB page from `from` (bytes) to the end of memory.
  (func $write_from (param $at i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $at) (i32.const 1048576)))
        (i32.store8 (local.get $at) (i32.const 1))
        (local.set $at (i32.add (local.get $at) (i32.const 4096)))
        (br $next))))
  (func (export "touch_all") (result i32) (call $write_from (i32.const 0)) (i32.const 0))
  (func (export "touch_half") (result i32) (call $write_from (i32.const 524288)) (i32.const 0))
  ;; Only reads: a read of an untouched page maps the kernel's zero page, still counted.
  (func (export "read_all") (result i32) (local $at i32) (local $sum i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $at) (i32.const 1048576)))
        (local.set $sum (i32.add (local.get $sum) (i32.load8_u (local.get $at))))
        (local.set $at (i32.add (local.get $at) (i32.const 4096)))
        (br $next)))
    (local.get $sum))
  (func (export "none") (result i32) (i32.const 0))
  (func (export "grow_table") (result i32) (table.grow 0 (ref.null func) (i32.const 1000)))
)
