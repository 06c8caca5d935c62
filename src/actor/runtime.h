// ActorRuntime: runs events for resident actors — one event at a time per actor (the input
// gate) with a bounded queue, each event's writes one atomic batch, every answer released
// only through the storage's output gate, the lifecycle (started on first event through
// StorageProvider::Open, instance dropped when idle, hibernated, evicted under the memory
// budget). The rules are ActorRuntimeCore's (runtime_core.h, what the simulator runs); the
// code runs on a V8Executor (v8_executor.h: worker threads, one isolate each, an actor
// pinned to one worker while resident). What an actor may rely on (frozen time within an
// event, what a failed event discards, what a dropped instance loses) and how memory is
// counted: docs/internals.md, "ActorRuntime".
//
// Threading: every public method on the Env's loop thread; workers report back through
// Env::PostFromAnyThread.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "actor/actor_versions.h"
#include "actor/alarm_event.h"
#include "actor/messages.h"
#include "actor/event_host.h"
#include "actor/runtime_core.h"
#include "actor/sockets.h"
#include "actor/storage.h"
#include "actor/stored_quota.h"
#include "actor/types.h"
#include "base/metrics.h"
#include "base/time.h"
#include "engine/engine.h"
#include "env/env.h"

namespace wk::actor {

class V8Executor;

// The default of RuntimeOptions::max_compiled_bytes_per_tenant: a quarter of the default
// budget, about 16 MiB of function bodies at the engine's charge (engine.h).
inline constexpr std::uint64_t kDefaultMaxCompiledBytesPerTenant = 256ull << 20;

struct RuntimeOptions {
  ActorLimits limits;
  // What one event may send (actor/messages.h; actors.max_message_bytes,
  // actors.max_messages_per_event).
  MessageLimits messages;
  // What one event may send on its actor's WebSockets (actor/sockets.h; the [websockets]
  // settings max_message_bytes, max_event_send_bytes, max_event_sends).
  SocketLimits sockets;
  // Worker threads (each one V8 isolate). 0: one per core.
  int workers = 0;
  // How long a worker thread keeps polling for its next event after one before it sleeps
  // (env/spin.h: a hand-off within it costs no kernel wake-up). 0: sleeps at once. The
  // node uses the same window for its loop (`actors.spin_us`, docs/configuration.md).
  Duration spin{0};
  // An actor with no event for this long leaves memory (its hold can then be released).
  Duration idle_hibernate = std::chrono::seconds(30);
  // An actor with no event for this long drops its instance but stays resident ("warm but
  // not instantiated", above). At or above idle_hibernate: instances are kept until then.
  Duration idle_instance = std::chrono::seconds(10);
  // How long a hibernated actor's hold is kept asleep on this node, and how many at most
  // (docs/node-lease.md, "Sleeping holds"; applied by the node's Owners). 0 ms: released at
  // hibernation, as before sleeping holds existed.
  Duration sleeping_hold = std::chrono::hours(1);
  std::size_t max_sleeping_holds = 100'000;
  // Live instances at most; a new one first drops the instance of the least recently active
  // idle actor. Each instance's linear memory is two memory mappings, and Linux allows a
  // process 65,530 by default (vm.max_map_count): past about 30,000 instances V8 cannot
  // allocate another memory. (Busy actors are never stopped: the bound is soft by the
  // events running at once.)
  // Live instances also stay within kLiveReservationBytes of address space (below).
  std::uint64_t max_instances = 20'000;
  // The memory resident actors may take (see "Memory" above): over it, idle actors' instances
  // are dropped, then idle actors evicted, least recently active first; a new actor that
  // would not fit even then is refused.
  std::uint64_t memory_budget_bytes = 1ull << 30;
  // The compiled modules one tenant's classes may hold on the node together
  // (engine::Module::compiled_bytes, counted in the budget above too). A class whose module
  // would take its tenant past it first drops that tenant's unused modules; if that is not
  // enough it is refused (RegisterClass). 0: no bound but the budget.
  std::uint64_t max_compiled_bytes_per_tenant = kDefaultMaxCompiledBytesPerTenant;
  // Idempotency-Key records (docs/http-api.md, "Idempotent requests"): how long a key's
  // answer is kept (a retry after it runs again), and the largest answer body kept with it
  // (a larger one is kept without its body: a retry gets the status and headers only).
  Duration idempotency_ttl = std::chrono::hours(24);
  std::uint64_t idempotency_max_answer_bytes = 64 * 1024;
  // One actor's records together: past it the oldest are forgotten before their TTL, so a
  // busy actor's state and snapshots do not grow with its request rate times the TTL.
  std::uint64_t idempotency_max_bytes = 1 << 20;
  // How long `sync` (exec-durable) waits before reporting failure.
  Duration sync_timeout = std::chrono::seconds(30);
  // How long a request waits for its class's module to compile (off the loop, on the
  // node's compile threads: module_compiler.h) before it is answered 503 with Retry-After.
  Duration compile_timeout = std::chrono::seconds(30);
  // The V8 heap of each worker (module and instance objects, tables; not linear memory).
  // An event that reaches it fails and its actor's instance is thrown away; the node goes on
  // (engine::WorkerOptions).
  std::uint64_t isolate_heap_limit_bytes = 512ull << 20;
  // The old-generation garbage a worker's V8 heap may gather before V8 runs a full
  // collection of its own (engine::WorkerOptions::gc_floor_bytes: fewer stop-the-world
  // pauses while instances are made and dropped, for up to this much more memory per
  // worker). Unset: DefaultIsolateGcFloor(isolate_heap_limit_bytes); 0: V8's own heuristics.
  std::optional<std::uint64_t> isolate_gc_floor_bytes;
  // Linear memories each worker keeps zeroed for its modules' next instances
  // (engine::WorkerOptions::memory_pool_size); 0: each memory goes with its instance. Not a
  // node setting: the engine's default serves (tests turn it off to throw memories away).
  std::size_t memory_pool_size = engine::kDefaultMemoryPoolSize;
  // The wall clock events see, in ms since the epoch. Default: the Env's WallNow. Tests
  // replace it to move time.
  std::function<std::int64_t()> wall_clock_ms;
  // Broken models (base/broken_models.h) of alarm events (fire-before-due) and of the
  // workers' memory pool (pool-skips-zeroing, engine::WorkerOptions::broken): tests only.
  BrokenModels broken;
  // The tenants' stored bytes and stored_bytes quotas (stored_quota.h), which every event's
  // writes are charged to; null: none. Not owned; outlives the runtime.
  TenantStoredBytes* stored_quota = nullptr;
};

// Range of isolate_heap_limit_bytes: V8 needs a few MiB to start an isolate, and the heap
// must hold at least a few actors' tables at their limit.
inline constexpr std::uint64_t kMinIsolateHeapLimitBytes = 32ull << 20;
inline constexpr std::uint64_t kMaxIsolateHeapLimitBytes = 64ull << 30;
// The default of isolate_gc_floor_bytes: an eighth of the heap limit, at most 64 MiB (the
// default 512 MiB limit gives 64 MiB: at 50,000 counters it cuts a worker's full
// collections about fifty-fold, docs/benchmarks.md "Density").
inline constexpr std::uint64_t kMaxDefaultIsolateGcFloorBytes = 64ull << 20;
constexpr std::uint64_t DefaultIsolateGcFloor(std::uint64_t isolate_heap_limit_bytes) {
  return std::min(isolate_heap_limit_bytes / 8, kMaxDefaultIsolateGcFloorBytes);
}
// Range of max_instances: the upper end is where Linux's largest usual vm.max_map_count
// (262,144 on tuned hosts) runs out.
inline constexpr std::uint64_t kMaxInstancesSetting = 120'000;

// Linear memories' address space (engine::kLinearReservationLimitBytes: V8 reserves each
// memory's maximum, actors.max_memory_bytes at most, until it collects the memory, and past
// about 1 TiB for the process every instantiation runs critical garbage collections).
// Live instances reserve at most this much together: a new one first drops the instance of
// the least recently active idle actor (as for max_instances; 12,288 instances of 64 MiB).
inline constexpr std::uint64_t kLiveReservationBytes = engine::kLinearReservationLimitBytes / 4 * 3;
// Memories of instances thrown away (dropped, evicted, failed) that V8 has not collected
// yet: once a worker's reserve this share of the limit, or number this many (each is two
// memory mappings, and Linux's vm.max_map_count, 65,530 by default, binds first for small
// maxima), both divided among the workers, it starts a collection beside its thread
// (engine::Worker::StartCollection), queued behind the jobs that threw them away.
inline constexpr std::uint64_t kUncollectedReservationBytes = engine::kLinearReservationLimitBytes / 8;
inline constexpr std::uint64_t kUncollectedMemories = 4096;

// Checks the options; the error names the setting.
Status ValidateRuntimeOptions(const RuntimeOptions& options);

// Compiles a class module with the ABI's checks and the actor limits (the memory maximum),
// charged to `tenant` (engine::Engine::CompiledBytesByOwner).
Result<std::shared_ptr<const engine::Module>> CompileActorModule(engine::Engine& engine,
                                                                 std::span<const std::uint8_t> wasm,
                                                                 const ActorLimits& limits,
                                                                 const std::string& tenant = {});

// Which module runs each class, by version. An unversioned class (Set) has one module,
// version 0, and writes no version mark; a versioned one has the modules this node loaded
// (SetVersion: versions are immutable, so a module once set stays right) and a chooser
// (SetChooser) naming the version each actor runs. A class's modules are looked up when one
// of its actors starts and before each event of a resident one (a redeploy or a rollout
// reaches it from its next event). A module only the registry holds (no resident actor runs
// it) may be dropped, least recently used first, to meet the memory budget; the class stays
// known, and its next load compiles it again. Loop thread only.
class ClassRegistry {
 public:
  // The class unversioned: every actor runs `module`.
  void Set(const std::string& tenant, const std::string& class_name, std::shared_ptr<const engine::Module> module);
  // Adds version `version` (> 0); the class is versioned once SetChooser runs.
  void SetVersion(const std::string& tenant, const std::string& class_name, std::uint32_t version,
                  std::shared_ptr<const engine::Module> module);
  // Versioned from now on: `stable` is the version an actor with nothing to go by runs.
  // Set the versions the chooser names first, in the same loop turn.
  void SetChooser(const std::string& tenant, const std::string& class_name, VersionChooser chooser,
                  std::uint32_t stable);
  // {0} for an unversioned class; {stable} for a class without a chooser.
  VersionPick Choose(const std::string& tenant, const std::string& class_name, std::string_view name,
                     std::uint32_t mark, bool empty) const;
  bool Versioned(const std::string& tenant, const std::string& class_name) const;
  // The stable (or only) version's module; null if never set, or dropped. Marks it used (the
  // order DropUnused follows).
  std::shared_ptr<const engine::Module> Find(const std::string& tenant, const std::string& class_name);
  std::shared_ptr<const engine::Module> Find(const std::string& tenant, const std::string& class_name,
                                             std::uint32_t version);
  // Set once, the stable (or only) version's module dropped since (and not set again).
  bool Dropped(const std::string& tenant, const std::string& class_name) const;
  // `module` is one of the class's versions here.
  bool Holds(const std::string& tenant, const std::string& class_name,
             const std::shared_ptr<const engine::Module>& module) const;
  // Drops modules held by nothing but the registry, least recently used first, until `bytes`
  // of compiled code are freed (engine::Module::compiled_bytes); of `tenant` only if given.
  // Returns the bytes freed.
  std::uint64_t DropUnused(std::uint64_t bytes, const std::string* tenant = nullptr);
  std::uint64_t dropped() const { return dropped_; }

