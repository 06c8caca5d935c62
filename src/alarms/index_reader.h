// Reading the alarm index for people (docs/console.md; docs/http-api.md, "Alarms due and
// late"): which alarms are due or late across the shards, and which alarm each actor of a
// listing page has, without waking an actor. An entry may outlive its alarm, so the index
// says which alarms *may* be pending: of an actor's entries, the latest set's (highest
// generation, then batch) is its alarm unless that set was just deleted; the state decides.
//
// Cost: one LIST per 1,000 entries of each shard read, never a GET; a read stops at
// `max_pages` pages (then `complete` is false) or, with `due_until_ms`, at the first entry
// due after it.
//
// Threading: Env loop thread. Simulator-clean: only Env and ObjectStore.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "alarms/format.h"
#include "base/status.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::alarms {

struct IndexReadOptions {
  // Only entries due at or before this (Unix ms); the read stops at the first one after.
  std::optional<std::int64_t> due_until_ms;
  // LIST pages of 1,000 read per shard at most (a bound on one request's cost).
  int max_pages = 4;
  Duration timeout = std::chrono::seconds(5);  // each LIST
  int attempts = 3;                            // each LIST, on kRetryable / kUnknownOutcome
};

struct ShardListing {
  std::vector<EntryKey> entries;    // by due time, then actor
  bool complete = true;             // false: max_pages reached with more entries to read
  std::uint64_t foreign_keys = 0;   // keys under the shard that are not entries (left alone)
  std::uint64_t lists = 0;          // LIST requests sent
};

// One shard's entries (0 <= shard < kShards; checked).
Task<Result<ShardListing>> ReadShard(Env& env, ObjectStore& store, int shard, IndexReadOptions options);

// Several shards at once (one task each); the answer has one result per shard asked.
Task<std::map<int, Result<ShardListing>>> ReadShards(Env& env, ObjectStore& store, std::vector<int> shards,
                                                     IndexReadOptions options);

// Of each actor's entries, the latest set's (highest generation, then batch): its alarm by
// the index. `entries` for each actor counts them all (more than one: the rest are stale).
struct IndexedAlarm {
  EntryKey latest;
  std::uint64_t entries = 0;
};
std::map<ActorId, IndexedAlarm> LatestSetPerActor(const std::vector<EntryKey>& entries);

}  // namespace wk::alarms
