// Executor: what the runtime's core (runtime_core.h) needs of whatever runs actors' code:
// run one event of an actor against its storage, keep or drop its instance, and say what
// it holds in memory. The core decides when; an executor only does. V8Executor
// (v8_executor.h) is the real one, the simulator's NativeExecutor the other
// (sim/native_actor_host.h).
//
// Guarantees each side relies on: an actor's jobs (events, the drop of its instance, its
// close) start in the order asked, on the actor's lane; the core asks for an event only
// once the actor's previous one came back, and for a drop or a close only while none runs.
//
// Threading: every method is called on the Env loop thread, and every completion runs there
// unless Stop() ran first (an executor with threads hands them back with PostFromAnyThread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actor/alarm_event.h"
#include "actor/idempotency.h"
#include "actor/messages.h"
#include "actor/sockets.h"
#include "actor/storage.h"
#include "actor/types.h"
#include "base/time.h"

namespace wk::actor {

// One resident actor's side in the executor: its code and its instance, whatever they are.
// Made by Executor::NewActor when the actor becomes resident; the core keeps it for the
// residency (its restarts included) and jobs keep it alive while they run.
class ExecutorActor {
 public:
  virtual ~ExecutorActor() = default;
  // The lane its jobs run on (0 .. Executor::lanes() - 1), fixed for its residency.
  std::size_t lane = 0;
  // The class version it runs (docs/tenants.md, "Class versions"; 0: an unversioned class),
  // for `actor inspect` and the metrics: read on the loop, set by the executor.
  std::atomic<std::uint32_t> version{0};
};

// What an actor holds after a job, as the executor measured it.
struct ActorMemory {
  bool has_instance = false;       // it has an instance after the event
  std::uint64_t linear = 0;        // its linear memory's pages touched
  std::uint64_t linear_mapped = 0; // its linear memory as mapped
  std::uint64_t instance_heap = 0; // what its instance holds of its lane's heap
  std::uint64_t reserved = 0;      // the address space its linear memory reserves
  std::uint64_t state = 0;         // ActorStorage::MemoryBytes
};

// One event for Executor::Run.
struct ExecutorEvent {
  std::optional<Request> request;  // nullopt: an alarm or a message event
  AlarmEvent alarm;
  // A message event (actor/messages.h): the receiver's wk_on_message runs, and on success
  // RecordApplied(from, seq) joins the handler's batch (never request and message both).
  std::optional<IncomingMessage> message;
  // A socket event (actor/sockets.h): wk_on_socket_open, _message or _close runs.
  std::optional<SocketEvent> socket;
  // The actor's open connections when the event was dispatched (SocketDirectory::View); null
  // if it has none (or the runtime has no directory).
  std::shared_ptr<const SocketSet> sockets;
  // The wall time the event sees (Unix ms): when the core dispatched it. Time inside an
  // event is frozen, as in Cloudflare's Workers: an event is deterministic given its input
  // and its storage, and actors get no fine timer.
  std::int64_t now_ms = 0;
  // A request with an Idempotency-Key that has no record yet: its answer's record goes into
  // the event's batch (AddIdempotencyRecord), so it is durable exactly when the writes are.
  std::optional<IdempotentRequest> idempotent;
};

// How an event ran, for the core.
struct ExecutedEvent {
  EventResult result;
  // The output gate: the answer may be released once this sequence is (WhenReleasable).
  std::uint64_t wait_seq = 0;
  ActorMemory memory;
  bool instantiated = false;  // an instance was made for it
  // Idempotency records its batch dropped before their TTL (IdempotentRequest::max_bytes).
  std::size_t idempotency_forgotten = 0;
  // On the Env's monotonic clock (the real Env's is steady_clock, so a worker thread reads
  // it there): when the event started on its lane, and when it ended.
  MonoTime started{};
  MonoTime ran{};
};

struct ExecutorStats {
  std::uint64_t heap_bytes = 0;  // the lanes' heaps, as last measured (counted by the budget)
  std::uint64_t reservation_collections = 0;
  std::uint64_t compiled_bytes = 0;  // the classes' compiled code held now (counted by the budget)
  std::uint64_t compiled_dropped = 0;  // compiled modules dropped to meet the budget, in all
};

class Executor {
 public:
  virtual ~Executor() = default;

