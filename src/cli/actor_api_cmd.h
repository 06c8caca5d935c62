// `wasmkeep actor list | inspect | delete`: the actors of a class, one actor's keys and
// values, and deleting one — through a node's HTTP API (server/actor_admin.h), with a
// tenant token (its own tenant only) or an operator token (`wasmkeep admin token add`).
//
//   wasmkeep actor list TENANT/CLASS [--prefix P] [--after NAME] [--limit N] [--all] [--json]
//   wasmkeep actor inspect TENANT/CLASS/NAME [--prefix P] [--after KEY] [--limit N] [--all]
//                                            [--hex | --text] [--max-value-bytes N] [--json]
//   wasmkeep actor delete TENANT/CLASS/NAME
//   wasmkeep actor restore TENANT/CLASS/NAME --at TIME | --batch ID
//   wasmkeep actor fork TENANT/CLASS/NAME --at TIME | --batch ID --to [CLASS/]NAME
//   wasmkeep actor messages TENANT/CLASS/NAME --retry SEQ | --drop SEQ   (RunDeadMessage)
//   common: [--token TOKEN (env WASMKEEP_TOKEN)] [--node HOST:PORT]
//
// They go through a node, not the bucket, because a node is what may act: the inspector
// reads a resident actor from its owner, a deletion acquires the actor through the
// ownership protocol first (docs/console.md), and a dead message is sent again or dropped
// by the node holding its sender, at the sender's input gate (docs/messages.md, "Dead
// messages"), and a restore or fork is made by the node that takes the actor as its owner
// (docs/storage.md, "History and point-in-time restore"): only an actor's owner writes its
// state. Exit codes as `call` and every command
// (cli/common.h): 0 ok, 2 refused (400, 401, 403), 3 conflict (409), 4 not found, 1 any
// other failure. Documented in docs/cli.md.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "cli/common.h"

namespace wk::cli {

// Adds list, inspect and delete under `actor`.
void AddActorApiCommands(CLI::App& actor, const GlobalOptions& globals, int* result);

// `actor messages TENANT/CLASS/NAME --retry SEQ | --drop SEQ`: asks a node to send the dead
// message SEQ again (under a new number, printed) or to drop it. Exactly one of retry and
// drop is set (a number from 1).
struct DeadMessageArgs {
  std::string actor;
  std::uint64_t seq = 0;
  bool retry = false;  // else drop
  std::string token;
  std::string node;
  bool json = false;
};
int RunDeadMessage(const GlobalOptions& globals, const DeadMessageArgs& args);

}  // namespace wk::cli
