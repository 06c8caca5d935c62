// `wasmkeep admin token ...`: operator tokens, which open the console and the admin JSON
// routes of every node (docs/security.md, "Operators"; control/operators.h).
//
//   wasmkeep admin token add LABEL         mint an operator token (printed as the last line)
//   wasmkeep admin token list [--json]     every operator token's id, label and creation time
//   wasmkeep admin token revoke TOKEN_ID   remove one (nodes refuse it within 2 s)
//
// Like `tenant add`, `add` prints the token as the LAST line of its output, once: the
// bucket keeps only its hash. Exit codes as every command (cli/common.h): 2 a bad label or
// token id, 3 the most tokens there may be, 4 no such token id.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

void AddAdminCommand(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
