#include "actor/v8_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
#include <mutex>
#include <set>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "actor/abi.h"
#include "actor/fair_queue.h"
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

// The real Env's monotonic clock (RealEnv::MonoNow is steady_clock's), read on a worker.
MonoTime SteadyNow() {
  return MonoTime(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch()));
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Worker threads

// One thread with one engine::Worker (isolate) and its jobs, shared between tenants by
// weight (fair_queue.h; the worker's own jobs, collections, are tenant ""). Every job of an
// actor (its events, the drop of its instance) goes to one worker and its tenant's queue, so
// they run in order and its instance stays on this thread.
class V8Executor::WorkerThread {
 public:
  using Job = std::function<void(engine::Worker&)>;

  // `spin`: how long the thread polls for the next job after one before it sleeps
  // (env/spin.h); 0 sleeps at once.
  // `jobs_ahead`: where each job of an idle tenant counts the jobs that ran before it.
  WorkerThread(engine::Engine& engine, engine::WorkerOptions options, Duration spin, BrokenModels broken,
               Histogram& jobs_ahead)
      : jobs_(broken), jobs_ahead_(jobs_ahead) {
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
  // A job of the node's own (no tenant's).
  void Post(Job job) { Post("", 1, std::move(job)); }
  // REQUIRES: weight > 0.
  void Post(const std::string& tenant, double weight, Job job) {
    {
      std::lock_guard lock(mu_);
      jobs_.Push(tenant, weight, std::move(job));
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
      std::optional<FairQueue<Job>::Popped> next;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stop_ and drained
        next = jobs_.Pop();
        queued_.store(jobs_.size(), std::memory_order_release);
      }
      if (next->ahead) jobs_ahead_.Observe(static_cast<double>(*next->ahead));
      const MonoTime began = SteadyNow();
      next->job(worker);
      worker.PumpMessageLoop();
      const Duration took = SteadyNow() - began;
      std::lock_guard lock(mu_);
      jobs_.Charge(next->tenant, took);
    }
  }

  std::atomic<Duration::rep> spin_ns_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  FairQueue<Job> jobs_;  // guarded by mu_
  Histogram& jobs_ahead_;
  std::atomic<std::size_t> queued_{0};  // jobs_.size(), for the spin to read without mu_
  bool stop_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------
// Actors

struct V8Executor::Actor final : ExecutorActor {
  ActorId id;
  std::string key;
  // Set on the loop (NewActor, Started, UseCurrentCode) while no job of the actor is queued,
  // and by its jobs (a failed migration's fallback); read by jobs.
  std::shared_ptr<const engine::Module> module;
  // Worker-thread state: touched only by jobs on the actor's worker (ordered by its FIFO),
  // and by the loop only between residencies (Started).
  std::unique_ptr<engine::Instance> instance;
  std::uint64_t last_seq = 0;
  // Class versions (docs/tenants.md; actor_versions.h). Set on the loop between jobs
  // (Started, UseCurrentCode) and by its jobs (a commit's mark, a failed migration's
  // fallback), which the loop reads only after their completion.
  ActorVersions versions;
  std::shared_ptr<const engine::Module> fallback;  // the module of versions.upgrade_from
};

struct V8Executor::Ran {
  ExecutedEvent event;
  std::uint64_t heap = 0;  // the worker's whole V8 heap after it
  std::optional<UpgradeReport> upgrade;  // a migration ran before the event
  engine::CallOutcome call_outcome = engine::CallOutcome::kReturned;  // for on_event_end
  std::string call_message;
};

V8Executor::V8Executor(Env& env, engine::Engine& engine, ClassRegistry& classes, const RuntimeOptions& options,
                       RuntimeHooks hooks)
    : env_(env), engine_(engine), classes_(classes), options_(options), hooks_(std::move(hooks)) {
  int n = options_.workers;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  engine::WorkerOptions worker_options;
  worker_options.heap_limit_bytes = options_.isolate_heap_limit_bytes;
  worker_options.gc_floor_bytes =
      options_.isolate_gc_floor_bytes.value_or(DefaultIsolateGcFloor(options_.isolate_heap_limit_bytes));
  worker_options.memory_pool_size = options_.memory_pool_size;
  worker_options.broken = options_.broken;
  for (int i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<WorkerThread>(engine_, worker_options, options_.spin, options_.broken, jobs_ahead_));
  }
  lanes_ = workers_.size();
  worker_memory_.assign(lanes_, WorkerMemory{});
}

