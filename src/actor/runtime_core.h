// ActorRuntimeCore: the actor runtime's rules, apart from the code that runs actors (an
// Executor, executor.h): one event at a time per actor (the input gate) with a bounded
// queue; every answer released only through the storage's output gate
// (ActorStorage::WhenReleasable); the lifecycle (start through StorageProvider::Open,
// instance dropped when idle, hibernation, eviction under the memory budget, a failed
// storage closed and restored afresh). ActorRuntime (runtime.h) runs it over V8 workers,
// the simulator over native test actors. Per-actor states: docs/internals.md,
// "ActorRuntime".
//
// Threading: the Env loop thread only; no threads, no clock but the Env's. Deterministic
// given its Env and its executor.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actor/alarm_event.h"
#include "actor/event_host.h"
#include "actor/executor.h"
#include "actor/idempotency.h"
#include "actor/messages.h"
#include "actor/sockets.h"
#include "actor/storage.h"
#include "actor/types.h"
#include "base/broken_models.h"
#include "base/metrics.h"
#include "base/time.h"
#include "env/env.h"

namespace wk::actor {

// What a resident actor costs the node besides its instance, its linear memory and its
// state: the runtime's slot for it, its storage's structures (the replica, its output gate
// and hold, the ownership layer's entry) and the allocator's overhead on them. Measured in
// `wasmkeep serve` (bench/density_bench.sh: 50,000 resident counters whose instances were
// dropped took 4.1 KiB of RSS each, their state included; docs/benchmarks.md, "Density").
inline constexpr std::uint64_t kResidentActorBookkeepingBytes = 4096;
// Series of wasmkeep_actor_tenant_memory_bytes: the tenants holding the most memory get one
// each, the others are summed under tenant="_other" (a tenant name never starts with "_").
inline constexpr std::size_t kMaxTenantMemorySeries = 50;
// The phases of an event that ran on a lane (wasmkeep_actor_event_phase_seconds, by label
// `phase`): from its arrival to its dispatch to its lane (input: the actor's earlier events
// first), to its start there (worker: events of other actors on the same lane first), to
// the end of its run (run), to its released answer (output).
inline constexpr std::array<std::string_view, 4> kEventPhases = {"input", "worker", "run", "output"};

enum class UnloadReason : std::uint8_t { kHibernated, kEvicted, kFailed, kShutdown, kRequested };
std::string_view UnloadReasonName(UnloadReason r);

struct RuntimeStats {
  std::size_t resident_actors = 0;
  std::size_t instances = 0;  // resident actors with an instance
  // What the memory budget counts: linear_bytes + state_bytes + heap_bytes + bookkeeping_bytes
  // + compiled_bytes + socket_bytes.
  std::uint64_t memory_bytes = 0;
  std::uint64_t linear_bytes = 0;  // instances' linear memory: the pages they touched
  std::uint64_t state_bytes = 0;   // resident actors' state in memory (StateMap::memory_bytes)
  std::uint64_t heap_bytes = 0;    // the workers' V8 heaps (instances, tables), as last measured
  std::uint64_t bookkeeping_bytes = 0;  // resident_actors * kResidentActorBookkeepingBytes
  std::uint64_t compiled_bytes = 0;     // the classes' compiled modules (ExecutorStats::compiled_bytes)
  std::uint64_t socket_bytes = 0;       // the node's WebSockets (SocketDirectory::MemoryBytes)
  std::uint64_t compiled_dropped = 0;   // compiled modules dropped to meet the budget
  // Not counted apart (already in the figures above), for comparison:
  std::uint64_t linear_mapped_bytes = 0;  // instances' linear memory as mapped (its size)
  std::uint64_t instance_heap_bytes = 0;  // what the instances hold of heap_bytes (Instance::HeapBytes)
  std::uint64_t memory_refusals = 0;  // new actors refused because the budget was used up
  // Starts refused because the tenant's resident_actors share was full of busy actors, and
  // idle actors hibernated to make room under it.
  std::uint64_t resident_quota_refusals = 0;
  std::uint64_t resident_quota_hibernations = 0;
  // Instances dropped from resident actors: idle for idle_instance, to meet the budget, to
  // stay within max_instances.
  std::uint64_t instances_dropped_idle = 0;
  std::uint64_t instances_dropped_memory = 0;
  std::uint64_t instances_dropped_limit = 0;  // max_instances or the executor's reservation limit
  std::uint64_t instances_dropped_redeploy = 0;  // their class was redeployed: the next event runs the new code
  // Live instances' reserved address space (their memories' maxima; kLiveReservationBytes).
  std::uint64_t instance_reserved_bytes = 0;
  // Collections started because thrown-away memories reached kUncollectedReservationBytes.
  std::uint64_t reservation_collections = 0;  // or kUncollectedMemories
  std::uint64_t events = 0;
  std::uint64_t failed_events = 0;
  std::uint64_t idempotent_replays = 0;      // answered from an Idempotency-Key's record
  std::uint64_t idempotency_key_reused = 0;  // a key reused for another request (422)
  std::uint64_t idempotency_keys_forgotten = 0;  // records dropped before their TTL (max_bytes)
  std::uint64_t overloaded = 0;
  std::uint64_t instantiations = 0;
  std::uint64_t hibernations = 0;
  std::uint64_t evictions = 0;
};

// One tenant's part of the memory the budget counts: its resident actors' linear memory,
// state and bookkeeping, what their instances hold of their lanes' heaps, and its classes'
// compiled modules (a tenant with compiled code and no resident actor is listed too).
struct TenantMemory {
  std::string tenant;
  double bytes = 0;
  std::size_t actors = 0;
};

// The core's part of RuntimeOptions (runtime.h, where each setting is described).
struct RuntimeCoreOptions {
  ActorLimits limits;  // max_request_bytes and max_queued_events here
  Duration idle_hibernate = std::chrono::seconds(30);
  Duration idle_instance = std::chrono::seconds(10);
  std::uint64_t max_instances = 20'000;
  std::uint64_t memory_budget_bytes = 1ull << 30;
  // The wall clock events see, in ms since the epoch. Default: the Env's WallNow.
  std::function<std::int64_t()> wall_clock_ms;
  // Idempotency-Key records (idempotency.h): kept this long (actors.idempotency_ttl_ms), with
  // answer bodies up to idempotency_max_answer_bytes.
  std::int64_t idempotency_ttl_ms = 24 * 3600 * 1000;
  std::uint64_t idempotency_max_answer_bytes = 64 * 1024;
  std::uint64_t idempotency_max_bytes = 1 << 20;  // one actor's records together
  // A resident actor's outbox has messages to deliver (docs/messages.md): called once an
  // event that sent some is durable, when an actor starts with a non-empty outbox, and once
  // an operator's retry of a dead message is durable (ResolveDead). The message delivery
  // (routing/message_delivery.h) then reads it with ReadOutbox. Unset: messages stay in
  // outboxes.
  std::function<void(const ActorId&)> on_outbox;
  // Loads one version of the actor's class on this node (Executor::VersionsMissing); null:
  // nothing is ever missing. A failure answers the start's events "unavailable".
  std::function<Task<Status>(ActorId, std::uint32_t version)> load_version;
  // After each event ran, on the loop: the time its worker spent on it (its instantiation
  // included), which the tenants' CPU quotas and usage are charged (docs/tenants.md).
  std::function<void(const ActorId&, Duration worker_time)> on_event_time;
  // Asked on the loop as a tenant's actor is about to start here: how many of the tenant's
  // actors this node may keep in memory (its share of the resident_actors quota,
  // docs/tenants.md), nullopt for no limit. At the limit the tenant's least recently used
  // idle actor is hibernated to make room; if none is idle the start is refused kOverQuota.
  // Asked again at each sweep: idle actors over a lowered share leave then.
  std::function<std::optional<std::size_t>(const std::string& tenant)> resident_limit;
  // messages.wake_after_ms (MessageLimits): the wake time a system batch that fills an
  // outbox (RetryDead) writes; a system batch that empties one deletes it (KeepOutboxWake).
  std::int64_t message_wake_after_ms = MessageLimits{}.wake_after_ms;
  // The node's WebSocket connections (routing/socket_hub.h): what events see of their
  // actor's connections, and what carries out their sends. Null: events see none, and
  // HandleSocket still runs (tests); SetSocketDirectory sets it later.
  SocketDirectory* sockets = nullptr;
  // answer-without-gate, input-gate-concurrent, idempotent-answer-not-in-batch,
  // message-before-durable, applied-record-not-in-batch and outbox-lost-on-restore switch here
  // (base/broken_models.h).
  BrokenModels broken;
  // Hands the output gate's answer (ActorStorage::WhenReleasable's callback, which may come
  // on any thread) to the loop: Env::PostFromAnyThread on the real runtime. Default:
  // Env::Post (the simulator, whose storages call back on the loop).
  std::function<void(std::function<void()>)> to_loop;
};

class ActorRuntimeCore final : public EventHost {
 public:
  // `on_unloaded`: an actor left memory; every response it owed has been delivered (the
  // ownership layer releases its hold there).
  ActorRuntimeCore(Env& env, Executor& executor, StorageProvider& storage, RuntimeCoreOptions options,
                   std::function<void(const ActorId&, UnloadReason)> on_unloaded = {});
  // Should follow a completed Shutdown. If actors are still resident, every queued or
  // in-flight event is answered "unavailable", the executor is stopped (events not yet
  // started are skipped), and every storage is closed.
  ~ActorRuntimeCore() override;
  ActorRuntimeCore(const ActorRuntimeCore&) = delete;
  ActorRuntimeCore& operator=(const ActorRuntimeCore&) = delete;

