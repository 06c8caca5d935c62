// An actor's history (docs/storage.md, "History and point-in-time restore"): the chain of
// segments its holds acknowledged, followed back through the owner fences as far as the
// retained objects reach; its batches with the time each became durable; and its state at
// any of them. Read-only: nothing here acquires, wakes or writes.
//
// Guarantees: only the chain counts (a segment no fence names is a late upload, never in
// the history); a batch's time is its segment's time in the bucket's listing (when the
// bucket stored it, so the time it became durable; the bucket's clock, to the second on
// some servers); a point is refused (kInvalidArgument, naming the earliest and latest
// times there are) when it is outside the retention window, in the future, or older than
// the retained objects; the state at a point is the snapshot before it plus the chain's
// batches up to and including it, exactly. Threading: Env loop thread; simulator-clean.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actor/state_map.h"
#include "base/time.h"
#include "env/env.h"
#include "replica/format.h"
#include "replica/restore.h"
#include "store/object_store.h"

namespace wk::replica {

// One batch of the chain: the `index`-th (1-based) batch of the data segment `segment`.
// Written "<gen>-<seq>.<index>", unpadded.
struct BatchId {
  Position segment;
  std::uint32_t index = 0;
  friend auto operator<=>(const BatchId&, const BatchId&) = default;
  std::string ToString() const;
};
// kInvalidArgument naming the text for anything but "<gen>-<seq>.<index>" with seq and
// index >= 1.
Result<BatchId> ParseBatchId(std::string_view text);

// What listing an actor's log found: every segment and snapshot with its size and time.
struct ListedObject {
  std::uint64_t size = 0;
  std::int64_t modified_ms = 0;
};
struct LogListing {
  std::map<Position, ListedObject> segments;
  std::map<Position, ListedObject> snapshots;
};
// Both listings (in parallel), parsed; kFatal for a key that is not a position.
Task<Result<LogListing>> ListLog(Env& env, ObjectStore& store, ActorId actor, RestoreOptions options);

// The chain as far back as the retained objects reach, oldest first.
struct Chain {
  // Every chain segment (fences included) from the oldest retained one, ascending. Every
  // one of them is listed.
  std::vector<Position> segments;
  // Where the chain can be rebuilt from: `from_empty` if it reaches the actor's beginning
  // (or the empty fence of a deletion), and every listed snapshot that lies on it with no
  // segment missing after it.
  bool from_empty = false;
  std::vector<Position> bases;  // ascending
};
// Reads a fence (the segment <gen>-0) for the reconstruction; a cache may stand in front.
using FenceReader = std::function<Task<Result<FenceInfo>>(Position)>;
// Follows the newest fence's run and base back through the older holds' fences while
// their segments are listed. kFatal if a fence named by the chain is corrupt. An empty log:
// an empty chain, from_empty. `broken`: history-ignores-fence (base/broken_models.h).
// REQUIRES: listing outlives the task (co_await it where the listing lives).
Task<Result<Chain>> ReconstructChain(const LogListing& listing, FenceReader read_fence, BrokenModels broken = {});
// The reader of fences straight from the store (bounded retries as a restore's reads).
FenceReader StoreFenceReader(Env& env, ObjectStore& store, ActorId actor, RestoreOptions options);

struct BatchInfo {
  BatchId id;
  std::int64_t time_ms = 0;       // its segment's, as listed
  std::uint32_t puts = 0;         // the module's keys written
  std::uint32_t deletes = 0;      // the module's keys deleted
  bool delete_all = false;        // it cleared the module's keys first
  std::vector<std::string> keys;  // the first few keys it changed (at most kSampleKeys)
  std::uint64_t bytes = 0;        // keys and values it wrote, the module's and the runtime's
  std::optional<std::optional<std::int64_t>> alarm;  // as actor::Batch::alarm
  std::uint32_t system = 0;       // the runtime's own entries it changed
};
inline constexpr std::size_t kSampleKeys = 3;

struct HistoryOptions {
  std::int64_t now_ms = 0;        // the reader's wall clock
  Duration retention{};           // the window; 0: only what is retained
  std::int64_t since_ms = 0;      // only batches at or after this time
  std::size_t limit = 1000;       // at most this many, the newest kept
  RestoreOptions read;
};

struct History {
  ActorId actor;
  std::vector<BatchInfo> batches;  // ascending
  bool truncated = false;          // more batches matched than `limit`
  // The earliest time a restore may ask for: the window's start or the oldest retained
  // point, whichever is later; nullopt when there is nothing to restore to.
  std::optional<std::int64_t> earliest_ms;
  std::optional<std::int64_t> latest_ms;   // the newest batch's time
  std::uint64_t segments_read = 0;
};
// Lists the chain's batches (reads every chain segment at or after since_ms).
Task<Result<History>> ReadHistory(Env& env, ObjectStore& store, ActorId actor, HistoryOptions options);

// A point of the history: a time (the state of every batch durable by then: the longest
// prefix of the chain whose times are all at or before it) or a batch.
struct PointSpec {
  std::optional<std::int64_t> at_ms;
  std::optional<BatchId> batch;
};
struct PointState {
  actor::StateMap state;
  std::optional<BatchId> last;     // the last batch applied; nullopt: the empty state, or
  std::optional<Position> snapshot;  // the state of this snapshot, no batch after it (last nullopt)
  std::int64_t time_ms = 0;        // that batch's time
  std::uint64_t segments_read = 0;
  std::uint64_t bytes_read = 0;
};
// The state at the point (module entries, alarm and the runtime's entries as they were).
// kInvalidArgument for a point outside the window or the retained history, a batch not on
// the chain, a time in the future; kNotFound for an actor with no log.
Task<Result<PointState>> StateAt(Env& env, ObjectStore& store, ActorId actor, PointSpec point,
                                 HistoryOptions options);

// The batch that turns any state into `target`'s module entries and alarm, leaving the
// runtime's own entries as they are: delete_all, a put per entry, the alarm set or deleted.
actor::Batch ReplacementBatch(const actor::StateMap& target);

}  // namespace wk::replica
