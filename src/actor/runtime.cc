#include "actor/runtime.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "actor/abi.h"
#include "actor/txn.h"
#include "base/check.h"
#include "base/log.h"

namespace wk::actor {

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
  if (o.idle_hibernate < std::chrono::milliseconds(1)) return InvalidArgument("actors.idle_hibernate_ms must be at least 1");
  if (o.memory_budget_bytes < o.limits.max_memory_bytes) {
    return InvalidArgument("actors.memory_budget_bytes must be at least actors.max_memory_bytes");
  }
  if (o.sync_timeout < std::chrono::milliseconds(1)) return InvalidArgument("actors.sync_timeout_ms must be at least 1");
  if (o.isolate_heap_limit_bytes < kMinIsolateHeapLimitBytes || o.isolate_heap_limit_bytes > kMaxIsolateHeapLimitBytes) {
    return InvalidArgument(fmt::format("actors.isolate_heap_limit_bytes must be between {} and {}",
                                       kMinIsolateHeapLimitBytes, kMaxIsolateHeapLimitBytes));
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

  WorkerThread(engine::Engine& engine, engine::WorkerOptions options) {
    thread_ = std::thread([this, &engine, options] { Loop(engine, options); });
  }
  ~WorkerThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Post(Job job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void Loop(engine::Engine& engine, engine::WorkerOptions options) {
    engine::Worker worker(engine, options);
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stop_ and drained
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job(worker);
      worker.PumpMessageLoop();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
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
};

struct ActorRuntime::Slot {
  enum class State : std::uint8_t { kStarting, kReady, kRunning, kClosing };

  ActorId id;
  std::string key;
  std::size_t worker = 0;
  State state = State::kStarting;
  std::deque<Pending> queue;
  std::shared_ptr<const engine::Module> module;
  // Events dispatched whose answers are not delivered yet (executing or awaiting
  // durability). An actor is idle only when this is zero and its queue is empty.
  int undelivered = 0;
  bool unload_requested = false;
  MonoTime last_active{};
  Env::TimerId idle_timer = 0;
  // What the budget counts for this actor: linear memory plus state (heap is per worker).
  std::uint64_t linear_bytes = 0;
  std::uint64_t state_bytes = 0;

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
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<WorkerThread>(engine_, worker_options));
  worker_heap_bytes_.assign(workers_.size(), 0);
}

ActorRuntime::~ActorRuntime() {
  // Normally Shutdown has emptied actors_. If it could not (its limit passed), nothing may
  // be left hanging: every queued or in-flight event is answered "unavailable", events not
  // yet started are skipped, instances die on their own threads, storages are closed.
  *alive_ = false;
  stopping_->store(true);
  EventResult stopped;
  stopped.outcome = EventOutcome::kUnavailable;
  stopped.error = "the actor runtime stopped";
  for (auto& [key, slot] : actors_) {
    if (slot->idle_timer != 0) env_.CancelTimer(slot->idle_timer);
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
  registry.AddCallbackGauge("wasmkeep_actor_resident", "Actors resident in memory.",
                            [&runtime] { return static_cast<double>(runtime.stats().resident_actors); });
  registry.AddCallbackGauge(
      "wasmkeep_actor_memory_bytes",
      "Memory the budget counts (actors.memory_budget_bytes): resident actors' linear memory and state, and the "
      "workers' V8 heaps.",
      [&runtime] { return static_cast<double>(runtime.stats().memory_bytes); });
  const std::string parts = "wasmkeep_actor_memory_bytes by part: linear memory, state (with per-entry overhead), V8 heap.";
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().linear_bytes); },
                            {{"part", "linear"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().state_bytes); },
                            {{"part", "state"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().heap_bytes); },
                            {{"part", "heap"}});
  counter("wasmkeep_actor_memory_refusals_total", "Actors refused a start (503) because the memory budget was used up.",
          &RuntimeStats::memory_refusals, {});
}

RuntimeStats ActorRuntime::stats() const {
  RuntimeStats s = stats_;
  s.resident_actors = actors_.size();
  s.linear_bytes = linear_bytes_;
  s.state_bytes = state_bytes_;
  s.memory_bytes = MemoryBytes();
  s.heap_bytes = s.memory_bytes - linear_bytes_ - state_bytes_;
  return s;
}

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
    slot = std::make_shared<Slot>();
    slot->id = id;
    slot->key = key;
    slot->module = std::move(module);
    slot->worker = std::hash<std::string>{}(key) % workers_.size();
    slot->last_active = env_.MonoNow();
    actors_.emplace(key, slot);
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
    actors_.erase(slot->key);
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
  if (slot->idle_timer != 0) {
    env_.CancelTimer(slot->idle_timer);
    slot->idle_timer = 0;
  }
  Pending pending = std::move(slot->queue.front());
  slot->queue.pop_front();
  slot->state = Slot::State::kRunning;
  slot->undelivered++;
  const std::int64_t now_ms = NowMs();
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  auto shared_pending = std::make_shared<Pending>(std::move(pending));
  slot->inflight.push_back(shared_pending);
  auto stopping = stopping_;
  workers_[slot->worker]->Post([this, env, alive, slot, shared_pending, now_ms, stopping](engine::Worker& worker) {
    if (stopping->load()) return;  // the runtime is being destroyed; the event was answered
    if (hooks_.on_event_start) hooks_.on_event_start(slot->id, slot->worker);
    ExecResult exec = Execute(worker, *slot, shared_pending->request, shared_pending->alarm, now_ms);
    if (hooks_.on_event_end) hooks_.on_event_end(slot->id, slot->worker, EventEnd{exec.call_outcome, exec.call_message});
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
      out.memory.linear = slot.instance ? slot.instance->MemoryBytes() : 0;
      out.memory.state = slot.storage->MemoryBytes();
      out.memory.heap = worker.HeapUsedBytes();
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
  out.memory.linear = slot.instance ? slot.instance->MemoryBytes() : 0;
  out.memory.state = slot.storage->MemoryBytes();
  out.memory.heap = worker.HeapUsedBytes();
  return out;
}

void ActorRuntime::ExecutionDone(const std::shared_ptr<Slot>& slot, MemoryUse memory, bool instantiated) {
  WK_CHECK(slot->state == Slot::State::kRunning, "execution done on a slot that was not running");
  slot->state = Slot::State::kReady;
  slot->last_active = env_.MonoNow();
  linear_bytes_ = linear_bytes_ - slot->linear_bytes + memory.linear;
  state_bytes_ = state_bytes_ - slot->state_bytes + memory.state;
  slot->linear_bytes = memory.linear;
  slot->state_bytes = memory.state;
  worker_heap_bytes_[slot->worker] = memory.heap;
  if (instantiated) {
    ++stats_.instantiations;
  }
  Pump(slot);
  AfterProgress(slot);
  EnforceMemoryBudget();
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
  pending->done.Set(std::move(result));
  AfterProgress(slot);
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
  } else {
    ArmIdleTimer(slot);
  }
}

