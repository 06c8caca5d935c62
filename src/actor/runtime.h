// ActorRuntime: runs events for resident actors. Between a request for an actor and its
// module's code: one event at a time per actor (the input gate) with a bounded queue, each
// event's writes as one atomic batch, responses released only once durable (the output
// gate), and the lifecycle — created on first event through StorageProvider::Open,
// hibernated after an idle time, evicted under a memory budget (idle actors first).
//
// Threads: the runtime's own state lives on its Env's loop thread; every public method is
// called there. Events execute on a fixed pool of worker threads, each owning one V8
// isolate (engine::Worker); an actor is pinned to one worker for its residency, so its
// instance never crosses threads. Workers report back through Env::PostFromAnyThread.
// (The runtime is a real-runtime component: it uses threads. Storage and cluster code stay
// simulator-clean; the runtime talks to them only through StorageProvider and hooks.)
//
// Per-actor states (loop thread):
//   kStarting --Open ok--> kReady <--event done-- kRunning
//                            |  \--dispatch------------^
//        idle timer / budget |   (or Open failed: queued events answered kUnavailable)
//                            v
//                        kClosing --instance destroyed, storage closed--> (gone, or
//                                   kStarting again if events arrived meanwhile)
//
// Time inside an event is frozen: now_ms() (and WASI's realtime clock) is the wall time at
// which the event was dispatched, as in Cloudflare's Workers. It keeps an event
// deterministic given its input and its storage, and gives actors no fine timer.
//
// Failures of an event (trap, CPU limit, bad host call, proc_exit, non-zero return) fail
// that event only: its batch is discarded and the instance, if it unwound, is thrown away;
// the next event gets a fresh instance over the committed state.
//
// The output gate is the storage's (ActorStorage::WhenReleasable, storage.h): every answer,
// read-only or not, and every exec-durable `sync` returning passes it; the runtime keeps no
// stickiness of its own. A storage that failed (its writes could not be made durable, its
// hold ended, or a sync timed out and the runtime broke it) voids the actor's in-memory
// state: every event waiting on it answers kUnavailable, and the actor is closed and
// restored afresh for the next event.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "actor/alarm_event.h"
#include "actor/event_host.h"
#include "actor/storage.h"
#include "actor/types.h"
#include "base/metrics.h"
#include "base/time.h"
#include "engine/engine.h"
#include "env/env.h"

namespace wk::actor {

struct RuntimeOptions {
  ActorLimits limits;
  // Worker threads (each one V8 isolate). 0: one per core.
  int workers = 0;
  // An actor with no event for this long leaves memory (its hold can then be released).
  Duration idle_hibernate = std::chrono::seconds(30);
  // Total linear memory of resident actors above which idle actors are evicted, least
  // recently used first.
  std::uint64_t memory_budget_bytes = 1ull << 30;
  // How long `sync` (exec-durable) waits before reporting failure.
  Duration sync_timeout = std::chrono::seconds(30);
  // How long a request waits for its class's module to compile (off the loop, on the
  // node's compile threads: module_compiler.h) before it is answered 503 with Retry-After.
  Duration compile_timeout = std::chrono::seconds(30);
  // The V8 heap of each worker (module and instance objects, tables; not linear memory).
  // An event that reaches it fails and its actor's instance is thrown away; the node goes on
  // (engine::WorkerOptions).
  std::uint64_t isolate_heap_limit_bytes = 512ull << 20;
  // The wall clock events see, in ms since the epoch. Default: the Env's WallNow. Tests
  // replace it to move time.
  std::function<std::int64_t()> wall_clock_ms;
  // Broken models (base/broken_models.h) of alarm events (fire-before-due): tests only.
  BrokenModels broken;
};

// Range of isolate_heap_limit_bytes: V8 needs a few MiB to start an isolate, and the heap
// must hold at least a few actors' tables at their limit.
inline constexpr std::uint64_t kMinIsolateHeapLimitBytes = 32ull << 20;
inline constexpr std::uint64_t kMaxIsolateHeapLimitBytes = 64ull << 30;

// Checks the options; the error names the setting.
Status ValidateRuntimeOptions(const RuntimeOptions& options);

// Compiles a class module with the ABI's checks and the actor limits (the memory maximum).
Result<std::shared_ptr<const engine::Module>> CompileActorModule(engine::Engine& engine,
                                                                 std::span<const std::uint8_t> wasm,
                                                                 const ActorLimits& limits);

// Which module runs each class. A class's module is looked up when one of its actors
// starts; an actor already resident keeps the module it started with until it next starts.
// Loop thread only.
class ClassRegistry {
 public:
  void Set(const std::string& tenant, const std::string& class_name, std::shared_ptr<const engine::Module> module);
  std::shared_ptr<const engine::Module> Find(const std::string& tenant, const std::string& class_name) const;

