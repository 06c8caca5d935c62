// `wasmkeep bucket ...`: an operator's view of the bucket through the ObjectStore, with
// the same conditional semantics the cluster uses.
//
//   wasmkeep bucket ls [PREFIX] [--long] [--json]
//   wasmkeep bucket get KEY [--output FILE]
//   wasmkeep bucket put KEY FILE [--if-none-match | --if-match VERSION]   (FILE "-" = stdin)
//   wasmkeep bucket rm KEY [--if-match VERSION]
//
// Exit codes (ExitCode) are part of the interface: scripts tell a lost race from an error.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/common.h"

namespace wk::cli {

// Registers the `bucket` subcommand; *result receives the exit code when it ran.
void AddBucketCommand(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