V8Executor::~V8Executor() { Stop(); }

void V8Executor::Stop() {
  *alive_ = false;
  stopping_->store(true);
  workers_.clear();  // joins: running jobs finish, queued event jobs see stopping_ and skip
}

void V8Executor::SetSpin(Duration spin) {
  options_.spin = spin;
  for (auto& w : workers_) w->set_spin(spin);
}

std::shared_ptr<ExecutorActor> V8Executor::NewActor(const ActorId& id, const std::string& key) {
  std::shared_ptr<const engine::Module> module = classes_.Find(id.tenant, id.class_name);
  if (!module) return nullptr;
  auto a = std::make_shared<Actor>();
  a->id = id;
  a->key = key;
  a->module = std::move(module);
  a->lane = std::hash<std::string>{}(key) % lanes_;
  return a;
}


std::vector<std::uint32_t> V8Executor::VersionsMissing(const ExecutorActor& actor, const ActorStorage& storage) {
  const auto& a = static_cast<const Actor&>(actor);
  const std::uint32_t mark = ParseClassVersion(storage.GetSystem(kClassVersionKey));
  // A marked state of a class known here unversioned: its version (loading it reads the
  // class's rollout again).
  if (!classes_.Versioned(a.id.tenant, a.id.class_name)) {
    if (mark == 0) return {};
    return {mark};
  }
  const VersionPick pick = classes_.Choose(a.id.tenant, a.id.class_name, a.id.name, mark, StoresNothing(storage));
  return VersionsNeeded(pick, [&](std::uint32_t v) { return classes_.Find(a.id.tenant, a.id.class_name, v) != nullptr; });
}

void V8Executor::Started(ExecutorActor& actor, const ActorStorage& storage) {
  auto& a = static_cast<Actor&>(actor);
  a.last_seq = 0;
  a.versions.Start(storage);
  ChooseCode(a);
}

bool V8Executor::UseCurrentCode(ExecutorActor& actor) {
  // Set here, on the loop, while no event job of the actor runs (the input gate); a drop
  // job queued before does not read it.
  return ChooseCode(static_cast<Actor&>(actor));
}

bool V8Executor::ChooseCode(Actor& a) {
  const std::string& t = a.id.tenant;
  const std::string& c = a.id.class_name;
  ActorVersions& v = a.versions;
  if (!classes_.Versioned(t, c)) {
    a.fallback.reset();
    if (!v.ApplyUnversioned()) return false;
    std::shared_ptr<const engine::Module> current = classes_.Find(t, c);
    if (!current || current == a.module) return false;  // dropped: its next start loads it again
    a.module = std::move(current);
    a.version = 0;
    return true;
  }
  const auto loaded = [&](std::uint32_t version) { return classes_.Find(t, c, version) != nullptr; };
  if (!v.Apply(classes_.Choose(t, c, a.id.name, v.mark, v.empty), loaded, options_.broken)) return false;
  std::shared_ptr<const engine::Module> module = classes_.Find(t, c, v.run);
  a.fallback = v.upgrade_from && !v.no_fallback ? classes_.Find(t, c, *v.upgrade_from) : nullptr;
  a.version = v.run;
  if (module == a.module) return false;
  a.module = std::move(module);
  return true;
}

bool V8Executor::CodeMissing(const ExecutorActor& actor) const {
  return static_cast<const Actor&>(actor).versions.missing != 0;
}

bool V8Executor::CodeDropped(const ActorId& id) const { return classes_.Dropped(id.tenant, id.class_name); }

