// Tests only: the WASMKEEP_DEBUG_WRITER hook of `wasmkeep serve`. The multi-process
// storage tests (tests/cluster/storage_test.sh) need a node that writes through the real
// replica and says exactly which writes were acknowledged, under faults the HTTP API
// cannot stage. For each
// listed actor this acquires a hold once the node lease is valid, opens a Replica (restore
// + owner fence), and writes continuously:
//
//   each write is one batch: read `log` (comma-separated ids), append the next id
//   `<node>.<generation>.<n>`, put `log` and `e/<id>`. Several commits are kept in flight
//   (group commit). Every id is printed as `acked <id>` on stdout, flushed, only once
//   WhenReleasable says Ok.
//
// The restore is logged as one line ("debug writer restored": the restored `log`, its id
// count, the number of `e/` keys and whether they match it, reads, the largest number of
// reads in flight at once, the chain, the time taken). On a replica failure (an upload
// failed or was Late, or the hold ended) it logs "debug writer: replica failed", releases
// the hold if still valid, and acquires and opens again a second later.
//
// Knobs (WASMKEEP_DEBUG_WRITER_OPTIONS, comma-separated NAME=VALUE):
//   rate=N            writes per second per actor (default 200)
//   inflight=N        commits not yet acknowledged, at most (default 8)
//   writes=N          stop writing after N writes per hold, then log "debug writer idle"
//                     once all are acknowledged (default 0: never stop)
//   snapshot_every=N  storage.snapshot_every_segments (default: the [storage] setting)
//   parallelism=N     storage.restore_parallelism (default: the [storage] setting)
//
// Never for production: `serve` logs a warning when it is set. Threading: the Env loop.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_node.h"
#include "env/real_env.h"
#include "replica/replica.h"
#include "store/object_store.h"

namespace wk::cli {

struct DebugWriterOptions {
  std::vector<ActorId> actors;
  double writes_per_second = 200;
  int inflight = 8;
  std::uint64_t writes = 0;  // per hold; 0: unlimited
  replica::ReplicaOptions replica;
};

// Parses WASMKEEP_DEBUG_WRITER's actor list and WASMKEEP_DEBUG_WRITER_OPTIONS; the
// replica's options are `storage` (the config's [storage]) with the knobs applied.
// kInvalidArgument names the bad item.
Result<DebugWriterOptions> ParseDebugWriter(std::string_view actors, std::string_view options,
                                            const replica::ReplicaOptions& storage);

// Spawns one writer per actor on env. Every pointer must outlive env's tasks.
void StartDebugWriters(RealEnv* env, ClusterNode* node, ObjectStore* store, replica::ReplicaTotals* totals,
                       NodeId node_id, std::shared_ptr<const DebugWriterOptions> options);

}  // namespace wk::cli