 private:
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const engine::Module>> classes_;
};

enum class UnloadReason : std::uint8_t { kHibernated, kEvicted, kFailed, kShutdown, kRequested };
std::string_view UnloadReasonName(UnloadReason r);

// How an event's execution ended, for RuntimeHooks::on_event_end.
struct EventEnd {
  // The outcome of the handler's call (engine.h); kReturned also when the handler returned
  // an error value, and when the event never called it (its instance could not be made).
  engine::CallOutcome outcome = engine::CallOutcome::kReturned;
  // The engine's message for a call that did not return (empty otherwise).
  std::string_view message;
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
};

struct RuntimeStats {
  std::size_t resident_actors = 0;
  // What the memory budget counts: linear_bytes + state_bytes + heap_bytes.
  std::uint64_t memory_bytes = 0;
  std::uint64_t linear_bytes = 0;  // resident actors' linear memory
  std::uint64_t state_bytes = 0;   // their state in memory (StateMap::memory_bytes)
  std::uint64_t heap_bytes = 0;    // the workers' V8 heaps (tables, instances), as last measured
  std::uint64_t memory_refusals = 0;  // new actors refused because the budget was used up
  std::uint64_t events = 0;
  std::uint64_t failed_events = 0;
  std::uint64_t overloaded = 0;
  std::uint64_t instantiations = 0;
  std::uint64_t hibernations = 0;
  std::uint64_t evictions = 0;
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

  bool IsResident(const ActorId& id) const override;
  RuntimeStats stats() const;
  const Histogram& event_seconds() const { return event_seconds_; }
  const RuntimeOptions& options() const { return options_; }

 private:
  struct Slot;
  struct Pending;
  class WorkerThread;
  struct ExecResult;

  Task<EventResult> Submit(ActorId id, std::optional<Request> request, AlarmEvent alarm = {});
  Task<void> Start(std::shared_ptr<Slot> slot);
  void Pump(const std::shared_ptr<Slot>& slot);
  // On the worker thread.
  ExecResult Execute(engine::Worker& worker, Slot& slot, const std::optional<Request>& request,
                     const AlarmEvent& alarm, std::int64_t now_ms);
  struct MemoryUse {
    std::uint64_t linear = 0;
    std::uint64_t state = 0;
    std::uint64_t heap = 0;  // the worker's whole V8 heap
  };
  void ExecutionDone(const std::shared_ptr<Slot>& slot, MemoryUse memory, bool instantiated);
  void Deliver(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending, EventResult result,
               Status durable);
  // After an event finished executing or was answered: close a broken or unloading actor,
  // or arm the idle timer, once nothing is running or owed.
  void AfterProgress(const std::shared_ptr<Slot>& slot);
  bool IsIdle(const Slot& slot) const;
  // Its storage failed (sticky): close it once nothing is running or owed.
  static bool Broken(const Slot& slot);
  void ArmIdleTimer(const std::shared_ptr<Slot>& slot);
  void Close(const std::shared_ptr<Slot>& slot, UnloadReason reason);
  void CloseDone(const std::shared_ptr<Slot>& slot, UnloadReason reason);
  // Evicts idle actors (least recently used first) while the node is over its budget;
  // returns the bytes resident once they are gone.
  std::uint64_t EnforceMemoryBudget();
  std::uint64_t MemoryBytes() const;
  std::int64_t NowMs() const;

  Env& env_;
  engine::Engine& engine_;
  ClassRegistry& classes_;
  StorageProvider& storage_;
  RuntimeOptions options_;
  RuntimeHooks hooks_;
  std::vector<std::unique_ptr<WorkerThread>> workers_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> actors_;
  std::uint64_t linear_bytes_ = 0;
  std::uint64_t state_bytes_ = 0;
  std::vector<std::uint64_t> worker_heap_bytes_;  // per worker, measured after its last event
  bool shutting_down_ = false;
  RuntimeStats stats_;
  // Alive while the runtime is; callbacks from workers check it before touching `this`.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Set by the destructor; worker jobs not yet started skip their event.
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  // Seconds from an event's arrival to its released answer.
  Histogram event_seconds_{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
};

// Publishes the runtime's events, instances, unloads, latency and residency (base/metrics.h,
// "How WasmKeep publishes"). REQUIRES: runtime outlives every RenderText(), which runs on
// the runtime's loop thread.
void PublishRuntimeMetrics(MetricsRegistry& registry, const ActorRuntime& runtime);

}  // namespace wk::actor