std::uint64_t V8Executor::DropUnusedCode(std::uint64_t bytes) { return classes_.DropUnused(bytes); }

std::uint64_t V8Executor::CodeFreedBy(const ExecutorActor& leaving, std::map<const void*, std::uint64_t>& tally) const {
  const auto& a = static_cast<const Actor&>(leaving);
  if (!a.module) return 0;
  // Held by the registry (once, if it is the class's current code) and by each resident
  // actor running it: unused once every actor holding it has left.
  const std::uint64_t gone = ++tally[a.module.get()];
  const std::uint64_t registry = classes_.Holds(a.id.tenant, a.id.class_name, a.module) ? 1 : 0;
  return static_cast<std::uint64_t>(a.module.use_count()) == gone + registry ? a.module->compiled_bytes() : 0;
}

std::vector<std::pair<std::string, std::uint64_t>> V8Executor::CompiledBytesByTenant() const {
  return engine_.CompiledBytesByOwner();
}

ExecutorStats V8Executor::stats() const {
  ExecutorStats s;
  for (const WorkerMemory& w : worker_memory_) s.heap_bytes += w.heap_bytes;
  s.reservation_collections = reservation_collections_;
  // Every module alive, whoever holds it (the registry, resident actors, the compiler's
  // cache): what the process holds of compiled code.
  s.compiled_bytes = engine_.compiled_bytes();
  s.compiled_dropped = classes_.dropped();
  return s;
}

std::uint64_t V8Executor::InstanceReservation(const ExecutorActor& next) const {
  // The memories the workers keep for reuse reserve address space too (at most
  // engine::kMaxPooledReservationBytes each): counted with the live instances'.
  return static_cast<const Actor&>(next).module->max_memory_bytes() + engine_.pooled_reserved_bytes();
}

// ---------------------------------------------------------------------------------------
// Events

StoredQuotaScope V8Executor::QuotaScope(const Actor& actor) const {
  if (options_.stored_quota == nullptr) return {};
  return StoredQuotaScope{options_.stored_quota, actor.id.tenant};
}

double V8Executor::TenantWeight(const std::string& tenant) const {
  // The tenant's share of a busy worker (docs/tenants.md, "Fair shares").
  return hooks_.tenant_weight ? std::max(hooks_.tenant_weight(tenant), 1e-3) : 1.0;
}

void V8Executor::Run(std::shared_ptr<ExecutorActor> actor, ActorStorage* storage,
                     std::shared_ptr<const ExecutorEvent> event, std::function<void(ExecutedEvent)> done) {
  auto a = std::static_pointer_cast<Actor>(std::move(actor));
  const std::size_t lane = a->lane;
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  auto stopping = stopping_;
  workers_[lane]->Post(a->id.tenant, TenantWeight(a->id.tenant), [this, env, alive, a, storage, event, done = std::move(done), stopping,
                                              lane](engine::Worker& worker) {
    if (stopping->load()) return;  // the runtime is being destroyed; the event was answered
    const MonoTime started = SteadyNow();
    if (hooks_.on_event_start) hooks_.on_event_start(a->id, lane);
    Ran ran = Execute(worker, *a, *storage, *event);
    if (hooks_.on_event_end) hooks_.on_event_end(a->id, lane, EventEnd{ran.call_outcome, ran.call_message});
    ran.event.started = started;
    ran.event.ran = SteadyNow();
    ran.heap = worker.HeapUsedBytes();
    env->PostFromAnyThread([this, alive, lane, done, ran = std::move(ran)]() mutable {
      auto l = alive.lock();
      if (!l || !*l) return;
      worker_memory_[lane].heap_bytes = ran.heap;
      worker_memory_[lane].last_event = env_.MonoNow();
      if (ran.upgrade && hooks_.on_upgrade) hooks_.on_upgrade(*ran.upgrade);
      done(std::move(ran.event));
    });
  });
}

