// `wasmkeep serve`: runs a node — the cluster part (node lease, listing, fence watch,
// ownership, docs/node-lease.md), the actors with their durable storage (server/actor_host.h), and
// one HTTP listener for the actor API (/v1/actors/...) and the operator endpoint
// (/metrics, /healthz, /readyz). Documented in docs/cli.md.
//
//   wasmkeep serve [--node-id ID] [--listen ADDR] [--advertise ADDR]
//
// Exit status: 0 after a clean stop (SIGTERM or SIGINT: the lease is released), 2 for a bad
// configuration, 6 when the node lease was lost (fenced, replaced or deleted), 7 when
// another process runs under the same node id. A supervisor restarts on 6 and 7
// (systemd Restart=on-failure).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

void AddServeCommand(CLI::App& app, const GlobalOptions& globals, int* result);

// The node id used when none is configured: the host name, with anything outside
// [A-Za-z0-9._-] replaced by '-', cut to 64 characters.
std::string DefaultNodeId();

}  // namespace wk::cli
