#include "actor/runtime.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "actor/abi.h"
#include "actor/txn.h"
#include "base/check.h"
#include "base/log.h"
#include "env/spin.h"

namespace wk::actor {
namespace {

// The least time between two full collections of a worker's heap that the idle sweep asks
// for (after it dropped instances there): one takes tens of milliseconds on a large heap.
constexpr Duration kIdleCollectionInterval = std::chrono::seconds(5);
// A worker with an event this recent is busy: the sweep does not stop it for a collection.
constexpr Duration kBusyWorkerWindow = std::chrono::seconds(1);

}  // namespace

// ---------------------------------------------------------------------------------------
// Options, classes

Status ValidateLimits(const ActorLimits& l) {
  if (l.max_memory_bytes < engine::kWasmPageBytes || l.max_memory_bytes > (4ull << 30)) {
    return InvalidArgument("actors.max_memory_bytes must be between 64 KiB and 4 GiB");
  }
  if (l.max_memory_bytes % engine::kWasmPageBytes != 0) {
    return InvalidArgument("actors.max_memory_bytes must be a multiple of 65536 (the WebAssembly page size)");
  }
  if (l.max_event_cpu_ms < 1 || l.max_event_cpu_ms > 600'000) {
    return InvalidArgument("actors.max_event_cpu_ms must be between 1 and 600000");
  }
  if (l.max_request_bytes < 1 || l.max_response_bytes < 1) {
    return InvalidArgument("actors.max_request_bytes and actors.max_response_bytes must be at least 1");
  }
  if (l.max_key_bytes < 1 || l.max_key_bytes > (1u << 20)) {
    return InvalidArgument("actors.max_key_bytes must be between 1 and 1048576");
  }
  if (l.max_value_bytes > (64u << 20)) return InvalidArgument("actors.max_value_bytes must be at most 64 MiB");
  if (l.max_stored_bytes < std::uint64_t{l.max_key_bytes} + l.max_value_bytes) {
    return InvalidArgument("actors.max_stored_bytes must hold at least one key of max_key_bytes with a value of max_value_bytes");
  }
  if (l.max_queued_events < 1 || l.max_queued_events > 100'000) {
    return InvalidArgument("actors.max_queued_events must be between 1 and 100000");
  }
  if (l.max_module_bytes < 8 || l.max_module_bytes > kMaxModuleBytesSetting) {
    return InvalidArgument(fmt::format("actors.max_module_bytes must be between 8 and {}", kMaxModuleBytesSetting));
  }
  if (l.max_table_elements > kMaxTableElementsSetting) {
    return InvalidArgument(fmt::format("actors.max_table_elements must be at most {}", kMaxTableElementsSetting));
  }
  return Status::Ok();
}

Status ValidateRuntimeOptions(const RuntimeOptions& o) {
  if (auto s = ValidateLimits(o.limits); !s.ok()) return s;
  if (o.workers < 0 || o.workers > 256) return InvalidArgument("actors.workers must be between 0 (one per core) and 256");
  if (o.spin < Duration::zero() || o.spin > std::chrono::milliseconds(1)) {
    return InvalidArgument("actors.spin_us must be between 0 (off) and 1000");
  }
  if (o.idle_hibernate < std::chrono::milliseconds(1)) return InvalidArgument("actors.idle_hibernate_ms must be at least 1");
  if (o.idle_instance < std::chrono::milliseconds(1)) return InvalidArgument("actors.idle_instance_ms must be at least 1");
  if (o.max_instances < 1 || o.max_instances > kMaxInstancesSetting) {
    return InvalidArgument(fmt::format("actors.max_instances must be between 1 and {}", kMaxInstancesSetting));
  }
  if (o.memory_budget_bytes < o.limits.max_memory_bytes) {
    return InvalidArgument("actors.memory_budget_bytes must be at least actors.max_memory_bytes");
  }
  if (o.sync_timeout < std::chrono::milliseconds(1)) return InvalidArgument("actors.sync_timeout_ms must be at least 1");
  if (o.isolate_heap_limit_bytes < kMinIsolateHeapLimitBytes || o.isolate_heap_limit_bytes > kMaxIsolateHeapLimitBytes) {
    return InvalidArgument(fmt::format("actors.isolate_heap_limit_bytes must be between {} and {}",
                                       kMinIsolateHeapLimitBytes, kMaxIsolateHeapLimitBytes));
  }
  if (o.isolate_gc_floor_bytes && *o.isolate_gc_floor_bytes > o.isolate_heap_limit_bytes / 2) {
    return InvalidArgument(fmt::format("actors.isolate_gc_floor_bytes ({}) must be at most half of "
                                       "actors.isolate_heap_limit_bytes ({})",
                                       *o.isolate_gc_floor_bytes, o.isolate_heap_limit_bytes));
  }
  return Status::Ok();
}

std::string_view UnloadReasonName(UnloadReason r) {
  switch (r) {
    case UnloadReason::kHibernated: return "hibernated";
    case UnloadReason::kEvicted: return "evicted";
    case UnloadReason::kFailed: return "failed";
    case UnloadReason::kShutdown: return "shutdown";
    case UnloadReason::kRequested: return "requested";
  }
  return "?";
}

Result<std::shared_ptr<const engine::Module>> CompileActorModule(engine::Engine& engine,
                                                                 std::span<const std::uint8_t> wasm,
                                                                 const ActorLimits& limits) {
  engine::ModuleLimits ml;
  ml.max_memory_bytes = limits.max_memory_bytes;
  ml.max_module_bytes = limits.max_module_bytes;
  ml.max_table_elements = limits.max_table_elements;
  ml.setting_prefix = "actors.";
  return engine.Compile(wasm, AbiHostInterface(), AbiExports(), ml);
}

void ClassRegistry::Set(const std::string& tenant, const std::string& class_name,
                        std::shared_ptr<const engine::Module> module) {
  classes_[{tenant, class_name}] = std::move(module);
}

std::shared_ptr<const engine::Module> ClassRegistry::Find(const std::string& tenant,
                                                          const std::string& class_name) const {
  auto it = classes_.find({tenant, class_name});
  return it == classes_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------------------------------
// Worker threads

// One thread with one engine::Worker (isolate) and a FIFO of jobs. Jobs for one actor go to
// one worker, so they run in order and its instance stays on this thread.
class ActorRuntime::WorkerThread {
 public:
  using Job = std::function<void(engine::Worker&)>;

  // `spin`: how long the thread polls for the next job after one before it sleeps
  // (env/spin.h); 0 sleeps at once.
  WorkerThread(engine::Engine& engine, engine::WorkerOptions options, Duration spin) {
    set_spin(spin);
    thread_ = std::thread([this, &engine, options] { Loop(engine, options); });
  }
  // From any thread; the next wait uses it.
  void set_spin(Duration spin) { spin_ns_.store(spin.count(), std::memory_order_relaxed); }
  ~WorkerThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      queued_.store(1, std::memory_order_release);  // ends a spin at once
    }
    cv_.notify_one();
    thread_.join();
  }
  void Post(Job job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
      queued_.store(jobs_.size(), std::memory_order_release);
    }
    // Costs no system call while the thread spins: glibc's notify wakes through the
    // kernel only when a thread waits.
    cv_.notify_one();
  }

 private:
  void Loop(engine::Engine& engine, engine::WorkerOptions options) {
    engine::Worker worker(engine, options);
    for (;;) {
      if (const Duration spin{spin_ns_.load(std::memory_order_relaxed)}; spin > Duration::zero()) {
        // Poll the queue's size (no lock) until a job comes or the window passes.
        SpinWindow window(spin);
        while (queued_.load(std::memory_order_acquire) == 0 && window.KeepSpinning()) {
        }
      }
      Job job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stop_ and drained
        job = std::move(jobs_.front());
        jobs_.pop_front();
        queued_.store(jobs_.size(), std::memory_order_release);
      }
      job(worker);
      worker.PumpMessageLoop();
    }
  }

  std::atomic<Duration::rep> spin_ns_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::atomic<std::size_t> queued_{0};  // jobs_.size(), for the spin to read without mu_
  bool stop_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------
