// `wasmkeep tenant ...`: tenants and their access tokens (docs/tenants.md).
//
//   wasmkeep tenant add NAME                    create NAME with one token
//   wasmkeep tenant add-token NAME              mint another token for NAME
//   wasmkeep tenant list [--json]               every tenant and its token ids
//   wasmkeep tenant revoke-token NAME TOKEN_ID  remove a token (nodes refuse it within 2 s)
//
// `add` and `add-token` print the new token as the LAST line of their output: it is shown
// once, the bucket keeps only its hash (so `TOKEN=$(wasmkeep tenant add acme | tail -1)`).
// Exit codes as every command (cli/common.h): 2 bad name or token id, 3 the tenant exists
// (or has the most tokens it may), 4 no such tenant or token id. Documented in docs/cli.md.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

void AddTenantCommand(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