 private:
  struct Entry {
    std::shared_ptr<const engine::Module> module;
    std::uint64_t used = 0;  // use_clock_ at the last Set or Find
    bool set = false;
  };
  struct Class {
    std::map<std::uint32_t, Entry> versions;
    VersionChooser chooser;
    std::uint32_t stable = 0;
    bool versioned = false;
  };
  Entry* EntryOf(const std::string& tenant, const std::string& class_name, std::uint32_t version);
  const Entry* EntryOf(const std::string& tenant, const std::string& class_name, std::uint32_t version) const;
  std::map<std::pair<std::string, std::string>, Class> classes_;
  std::uint64_t use_clock_ = 0;
  std::uint64_t dropped_ = 0;
};

// How an event's execution ended, for RuntimeHooks::on_event_end.
struct EventEnd {
  // The outcome of the handler's call (engine.h); kReturned also when the handler returned
  // an error value, and when the event never called it (its instance could not be made).
  engine::CallOutcome outcome = engine::CallOutcome::kReturned;
  // The engine's message for a call that did not return (empty otherwise).
  std::string_view message;
};

// One migration (wk_on_upgrade, docs/tenants.md "Class versions"), as RuntimeHooks reports it.
struct UpgradeReport {
  ActorId id;
  std::uint32_t from = 0;
  std::uint32_t to = 0;
  bool ok = false;
  std::string error;  // when !ok: the trap, the code returned, or the limit
};

struct RuntimeHooks {
  // An actor left memory; every response it owed has been delivered. The ownership layer
  // releases its hold here.
  std::function<void(const ActorId&, UnloadReason)> on_unloaded;
  // Right before and right after one event executes (its instantiation included), on the
  // actor's worker thread: several workers call them at once, so they must be thread-safe,
  // and cheap (they are on every event's path). `worker` (0 .. workers - 1) is the thread
  // running it; it runs one event at a time, so a start and its end come in pairs per worker.
  // A crash of the process between the two leaves the start without its end: what the
  // quarantine's local journal relies on (src/server/running_events.h).
  std::function<void(const ActorId&, std::size_t worker)> on_event_start;
  std::function<void(const ActorId&, std::size_t worker, const EventEnd&)> on_event_end;
  // After each migration ran, on the loop thread (the host counts failures in the class's
  // rollout: control/class_versions.h).
  std::function<void(const UpgradeReport&)> on_upgrade;
  // RuntimeCoreOptions::load_version: loads one version of a versioned class (the host reads
  // it from the bucket and calls RegisterVersion).
  std::function<Task<Status>(ActorId, std::uint32_t version)> load_version;
  // A tenant's weight in its workers' fair shares (actor/fair_queue.h; docs/tenants.md, "Fair
  // shares"), asked on the loop thread as each event is queued; unset: 1 for every tenant.
  std::function<double(const std::string& tenant)> tenant_weight;
  // RuntimeCoreOptions::on_event_time: each event's worker time, on the loop thread.
  std::function<void(const ActorId&, Duration worker_time)> on_event_time;
  // RuntimeCoreOptions::resident_limit: the tenant's actors this node may keep in memory.
  std::function<std::optional<std::size_t>(const std::string& tenant)> resident_limit;
};

class ActorRuntime final : public EventHost {
 public:
  ActorRuntime(Env& env, engine::Engine& engine, ClassRegistry& classes, StorageProvider& storage,
               RuntimeOptions options, RuntimeHooks hooks = {});
  // Should follow a completed Shutdown. If actors are still resident (Shutdown's limit
  // passed), every queued or in-flight event is answered "unavailable", events not yet
  // started are skipped, and every storage is closed (with callbacks possibly outstanding:
  // a StorageProvider must then drop them).
  ~ActorRuntime() override;
  ActorRuntime(const ActorRuntime&) = delete;
  ActorRuntime& operator=(const ActorRuntime&) = delete;