// Slots

struct ActorRuntime::Pending {
  std::optional<Request> request;  // nullopt: an alarm event
  AlarmEvent alarm;                // for an alarm event
  Latch<EventResult> done;
  MonoTime queued_at;
  // Where the event's time went (wasmkeep_actor_event_phase_seconds), in real elapsed time:
  // set on the loop (arrived, dispatched) and on its worker (started, ran), read on the loop
  // once the answer is released (the worker's writes reach it through the hand-back post).
  using Clock = std::chrono::steady_clock;
  Clock::time_point arrived = Clock::now();
  Clock::time_point dispatched{};
  Clock::time_point started{};
  Clock::time_point ran{};
};

struct ActorRuntime::Slot : std::enable_shared_from_this<Slot> {
  enum class State : std::uint8_t { kStarting, kReady, kRunning, kClosing };

  ActorId id;
  std::string key;
  std::size_t worker = 0;
  State state = State::kStarting;
  // A list, not a deque: an idle actor's empty queue allocates nothing (libstdc++'s deque
  // allocates about 600 bytes even when empty; docs/benchmarks.md, "Density").
  std::list<Pending> queue;
  std::shared_ptr<const engine::Module> module;
  // Events dispatched whose answers are not delivered yet (executing or awaiting
  // durability). An actor is idle only when this is zero and its queue is empty.
  int undelivered = 0;
  bool unload_requested = false;
  // The loop thread's view: the actor has an instance (from its last event's report) and
  // no drop of it is queued since.
  bool has_instance = false;
  MonoTime last_active{};
  std::list<Slot*>::iterator by_activity;         // in ActorRuntime::by_activity_
  std::list<Slot*>::iterator instance_by_activity;  // in instances_by_activity_ if has_instance
  // What the budget counts for this actor (besides its worker's heap and its bookkeeping).
  std::uint64_t linear_bytes = 0;  // resident pages of its linear memory
  std::uint64_t linear_mapped_bytes = 0;
  std::uint64_t instance_heap_bytes = 0;  // what its instance holds of its worker's heap
  std::uint64_t reserved_bytes = 0;  // its instance's linear memory's maximum (address space)
  std::uint64_t state_bytes = 0;
  TenantTotals* tenant = nullptr;  // its tenant's entry in tenant_totals_ (stable: a node map)

  // Worker-thread state: touched only by jobs on `worker` (ordered by its FIFO), and by the
  // loop thread only when no job for this slot is queued or running (kStarting, kClosing
  // after the close job).
  std::unique_ptr<ActorStorage> storage;
  std::unique_ptr<engine::Instance> instance;
  std::uint64_t last_seq = 0;

  // Loop thread: events dispatched and not yet answered (for the destructor).
  std::vector<std::shared_ptr<Pending>> inflight;
};

struct ActorRuntime::ExecResult {
  EventResult result;
  std::uint64_t wait_seq = 0;  // the output gate: answer once this is durable
  MemoryUse memory;            // measured on the worker after the event
  bool instantiated = false;
  engine::CallOutcome call_outcome = engine::CallOutcome::kReturned;  // for on_event_end
  std::string call_message;
};

ActorRuntime::ActorRuntime(Env& env, engine::Engine& engine, ClassRegistry& classes, StorageProvider& storage,
                           RuntimeOptions options, RuntimeHooks hooks)
    : env_(env), engine_(engine), classes_(classes), storage_(storage), options_(std::move(options)),
      hooks_(std::move(hooks)) {
  WK_CHECK(ValidateRuntimeOptions(options_).ok(), "invalid RuntimeOptions (validate before constructing)");
  int n = options_.workers;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  engine::WorkerOptions worker_options;
  worker_options.heap_limit_bytes = options_.isolate_heap_limit_bytes;
  worker_options.gc_floor_bytes =
      options_.isolate_gc_floor_bytes.value_or(DefaultIsolateGcFloor(options_.isolate_heap_limit_bytes));
  worker_options.memory_pool_size = options_.memory_pool_size;
  worker_options.broken = options_.broken;
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<WorkerThread>(engine_, worker_options, options_.spin));
  worker_memory_.assign(workers_.size(), WorkerMemory{});
}

void ActorRuntime::SetSpin(Duration spin) {
  WK_CHECK(spin >= Duration::zero() && spin <= std::chrono::milliseconds(1), "spin window out of range");
  options_.spin = spin;
  for (auto& w : workers_) w->set_spin(spin);
}

ActorRuntime::~ActorRuntime() {
  // Normally Shutdown has emptied actors_. If it could not (its limit passed), nothing may
  // be left hanging: every queued or in-flight event is answered "unavailable", events not
  // yet started are skipped, instances die on their own threads, storages are closed.
  *alive_ = false;
  stopping_->store(true);
  if (sweep_timer_ != 0) env_.CancelTimer(sweep_timer_);
  EventResult stopped;
  stopped.outcome = EventOutcome::kUnavailable;
  stopped.error = "the actor runtime stopped";
  for (auto& [key, slot] : actors_) {
    for (Pending& p : slot->queue) p.done.Set(stopped);
    slot->queue.clear();
    for (auto& p : slot->inflight) p->done.Set(stopped);
    slot->inflight.clear();
    workers_[slot->worker]->Post([slot](engine::Worker&) { slot->instance.reset(); });
  }
  workers_.clear();  // joins: running jobs finish, queued event jobs see stopping_ and skip
  for (auto& [key, slot] : actors_) {
    if (slot->storage) storage_.Close(slot->id, std::move(slot->storage));
    if (hooks_.on_unloaded) hooks_.on_unloaded(slot->id, UnloadReason::kShutdown);
  }
}

std::int64_t ActorRuntime::NowMs() const {
  return options_.wall_clock_ms ? options_.wall_clock_ms() : ToUnixMs(env_.WallNow());
}

bool ActorRuntime::IsResident(const ActorId& id) const { return actors_.contains(id.ToString()); }