bool ActorRuntime::IsIdle(const Slot& slot) const {
  return slot.state == Slot::State::kReady && slot.queue.empty() && slot.undelivered == 0;
}

void ActorRuntime::ArmIdleTimer(const std::shared_ptr<Slot>& slot) {
  if (slot->idle_timer != 0) env_.CancelTimer(slot->idle_timer);
  std::weak_ptr<Slot> weak = slot;
  slot->idle_timer = env_.StartTimer(env_.MonoNow() + options_.idle_hibernate, [this, weak] {
    auto s = weak.lock();
    if (!s) return;
    s->idle_timer = 0;
    if (IsIdle(*s) && env_.MonoNow() - s->last_active >= options_.idle_hibernate) {
      Close(s, UnloadReason::kHibernated);
    }
  });
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
  auto slot = std::make_shared<Slot>();
  slot->id = id;
  slot->key = key;
  slot->module = std::move(module);
  slot->worker = std::hash<std::string>{}(key) % workers_.size();
  slot->last_active = env_.MonoNow();
  actors_.emplace(std::move(key), slot);
  env_.Spawn(Start(slot), "actor warm start " + slot->key);
}

void ActorRuntime::Close(const std::shared_ptr<Slot>& slot, UnloadReason reason) {
  if (slot->state == Slot::State::kClosing) return;
  WK_CHECK(slot->state == Slot::State::kReady && slot->undelivered == 0, "closing a busy actor");
  slot->state = Slot::State::kClosing;
  if (slot->idle_timer != 0) {
    env_.CancelTimer(slot->idle_timer);
    slot->idle_timer = 0;
  }
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  workers_[slot->worker]->Post([this, env, alive, slot, reason](engine::Worker& worker) {
    slot->instance.reset();  // V8 objects die on their own isolate's thread
    const std::uint64_t heap = worker.HeapUsedBytes();
    env->PostFromAnyThread([this, alive, slot, reason, heap] {
      auto a = alive.lock();
      if (!a || !*a) return;
      worker_heap_bytes_[slot->worker] = heap;
      CloseDone(slot, reason);
    });
  });
}

void ActorRuntime::CloseDone(const std::shared_ptr<Slot>& slot, UnloadReason reason) {
  linear_bytes_ -= slot->linear_bytes;
  state_bytes_ -= slot->state_bytes;
  slot->linear_bytes = 0;
  slot->state_bytes = 0;
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
  actors_.erase(slot->key);
}

std::uint64_t ActorRuntime::MemoryBytes() const {
  std::uint64_t heap = 0;
  for (std::uint64_t h : worker_heap_bytes_) heap += h;
  return linear_bytes_ + state_bytes_ + heap;
}

std::uint64_t ActorRuntime::EnforceMemoryBudget() {
  std::uint64_t projected = MemoryBytes();
  if (projected <= options_.memory_budget_bytes) return projected;
  std::vector<std::shared_ptr<Slot>> idle;
  for (auto& [key, slot] : actors_) {
    // Closing ones are on their way out: their bytes are still counted until CloseDone.
    if (IsIdle(*slot)) idle.push_back(slot);
  }
  std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a->last_active < b->last_active; });
  std::vector<bool> collect(workers_.size(), false);
  for (auto& slot : idle) {
    if (projected <= options_.memory_budget_bytes) break;
    const std::uint64_t bytes = slot->linear_bytes + slot->state_bytes;
    projected -= std::min(projected, bytes);
    WK_LOG_INFO("evicting an idle actor: resident actors exceed actors.memory_budget_bytes",
                {{"actor", slot->key}, {"memory_bytes", std::to_string(bytes)}});
    Close(slot, UnloadReason::kEvicted);
    collect[slot->worker] = true;
  }
  // One full collection per worker that lost actors, queued behind their close jobs, so the
  // heap the budget counts drops with them (otherwise it would keep its last measure until
  // the next event on that worker, and could refuse new actors with nothing left to evict).
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  for (std::size_t i = 0; i < collect.size(); ++i) {
    if (!collect[i]) continue;
    workers_[i]->Post([this, env, alive, i](engine::Worker& worker) {
      worker.CollectGarbage();
      const std::uint64_t heap = worker.HeapUsedBytes();
      env->PostFromAnyThread([this, alive, i, heap] {
        auto a = alive.lock();
        if (a && *a) worker_heap_bytes_[i] = heap;
      });
    });
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