  // Runs a request event for the actor (starting it if needed) and answers once its
  // response may be released. Never throws; the outcome says what happened.
  Task<EventResult> HandleRequest(ActorId id, Request request) override;
  // Runs an alarm event (alarm_event.h, docs/alarms.md): the handler (wk_on_alarm) only if
  // the actor's committed alarm is due now; a module without wk_on_alarm has a due alarm
  // cleared without running anything. kNotFound only if no class is deployed.
  Task<EventResult> HandleAlarm(ActorId id, AlarmEvent event) override;
  Task<EventResult> HandleMessage(ActorId id, IncomingMessage message) override;
  Task<EventResult> HandleSocket(ActorId id, SocketEvent event) override;
  Task<Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>>> ReadOutbox(ActorId id, std::size_t max) override;
  Task<Status> CommitSystem(ActorId id, Batch batch) override;
  // An operator's retry or drop of a dead message (EventHost::ResolveDead).
  Task<Result<std::uint64_t>> ResolveDead(ActorId id, std::uint64_t seq, DeadAction action) override;
  // ActorRuntimeCore::SetOutboxListener.
  void SetOutboxListener(std::function<void(const ActorId&)> fn);
  // ActorRuntimeCore::SetSocketDirectory.
  void SetSocketDirectory(SocketDirectory* sockets);