void PublishRuntimeMetrics(MetricsRegistry& registry, const ActorRuntime& runtime) {
  // A counter over one field of the runtime's stats (copied per read: loop thread).
  auto counter = [&](std::string name, std::string help, std::uint64_t RuntimeStats::*field, MetricLabels labels) {
    registry.AddCallbackCounter(std::move(name), std::move(help),
                                [&runtime, field] { return static_cast<double>(runtime.stats().*field); },
                                std::move(labels));
  };
  const std::string events = "Actor events by outcome.";
  registry.AddCallbackCounter(
      "wasmkeep_actor_events_total", events,
      [&runtime] {
        const RuntimeStats s = runtime.stats();
        return static_cast<double>(s.events - s.failed_events);
      },
      {{"outcome", "ok"}});
  counter("wasmkeep_actor_events_total", events, &RuntimeStats::failed_events, {{"outcome", "failed"}});
  counter("wasmkeep_actor_events_total", events, &RuntimeStats::overloaded, {{"outcome", "overloaded"}});
  counter("wasmkeep_actor_instantiations_total", "WebAssembly instances created (first events and re-creations).",
          &RuntimeStats::instantiations, {});
  const std::string unloads = "Actors that left memory, by reason.";
  counter("wasmkeep_actor_unloads_total", unloads, &RuntimeStats::hibernations, {{"reason", "hibernated"}});
  counter("wasmkeep_actor_unloads_total", unloads, &RuntimeStats::evictions, {{"reason", "evicted"}});
  registry.AddHistogramView("wasmkeep_actor_event_seconds", "Time from an event's arrival to its released answer.",
                            runtime.event_seconds());
  const std::string phases =
      "Where a dispatched event's time went: queued behind the actor's earlier events (input), waiting for its "
      "worker thread (worker), running there (run: instantiation, the module's call, its batch handed to storage), "
      "then until its answer was released (output: the output gate's durability wait and the hand-back).";
  for (std::size_t i = 0; i < kEventPhases.size(); ++i) {
    registry.AddHistogramView("wasmkeep_actor_event_phase_seconds", phases, runtime.event_phase_seconds(i),
                              {{"phase", std::string(kEventPhases[i])}});
  }
  registry.AddCallbackGauge("wasmkeep_actor_resident", "Actors resident in memory.",
                            [&runtime] { return static_cast<double>(runtime.stats().resident_actors); });
  registry.AddCallbackGauge(
      "wasmkeep_actor_memory_bytes",
      "Memory the budget counts (actors.memory_budget_bytes): instances' linear memory (pages touched), resident "
      "actors' state and bookkeeping, and the workers' V8 heaps.",
      [&runtime] { return static_cast<double>(runtime.stats().memory_bytes); });
  const std::string parts =
      "wasmkeep_actor_memory_bytes by part: linear memory (pages touched), state (with per-entry overhead), V8 heap, "
      "bookkeeping per resident actor.";
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().linear_bytes); },
                            {{"part", "linear"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().state_bytes); },
                            {{"part", "state"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().heap_bytes); },
                            {{"part", "heap"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().bookkeeping_bytes); },
                            {{"part", "bookkeeping"}});
  registry.AddCallbackGaugeBreakdown(
      "wasmkeep_actor_tenant_memory_bytes",
      "wasmkeep_actor_memory_bytes by tenant: its actors' linear memory, state and bookkeeping, and their share of "
      "the V8 heaps; the tenants with the most, then _other for the rest and _node for heap no instance holds.",
      "tenant", [&runtime] {
        const std::vector<TenantMemory> tenants = runtime.MemoryByTenant();
        MetricsRegistry::Breakdown out;
        double attributed = 0, other = 0;
        for (std::size_t i = 0; i < tenants.size(); ++i) {
          attributed += tenants[i].bytes;
          if (i < kMaxTenantMemorySeries) {
            out.emplace_back(tenants[i].tenant, tenants[i].bytes);
          } else {
            other += tenants[i].bytes;
          }
        }
        if (tenants.size() > kMaxTenantMemorySeries) out.emplace_back("_other", other);
        out.emplace_back("_node", std::max(0.0, static_cast<double>(runtime.stats().memory_bytes) - attributed));
        return out;
      });
  registry.AddCallbackGauge("wasmkeep_actor_instances",
                            "Resident actors with a WebAssembly instance (the others are warm but not instantiated).",
                            [&runtime] { return static_cast<double>(runtime.stats().instances); });
  registry.AddCallbackGauge(
      "wasmkeep_actor_linear_mapped_bytes",
      "Linear memory of the instances as mapped (their size); the budget counts the pages touched (part=\"linear\").",
      [&runtime] { return static_cast<double>(runtime.stats().linear_mapped_bytes); });
  const std::string dropped = "Instances dropped from resident actors, by reason (idle: actors.idle_instance_ms; "
                              "memory: actors.memory_budget_bytes; limit: actors.max_instances).";
  counter("wasmkeep_actor_instances_dropped_total", dropped, &RuntimeStats::instances_dropped_idle,
          {{"reason", "idle"}});
  counter("wasmkeep_actor_instances_dropped_total", dropped, &RuntimeStats::instances_dropped_memory,
          {{"reason", "memory"}});
  counter("wasmkeep_actor_instances_dropped_total", dropped, &RuntimeStats::instances_dropped_limit,
          {{"reason", "limit"}});
  counter("wasmkeep_actor_memory_refusals_total", "Actors refused a start (503) because the memory budget was used up.",
          &RuntimeStats::memory_refusals, {});
  registry.AddCallbackGauge(
      "wasmkeep_actor_instance_reserved_bytes",
      "Address space the live instances' linear memories reserve (each its maximum), kept within 3/4 of V8's 1 TiB.",
      [&runtime] { return static_cast<double>(runtime.stats().instance_reserved_bytes); });
  counter("wasmkeep_actor_reservation_collections_total",
          "Collections started because the memories of thrown-away instances that V8 had not collected yet reserved "
          "1/8 of V8's 1 TiB of address space, or numbered 4,096.",
          &RuntimeStats::reservation_collections, {});

  // The engine: its workers' garbage collections, instantiations, linear memories.
  auto engine_counter = [&](std::string name, std::string help, auto field, MetricLabels labels) {
    registry.AddCallbackCounter(std::move(name), std::move(help),
                                [&runtime, field] { return static_cast<double>(field(runtime.engine_stats())); },
                                std::move(labels));
  };
  const std::string gcs =
      "Garbage collections of the workers' V8 heaps, by cause: young (scavenge), full (V8's own), external_memory "
      "(memory outside the heap grew), all_available (V8 collected all it could on its own: it could not reserve a "
      "linear memory, or its heap ran out), requested (the runtime asked).";
  const std::string gc_seconds = "Pauses of those collections on the workers' threads, by cause.";
  for (std::size_t i = 0; i < engine::kGcCauses; ++i) {
    const std::string cause(engine::GcCauseName(static_cast<engine::GcCause>(i)));
    engine_counter("wasmkeep_engine_gc_total", gcs, [i](const engine::EngineStats& s) { return s.collections[i]; },
                   {{"cause", cause}});
    engine_counter("wasmkeep_engine_gc_seconds_total", gc_seconds,
                   [i](const engine::EngineStats& s) { return s.collection_seconds[i]; }, {{"cause", cause}});
  }
  engine_counter("wasmkeep_engine_instantiation_seconds_total", "Wall time of the workers' instantiations.",
                 [](const engine::EngineStats& s) { return s.instantiation_seconds; }, {});
  engine_counter("wasmkeep_engine_slow_instantiations_total", "Instantiations that took more than 10 ms.",
                 [](const engine::EngineStats& s) { return s.slow_instantiations; }, {});
  engine_counter("wasmkeep_engine_instantiation_gc_total", "Garbage collections that ran inside instantiations.",
                 [](const engine::EngineStats& s) { return s.collections_in_instantiations; }, {});
  engine_counter("wasmkeep_engine_instantiation_gc_seconds_total", "Their pauses.",
                 [](const engine::EngineStats& s) { return s.collection_seconds_in_instantiations; }, {});
  registry.AddCallbackGauge(
      "wasmkeep_engine_linear_memories",
      "Linear memories V8 holds: live instances', those kept for reuse, and thrown-away ones it has not collected "
      "yet.",
      [&runtime] { return static_cast<double>(runtime.engine_stats().linear_memories); });
  registry.AddCallbackGauge(
      "wasmkeep_engine_linear_memories_pooled",
      "Of those, the memories the workers keep zeroed for their modules' next instances.",
      [&runtime] { return static_cast<double>(runtime.engine_stats().pooled_memories); });
  engine_counter("wasmkeep_engine_linear_memory_reuses_total",
                 "Instantiations given a kept memory (zeroed) instead of a new one.",
                 [](const engine::EngineStats& s) { return static_cast<double>(s.reused_memories); }, {});
  registry.AddCallbackGauge(
      "wasmkeep_engine_linear_reserved_bytes",
      "Address space those memories reserve (each its maximum); V8 refuses more than about 1 TiB.",
      [&runtime] { return static_cast<double>(runtime.engine_stats().linear_reserved_bytes); });
}

