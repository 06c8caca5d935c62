// The storage interface an actor's events run against: a sorted key-value map per actor,
// read synchronously from memory and made durable in batches. Implemented by the durable
// replica (src/replica) and by MemStorage (testing/mem_storage.h, tests and benchmarks).
//
// Guarantees: reads reflect every Commit so far; a batch applies whole; WhenReleasable is
// the output gate every visible effect of an actor passes; a failed storage stays failed
// (each method below says what it promises).
//
// Threading: one ActorStorage is used by one event at a time, on the worker running that
// actor; between events the runtime calls failure() and WhenReleasable from its loop thread.
// Open and Close run on the loop thread; WhenReleasable's callback may run on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "env/task.h"

namespace wk::actor {

using ::wk::ActorId;

struct Mutation {
  enum class Kind : std::uint8_t { kPut, kDelete, kDeleteAll };
  Kind kind;
  std::string key;
  std::string value;
};

// One event's writes, applied atomically. `alarm`: unset = unchanged; set to nullopt = the
// alarm deleted; set to a time = the alarm set. `system`: the runtime's own entries written
// with the event (kPut and kDelete only): its idempotency records (docs/http-api.md,
// "Idempotent requests"), committed in the same batch as the writes they answer for. The
// module never sees them, delete_all leaves them, and they do not count as stored bytes.
struct Batch {
  std::vector<Mutation> mutations;
  std::optional<std::optional<std::int64_t>> alarm;
  std::vector<Mutation> system;
  bool empty() const { return mutations.empty() && !alarm.has_value() && system.empty(); }
};

// The wake entry: a system entry holding a time (Unix ms, decimal) by which the actor must
// be started even if nobody calls it, written by the runtime in the batch that makes it
// needed (an outbox becoming non-empty: messages.h) and deleted in the batch that ends the
// need. The alarm index keeps an entry for the actor's *indexed time*, the earlier of its
// alarm and its wake time (docs/alarms.md, "The index"), so the scanners that start actors
// whose alarm is due start an actor whose wake time passed in the same way; the alarm
// event it then gets runs nothing unless its alarm is due. One definition, used by the
// replica (what it reports to the index) and the executors (EventResult::indexed_after).
inline constexpr std::string_view kWakeKey = "wake";
// The version mark: a system entry holding the class version (decimal) that last committed
// the actor's state, written in the batch of the first event a version commits (a
// migration's batch: docs/tenants.md, "Which version an actor runs"). 0 when absent or
// unreadable: a state written before class versions.
inline constexpr std::string_view kClassVersionKey = "class-version";
std::uint32_t ParseClassVersion(std::optional<std::string_view> value);
// The wake time of a wake entry's value; nullopt for none or an unreadable one.
std::optional<std::int64_t> ParseWake(std::optional<std::string_view> value);
std::string EncodeWake(std::int64_t wake_ms);
// The earlier of an alarm and a wake time (either may be absent).
std::optional<std::int64_t> IndexedTime(std::optional<std::int64_t> alarm, std::optional<std::int64_t> wake);
// Whether applying the batch may change the indexed time (it sets the alarm or touches the
// wake entry).
bool ChangesIndexedTime(const Batch& batch);

struct ListQuery {
  // Range mode: start <= key < end (empty end: no upper bound). Prefix mode: keys starting
  // with `start`.
  std::string start;
  std::string end;
  bool prefix = false;
  bool reverse = false;
};

// Called with each entry in order; return false to stop. It must not call the storage (the
// durable replica holds its lock while it lists).
using ListVisitor = std::function<bool(std::string_view key, std::string_view value)>;

class ActorStorage {
 public:
  virtual ~ActorStorage() = default;
  // Get, List, Alarm, StoredBytes and the system entries (GetSystem, ListSystem) reflect
  // every Commit made so far: reads are from memory.
  virtual std::optional<std::string> Get(std::string_view key) const = 0;
  virtual void List(const ListQuery& query, const ListVisitor& visit) const = 0;
  virtual std::optional<std::int64_t> Alarm() const = 0;
  // The earlier of Alarm() and the wake entry's time (kWakeKey).
  std::optional<std::int64_t> IndexedTime() const {
    const std::optional<std::string> wake = GetSystem(kWakeKey);
    return actor::IndexedTime(Alarm(), wake ? ParseWake(std::string_view(*wake)) : std::nullopt);
  }
  // The runtime's own entries (Batch::system), apart from the module's, and their keys plus
  // values in bytes.
  virtual std::optional<std::string> GetSystem(std::string_view key) const = 0;
  virtual void ListSystem(const ListQuery& query, const ListVisitor& visit) const = 0;
  virtual std::uint64_t SystemBytes() const = 0;
  // Keys plus values of the module's entries, in bytes.
  virtual std::uint64_t StoredBytes() const = 0;
  // What the state takes in memory, per-entry overhead included (StateMap::memory_bytes):
  // counted against the node's memory budget.
  virtual std::uint64_t MemoryBytes() const = 0;
  // Applies the whole batch at once and returns its sequence number: sequence numbers
  // increase by one per batch, starting at 1.
  virtual std::uint64_t Commit(Batch batch) = 0;
  // The output gate: every externally visible effect of the actor (an event's answer,
  // read-only or not; `sync` returning) passes through it. Calls back Ok only when every
  // batch up to `seq` is durable AND the storage may still speak for the actor at that
  // instant (the node still holds it); seq 0 means "nothing written" and is Ok only under
  // the second condition. Otherwise it calls back with an error once that is known: the
  // storage has then failed.
  virtual void WhenReleasable(std::uint64_t seq, std::function<void(Status)> done) = 0;
  // Ok until the storage fails, then its error for good (sticky): the actor's in-memory
  // state is void, nothing more is released, and the runtime closes the actor and restores
  // it afresh for its next event.
  virtual Status failure() const = 0;
  // Fails the storage at once: the runtime gives up on it (an exec-durable wait timed out,
  // so an answer must never be released).
  virtual void Break(Status why) = 0;
};

// Why an actor's storage is closed: it only leaves memory (hibernation, the memory budget),
// so a provider may keep its hold for its next start (docs/node-lease.md, "Sleeping holds");
// or it leaves this node's care (a drain, a move, quarantine, a failure, a stop), so the
// hold goes with it.
enum class CloseIntent : std::uint8_t { kKeepHold, kRelease };

class StorageProvider {
 public:
  virtual ~StorageProvider() = default;
  // Restores the actor's state (its first event waits for this). Errors are retryable from
  // the caller's view: the event answers "unavailable".
  virtual Task<Result<std::unique_ptr<ActorStorage>>> Open(const ActorId& id) = 0;
  // The actor left memory; every WhenReleasable callback it asked for has been called.
  virtual void Close(const ActorId& id, std::unique_ptr<ActorStorage> storage, CloseIntent intent) = 0;
};

// Key-range helpers shared by implementations.
bool InQuery(const ListQuery& q, std::string_view key);
// For prefix mode: the smallest key greater than every key with this prefix ("" = none).
std::string PrefixEnd(std::string_view prefix);

}  // namespace wk::actor
