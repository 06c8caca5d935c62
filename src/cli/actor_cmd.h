// `wasmkeep actor ...`: working with actor modules on this machine, and with quarantined
// actors in the bucket.
//
//   wasmkeep actor check FILE.wasm [--json]
//   wasmkeep actor quarantined [--tenant T] [--all] [--json]
//   wasmkeep actor unquarantine TENANT/CLASS/NAME
//   wasmkeep actor alarm TENANT/CLASS/NAME [--json]
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
// (docs/alarms.md). Documented in docs/cli.md.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

void AddActorCommand(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