ActorMemory V8Executor::MeasureMemory(Actor& actor, ActorStorage& storage) {
  ActorMemory m;
  if (actor.instance) {
    m.has_instance = true;
    m.linear = actor.instance->ResidentMemoryBytes();
    m.linear_mapped = actor.instance->MemoryBytes();
    m.instance_heap = actor.instance->HeapBytes();
    m.reserved = actor.instance->module().max_memory_bytes();
  }
  m.state = storage.MemoryBytes();
  return m;
}

V8Executor::Ran V8Executor::Execute(engine::Worker& worker, Actor& actor, ActorStorage& storage,
                                    const ExecutorEvent& event) {
  Ran ran;
  EventResult& result = ran.event.result;
  auto refuse = [&](std::string why) {
    result.outcome = EventOutcome::kUnavailable;
    result.error = std::move(why);
    ran.event.wait_seq = actor.last_seq;
    ran.event.memory = MeasureMemory(actor, storage);
    return ran;
  };
  const ActorVersions& versions = actor.versions;
  if (versions.missing != 0) {
    return refuse(fmt::format("version {} of class {}/{} is not loaded on this node; retry", versions.missing,
                              actor.id.tenant, actor.id.class_name));
  }
  if (versions.blocked != 0) {
    return refuse(fmt::format("the migration of {} to version {} failed, and the version its state is at is marked "
                              "broken: nothing runs it until the operator chooses (docs/tenants.md, \"Rolling back\")",
                              actor.key, versions.blocked));
  }
  // A new version's migration runs first, in a batch of its own (docs/tenants.md).
  if (versions.upgrade_from) {
    RunUpgrade(worker, actor, storage, event, ran);
    if (Status failed = storage.failure(); !failed.ok()) return refuse(failed.ToString());
    if (versions.blocked != 0) {
      return refuse(fmt::format("the migration of {} to version {} failed ({}), and the version its state is at is "
                                "marked broken: nothing runs it until the operator chooses",
                                actor.key, versions.blocked, ran.upgrade ? ran.upgrade->error : std::string()));
    }
  }
  const std::optional<Request>& request = event.request;
  const AlarmEvent& alarm = event.alarm;
  // An alarm event first asks the actor's committed state (alarm_event.h): nothing runs for
  // an alarm that is absent or not due here (a stale index entry, a deleted or replaced
  // alarm, a clock behind the scanner's); its answer still passes the output gate, so the
  // caller learns the alarm as durably as any answer.
  std::optional<std::int64_t> due_alarm;
  const IncomingMessage* message = event.message ? &*event.message : nullptr;
  const SocketEvent* socket = event.socket ? &*event.socket : nullptr;
  const bool is_alarm = !request && message == nullptr && socket == nullptr;
  // A socket event whose export the class lacks (docs/abi.md): a message or an open needs
  // wk_on_socket_message (404: the class takes no WebSockets); an open without
  // wk_on_socket_open is accepted and a close without wk_on_socket_close is noted, with
  // nothing run. Either answer still passes the output gate (the hold must be valid).
  std::string_view socket_export;
  if (socket != nullptr) {
    socket_export = socket->kind == SocketEventKind::kOpen      ? kSocketOpenExport
                    : socket->kind == SocketEventKind::kMessage ? kSocketMessageExport
                                                                : kSocketCloseExport;
    if (socket->kind != SocketEventKind::kClose && !actor.module->HasExport(kSocketMessageExport)) {
      result.outcome = EventOutcome::kNotFound;
      result.error = fmt::format("class {}/{} has no {} export: it takes no WebSockets", actor.id.tenant,
                                 actor.id.class_name, kSocketMessageExport);
      ran.event.wait_seq = actor.last_seq;
      ran.event.memory = MeasureMemory(actor, storage);
      return ran;
    }
    if (!actor.module->HasExport(socket_export)) {
      if (Status broken = storage.failure(); !broken.ok()) {
        result.outcome = EventOutcome::kUnavailable;
        result.error = broken.ToString();
      }
      ran.event.wait_seq = actor.last_seq;
      ran.event.memory = MeasureMemory(actor, storage);
      return ran;
    }
  }
  if (message != nullptr && !actor.module->HasExport(kMessageExport)) {
    // Permanent: the sender parks the message as dead at once (docs/messages.md).
    result.outcome = EventOutcome::kNotFound;
    result.error = fmt::format("class {}/{} has no {} export: it cannot receive messages", actor.id.tenant,
                               actor.id.class_name, kMessageExport);
    ran.event.wait_seq = actor.last_seq;
    ran.event.memory = MeasureMemory(actor, storage);
    return ran;
  }
  if (is_alarm) {
    due_alarm = storage.Alarm();
    const bool due = AlarmDue(due_alarm, event.now_ms, options_.broken);
    if (!due || !actor.module->HasExport(kAlarmExport)) {
      if (Status broken = storage.failure(); !broken.ok()) {
        result.outcome = EventOutcome::kUnavailable;
        result.error = broken.ToString();
      } else if (due) {
        // A class without wk_on_alarm: the due alarm is cleared, nothing runs (docs/alarms.md).
        Batch clear;
        clear.alarm = std::optional<std::int64_t>();
        CommitWithMark(actor, storage, std::move(clear));
      }
      SetAlarmAfter(result, storage);
      ran.event.wait_seq = actor.last_seq;
      ran.event.memory = MeasureMemory(actor, storage);
      return ran;
    }
  }
  const auto cpu_limit = std::chrono::milliseconds(options_.limits.max_event_cpu_ms);
  EventTxn txn(storage, options_.limits, QuotaScope(actor));
  EventContext ctx;
  ctx.limits = &options_.limits;
  ctx.actor = actor.key;
  ctx.request = request ? &*request : socket != nullptr && socket->kind == SocketEventKind::kOpen ? &socket->handshake : nullptr;
  ctx.txn = &txn;
  ctx.now_ms = event.now_ms;
  // The messages the event sends join its final batch (actor/messages.h).
  MessageSendBuffer outbox(storage, options_.messages, options_.broken);
  ctx.self = &actor.id;
  ctx.outbox = &outbox;
  ctx.message = message;
  SocketEventState sockets(event.sockets, options_.sockets, socket);
  ctx.sockets = &sockets;
  if (is_alarm) {
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
      actor.key, options_.sync_timeout / std::chrono::milliseconds(1));
  ctx.sync = [this, &actor, &storage, &txn, sync_deadline, &timed_out]() {
    if (!storage.failure().ok()) return false;
    Batch batch = txn.TakeBatch();
    if (!batch.empty()) CommitWithMark(actor, storage, std::move(batch));
    struct Wait {
      std::mutex mu;
      std::condition_variable cv;
      std::optional<Status> status;
    };
    auto wait = std::make_shared<Wait>();
    storage.WhenReleasable(actor.last_seq, [wait](Status s) {
      std::lock_guard lock(wait->mu);
      wait->status = std::move(s);
      wait->cv.notify_all();
    });
    std::unique_lock lock(wait->mu);
    if (!wait->cv.wait_until(lock, sync_deadline, [&] { return wait->status.has_value(); })) {
      lock.unlock();
      // Not known in time: give up on the storage, so nothing of this actor is released
      // any more (it is restored afresh for its next event).
      storage.Break(Retryable(timed_out));
      return false;
    }
    return wait->status->ok();  // an error has failed the storage (storage.h)
  };

  auto fail = [&](std::string message) {
    result.outcome = EventOutcome::kActorFailed;
    result.error = std::move(message);
    WK_LOG_WARN("actor event failed", {{"actor", actor.key}, {"error", result.error}});
  };

  if (!actor.instance) {
    auto made = worker.Instantiate(actor.module, &ctx, cpu_limit);
    ran.event.instantiated = true;
    if (!made.ok()) {
      fail(made.status().message());
      ran.event.wait_seq = actor.last_seq;
      ran.event.memory = MeasureMemory(actor, storage);
      return ran;
    }
    actor.instance = std::move(*made);
    // What _initialize did through the ABI is not the event's: it starts with an empty
    // result buffer and the default response (abi.md). (Its writes, if any, stay in the
    // batch: static constructors run once per instance, over committed state.)
    ctx.result.clear();
    ctx.response = Response{};
    ctx.response_bytes = 0;
  }
  const std::string_view export_name = request                ? kRequestExport
                                       : message != nullptr    ? kMessageExport
                                       : socket != nullptr     ? socket_export
                                                               : kAlarmExport;
  engine::CallResult call = actor.instance->Call(export_name, &ctx, cpu_limit);
  ctx.FlushOutput();
  ran.call_outcome = call.outcome;
  if (!call.ok()) ran.call_message = call.message;
  if (!call.instance_usable) actor.instance.reset();

  if (Status broken = storage.failure(); !broken.ok()) {
    // The gate will refuse this answer (the core's Deliver says why); commit nothing more.
    result.outcome = EventOutcome::kUnavailable;
    result.error = broken.ToString();
  } else if (call.ok() && call.value == 0 &&
             (ctx.response.status < kMinResponseStatus || ctx.response.status > kMaxResponseStatus)) {
    // response_set_status refuses these; checked again before anything is committed, so
    // an answer the server would turn into a 500 never comes with committed writes.
    fail(fmt::format("the actor's response status {} is not in {}..{}", ctx.response.status, kMinResponseStatus,
                     kMaxResponseStatus));
  } else if (call.ok() && call.value == 0) {
    Batch batch = txn.TakeBatch();
    if (event.idempotent && !options_.broken.on(BrokenModel::kIdempotentAnswerNotInBatch)) {
      ran.event.idempotency_forgotten =
          AddIdempotencyRecord(*event.idempotent, ctx.response, event.now_ms, storage, batch);
    }
    if (message != nullptr && !options_.broken.on(BrokenModel::kAppliedRecordNotInBatch)) {
      // Applied exactly when the handler's writes are (actor/messages.h).
      RecordApplied(batch, message->from, message->seq);
    }
    outbox.AddTo(batch);
    result.messages_sent = outbox.size();
    if (!batch.empty()) CommitWithMark(actor, storage, std::move(batch));
    result.response = std::move(ctx.response);
    result.alarm_fired = is_alarm;
    result.sockets = sockets.TakeEffects();
  } else if (call.ok()) {
    fail(fmt::format("the actor's {} returned {}", export_name, call.value));
  } else {
    std::string message = call.message;
    if (call.outcome == engine::CallOutcome::kTerminated) message += " (actors.max_event_cpu_ms)";
    if (call.outcome == engine::CallOutcome::kHeapLimit) message += " (actors.isolate_heap_limit_bytes)";
    if (call.outcome == engine::CallOutcome::kOutOfMemory) message += " (actors.max_memory_bytes)";
    fail(std::move(message));
  }
  if (is_alarm && alarm.last_attempt && result.outcome == EventOutcome::kActorFailed && storage.failure().ok() &&
      storage.Alarm() == due_alarm) {
    // The retries are used up: the alarm is cleared, without the failed run's writes.
    Batch clear;
    clear.alarm = std::optional<std::int64_t>();
    CommitWithMark(actor, storage, std::move(clear));
  }
  if (is_alarm) SetAlarmAfter(result, storage);
  ran.event.wait_seq = actor.last_seq;
  ran.event.memory = MeasureMemory(actor, storage);
  return ran;
}

