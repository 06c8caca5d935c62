// Restore: an actor's state from its log in the bucket, following the chain the newest owner
// fence names (docs/storage.md, "Restore" and "The owner fence"), its objects read in
// parallel with bounded retries and applied in chain order. Guarantees: segments off the
// chain (late uploads of older holds) are ignored; an object the chain names that is missing
// or corrupt is kFatal (never a state without acknowledged writes); a log holding a
// generation >= ours is kPreconditionFailed. Threading: Env loop thread; simulator-clean.
// Details (the steps): docs/internals.md, "Restore".
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

// Restores actor's state for a hold of generation `generation`. `resume_segment` set: the
// hold is a sleeping one that wakes (docs/node-lease.md, "Sleeping holds"), so the log holds
// its generation already: the newest fence must be its own, and its own segments must run
// without a gap exactly to resume_segment (or a snapshot of it there), none after; anything
// else is kPreconditionFailed (the caller takes a new hold instead).
Task<Result<Restored>> Restore(Env& env, ObjectStore& store, ActorId actor, Generation generation,
                               RestoreOptions options, std::optional<std::uint64_t> resume_segment = std::nullopt);

// The bodies of keys, in order, read `parallelism` at once with the restore's bounded
// retries; a missing object is kNotFound naming it (the history reads, its callers, list
// again: the owner's garbage collection may have removed it since their listing).
Task<Result<std::vector<std::string>>> ReadObjects(Env& env, ObjectStore& store, std::vector<std::string> keys,
                                                   RestoreOptions options);

// Every key under prefix, all pages, each page bounded by timeout and retried up to
// attempts times on kRetryable/kUnknownOutcome.
Task<Result<std::vector<ListEntry>>> ListAll(Env& env, ObjectStore& store, std::string prefix, Duration timeout,
                                             int attempts);

}  // namespace wk::replica