RuntimeStats ActorRuntime::stats() const {
  RuntimeStats s = stats_;
  s.resident_actors = actors_.size();
  s.instances = instances_by_activity_.size();
  s.linear_bytes = linear_bytes_;
  s.linear_mapped_bytes = linear_mapped_bytes_;
  s.state_bytes = state_bytes_;
  s.bookkeeping_bytes = actors_.size() * kResidentActorBookkeepingBytes;
  s.instance_heap_bytes = instance_heap_bytes_;
  s.instance_reserved_bytes = instance_reserved_bytes_;
  for (const WorkerMemory& w : worker_memory_) s.heap_bytes += w.heap_bytes;
  s.memory_bytes = MemoryBytes();
  return s;
}

std::vector<TenantMemory> ActorRuntime::MemoryByTenant() const {
  std::vector<TenantMemory> out;
  out.reserve(tenant_totals_.size());
  for (const auto& [name, t] : tenant_totals_) {
    out.push_back(TenantMemory{
        name,
        static_cast<double>(t.linear_bytes + t.state_bytes + t.instance_heap_bytes +
                            t.actors * kResidentActorBookkeepingBytes),
        t.actors});
  }
  std::sort(out.begin(), out.end(), [](const TenantMemory& a, const TenantMemory& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.tenant < b.tenant;
  });
  return out;
}

std::uint64_t ActorRuntime::InstanceHeap(const Slot& slot) { return slot.has_instance ? slot.instance_heap_bytes : 0; }

Task<EventResult> ActorRuntime::HandleRequest(ActorId id, Request request) {
  if (request.body.size() > options_.limits.max_request_bytes) {
    EventResult r;
    r.outcome = EventOutcome::kBadRequest;
    r.error = fmt::format("the request body is {} bytes, over the limit max_request_bytes = {}",
                          request.body.size(), options_.limits.max_request_bytes);
    co_return r;
  }
  std::optional<Request> req(std::move(request));
  EventResult r = co_await Submit(std::move(id), std::move(req));
  co_return r;
}

Task<EventResult> ActorRuntime::HandleAlarm(ActorId id, AlarmEvent event) {
  std::optional<Request> none;
  EventResult r = co_await Submit(std::move(id), std::move(none), event);
  co_return r;
}

Task<EventResult> ActorRuntime::Submit(ActorId id, std::optional<Request> request, AlarmEvent alarm) {
  EventResult refused;
  if (shutting_down_) {
    refused.outcome = EventOutcome::kUnavailable;
    refused.error = "the node is shutting down";
    co_return refused;
  }
  std::string key = id.ToString();
  auto it = actors_.find(key);
  std::shared_ptr<Slot> slot = it == actors_.end() ? nullptr : it->second;
  // A resident actor runs the module it started with; a new one the class's current one.
  std::shared_ptr<const engine::Module> module = slot ? slot->module : classes_.Find(id.tenant, id.class_name);
  if (!module) {
    refused.outcome = EventOutcome::kNotFound;
    refused.error = fmt::format("no class {}/{} is deployed", id.tenant, id.class_name);
    co_return refused;
  }
  if (!slot && options_.memory_budget_bytes > 0 && MemoryBytes() > options_.memory_budget_bytes) {
    // Admission: a new actor starts only if evicting idle ones brings the node back under
    // its budget (they leave asynchronously; their bytes are subtracted here already).
    const std::uint64_t projected = EnforceMemoryBudget();
    if (projected > options_.memory_budget_bytes) {
      ++stats_.memory_refusals;
      refused.outcome = EventOutcome::kOverloaded;
      refused.error = fmt::format(
          "the node's memory budget is used up ({} bytes resident, actors.memory_budget_bytes = {}): {} cannot start "
          "here now",
          projected, options_.memory_budget_bytes, key);
      co_return refused;
    }
  }
  if (!slot) {
    slot = NewSlot(id, key, std::move(module));
    env_.Spawn(Start(slot), "actor start " + key);
  } else if (slot->queue.size() >= options_.limits.max_queued_events) {
    ++stats_.overloaded;
    refused.outcome = EventOutcome::kOverloaded;
    refused.error = fmt::format("the actor {} is overloaded: {} events are queued (max_queued_events)", key,
                                slot->queue.size());
    co_return refused;
  }
  Latch<EventResult> done(env_, [] {
    EventResult r;
    r.outcome = EventOutcome::kUnavailable;
    r.error = "cancelled";
    return r;
  });
  const MonoTime queued_at = env_.MonoNow();
  slot->queue.push_back(Pending{std::move(request), alarm, done, queued_at});
  Pump(slot);
  auto alive = alive_;
  EventResult result = co_await done.Wait();
  // The runtime may have been destroyed while this waited (its destructor answers every
  // event): touch nothing of it then.
  if (*alive) event_seconds_.Observe(ToSeconds(env_.MonoNow() - queued_at));
  co_return result;
}

Task<void> ActorRuntime::Start(std::shared_ptr<Slot> slot) {
  WK_CHECK(slot->state == Slot::State::kStarting, "Start on a slot that is not starting");
  auto alive = alive_;
  Result<std::unique_ptr<ActorStorage>> opened = co_await storage_.Open(slot->id);
  if (!*alive) co_return;
  if (!opened.ok()) {
    WK_LOG_WARN("actor restore failed", {{"actor", slot->key}, {"error", opened.status().ToString()}});
    EventResult r;
    r.outcome = EventOutcome::kUnavailable;
    r.error = "the actor's state could not be restored: " + opened.status().ToString();
    auto queue = std::move(slot->queue);
    slot->queue.clear();
    Forget(*slot);
    for (Pending& p : queue) p.done.Set(r);
    // The ownership layer may have taken a hold for this start: let it release it.
    if (hooks_.on_unloaded) hooks_.on_unloaded(slot->id, UnloadReason::kFailed);
    co_return;
  }
  slot->storage = std::move(*opened);
  slot->last_seq = 0;
  slot->state = Slot::State::kReady;
  // The class may have been redeployed while the actor was away: start on the current one.
  if (auto current = classes_.Find(slot->id.tenant, slot->id.class_name)) slot->module = std::move(current);
  Pump(slot);
  AfterProgress(slot);
}

bool ActorRuntime::Broken(const Slot& slot) { return slot.storage && !slot.storage->failure().ok(); }

