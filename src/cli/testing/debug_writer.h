// Tests only: the WASMKEEP_DEBUG_WRITER hook of `wasmkeep serve` (docs/DEVELOPING.md,
// "Test hooks"). For the multi-process storage tests (tests/cluster/storage_test.sh): a
// node that writes to the listed actors through the real replica and prints exactly which
// writes were acknowledged, under faults the HTTP API cannot stage. What it writes and
// prints is StartDebugWriters'; its knobs are DebugWriterOptions'.
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

// WASMKEEP_DEBUG_WRITER_OPTIONS is comma-separated NAME=VALUE: rate=N (writes_per_second),
// inflight=N, writes=N, snapshot_every=N (storage.snapshot_every_segments) and
// parallelism=N (storage.restore_parallelism); the last two default to the [storage]
// settings.
struct DebugWriterOptions {
  std::vector<ActorId> actors;
  double writes_per_second = 200;  // per actor
  int inflight = 8;                // commits not yet acknowledged, at most
  // Per hold; once reached and all acknowledged, it logs "debug writer idle". 0: unlimited.
  std::uint64_t writes = 0;
  replica::ReplicaOptions replica;
};

// Parses WASMKEEP_DEBUG_WRITER's actor list and WASMKEEP_DEBUG_WRITER_OPTIONS; the
// replica's options are `storage` (the config's [storage]) with the knobs applied.
// kInvalidArgument names the bad item.
Result<DebugWriterOptions> ParseDebugWriter(std::string_view actors, std::string_view options,
                                            const replica::ReplicaOptions& storage);

// Spawns one writer per actor on env. Every pointer must outlive env's tasks.
//
// Each writer acquires a hold once the node lease is valid, opens a Replica (restore and
// owner fence) and writes continuously. Each write is one batch: read `log` (comma-separated
// ids), append the next id `<node>.<generation>.<n>`, put `log` and `e/<id>`; several
// commits are kept in flight (group commit). Every id is printed as `acked <id>` on stdout,
// flushed, only once WhenReleasable says Ok. The restore is logged as one line ("debug
// writer restored": the restored `log`, its id count, the number of `e/` keys and whether
// they match it, reads, the most reads in flight at once, the chain, the time taken). On a
// replica failure (an upload failed or was Late, or the hold ended) it logs "debug writer:
// replica failed", releases the hold if still valid, and acquires and opens again a second
// later.
void StartDebugWriters(RealEnv* env, ClusterNode* node, ObjectStore* store, replica::ReplicaTotals* totals,
                       NodeId node_id, std::shared_ptr<const DebugWriterOptions> options);

}  // namespace wk::cli