  // Asks an actor to leave memory as soon as it is idle (events queued meanwhile restart
  // it). No effect if it is not resident.
  void Unload(const ActorId& id) override;
  // Starts the actor without an event (a move's target restores it at once); it hibernates
  // after idle_hibernate if no event comes. No effect while shutting down, if resident, if
  // its class is not registered, or if the memory budget is used up.
  void Warm(const ActorId& id) override;
  // Refuses new events, lets running ones finish, unloads every actor and stops the
  // workers. Bounded by `limit`; returns false if actors were still resident.
  Task<bool> Shutdown(Duration limit = std::chrono::seconds(30));

  // Makes `module` (compiled for `tenant`) the class's current code, unless it would take
  // the tenant past max_compiled_bytes_per_tenant once the tenant's unused modules are
  // dropped, or the node past its memory budget once idle instances, unused code and idle
  // actors are: then kRetryable, naming the setting (the module is not kept).
  Status RegisterClass(const std::string& tenant, const std::string& class_name,
                       std::shared_ptr<const engine::Module> module);
  // RegisterClass for one version of a versioned class (ClassRegistry::SetVersion).
  Status RegisterVersion(const std::string& tenant, const std::string& class_name, std::uint32_t version,
                         std::shared_ptr<const engine::Module> module);
  // Modules refused by RegisterClass.
  std::uint64_t compiled_refusals() const { return compiled_refusals_; }