void V8Executor::CommitWithMark(Actor& actor, ActorStorage& storage, Batch batch) {
  if (batch.empty()) return;
  actor.versions.Mark(batch);
  actor.last_seq = storage.Commit(std::move(batch));
  actor.versions.Committed(storage);
}

void V8Executor::RunUpgrade(engine::Worker& worker, Actor& actor, ActorStorage& storage, const ExecutorEvent& event,
                            Ran& ran) {
  if (!storage.failure().ok()) return;  // the event is refused on its storage; the next start tries again
  ActorVersions& versions = actor.versions;
  const std::uint32_t from = *versions.upgrade_from;
  const std::uint32_t to = versions.run;
  UpgradeReport report{actor.id, from, to, false, {}};
  const auto cpu_limit = std::chrono::milliseconds(options_.limits.max_event_cpu_ms);
  EventTxn txn(storage, options_.limits, QuotaScope(actor));
  EventContext ctx;
  ctx.limits = &options_.limits;
  ctx.actor = actor.key;
  ctx.txn = &txn;
  ctx.now_ms = event.now_ms;
  ctx.self = &actor.id;
  // No messages, WebSockets or sync in a migration (docs/abi.md): its batch is only state.
  if (!actor.module->HasExport(kUpgradeExport)) {
    report.ok = true;  // nothing to convert: the mark alone, in a batch of its own
  } else {
    if (!actor.instance) {
      auto made = worker.Instantiate(actor.module, &ctx, cpu_limit);
      ran.event.instantiated = true;
      if (made.ok()) {
        actor.instance = std::move(*made);
      } else {
        report.error = made.status().message();
      }
    }
    if (actor.instance) {
      const std::int32_t arg = static_cast<std::int32_t>(from);
      engine::CallResult call = actor.instance->Call(kUpgradeExport, &ctx, cpu_limit, std::span(&arg, 1));
      if (!call.instance_usable) actor.instance.reset();
      if (!storage.failure().ok()) {
        report.error = storage.failure().ToString();
      } else if (call.ok() && call.value == 0) {
        report.ok = true;
      } else if (call.ok()) {
        report.error = fmt::format("{} returned {}", kUpgradeExport, call.value);
      } else {
        report.error = call.message;
        if (call.outcome == engine::CallOutcome::kTerminated) report.error += " (actors.max_event_cpu_ms)";
      }
    }
  }
  if (!storage.failure().ok()) {
    // The hold ended meanwhile (a move, a drain): not the module's failure, and not counted.
    // Nothing is kept; the next start migrates.
    return;
  }
  if (report.ok) {
    Batch batch = txn.TakeBatch();
    versions.Upgraded(batch, options_.broken);
    if (!batch.empty()) {
      actor.last_seq = storage.Commit(std::move(batch));
      versions.Committed(storage);
    }
  } else {
    // Nothing it wrote is kept; the actor answers on the version its state is at, unless
    // that one is broken (blocked: nothing runs it).
    WK_LOG_WARN("actor migration failed",
                {{"actor", actor.key}, {"from", std::to_string(from)}, {"to", std::to_string(to)}, {"error", report.error}});
    actor.instance.reset();
    if (versions.UpgradeFailed()) {
      actor.module = std::move(actor.fallback);
      actor.version = from;
    }
  }
  actor.fallback.reset();
  ran.upgrade = std::move(report);
}