  virtual std::size_t lanes() const = 0;
  // A new resident actor of `id`'s class at its current code; nullptr if its class is not
  // deployed (the core answers kNotFound).
  virtual std::shared_ptr<ExecutorActor> NewActor(const ActorId& id, const std::string& key) = 0;
  // Right after the actor's storage opened, before Started: the versions of its class it may
  // run (the one its state and the rollout choose, and the one a failed migration falls back
  // to) that this node has not loaded; the core loads them (RuntimeCoreOptions::load_version).
  virtual std::vector<std::uint32_t> VersionsMissing(const ExecutorActor& /*actor*/, const ActorStorage& /*storage*/) {
    return {};
  }
  // The actor's storage just opened (a start or a restart): it runs the code its class
  // chooses for it from now on (a redeploy or a rollout while it was away; its state's
  // version mark, docs/tenants.md).
  virtual void Started(ExecutorActor& actor, const ActorStorage& storage) = 0;
  // Before each event of a resident actor: if its class was redeployed (or its rollout
  // changed) since its code was set, it runs the code chosen now from this event on, and
  // true is returned (the core then drops its instance, which is of the old code). No job
  // of the actor runs.
  virtual bool UseCurrentCode(ExecutorActor& /*actor*/) { return false; }
  // After UseCurrentCode: the version chosen for the actor is not loaded here (dropped since
  // its start, or a class this node knew unversioned). Its events are refused until the core
  // loads VersionsMissing.
  virtual bool CodeMissing(const ExecutorActor& /*actor*/) const { return false; }
  // NewActor found no code for `id`'s class because it was dropped to meet the memory
  // budget (DropUnusedCode), not because the class is unknown.
  virtual bool CodeDropped(const ActorId& /*id*/) const { return false; }
  // Drops compiled code no resident actor runs, least recently used first, until `bytes`
  // are freed or none is left; returns what it freed (the next start of the class compiles
  // it again).
  virtual std::uint64_t DropUnusedCode(std::uint64_t /*bytes*/) { return 0; }
  // For the budget's projection, with `leaving` idle actors about to be evicted one by one
  // (`tally`: the executor's count of them so far, empty at first): the compiled code that
  // becomes unused, and droppable, once this one has gone too.
  virtual std::uint64_t CodeFreedBy(const ExecutorActor& /*leaving*/,
                                    std::map<const void*, std::uint64_t>& /*tally*/) const {
    return 0;
  }
  // ExecutorStats::compiled_bytes by tenant (tenants holding none left out).
  virtual std::vector<std::pair<std::string, std::uint64_t>> CompiledBytesByTenant() const { return {}; }
  // Runs one event against `storage` (alive until `done` is called, or Stop returns).
  virtual void Run(std::shared_ptr<ExecutorActor> actor, ActorStorage* storage, std::shared_ptr<const ExecutorEvent> event,
                   std::function<void(ExecutedEvent)> done) = 0;
  // Drops the actor's instance after its jobs so far; the next event makes a fresh one.
  virtual void DropInstance(std::shared_ptr<ExecutorActor> actor) = 0;
  // Drops the actor's instance for good after its jobs so far, then calls `done`.
  virtual void Close(std::shared_ptr<ExecutorActor> actor, std::function<void()> done) = 0;
  // Ends every job: after it returns no job runs and no completion is called. Events queued
  // and not started are skipped; drops and closes queued before it still run.
  virtual void Stop() = 0;

  // The memory around instances (the core keeps each actor's own figures).
  virtual ExecutorStats stats() const = 0;
  // Before an event of `next` makes an instance: the address space that instance and the
  // executor's kept memories would reserve, and the most live instances may reserve.
  virtual std::uint64_t InstanceReservation(const ExecutorActor& next) const = 0;
  virtual std::uint64_t live_reservation_limit() const = 0;
  // An instance of the actor (on its lane) reserving `reserved` is gone or going.
  virtual void InstanceForgotten(const ExecutorActor& actor, std::uint64_t reserved) = 0;
  // After instances were thrown away on `lane`: `live` instances reserving `live_reserved`
  // remain. The executor may reclaim what the gone ones left.
  virtual void AfterInstancesGone(std::size_t lane, std::uint64_t live, std::uint64_t live_reserved) = 0;
  // The idle sweep ran; `dropped[lane]`: it dropped idle instances there.
  virtual void AfterIdleSweep(const std::vector<bool>& dropped) = 0;
  // The memory budget dropped instances or evicted actors with instances on `lane`: reclaim
  // their memory now, so the budget's heap figure falls with them.
  virtual void ReclaimNow(std::size_t lane) = 0;
};

}  // namespace wk::actor