  Task<EventResult> HandleRequest(ActorId id, Request request) override;
  Task<EventResult> HandleAlarm(ActorId id, AlarmEvent event) override;
  Task<EventResult> HandleMessage(ActorId id, IncomingMessage message) override;
  Task<EventResult> HandleSocket(ActorId id, SocketEvent event) override;
  Task<Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>>> ReadOutbox(ActorId id, std::size_t max) override;
  Task<Status> CommitSystem(ActorId id, Batch batch) override;
  Task<Result<std::uint64_t>> ResolveDead(ActorId id, std::uint64_t seq, DeadAction action) override;
  void Unload(const ActorId& id) override;
  void Warm(const ActorId& id) override;
  bool IsResident(const ActorId& id) const override;
  // The class version the resident actor runs (0: an unversioned class); nullopt if it is
  // not resident.
  std::optional<std::uint32_t> VersionOf(const ActorId& id) const;
  // Resident actors of versioned classes by "tenant/class@version", most first.
  std::vector<std::pair<std::string, std::uint64_t>> ResidentByVersion() const;
  // Refuses new events, lets running ones finish, unloads every actor. Bounded by `limit`;
  // returns false if actors were still resident.
  Task<bool> Shutdown(Duration limit);

  // Sets RuntimeCoreOptions::on_outbox (the delivery is made after the runtime it uses).
  void SetOutboxListener(std::function<void(const ActorId&)> fn) { options_.on_outbox = std::move(fn); }
  // Sets RuntimeCoreOptions::sockets (the hub is made after the runtime it uses).
  void SetSocketDirectory(SocketDirectory* sockets) { options_.sockets = sockets; }

