// `wasmkeep cluster ...`: the operator's view of the node leases (docs/node-lease.md, "`wasmkeep cluster status`",
// "When to fence" and "When to forget").
//
//   wasmkeep cluster status [--json]
//   wasmkeep cluster fence NODE [--if-match VERSION]
//   wasmkeep cluster forget NODE
//   wasmkeep cluster drain NODE [--wait SECONDS] / undrain NODE
//   wasmkeep cluster cost [--since DURATION] [--prices aws-s3|r2|FILE] [--metrics URL]... [--no-storage] [--json]
//
// Timings come from the config file's [lease] section (they decide when a lease ran out
// and when an old heartbeat is stale). Documented in docs/cli.md and docs/node-lease.md.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

void AddClusterCommand(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