  // Changes the workers' spin window (RuntimeOptions::spin) from now on; the benchmarks
  // compare windows side by side in one process (bench/actor_bench.cc).
  void SetSpin(Duration spin);

  bool IsResident(const ActorId& id) const override;
  // ActorRuntimeCore::VersionOf and ResidentByVersion.
  std::optional<std::uint32_t> VersionOf(const ActorId& id) const;
  std::vector<std::pair<std::string, std::uint64_t>> ResidentByVersion() const;
  // The engine's totals (garbage collections, instantiations, linear memories' reservations).
  engine::EngineStats engine_stats() const { return engine_.stats(); }
  RuntimeStats stats() const;
  // The budget's figure by tenant, largest first (every resident actor's tenant). The part
  // of the workers' heaps no instance holds (V8's own start-up heap, the modules' objects,
  // garbage not collected yet) belongs to no tenant: it is stats().memory_bytes less the
  // sum. Kept per tenant as actors change: as cheap as the tenants are few.
  std::vector<TenantMemory> MemoryByTenant() const;
  const Histogram& event_seconds() const;
  // V8Executor::fair_share_jobs_ahead.
  const Histogram& fair_share_jobs_ahead() const;
  // Of events that ran on a worker, one phase of their time (kEventPhases[phase]).
  const Histogram& event_phase_seconds(std::size_t phase) const;
  const RuntimeOptions& options() const { return options_; }

 private:
  // RegisterClass's checks, before a module is kept.
  Status MakeRoomForModule(const std::string& tenant, const std::string& class_name, const engine::Module& module);

  engine::Engine& engine_;
  ClassRegistry& classes_;
  RuntimeOptions options_;
  std::uint64_t compiled_refusals_ = 0;
  std::unique_ptr<V8Executor> executor_;
  std::unique_ptr<ActorRuntimeCore> core_;  // after executor_: destroyed first, it stops it
};

// Publishes the runtime's events, instances, unloads, latency and residency (base/metrics.h,
// "How WasmKeep publishes"). REQUIRES: runtime outlives every RenderText(), which runs on
// the runtime's loop thread.
// The runtime's metrics (wasmkeep_actor_*) and its engine's (wasmkeep_engine_*).
void PublishRuntimeMetrics(MetricsRegistry& registry, const ActorRuntime& runtime);

}  // namespace wk::actor