void ActorRuntime::Pump(const std::shared_ptr<Slot>& slot) {
  if (slot->state != Slot::State::kReady || slot->queue.empty()) return;
  if (Broken(*slot)) {
    // Its storage failed (its hold ended, or its writes could not be made durable) while
    // it waited: close it once idle; the queued events restart it with a fresh restore.
    AfterProgress(slot);
    return;
  }
  if (!slot->has_instance) MakeRoomForInstance(*slot);
  Pending pending = std::move(slot->queue.front());
  slot->queue.pop_front();
  slot->state = Slot::State::kRunning;
  slot->undelivered++;
  const std::int64_t now_ms = NowMs();
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  auto shared_pending = std::make_shared<Pending>(std::move(pending));
  shared_pending->dispatched = Pending::Clock::now();
  slot->inflight.push_back(shared_pending);
  auto stopping = stopping_;
  workers_[slot->worker]->Post([this, env, alive, slot, shared_pending, now_ms, stopping](engine::Worker& worker) {
    if (stopping->load()) return;  // the runtime is being destroyed; the event was answered
    shared_pending->started = Pending::Clock::now();
    if (hooks_.on_event_start) hooks_.on_event_start(slot->id, slot->worker);
    ExecResult exec = Execute(worker, *slot, shared_pending->request, shared_pending->alarm, now_ms);
    if (hooks_.on_event_end) hooks_.on_event_end(slot->id, slot->worker, EventEnd{exec.call_outcome, exec.call_message});
    shared_pending->ran = Pending::Clock::now();
    // The output gate: this event's answer waits until everything it may depend on (the
    // actor's last committed batch, its own or an earlier event's) is durable, and is
    // released only if the storage's hold is still valid then (storage.h), even for an
    // event that wrote nothing.
    const MemoryUse memory = exec.memory;
    const bool instantiated = exec.instantiated;
    env->PostFromAnyThread([this, alive, slot, memory, instantiated] {
      if (alive.lock() && *alive.lock()) ExecutionDone(slot, memory, instantiated);
    });
    auto result = std::make_shared<EventResult>(std::move(exec.result));
    slot->storage->WhenReleasable(exec.wait_seq, [this, env, alive, slot, shared_pending, result](Status s) {
      env->PostFromAnyThread([this, alive, slot, shared_pending, result, s = std::move(s)]() mutable {
        auto a = alive.lock();
        if (a && *a) Deliver(slot, shared_pending, std::move(*result), std::move(s));
      });
    });
  });
}

ActorRuntime::MemoryUse ActorRuntime::MeasureMemory(engine::Worker& worker, Slot& slot) {
  MemoryUse m;
  if (slot.instance) {
    m.has_instance = true;
    m.linear = slot.instance->ResidentMemoryBytes();
    m.linear_mapped = slot.instance->MemoryBytes();
    m.instance_heap = slot.instance->HeapBytes();
    m.reserved = slot.instance->module().max_memory_bytes();
  }
  m.state = slot.storage->MemoryBytes();
  m.heap = worker.HeapUsedBytes();
  return m;
}

ActorRuntime::ExecResult ActorRuntime::Execute(engine::Worker& worker, Slot& slot,
                                               const std::optional<Request>& request, const AlarmEvent& alarm,
                                               std::int64_t now_ms) {
  ExecResult out;
  // An alarm event first asks the actor's committed state (alarm_event.h): nothing runs for
  // an alarm that is absent or not due here (a stale index entry, a deleted or replaced
  // alarm, a clock behind the scanner's); its answer still passes the output gate, so the
  // caller learns the alarm as durably as any answer.
  std::optional<std::int64_t> due_alarm;
  if (!request) {
    due_alarm = slot.storage->Alarm();
    const bool due = AlarmDue(due_alarm, now_ms, options_.broken);
    if (!due || !slot.module->HasExport(kAlarmExport)) {
      if (Status broken = slot.storage->failure(); !broken.ok()) {
        out.result.outcome = EventOutcome::kUnavailable;
        out.result.error = broken.ToString();
      } else if (due) {
        // A class without wk_on_alarm: the due alarm is cleared, nothing runs (docs/alarms.md).
        Batch clear;
        clear.alarm = std::optional<std::int64_t>();
        slot.last_seq = slot.storage->Commit(std::move(clear));
      }
      out.result.alarm_after = slot.storage->Alarm();
      out.wait_seq = slot.last_seq;
      out.memory = MeasureMemory(worker, slot);
      return out;
    }
  }
  const auto cpu_limit = std::chrono::milliseconds(options_.limits.max_event_cpu_ms);
  EventTxn txn(*slot.storage, options_.limits);
  EventContext ctx;
  ctx.limits = &options_.limits;
  ctx.actor = slot.key;
  ctx.request = request ? &*request : nullptr;
  ctx.txn = &txn;
  ctx.now_ms = now_ms;
  if (!request) {
    // The alarm is cleared as the handler starts; setting it again re-arms it.
    txn.SetAlarm(std::nullopt);
    ctx.alarm_retry_count = alarm.retry_count;
  }
  // All of an event's sync calls share one deadline: a wait uses no CPU, so the watchdog
  // cannot bound it, and a loop of put+sync must not hold the worker (and every actor on
  // it) for longer than sync_timeout in total.
  const auto sync_deadline = std::chrono::steady_clock::now() + options_.sync_timeout;
  // Exec-durable is an effect visible outside the actor: it passes the same gate as an
  // answer. A failure is the storage's (sticky): every later sync of the event fails at
  // once, and the event's answer is never released (abi.md).
  const std::string timed_out = fmt::format(
      "exec-durable (sync) of {} did not complete within actors.sync_timeout_ms ({} ms): its answer is never released",
      slot.key, options_.sync_timeout / std::chrono::milliseconds(1));
  ctx.sync = [&slot, &txn, sync_deadline, &timed_out]() {
    if (!slot.storage->failure().ok()) return false;
    Batch batch = txn.TakeBatch();
    if (!batch.empty()) slot.last_seq = slot.storage->Commit(std::move(batch));
    struct Wait {
      std::mutex mu;
      std::condition_variable cv;
      std::optional<Status> status;
    };
    auto wait = std::make_shared<Wait>();
    slot.storage->WhenReleasable(slot.last_seq, [wait](Status s) {
      std::lock_guard lock(wait->mu);
      wait->status = std::move(s);
      wait->cv.notify_all();
    });
    std::unique_lock lock(wait->mu);
    if (!wait->cv.wait_until(lock, sync_deadline, [&] { return wait->status.has_value(); })) {
      lock.unlock();
      // Not known in time: give up on the storage, so nothing of this actor is released
      // any more (it is restored afresh for its next event).
      slot.storage->Break(Retryable(timed_out));
      return false;
    }
    return wait->status->ok();  // an error has failed the storage (storage.h)
  };

  auto fail = [&](std::string message) {
    out.result.outcome = EventOutcome::kActorFailed;
    out.result.error = std::move(message);
    WK_LOG_WARN("actor event failed", {{"actor", slot.key}, {"error", out.result.error}});
  };

  if (!slot.instance) {
    auto made = worker.Instantiate(slot.module, &ctx, cpu_limit);
    out.instantiated = true;
    if (!made.ok()) {
      fail(made.status().message());
      out.wait_seq = slot.last_seq;
      return out;
    }
    slot.instance = std::move(*made);
    // What _initialize did through the ABI is not the event's: it starts with an empty
    // result buffer and the default response (abi.md). (Its writes, if any, stay in the
    // batch: static constructors run once per instance, over committed state.)
    ctx.result.clear();
    ctx.response = Response{};
    ctx.response_bytes = 0;
  }
  const std::string_view export_name = request ? kRequestExport : kAlarmExport;
  engine::CallResult call = slot.instance->Call(export_name, &ctx, cpu_limit);
  ctx.FlushOutput();
  out.call_outcome = call.outcome;
  if (!call.ok()) out.call_message = call.message;
  if (!call.instance_usable) slot.instance.reset();

  if (Status broken = slot.storage->failure(); !broken.ok()) {
    // The gate will refuse this answer (Deliver says why); commit nothing more.
    out.result.outcome = EventOutcome::kUnavailable;
    out.result.error = broken.ToString();
  } else if (call.ok() && call.value == 0 &&
             (ctx.response.status < kMinResponseStatus || ctx.response.status > kMaxResponseStatus)) {
    // response_set_status refuses these; checked again before anything is committed, so
    // an answer the server would turn into a 500 never comes with committed writes.
    fail(fmt::format("the actor's response status {} is not in {}..{}", ctx.response.status, kMinResponseStatus,
                     kMaxResponseStatus));
  } else if (call.ok() && call.value == 0) {
    Batch batch = txn.TakeBatch();
    if (!batch.empty()) slot.last_seq = slot.storage->Commit(std::move(batch));
    out.result.response = std::move(ctx.response);
    out.result.alarm_fired = !request.has_value();
  } else if (call.ok()) {
    fail(fmt::format("the actor's {} returned {}", export_name, call.value));
  } else {
    std::string message = call.message;
    if (call.outcome == engine::CallOutcome::kTerminated) message += " (actors.max_event_cpu_ms)";
    if (call.outcome == engine::CallOutcome::kHeapLimit) message += " (actors.isolate_heap_limit_bytes)";
    if (call.outcome == engine::CallOutcome::kOutOfMemory) message += " (actors.max_memory_bytes)";
    fail(std::move(message));
  }
  if (!request && alarm.last_attempt && out.result.outcome == EventOutcome::kActorFailed &&
      slot.storage->failure().ok() && slot.storage->Alarm() == due_alarm) {
    // The retries are used up: the alarm is cleared, without the failed run's writes.
    Batch clear;
    clear.alarm = std::optional<std::int64_t>();
    slot.last_seq = slot.storage->Commit(std::move(clear));
  }
  if (!request) out.result.alarm_after = slot.storage->Alarm();
  out.wait_seq = slot.last_seq;
  out.memory = MeasureMemory(worker, slot);
  return out;
}