// ---------------------------------------------------------------------------------------
// Instances and the workers' memory

void V8Executor::PostDrop(const std::shared_ptr<Actor>& actor, std::function<void()> done) {
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  const std::size_t lane = actor->lane;
  // In the actor's tenant's queue, behind the actor's events queued before it and ahead of
  // those after: an actor's jobs keep their order (fair_queue.h orders within a tenant only).
  const std::string tenant = actor->id.tenant;
  workers_[lane]->Post(tenant, TenantWeight(tenant),
                       [this, env, alive, a = actor, lane, done = std::move(done)](engine::Worker& worker) mutable {
    a->instance.reset();  // V8 objects die on their own isolate's thread
    // Not held past here: once the core lets the actor go, its code is unused at once.
    a.reset();
    const std::uint64_t heap = worker.HeapUsedBytes();
    env->PostFromAnyThread([this, alive, lane, heap, done] {
      auto a = alive.lock();
      if (!a || !*a) return;
      worker_memory_[lane].heap_bytes = heap;
      if (done) done();
    });
  });
}

void V8Executor::DropInstance(std::shared_ptr<ExecutorActor> actor) {
  PostDrop(std::static_pointer_cast<Actor>(std::move(actor)), nullptr);
}

void V8Executor::Close(std::shared_ptr<ExecutorActor> actor, std::function<void()> done) {
  PostDrop(std::static_pointer_cast<Actor>(std::move(actor)), std::move(done));
}

