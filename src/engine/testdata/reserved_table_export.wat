;; Exports a growable table under the name the engine reserves for its own export of it
;; (kTableExportPrefix in engine.h): refused at compile time.
(module
  (memory (export "memory") 1 1)
  (table (export "wasmkeep:table:0") 1 funcref))
