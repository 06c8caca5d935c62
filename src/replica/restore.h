// Restore: an actor's state from its log in the bucket, following the chain of owner
// fences (docs/architecture.md, "Durable storage"; ADR 0009's owner fence).
//
//   1. List wal/<actor>/ and snapshot/<actor>/ (both at once).
//   2. The newest fence is segment <G>-0 of the highest generation G that has one. Read it:
//      it names the snapshot its hold started from (base) and the run of segments after
//      that snapshot up to the tip that hold restored.
//   3. The chain is: base, run, then G's own segments <G>-1 .. <G>-k (contiguous from 1:
//      a hold sends a segment only after the previous one is acknowledged). If G wrote a
//      snapshot at <G>-j (j <= k), it replaces base and everything before it.
//   4. The snapshot and every segment after it are read in parallel, at most
//      `parallelism` at once, each read bounded by `read_timeout` and retried with back-off
//      up to `read_attempts` times, so one slow read does not stall the rest.
//   5. They are applied in chain order. Segments of older generations that are not on the
//      chain (an upload of a fenced or lapsed hold that landed late) are ignored.
//
// An object the chain names that is missing or corrupt fails the restore with kFatal: the
// actor stays unavailable rather than come back without acknowledged writes. A log that
// already holds generation >= ours fails with kPreconditionFailed: a later hold exists.
//
// Threading: Env loop thread. Simulator-clean.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "actor/state_map.h"
#include "base/time.h"
#include "base/broken_models.h"
#include "env/env.h"
#include "replica/format.h"
#include "store/object_store.h"

namespace wk::replica {

struct RestoreOptions {
  Duration read_timeout = std::chrono::seconds(5);
  int read_attempts = 4;
  int parallelism = 16;  // 1: one read at a time (the benchmark's comparison)
  Duration list_timeout = std::chrono::seconds(10);
  BrokenModels broken;  // restore-ignores-fence (base/broken_models.h)
};

struct Restored {
  actor::StateMap state;
  // The chain this restore followed: the new hold's fence names it.
  FenceInfo chain;
  // What the restore saw (garbage collection starts from it).
  std::vector<Position> listed_segments;
  std::vector<Position> listed_snapshots;
  // Bytes of segments on the chain after the base (snapshot policy counts from here).
  std::uint64_t bytes_since_base = 0;
  int reads = 0;        // objects read (retries not counted)
  int read_retries = 0;
  Duration took{};
};

// Restores actor's state for a hold of generation `generation`.
Task<Result<Restored>> Restore(Env& env, ObjectStore& store, ActorId actor, Generation generation,
                               RestoreOptions options);

// Every key under prefix, all pages, each page bounded by timeout and retried up to
// attempts times on kRetryable/kUnknownOutcome.
Task<Result<std::vector<ListEntry>>> ListAll(Env& env, ObjectStore& store, std::string prefix, Duration timeout,
                                             int attempts);

}  // namespace wk::replica