void V8Executor::InstanceForgotten(const ExecutorActor& actor, std::uint64_t reserved) {
  // Its memory keeps its address space until V8 collects it (AfterInstancesGone).
  worker_memory_[actor.lane].uncollected_reserved_bytes += reserved;
  ++worker_memory_[actor.lane].uncollected_memories;
}

void V8Executor::AfterInstancesGone(std::size_t i, std::uint64_t live_instances, std::uint64_t live_reserved_bytes) {
  // Once the memories thrown away on this worker since its last collection reserve its
  // share of kUncollectedReservationBytes (or number its share of kUncollectedMemories):
  // a collection beside its thread, queued behind the jobs that destroy those instances.
  // V8's own collections (frequent on a busy worker) free most of them: ask the engine what
  // it still holds beyond the live instances, not what was thrown away since our last ask.
  WorkerMemory& w = worker_memory_[i];
  if (w.uncollected_reserved_bytes < kUncollectedReservationBytes / lanes_ &&
      w.uncollected_memories < kUncollectedMemories / lanes_) {
    return;
  }
  // (Memories the workers keep for reuse are not garbage either: zeroed, they wait for the
  // next instance; engine::WorkerOptions::memory_pool_size.)
  const engine::EngineStats e = engine_.stats();
  const std::uint64_t live = live_instances + e.pooled_memories;
  const std::uint64_t live_reserved = live_reserved_bytes + e.pooled_reserved_bytes;
  const std::uint64_t memories = e.linear_memories > live ? e.linear_memories - live : 0;
  const std::uint64_t reserved = e.linear_reserved_bytes > live_reserved ? e.linear_reserved_bytes - live_reserved : 0;
  if (reserved < kUncollectedReservationBytes && memories < kUncollectedMemories) {
    w.uncollected_reserved_bytes = 0;  // collected meanwhile: count again from here
    w.uncollected_memories = 0;
    return;
  }
  ++reservation_collections_;
  StartCollectionOn(i);
}