void ActorRuntime::ExecutionDone(const std::shared_ptr<Slot>& slot, MemoryUse memory, bool instantiated) {
  WK_CHECK(slot->state == Slot::State::kRunning, "execution done on a slot that was not running");
  slot->state = Slot::State::kReady;
  slot->last_active = env_.MonoNow();
  by_activity_.splice(by_activity_.end(), by_activity_, slot->by_activity);
  SetStateBytes(*slot, memory.state);
  worker_memory_[slot->worker].heap_bytes = memory.heap;
  worker_memory_[slot->worker].last_event = slot->last_active;
  SetInstanceMemory(*slot, memory);
  if (instantiated) {
    ++stats_.instantiations;
  }
  Pump(slot);
  AfterProgress(slot);
  EnforceMemoryBudget();
}

void ActorRuntime::SetInstanceMemory(Slot& slot, const MemoryUse& memory) {
  if (!memory.has_instance) {
    ForgetInstance(slot);  // it failed and was thrown away, or could not be made
    CollectIfUncollected(slot.worker);
    return;
  }
  if (slot.has_instance) {
    instances_by_activity_.splice(instances_by_activity_.end(), instances_by_activity_, slot.instance_by_activity);
  } else {
    slot.has_instance = true;
    slot.instance_by_activity = instances_by_activity_.insert(instances_by_activity_.end(), &slot);
  }
  instance_reserved_bytes_ = instance_reserved_bytes_ - slot.reserved_bytes + memory.reserved;
  slot.reserved_bytes = memory.reserved;
  SetLinearBytes(slot, memory.linear);
  linear_mapped_bytes_ = linear_mapped_bytes_ - slot.linear_mapped_bytes + memory.linear_mapped;
  slot.linear_mapped_bytes = memory.linear_mapped;
  SetInstanceHeapBytes(slot, memory.instance_heap);
}

void ActorRuntime::SetLinearBytes(Slot& slot, std::uint64_t bytes) {
  linear_bytes_ = linear_bytes_ - slot.linear_bytes + bytes;
  slot.tenant->linear_bytes = slot.tenant->linear_bytes - slot.linear_bytes + bytes;
  slot.linear_bytes = bytes;
}

void ActorRuntime::SetStateBytes(Slot& slot, std::uint64_t bytes) {
  state_bytes_ = state_bytes_ - slot.state_bytes + bytes;
  slot.tenant->state_bytes = slot.tenant->state_bytes - slot.state_bytes + bytes;
  slot.state_bytes = bytes;
}

void ActorRuntime::SetInstanceHeapBytes(Slot& slot, std::uint64_t bytes) {
  instance_heap_bytes_ = instance_heap_bytes_ - slot.instance_heap_bytes + bytes;
  slot.tenant->instance_heap_bytes = slot.tenant->instance_heap_bytes - slot.instance_heap_bytes + bytes;
  slot.instance_heap_bytes = bytes;
}

void ActorRuntime::ForgetInstance(Slot& slot) {
  if (!slot.has_instance) return;
  instances_by_activity_.erase(slot.instance_by_activity);
  slot.has_instance = false;
  instance_reserved_bytes_ -= slot.reserved_bytes;
  // Its memory keeps its address space until V8 collects it (CollectIfUncollected).
  worker_memory_[slot.worker].uncollected_reserved_bytes += slot.reserved_bytes;
  ++worker_memory_[slot.worker].uncollected_memories;
  slot.reserved_bytes = 0;
  SetLinearBytes(slot, 0);
  linear_mapped_bytes_ -= slot.linear_mapped_bytes;
  slot.linear_mapped_bytes = 0;
  SetInstanceHeapBytes(slot, 0);
}

void ActorRuntime::DropInstance(Slot& slot, DropReason reason) {
  WK_CHECK(IsIdle(slot) && slot.has_instance, "dropping the instance of a busy actor, or one without an instance");
  ForgetInstance(slot);
  switch (reason) {
    case DropReason::kIdle: ++stats_.instances_dropped_idle; break;
    case DropReason::kMemory: ++stats_.instances_dropped_memory; break;
    case DropReason::kLimit: ++stats_.instances_dropped_limit; break;
  }
  // Queued on its worker like an event: an event dispatched after this finds no instance
  // and makes a fresh one over the committed state.
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  std::shared_ptr<Slot> self = slot.shared_from_this();
  workers_[slot.worker]->Post([this, env, alive, self](engine::Worker& worker) {
    self->instance.reset();  // V8 objects die on their own isolate's thread
    const std::uint64_t heap = worker.HeapUsedBytes();
    env->PostFromAnyThread([this, alive, w = self->worker, heap] {
      auto a = alive.lock();
      if (a && *a) worker_memory_[w].heap_bytes = heap;
    });
  });
  CollectIfUncollected(slot.worker);
}

