// `wasmkeep actor ...`: working with actor modules on this machine, and with quarantined
// actors in the bucket.
//
//   wasmkeep actor check FILE.wasm [--json]
//   wasmkeep actor quarantined [--tenant T] [--all] [--json]
//   wasmkeep actor unquarantine TENANT/CLASS/NAME
//   wasmkeep actor alarm TENANT/CLASS/NAME [--json]
//   wasmkeep actor history TENANT/CLASS/NAME [--since TIME] [--limit N] [--at TIME | --batch ID] [--json]
//
// `check` runs the checks a node runs before it accepts a class (docs/abi.md): the bytes are
// WebAssembly, every import is one the host provides with the right signature, the ABI's
// exports are there, the memory fits actors.max_memory_bytes (from the config's [actors]
// section) — then compiles it with V8. Exit 0 and a summary if it passes; exit 2 with the
// cause if not. `quarantined` lists the quarantine records (control/quarantine.h) of actors
// quarantined now (`--all`: every record, strikes only included; a corrupt one is listed
// with its error); `unquarantine` deletes an actor's record, lifting its quarantine (exit 4
// if it had none). `alarm` prints the actor's alarm as its durable state holds it (a
// read-only restore), its ownership record and its alarm index entries, stale ones marked
// (docs/alarms.md). `history` lists the actor's batches in the retention window, or its
// state at a point, read from the bucket (replica/history.h; docs/storage.md, "History and
// point-in-time restore"). Documented in docs/cli.md.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

void AddActorCommand(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