  RuntimeStats stats() const;
  std::vector<TenantMemory> MemoryByTenant() const;
  // Brings the node within its budget as a new actor's admission does (idle instances,
  // unused compiled code, idle actors); false if it stays over (what was resident is kept).
  bool MakeRoom();
  const Histogram& event_seconds() const { return event_seconds_; }
  const Histogram& event_phase_seconds(std::size_t phase) const { return event_phase_seconds_[phase]; }
  const RuntimeCoreOptions& options() const { return options_; }

 private:
  struct Slot;
  struct Pending;
  struct TenantTotals {
    std::uint64_t linear_bytes = 0;
    std::uint64_t state_bytes = 0;
    std::uint64_t instance_heap_bytes = 0;
    std::size_t actors = 0;
    std::size_t closing = 0;  // of `actors`, those leaving (Close to CloseDone)
  };

  // Hibernates the tenant's least recently active idle actors until at most `keep` of its
  // actors stay (closing ones not counted); whether that was reached. `all_or_nothing`:
  // closes none if it cannot be.
  bool MakeRoomForTenant(const std::string& tenant, std::size_t keep, bool all_or_nothing);
  Task<EventResult> Submit(ActorId id, std::optional<Request> request, AlarmEvent alarm,
                           std::optional<IdempotentRequest> idempotent = std::nullopt,
                           std::optional<IncomingMessage> message = std::nullopt,
                           std::optional<SocketEvent> socket = std::nullopt);
  // Queues a job the core does itself between the actor's events (ReadOutbox, CommitSystem,
  // ResolveDead). Without `start`, on a resident actor only: nullopt if it is not resident
  // (or closing, or shutting down). With `start` (an operator's job), the actor is started
  // as for an event if it is not resident (a refusal is the answer then).
  struct SystemJob;
  Task<std::optional<EventResult>> SubmitSystem(ActorId id, std::shared_ptr<SystemJob> job, bool start = false);
  // A new slot for an actor that is not resident, its start begun (its class's current
  // code; admitted under the memory budget, idle actors evicted first), or nullptr with
  // *refused set (no class, its code dropped, the budget used up).
  std::shared_ptr<Slot> StartSlot(const ActorId& id, const std::string& key, EventResult* refused);
  // The next queued entry is one the core answers without running the actor (a system job,
  // a message its applied record covers): answered through the output gate, true returned.
  bool AnswerOnLoop(const std::shared_ptr<Slot>& slot);
  // Loads the versions the actor's executor says are missing (RuntimeCoreOptions::
  // load_version), then pumps its events; a failure answers them "unavailable".
  Task<void> LoadMissingVersions(std::shared_ptr<Slot> slot);
  // The next queued event carries an Idempotency-Key whose record exists: it is answered
  // from the record (through the output gate) without running, and true is returned.
  bool AnswerFromRecord(const std::shared_ptr<Slot>& slot);
  // Hands `result` to the output gate: delivered once every batch up to wait_seq is durable
  // and the hold is valid, else answered unavailable.
  void Release(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending,
               std::shared_ptr<EventResult> result, std::uint64_t wait_seq);
  Task<void> Start(std::shared_ptr<Slot> slot);
  // Dispatches the actor's next queued event if the input gate lets it.
  void Pump(const std::shared_ptr<Slot>& slot);
  // An event ran: its answer goes through the output gate, the actor's figures are updated.
  void Executed(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending, ExecutedEvent ran);
  void ExecutionDone(const std::shared_ptr<Slot>& slot, const ActorMemory& memory, bool instantiated);
  void SetInstanceMemory(Slot& slot, const ActorMemory& memory);
  void ForgetInstance(Slot& slot);
  void SetLinearBytes(Slot& slot, std::uint64_t bytes);
  // The actor's state in memory (budgeted).
  void SetStateBytes(Slot& slot, std::uint64_t bytes);
  void SetInstanceHeapBytes(Slot& slot, std::uint64_t bytes);
  enum class DropReason : std::uint8_t { kIdle, kMemory, kLimit };
  void DropInstance(Slot& slot, DropReason reason);
  static std::uint64_t InstanceHeap(const Slot& slot);
  // Before an event of `next` instantiates: keeps live instances under max_instances and
  // the executor's reservation limit.
  void MakeRoomForInstance(const Slot& next);
  void AfterInstancesGone(std::size_t lane);
  // The periodic sweep: drops the instances of actors idle for idle_instance and
  // hibernates actors idle for idle_hibernate (least recently active first).
  void Sweep();
  void ScheduleSweep();
  void Deliver(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending, EventResult result,
               Status durable);
  void ObservePhases(const Pending& p);
  // After an event finished or was answered: close a broken or unloading actor once nothing
  // is running or owed.
  void AfterProgress(const std::shared_ptr<Slot>& slot);
  bool IsIdle(const Slot& slot) const;
  static bool Broken(const Slot& slot);
  // The one way a slot is made (an event's dispatch and a warm start both use it), so no
  // slot misses a list that Forget takes it out of.
  std::shared_ptr<Slot> NewSlot(const ActorId& id, std::string key, std::shared_ptr<ExecutorActor> exec);
  void Forget(Slot& slot);
  void Close(const std::shared_ptr<Slot>& slot, UnloadReason reason);
  void CloseDone(const std::shared_ptr<Slot>& slot, UnloadReason reason);
  // Evicts idle actors (least recently used first) while the node is over its budget;
  // returns the bytes resident once they are gone.
  std::uint64_t EnforceMemoryBudget();
  std::uint64_t MemoryBytes() const;
  std::int64_t NowMs() const;