void ActorRuntime::CollectIfUncollected(std::size_t i) {
  // V8's own collections (frequent on a busy worker) free most of them: ask the engine what
  // it still holds beyond the live instances, not what was thrown away since our last ask.
  WorkerMemory& w = worker_memory_[i];
  if (w.uncollected_reserved_bytes < kUncollectedReservationBytes / workers_.size() &&
      w.uncollected_memories < kUncollectedMemories / workers_.size()) {
    return;
  }
  // (Memories the workers keep for reuse are not garbage either: zeroed, they wait for the
  // next instance; engine::WorkerOptions::memory_pool_size.)
  const engine::EngineStats e = engine_.stats();
  const std::uint64_t live = instances_by_activity_.size() + e.pooled_memories;
  const std::uint64_t live_reserved = instance_reserved_bytes_ + e.pooled_reserved_bytes;
  const std::uint64_t memories = e.linear_memories > live ? e.linear_memories - live : 0;
  const std::uint64_t reserved = e.linear_reserved_bytes > live_reserved ? e.linear_reserved_bytes - live_reserved : 0;
  if (reserved < kUncollectedReservationBytes && memories < kUncollectedMemories) {
    w.uncollected_reserved_bytes = 0;  // collected meanwhile: count again from here
    w.uncollected_memories = 0;
    return;
  }
  ++stats_.reservation_collections;
  StartCollectionOn(i);
}

void ActorRuntime::StartCollectionOn(std::size_t i) {
  WorkerMemory& w = worker_memory_[i];
  w.last_collection = env_.MonoNow();
  w.collection_wanted = false;
  w.uncollected_reserved_bytes = 0;
  w.uncollected_memories = 0;
  workers_[i]->Post([](engine::Worker& worker) { worker.StartCollection(); });
}

void ActorRuntime::MakeRoomForInstance(const Slot& next) {
  // The memories the workers keep for reuse reserve address space too (at most
  // engine::kMaxPooledReservationBytes each): counted with the live instances'.
  const std::uint64_t reserve = next.module->max_memory_bytes() + engine_.pooled_reserved_bytes();
  auto full = [&] {
    return instances_by_activity_.size() >= options_.max_instances ||
           instance_reserved_bytes_ + reserve > kLiveReservationBytes;
  };
  for (auto it = instances_by_activity_.begin(); full() && it != instances_by_activity_.end();) {
    Slot* s = *it++;
    if (IsIdle(*s)) DropInstance(*s, DropReason::kLimit);
  }
}

void ActorRuntime::ScheduleSweep() {
  // Often enough that an idle actor is dealt with within a quarter of its idle time, and at
  // least once a second.
  const Duration shortest = std::min(options_.idle_instance, options_.idle_hibernate);
  const Duration period = std::clamp<Duration>(shortest / 4, std::chrono::milliseconds(1), std::chrono::seconds(1));
  std::weak_ptr<bool> alive = alive_;
  sweep_timer_ = env_.StartTimer(env_.MonoNow() + period, [this, alive] {
    auto a = alive.lock();
    if (!a || !*a) return;
    sweep_timer_ = 0;
    Sweep();
  });
}

void ActorRuntime::Sweep() {
  const MonoTime now = env_.MonoNow();
  std::vector<bool> dropped(workers_.size(), false);
  for (auto it = instances_by_activity_.begin(); it != instances_by_activity_.end();) {
    Slot* s = *it++;
    if (now - s->last_active < options_.idle_instance) break;  // the rest are more recent
    if (!IsIdle(*s)) continue;
    dropped[s->worker] = true;
    DropInstance(*s, DropReason::kIdle);
  }
  std::vector<std::shared_ptr<Slot>> sleepy;
  for (Slot* s : by_activity_) {
    if (now - s->last_active < options_.idle_hibernate) break;
    if (IsIdle(*s)) sleepy.push_back(s->shared_from_this());
  }
  for (auto& s : sleepy) Close(s, UnloadReason::kHibernated);
  // V8 frees what the dropped instances held (their linear memory included) at its next
  // full collection, which an idle worker may not run for a long time: ask for one, at most
  // every kIdleCollectionInterval, and at the latest that long after the last drop, once
  // the worker is idle (no event in the last kBusyWorkerWindow). A busy worker is not
  // stopped for it: a forced collection there holds every event queued behind it for its
  // whole length (80 ms each at 50,000 actors; the warm tail of docs/benchmarks.md,
  // "Density"), and a busy worker allocates, so V8 collects there on its own anyway.
  // (Address space and mappings are watched apart: CollectIfUncollected.)
  for (std::size_t i = 0; i < dropped.size(); ++i) {
    WorkerMemory& w = worker_memory_[i];
    w.collection_wanted = w.collection_wanted || dropped[i];
    if (!w.collection_wanted || now - w.last_collection < kIdleCollectionInterval) continue;
    if (now - w.last_event >= kBusyWorkerWindow) CollectGarbageOn(i);
  }
  if (!actors_.empty()) ScheduleSweep();
}

void ActorRuntime::CollectGarbageOn(std::size_t i) {
  worker_memory_[i].last_collection = env_.MonoNow();
  worker_memory_[i].collection_wanted = false;
  worker_memory_[i].uncollected_reserved_bytes = 0;  // a full collection frees them all
  worker_memory_[i].uncollected_memories = 0;
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  workers_[i]->Post([this, env, alive, i](engine::Worker& worker) {
    worker.CollectGarbage();
    const std::uint64_t heap = worker.HeapUsedBytes();
    env->PostFromAnyThread([this, alive, i, heap] {
      auto a = alive.lock();
      if (a && *a) worker_memory_[i].heap_bytes = heap;
    });
  });
}

void ActorRuntime::Deliver(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending,
                           EventResult result, Status durable) {
  slot->undelivered--;
  std::erase(slot->inflight, pending);
  if (!durable.ok()) {
    // The output gate refused: nothing this event did may be seen, and the storage has
    // failed (the in-memory state can no longer be trusted; AfterProgress closes it).
    result = EventResult{};
    result.outcome = EventOutcome::kUnavailable;
    result.error = "the answer was not released (its writes are not durable, or this node no longer holds the actor): " +
                   durable.ToString();
  }
  ++stats_.events;
  if (!result.ok()) ++stats_.failed_events;
  ObservePhases(*pending);
  pending->done.Set(std::move(result));
  AfterProgress(slot);
}

void ActorRuntime::ObservePhases(const Pending& p) {
  using std::chrono::duration;
  const auto seconds = [](Pending::Clock::duration d) { return duration<double>(d).count(); };
  event_phase_seconds_[0].Observe(seconds(p.dispatched - p.arrived));
  event_phase_seconds_[1].Observe(seconds(p.started - p.dispatched));
  event_phase_seconds_[2].Observe(seconds(p.ran - p.started));
  event_phase_seconds_[3].Observe(seconds(Pending::Clock::now() - p.ran));
}

void ActorRuntime::AfterProgress(const std::shared_ptr<Slot>& slot) {
  if (slot->state != Slot::State::kReady || slot->undelivered != 0) return;
  if (Broken(*slot)) {
    WK_LOG_WARN("the actor's storage failed; it is closed and restored afresh for its next event",
                {{"actor", slot->key}, {"error", slot->storage->failure().ToString()}});
    Close(slot, UnloadReason::kFailed);  // queued events restart it with a fresh restore
  } else if (!slot->queue.empty()) {
    return;
  } else if (slot->unload_requested) {
    Close(slot, UnloadReason::kRequested);
  } else if (shutting_down_) {
    Close(slot, UnloadReason::kShutdown);
  }
  // Otherwise it is idle: the sweep drops its instance, then hibernates it, in time.
}

bool ActorRuntime::IsIdle(const Slot& slot) const {
  return slot.state == Slot::State::kReady && slot.queue.empty() && slot.undelivered == 0;
}

