// `wasmkeep deploy` and `wasmkeep class ...`: deployed classes (docs/tenants.md).
//
//   wasmkeep deploy --tenant T --class C FILE.wasm [--json]
//   wasmkeep class list [--tenant T] [--json]
//
// `deploy` runs the checks `wasmkeep actor check` runs (the ABI, then a V8 compile with the
// config's [actors] limits), so a module a node would refuse is never stored; then it
// stores the module under classes/T/C/modules/<sha256> and points classes/T/C/current at
// it. Actors of the class run the new module from their next start. Exit codes as every
// command (cli/common.h): 2 bad name, unreadable file or a module that fails the checks
// (the message names the cause), 4 no such tenant, 5 the pointer's write may not have
// landed (deploying again is safe). Documented in docs/cli.md.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

// Registers `deploy` and `class`.
void AddClassCommands(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
