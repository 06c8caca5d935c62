// `wasmkeep actor list | inspect | delete`: the actors of a class, one actor's keys and
// values, and deleting one — through a node's HTTP API (server/actor_admin.h), with a
// tenant token (its own tenant only) or an operator token (`wasmkeep admin token add`).
//
//   wasmkeep actor list TENANT/CLASS [--prefix P] [--after NAME] [--limit N] [--all] [--json]
//   wasmkeep actor inspect TENANT/CLASS/NAME [--prefix P] [--after KEY] [--limit N] [--all]
//                                            [--hex | --text] [--max-value-bytes N] [--json]
//   wasmkeep actor delete TENANT/CLASS/NAME
//   common: [--token TOKEN (env WASMKEEP_TOKEN)] [--node HOST:PORT]
//
// They go through a node, not the bucket, because a node is what may act: the inspector
// reads a resident actor from its owner, and a deletion acquires the actor through the
// ownership protocol first (docs/console.md). Exit codes as `call` and every command
// (cli/common.h): 0 ok, 2 refused (400, 401, 403), 3 conflict (409), 4 not found, 1 any
// other failure. Documented in docs/cli.md.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

// Adds list, inspect and delete under `actor`.
void AddActorApiCommands(CLI::App& actor, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