void V8Executor::StartCollectionOn(std::size_t i) {
  WorkerMemory& w = worker_memory_[i];
  w.last_collection = env_.MonoNow();
  w.collection_wanted = false;
  w.uncollected_reserved_bytes = 0;
  w.uncollected_memories = 0;
  workers_[i]->Post([](engine::Worker& worker) { worker.StartCollection(); });
}

void V8Executor::AfterIdleSweep(const std::vector<bool>& dropped) {
  // V8 frees what the dropped instances held (their linear memory included) at its next
  // full collection, which an idle worker may not run for a long time: ask for one, at most
  // every kIdleCollectionInterval, and at the latest that long after the last drop, once
  // the worker is idle (no event in the last kBusyWorkerWindow). A busy worker is not
  // stopped for it: a forced collection there holds every event queued behind it for its
  // whole length (80 ms each at 50,000 actors; the warm tail of docs/benchmarks.md,
  // "Density"), and a busy worker allocates, so V8 collects there on its own anyway.
  // (Address space and mappings are watched apart: AfterInstancesGone.)
  const MonoTime now = env_.MonoNow();
  for (std::size_t i = 0; i < dropped.size(); ++i) {
    WorkerMemory& w = worker_memory_[i];
    w.collection_wanted = w.collection_wanted || dropped[i];
    if (!w.collection_wanted || now - w.last_collection < kIdleCollectionInterval) continue;
    if (now - w.last_event >= kBusyWorkerWindow) CollectGarbageOn(i);
  }
}

void V8Executor::CollectGarbageOn(std::size_t i) {
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

}  // namespace wk::actor