  Env& env_;
  Executor& executor_;
  StorageProvider& storage_;
  RuntimeCoreOptions options_;
  std::function<void(const ActorId&, UnloadReason)> on_unloaded_;
  std::function<void(std::function<void()>)> to_loop_;  // options_.to_loop, or Env::Post
  std::unordered_map<std::string, std::shared_ptr<Slot>> actors_;
  // Resident actors, and those with an instance, least recently active first (an actor
  // moves to the back when an event of it finishes): the sweep and the budget walk them
  // from the front, without sorting.
  std::list<Slot*> by_activity_;
  std::list<Slot*> instances_by_activity_;
  std::uint64_t linear_bytes_ = 0;
  std::uint64_t linear_mapped_bytes_ = 0;
  std::uint64_t state_bytes_ = 0;
  std::uint64_t instance_heap_bytes_ = 0;
  std::uint64_t instance_reserved_bytes_ = 0;
  // The same parts per tenant, kept as the totals above are, for MemoryByTenant: a scrape
  // of /metrics reads them without walking every resident actor (with 50,000 resident, the
  // loop thread ran 39-43 ms without a break at each scrape, in a scheduler trace). A
  // tenant's entry goes with its last resident actor.
  std::unordered_map<std::string, TenantTotals> tenant_totals_;
  Env::TimerId sweep_timer_ = 0;
  bool shutting_down_ = false;
  RuntimeStats stats_;
  // Alive while the core is; completions and gate callbacks check it before touching `this`.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Seconds from an event's arrival to its released answer.
  Histogram event_seconds_{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  // The same, by phase (kEventPhases), from 100 us.
  static std::vector<double> PhaseBounds() {
    return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  }
  std::array<Histogram, kEventPhases.size()> event_phase_seconds_{
      Histogram(PhaseBounds()), Histogram(PhaseBounds()), Histogram(PhaseBounds()), Histogram(PhaseBounds())};
};

}  // namespace wk::actor
