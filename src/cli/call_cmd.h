// `wasmkeep call`: a convenience client for the actor API.
//
//   wasmkeep call TENANT/CLASS/NAME[/PATH][?QUERY] [-X METHOD] [-d DATA | -d @FILE]
//                 [-H "Name: value"]... [--token TOKEN] [--node HOST:PORT] [-i]
//
// Sends METHOD (default GET, or POST when -d is given) to
// http://NODE/v1/actors/TENANT/CLASS/NAME/PATH with `Authorization: Bearer TOKEN` (the
// token from --token, else WASMKEEP_TOKEN). NODE defaults to the config's node.listen,
// else 127.0.0.1:8080. Prints the response body (with -i, the status line and headers
// first). Exit 0 for a 2xx answer; otherwise the status goes to stderr and the exit code
// is 4 for 404, 2 for other 4xx, 1 for 5xx or no answer. Documented in docs/cli.md.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"

namespace wk::cli {

void AddCallCommand(CLI::App& app, const GlobalOptions& globals, int* result);

}  // namespace wk::cli