void ActorRuntime::Unload(const ActorId& id) {
  auto it = actors_.find(id.ToString());
  if (it == actors_.end()) return;
  auto slot = it->second;
  if (IsIdle(*slot)) {
    Close(slot, UnloadReason::kRequested);
  } else {
    slot->unload_requested = true;
  }
}

void ActorRuntime::Warm(const ActorId& id) {
  if (shutting_down_) return;
  std::string key = id.ToString();
  if (actors_.contains(key)) return;
  std::shared_ptr<const engine::Module> module = classes_.Find(id.tenant, id.class_name);
  if (!module) return;
  if (options_.memory_budget_bytes > 0 && MemoryBytes() > options_.memory_budget_bytes) return;
  auto slot = NewSlot(id, std::move(key), std::move(module));
  env_.Spawn(Start(slot), "actor warm start " + slot->key);
}

std::shared_ptr<ActorRuntime::Slot> ActorRuntime::NewSlot(const ActorId& id, std::string key,
                                                          std::shared_ptr<const engine::Module> module) {
  auto slot = std::make_shared<Slot>();
  slot->id = id;
  slot->key = std::move(key);
  slot->module = std::move(module);
  slot->worker = std::hash<std::string>{}(slot->key) % workers_.size();
  slot->last_active = env_.MonoNow();
  slot->tenant = &tenant_totals_[slot->id.tenant];
  ++slot->tenant->actors;
  actors_.emplace(slot->key, slot);
  slot->by_activity = by_activity_.insert(by_activity_.end(), slot.get());
  if (sweep_timer_ == 0) ScheduleSweep();
  return slot;
}

void ActorRuntime::Close(const std::shared_ptr<Slot>& slot, UnloadReason reason) {
  if (slot->state == Slot::State::kClosing) return;
  WK_CHECK(slot->state == Slot::State::kReady && slot->undelivered == 0, "closing a busy actor");
  slot->state = Slot::State::kClosing;
  ForgetInstance(*slot);  // its destruction is queued below
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  workers_[slot->worker]->Post([this, env, alive, slot, reason](engine::Worker& worker) {
    slot->instance.reset();  // V8 objects die on their own isolate's thread
    const std::uint64_t heap = worker.HeapUsedBytes();
    env->PostFromAnyThread([this, alive, slot, reason, heap] {
      auto a = alive.lock();
      if (!a || !*a) return;
      worker_memory_[slot->worker].heap_bytes = heap;
      CloseDone(slot, reason);
    });
  });
  CollectIfUncollected(slot->worker);
}

void ActorRuntime::CloseDone(const std::shared_ptr<Slot>& slot, UnloadReason reason) {
  SetStateBytes(*slot, 0);
  storage_.Close(slot->id, std::move(slot->storage));
  if (reason == UnloadReason::kHibernated) {
    ++stats_.hibernations;
  } else if (reason == UnloadReason::kEvicted) {
    ++stats_.evictions;
  }
  WK_LOG_DEBUG("actor unloaded", {{"actor", slot->key}, {"reason", std::string(UnloadReasonName(reason))}});
  if (hooks_.on_unloaded) hooks_.on_unloaded(slot->id, reason);
  slot->unload_requested = false;
  if (!slot->queue.empty() && !shutting_down_) {
    // Events arrived while it was closing: start it again (a fresh restore).
    slot->state = Slot::State::kStarting;
    env_.Spawn(Start(slot), "actor restart " + slot->key);
    return;
  }
  if (!slot->queue.empty()) {
    EventResult r;
    r.outcome = EventOutcome::kUnavailable;
    r.error = "the node is shutting down";
    auto queue = std::move(slot->queue);
    slot->queue.clear();
    for (Pending& p : queue) p.done.Set(r);
  }
  Forget(*slot);
}

void ActorRuntime::Forget(Slot& slot) {
  ForgetInstance(slot);
  // Its state was taken off in CloseDone, or never counted (a failed start).
  if (--slot.tenant->actors == 0) tenant_totals_.erase(slot.id.tenant);
  slot.tenant = nullptr;
  by_activity_.erase(slot.by_activity);
  actors_.erase(slot.key);  // last: it may hold the last reference to the slot
}

std::uint64_t ActorRuntime::MemoryBytes() const {
  std::uint64_t heap = 0;
  for (const WorkerMemory& w : worker_memory_) heap += w.heap_bytes;
  return linear_bytes_ + state_bytes_ + heap + actors_.size() * kResidentActorBookkeepingBytes;
}

std::uint64_t ActorRuntime::EnforceMemoryBudget() {
  std::uint64_t projected = MemoryBytes();
  if (projected <= options_.memory_budget_bytes) return projected;
  auto subtract = [&projected](double bytes) {
    projected -= std::min<std::uint64_t>(projected, static_cast<std::uint64_t>(bytes));
  };
  std::vector<bool> collect(workers_.size(), false);
  // First the instances of idle actors: making one again costs no bucket
  // request, where an evicted actor is acquired and restored.
  for (auto it = instances_by_activity_.begin();
       projected > options_.memory_budget_bytes && it != instances_by_activity_.end();) {
    Slot* s = *it++;
    if (!IsIdle(*s)) continue;
    subtract(static_cast<double>(s->linear_bytes + InstanceHeap(*s)));
    collect[s->worker] = true;
    DropInstance(*s, DropReason::kMemory);
  }
  // Then idle actors themselves.
  std::vector<std::shared_ptr<Slot>> evict;
  for (Slot* s : by_activity_) {
    if (projected <= options_.memory_budget_bytes) break;
    // Closing ones are on their way out: their bytes are still counted until CloseDone.
    if (!IsIdle(*s)) continue;
    const std::uint64_t bytes = s->linear_bytes + s->state_bytes + kResidentActorBookkeepingBytes;
    subtract(static_cast<double>(bytes + InstanceHeap(*s)));
    WK_LOG_INFO("evicting an idle actor: resident actors exceed actors.memory_budget_bytes",
                {{"actor", s->key}, {"memory_bytes", std::to_string(bytes)}});
    collect[s->worker] = collect[s->worker] || s->has_instance;
    evict.push_back(s->shared_from_this());
  }
  for (auto& s : evict) Close(s, UnloadReason::kEvicted);
  // One full collection per worker that lost instances, queued behind their jobs, so the
  // heap the budget counts drops with them (otherwise it would keep its last measure until
  // the next event on that worker, and could refuse new actors with nothing left to evict).
  for (std::size_t i = 0; i < collect.size(); ++i) {
    if (collect[i]) CollectGarbageOn(i);
  }
  return projected;
}

Task<bool> ActorRuntime::Shutdown(Duration limit) {
  shutting_down_ = true;
  const MonoTime deadline = env_.MonoNow() + limit;
  while (!actors_.empty() && env_.MonoNow() < deadline) {
    // Idle actors close now; busy ones become idle (or close from AfterProgress) once their
    // last answer is out. Close only posts work, so actors_ does not change under the loop.
    std::vector<std::shared_ptr<Slot>> idle;
    for (auto& [key, slot] : actors_) {
      if (IsIdle(*slot)) idle.push_back(slot);
    }
    for (auto& slot : idle) Close(slot, UnloadReason::kShutdown);
    if (!co_await env_.SleepFor(std::chrono::milliseconds(5))) break;
  }
  const bool clean = actors_.empty();
  if (!clean) WK_LOG_WARN("actor runtime shutdown left actors resident", {{"count", std::to_string(actors_.size())}});
  co_return clean;
}

}  // namespace wk::actor
