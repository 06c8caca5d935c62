#include "actor/runtime_core.h"

#include "actor/idempotency.h"
#include "actor/messages.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "base/check.h"
#include "base/log.h"

namespace wk::actor {

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

// ---------------------------------------------------------------------------------------
// Slots

// A job the core does itself, between the actor's events (never on the executor).
struct ActorRuntimeCore::SystemJob {
  std::optional<Batch> commit;  // CommitSystem's batch; unset (and no `resolve`): ReadOutbox
  std::size_t outbox_max = 0;
  Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>> outbox = NotFound("not read");
  // ResolveDead's: the dead message's number and what to do with it; its outcome (the
  // retried message's new number, or the number dropped), and whether its batch was
  // committed (then a refusal of the output gate leaves its outcome unknown).
  std::optional<std::pair<std::uint64_t, DeadAction>> resolve;
  Result<std::uint64_t> resolved = NotFound("not run");
  bool committed = false;
};

struct ActorRuntimeCore::Pending {
  ExecutorEvent event;  // its now_ms set at dispatch; the executor reads it in place
  Latch<EventResult> done;
  // Where the event's time went (wasmkeep_actor_event_phase_seconds), on the Env's clock:
  // arrived and dispatched set here, started and ran reported by the executor.
  MonoTime arrived{};
  MonoTime dispatched{};
  MonoTime started{};
  MonoTime ran{};
  std::shared_ptr<SystemJob> system;  // set: not an event (AnswerOnLoop does it)
};

struct ActorRuntimeCore::Slot : std::enable_shared_from_this<Slot> {
  enum class State : std::uint8_t { kStarting, kReady, kRunning, kClosing };

  ActorId id;
  std::string key;
  std::shared_ptr<ExecutorActor> exec;  // its code and instance; exec->lane its lane
  State state = State::kStarting;
  // Events dispatched to the executor that have not come back (one, but for the broken
  // model input-gate-concurrent). kRunning while non-zero.
  int running = 0;
  // A list, not a deque: an idle actor's empty queue allocates nothing (libstdc++'s deque
  // allocates about 600 bytes even when empty; docs/benchmarks.md, "Density").
  std::list<Pending> queue;
  // Events dispatched whose answers are not delivered yet (executing or awaiting
  // durability). An actor is idle only when this is zero and its queue is empty.
  int undelivered = 0;
  bool unload_requested = false;
  // The core's view: the actor has an instance (from its last event's report) and no drop
  // of it is queued since.
  bool has_instance = false;
  MonoTime last_active{};
  std::list<Slot*>::iterator by_activity;           // in by_activity_
  std::list<Slot*>::iterator instance_by_activity;  // in instances_by_activity_ if has_instance
  // What the budget counts for this actor (besides its lane's heap and its bookkeeping).
  std::uint64_t linear_bytes = 0;
  std::uint64_t linear_mapped_bytes = 0;
  std::uint64_t instance_heap_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t state_bytes = 0;
  TenantTotals* tenant = nullptr;  // its tenant's entry in tenant_totals_ (stable: a node map)

  // Used by the executor's jobs while an event runs; by the core only between them (the
  // output gate's registration, failure(), the idempotency records, Open and Close).
  std::unique_ptr<ActorStorage> storage;
  // The last batch its storage committed, as the executor reported (ExecutedEvent::wait_seq):
  // what an answer served from an idempotency record waits for at the output gate.
  std::uint64_t last_seq = 0;
  // Its outbox may hold messages to deliver (on_outbox was called and a read has not found
  // it empty since): the sweep does not hibernate it and the budget does not evict it, so
  // its delivery goes on while this node holds it (docs/messages.md, "Who delivers").
  bool outbox_pending = false;
  // A class version it needs is being loaded (LoadMissingVersions): its events wait. One
  // load per event: version_loaded is set after it and cleared when an event runs.
  bool loading_version = false;
  bool version_loaded = false;

  // Events dispatched and not yet answered (for the destructor).
  std::vector<std::shared_ptr<Pending>> inflight;
};

ActorRuntimeCore::ActorRuntimeCore(Env& env, Executor& executor, StorageProvider& storage,
                                   RuntimeCoreOptions options,
                                   std::function<void(const ActorId&, UnloadReason)> on_unloaded)
    : env_(env), executor_(executor), storage_(storage), options_(std::move(options)),
      on_unloaded_(std::move(on_unloaded)) {
  WK_CHECK(executor_.lanes() > 0, "an executor without lanes");
  to_loop_ = options_.to_loop;
  if (!to_loop_) {
    Env* env = &env_;
    to_loop_ = [env](std::function<void()> fn) { env->Post(std::move(fn)); };
  }
}

ActorRuntimeCore::~ActorRuntimeCore() {
  // Normally Shutdown has emptied actors_. If it could not (its limit passed), nothing may
  // be left hanging: every queued or in-flight event is answered "unavailable", events not
  // yet started are skipped, instances are dropped, storages closed.
  *alive_ = false;
  if (sweep_timer_ != 0) env_.CancelTimer(sweep_timer_);
  EventResult stopped;
  stopped.outcome = EventOutcome::kUnavailable;
  stopped.error = "the actor runtime stopped";
  for (auto& [key, slot] : actors_) {
    for (Pending& p : slot->queue) p.done.Set(stopped);
    slot->queue.clear();
    for (auto& p : slot->inflight) p->done.Set(stopped);
    slot->inflight.clear();
    executor_.DropInstance(slot->exec);  // on its lane: an instance may live on one thread only
  }
  executor_.Stop();  // running jobs finish, queued event jobs are skipped
  for (auto& [key, slot] : actors_) {
    if (slot->storage) storage_.Close(slot->id, std::move(slot->storage), CloseIntent::kRelease);
    if (on_unloaded_) on_unloaded_(slot->id, UnloadReason::kShutdown);
  }
}

std::int64_t ActorRuntimeCore::NowMs() const {
  return options_.wall_clock_ms ? options_.wall_clock_ms() : ToUnixMs(env_.WallNow());
}

bool ActorRuntimeCore::IsResident(const ActorId& id) const { return actors_.contains(id.ToString()); }

std::optional<std::uint32_t> ActorRuntimeCore::VersionOf(const ActorId& id) const {
  auto it = actors_.find(id.ToString());
  if (it == actors_.end() || !it->second->exec) return std::nullopt;
  return it->second->exec->version.load();
}

std::vector<std::pair<std::string, std::uint64_t>> ActorRuntimeCore::ResidentByVersion() const {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& [key, slot] : actors_) {
    if (!slot->exec) continue;
    const std::uint32_t v = slot->exec->version.load();
    if (v != 0) ++counts[slot->id.tenant + "/" + slot->id.class_name + "@" + std::to_string(v)];
  }
  std::vector<std::pair<std::string, std::uint64_t>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

RuntimeStats ActorRuntimeCore::stats() const {
  RuntimeStats s = stats_;
  const ExecutorStats e = executor_.stats();
  s.resident_actors = actors_.size();
  s.instances = instances_by_activity_.size();
  s.linear_bytes = linear_bytes_;
  s.linear_mapped_bytes = linear_mapped_bytes_;
  s.state_bytes = state_bytes_;
  s.bookkeeping_bytes = actors_.size() * kResidentActorBookkeepingBytes;
  s.instance_heap_bytes = instance_heap_bytes_;
  s.instance_reserved_bytes = instance_reserved_bytes_;
  s.heap_bytes = e.heap_bytes;
  s.compiled_bytes = e.compiled_bytes;
  s.compiled_dropped = e.compiled_dropped;
  s.reservation_collections = e.reservation_collections;
  s.socket_bytes = options_.sockets != nullptr ? options_.sockets->MemoryBytes() : 0;
  s.memory_bytes = MemoryBytes();
  return s;
}

std::vector<TenantMemory> ActorRuntimeCore::MemoryByTenant() const {
  std::vector<TenantMemory> out;
  out.reserve(tenant_totals_.size());
  for (const auto& [name, t] : tenant_totals_) {
    out.push_back(TenantMemory{
        name,
        static_cast<double>(t.linear_bytes + t.state_bytes + t.instance_heap_bytes +
                            t.actors * kResidentActorBookkeepingBytes),
        t.actors});
  }
  // Compiled code is its deployer's, whether or not an actor of it is resident.
  for (const auto& [name, bytes] : executor_.CompiledBytesByTenant()) {
    if (name.empty()) continue;  // compiled for no tenant (tests); in the total, in _node
    auto it = std::find_if(out.begin(), out.end(), [&](const TenantMemory& m) { return m.tenant == name; });
    if (it == out.end()) it = out.insert(out.end(), TenantMemory{name, 0, 0});
    it->bytes += static_cast<double>(bytes);
  }
  std::sort(out.begin(), out.end(), [](const TenantMemory& a, const TenantMemory& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.tenant < b.tenant;
  });
  return out;
}

std::uint64_t ActorRuntimeCore::InstanceHeap(const Slot& slot) {
  return slot.has_instance ? slot.instance_heap_bytes : 0;
}

// ---------------------------------------------------------------------------------------
// Events: the input gate, dispatch, the output gate

Task<EventResult> ActorRuntimeCore::HandleRequest(ActorId id, Request request) {
  if (request.body.size() > options_.limits.max_request_bytes) {
    EventResult r;
    r.outcome = EventOutcome::kBadRequest;
    r.error = fmt::format("the request body is {} bytes, over the limit max_request_bytes = {}",
                          request.body.size(), options_.limits.max_request_bytes);
    co_return r;
  }
  auto key = IdempotencyKeyOf(request);
  if (!key.ok()) {
    EventResult r;
    r.outcome = EventOutcome::kInvalidHeader;
    r.error = key.status().message();
    co_return r;
  }
  std::optional<IdempotentRequest> idempotent;
  if (key->has_value()) {
    idempotent.emplace();
    idempotent->key = std::move(**key);
    idempotent->fingerprint = RequestFingerprint(request);
    idempotent->ttl_ms = options_.idempotency_ttl_ms;
    idempotent->max_answer_bytes = options_.idempotency_max_answer_bytes;
    idempotent->max_bytes = options_.idempotency_max_bytes;
  }
  std::optional<Request> req(std::move(request));
  EventResult r = co_await Submit(std::move(id), std::move(req), AlarmEvent{}, std::move(idempotent));
  co_return r;
}

Task<EventResult> ActorRuntimeCore::HandleAlarm(ActorId id, AlarmEvent event) {
  std::optional<Request> none;
  EventResult r = co_await Submit(std::move(id), std::move(none), event);
  co_return r;
}

Task<EventResult> ActorRuntimeCore::HandleMessage(ActorId id, IncomingMessage message) {
  if (message.body.size() > options_.limits.max_request_bytes) {
    EventResult r;
    r.outcome = EventOutcome::kBadRequest;
    r.error = fmt::format("the message body is {} bytes, over the limit max_request_bytes = {}", message.body.size(),
                          options_.limits.max_request_bytes);
    co_return r;
  }
  std::optional<Request> none;
  std::optional<IncomingMessage> m(std::move(message));
  EventResult r = co_await Submit(std::move(id), std::move(none), AlarmEvent{}, std::nullopt, std::move(m));
  co_return r;
}

Task<std::optional<EventResult>> ActorRuntimeCore::SubmitSystem(ActorId id, std::shared_ptr<SystemJob> job,
                                                                 bool start) {
  std::string key = id.ToString();
  auto it = actors_.find(key);
  std::shared_ptr<Slot> slot;
  if (start) {
    // An operator's job: queued as an event is (a closing actor starts again after it
    // closed), the actor started if it is not resident.
    EventResult refused;
    if (shutting_down_) {
      refused.outcome = EventOutcome::kUnavailable;
      refused.error = "the node is shutting down";
      co_return refused;
    }
    slot = it == actors_.end() ? StartSlot(id, key, &refused) : it->second;
    if (!slot) co_return refused;
  } else {
    // A closing actor is leaving this node (hibernation, a drain, a move, quarantine): a job
    // queued now would start it again here, so it counts as not resident.
    if (shutting_down_ || it == actors_.end() || it->second->state == Slot::State::kClosing) co_return std::nullopt;
    slot = it->second;
  }
  Latch<EventResult> done(env_, [] {
    EventResult r;
    r.outcome = EventOutcome::kUnavailable;
    r.error = "cancelled";
    return r;
  });
  // Not bounded by max_queued_events: the delivery asks for one at a time per actor.
  Pending p{ExecutorEvent{}, done, env_.MonoNow()};
  p.system = std::move(job);
  slot->queue.push_back(std::move(p));
  Pump(slot);
  EventResult result = co_await done.Wait();
  co_return result;
}

Task<Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>>> ActorRuntimeCore::ReadOutbox(ActorId id,
                                                                                                 std::size_t max) {
  auto job = std::make_shared<SystemJob>();
  job->outbox_max = max;
  const std::string name = id.ToString();
  std::optional<EventResult> r = co_await SubmitSystem(std::move(id), job);
  if (!r) co_return NotFound(name + " is not resident here");
  if (!r->ok()) co_return Retryable(r->error);
  co_return std::move(job->outbox);
}

Task<Status> ActorRuntimeCore::CommitSystem(ActorId id, Batch batch) {
  auto job = std::make_shared<SystemJob>();
  job->commit = std::move(batch);
  const std::string name = id.ToString();
  std::optional<EventResult> r = co_await SubmitSystem(std::move(id), std::move(job));
  if (!r) co_return NotFound(name + " is not resident here");
  if (!r->ok()) co_return Retryable(r->error);
  co_return Status::Ok();
}

Task<Result<std::uint64_t>> ActorRuntimeCore::ResolveDead(ActorId id, std::uint64_t seq, DeadAction action) {
  auto job = std::make_shared<SystemJob>();
  job->resolve.emplace(seq, action);
  const std::string name = id.ToString();
  std::optional<EventResult> r = co_await SubmitSystem(std::move(id), job, true);
  if (!r) co_return Retryable(name + " could not be started here");  // not reached: `start` answers
  if (!r->ok()) {
    if (r->outcome == EventOutcome::kNotFound) co_return NotFound(r->error);
    if (job->committed) {
      co_return UnknownOutcome("the change to " + name + " was committed but not released (it may or may not be " +
                               "durable: list its messages again): " + r->error);
    }
    co_return Retryable(r->error);
  }
  co_return std::move(job->resolved);
}

std::shared_ptr<ActorRuntimeCore::Slot> ActorRuntimeCore::StartSlot(const ActorId& id, const std::string& key,
                                                                     EventResult* refused) {
  // A new actor runs its class's current code.
  std::shared_ptr<ExecutorActor> exec = executor_.NewActor(id, key);
  if (!exec && executor_.CodeDropped(id)) {
    // Dropped to meet the budget between its load and this start: loaded again on a retry.
    ++stats_.memory_refusals;
    refused->outcome = EventOutcome::kOverloaded;
    refused->error = fmt::format("the compiled module of class {}/{} was dropped to meet actors.memory_budget_bytes; "
                                 "retry",
                                 id.tenant, id.class_name);
    return nullptr;
  }
  if (!exec) {
    refused->outcome = EventOutcome::kNotFound;
    refused->error = fmt::format("no class {}/{} is deployed", id.tenant, id.class_name);
    return nullptr;
  }
  if (options_.resident_limit && !options_.broken.on(BrokenModel::kResidentShareIgnored)) {
    if (const std::optional<std::size_t> limit = options_.resident_limit(id.tenant);
        limit && !MakeRoomForTenant(id.tenant, *limit > 0 ? *limit - 1 : 0, /*all_or_nothing=*/true)) {
      ++stats_.resident_quota_refusals;
      refused->outcome = EventOutcome::kOverQuota;
      refused->error = fmt::format(
          "tenant {} is at its quota resident_actors: this node keeps at most {} of its actors in memory (its share "
          "of the quota) and none of them is idle; retry",
          id.tenant, *limit);
      return nullptr;
    }
  }
  if (options_.memory_budget_bytes > 0 && MemoryBytes() > options_.memory_budget_bytes) {
    // Admission: a new actor starts only if evicting idle ones brings the node back under
    // its budget (they leave asynchronously; their bytes are subtracted here already).
    const std::uint64_t projected = EnforceMemoryBudget();
    if (projected > options_.memory_budget_bytes) {
      ++stats_.memory_refusals;
      refused->outcome = EventOutcome::kOverloaded;
      refused->error = fmt::format(
          "the node's memory budget is used up ({} bytes resident, actors.memory_budget_bytes = {}): {} cannot start "
          "here now",
          projected, options_.memory_budget_bytes, key);
      return nullptr;
    }
  }
  auto slot = NewSlot(id, key, std::move(exec));
  env_.Spawn(Start(slot), "actor start " + key);
  return slot;
}

Task<EventResult> ActorRuntimeCore::HandleSocket(ActorId id, SocketEvent event) {
  std::optional<Request> none;
  std::optional<SocketEvent> s(std::move(event));
  EventResult r = co_await Submit(std::move(id), std::move(none), AlarmEvent{}, std::nullopt, std::nullopt, std::move(s));
  co_return r;
}

Task<EventResult> ActorRuntimeCore::Submit(ActorId id, std::optional<Request> request, AlarmEvent alarm,
                                           std::optional<IdempotentRequest> idempotent,
                                           std::optional<IncomingMessage> message, std::optional<SocketEvent> socket) {
  EventResult refused;
  if (shutting_down_) {
    refused.outcome = EventOutcome::kUnavailable;
    refused.error = "the node is shutting down";
    co_return refused;
  }
  std::string key = id.ToString();
  auto it = actors_.find(key);
  std::shared_ptr<Slot> slot = it == actors_.end() ? nullptr : it->second;
  // A resident actor runs the code it started with; a new one its class's current code.
  if (!slot) {
    slot = StartSlot(id, key, &refused);
    if (!slot) co_return refused;
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
  ExecutorEvent event;
  event.request = std::move(request);
  event.alarm = alarm;
  event.message = std::move(message);
  event.socket = std::move(socket);
  event.idempotent = std::move(idempotent);
  slot->queue.push_back(Pending{std::move(event), done, queued_at});
  Pump(slot);
  auto alive = alive_;
  EventResult result = co_await done.Wait();
  // The core may have been destroyed while this waited (its destructor answers every
  // event): touch nothing of it then.
  if (*alive) event_seconds_.Observe(ToSeconds(env_.MonoNow() - queued_at));
  co_return result;
}

Task<void> ActorRuntimeCore::Start(std::shared_ptr<Slot> slot) {
  WK_CHECK(slot->state == Slot::State::kStarting, "Start on a slot that is not starting");
  auto alive = alive_;
  const ActorId id = slot->id;
  Result<std::unique_ptr<ActorStorage>> opened = co_await storage_.Open(id);
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
    if (on_unloaded_) on_unloaded_(slot->id, UnloadReason::kFailed);
    co_return;
  }
  slot->storage = std::move(*opened);
  slot->last_seq = 0;
  // The class versions it may run here, loaded before its first event (a state committed by
  // a version this node never ran: docs/tenants.md, "Which version an actor runs").
  if (options_.load_version) {
    for (std::uint32_t version : executor_.VersionsMissing(*slot->exec, *slot->storage)) {
      Status loaded = co_await options_.load_version(id, version);
      if (!*alive) co_return;
      if (!loaded.ok()) {
        WK_LOG_WARN("class version not loaded",
                    {{"actor", slot->key}, {"version", std::to_string(version)}, {"error", loaded.ToString()}});
        EventResult r;
        r.outcome = EventOutcome::kUnavailable;
        r.error = fmt::format("version {} of class {}/{} could not be loaded here: {}", version, id.tenant,
                              id.class_name, loaded.ToString());
        slot->state = Slot::State::kReady;
        auto queue = std::move(slot->queue);
        slot->queue.clear();
        for (Pending& p : queue) p.done.Set(r);
        Close(slot, UnloadReason::kRequested);
        co_return;
      }
    }
  }
  slot->state = Slot::State::kReady;
  // Restored with messages still to deliver (sent before it last left memory, or before its
  // node died): this holder delivers them now (docs/messages.md, "Who delivers").
  if (options_.on_outbox && !options_.broken.on(BrokenModel::kOutboxLostOnRestore)) {
    auto waiting = ListOutbox(*slot->storage, 1);
    if (!waiting.ok() || !waiting->empty()) {
      slot->outbox_pending = true;
      options_.on_outbox(slot->id);
    }
  }
  // The class may have been redeployed while the actor was away: start on the current one.
  executor_.Started(*slot->exec, *slot->storage);
  Pump(slot);
  AfterProgress(slot);
}

Task<void> ActorRuntimeCore::LoadMissingVersions(std::shared_ptr<Slot> slot) {
  auto alive = alive_;
  slot->loading_version = true;
  Status loaded = Status::Ok();
  for (std::uint32_t version : executor_.VersionsMissing(*slot->exec, *slot->storage)) {
    loaded = co_await options_.load_version(slot->id, version);
    if (!*alive) co_return;
    if (!loaded.ok()) break;
  }
  slot->loading_version = false;
  if (!loaded.ok()) {
    // Refused rather than run on other code; the next event tries again.
    EventResult r;
    r.outcome = EventOutcome::kUnavailable;
    r.error = fmt::format("a version of class {}/{} could not be loaded here: {}", slot->id.tenant,
                          slot->id.class_name, loaded.ToString());
    auto queue = std::move(slot->queue);
    slot->queue.clear();
    for (Pending& p : queue) p.done.Set(r);
    AfterProgress(slot);
    co_return;
  }
  // Loaded: the next event runs; if its version is still missing (dropped again at once),
  // the executor refuses it rather than this loading again before it.
  slot->version_loaded = true;
  Pump(slot);
}

bool ActorRuntimeCore::Broken(const Slot& slot) { return slot.storage && !slot.storage->failure().ok(); }

void ActorRuntimeCore::Pump(const std::shared_ptr<Slot>& slot) {
  if (slot->queue.empty()) return;
  // The input gate: an actor's events run one at a time, the next once the previous one
  // ran (its answer may still wait for the output gate: batches group-commit).
  const bool gate_open = slot->state == Slot::State::kReady ||
                         (slot->state == Slot::State::kRunning && options_.broken.on(BrokenModel::kInputGateConcurrent));
  if (!gate_open || slot->loading_version) return;
  if (Broken(*slot)) {
    // Its storage failed (its hold ended, or its writes could not be made durable) while
    // it waited: close it once idle; the queued events restart it with a fresh restore.
    AfterProgress(slot);
    return;
  }
  if (executor_.UseCurrentCode(*slot->exec) && slot->has_instance) {
    // Redeployed: this event runs the class's new code (docs/tenants.md). The old code's
    // instance is dropped on its lane ahead of the event, which makes a new one.
    ForgetInstance(*slot);
    ++stats_.instances_dropped_redeploy;
    executor_.DropInstance(slot->exec);
    AfterInstancesGone(slot->exec->lane);
  }
  if (options_.load_version && !slot->version_loaded && executor_.CodeMissing(*slot->exec) &&
      slot->state == Slot::State::kReady) {
    // The version chosen for it is not here (dropped, or a class known unversioned): load
    // it, then run the events; never another version meanwhile.
    env_.Spawn(LoadMissingVersions(slot), "actor versions " + slot->key);
    return;
  }
  if (AnswerOnLoop(slot)) {
    Pump(slot);  // answered without running: the gate is still open for the next event
    return;
  }
  if (!slot->has_instance) MakeRoomForInstance(*slot);
  auto pending = std::make_shared<Pending>(std::move(slot->queue.front()));
  slot->queue.pop_front();
  slot->version_loaded = false;
  slot->state = Slot::State::kRunning;
  slot->running++;
  slot->undelivered++;
  pending->dispatched = env_.MonoNow();
  slot->inflight.push_back(pending);
  pending->event.now_ms = NowMs();
  // What the event sees of its actor's WebSockets: as of now, after every earlier event's
  // tags (Executed hands them over before the next dispatch).
  if (options_.sockets != nullptr) pending->event.sockets = options_.sockets->View(slot->id);
  std::weak_ptr<bool> alive = alive_;
  std::shared_ptr<const ExecutorEvent> event(pending, &pending->event);
  executor_.Run(slot->exec, slot->storage.get(), std::move(event), [this, alive, slot, pending](ExecutedEvent ran) {
    auto a = alive.lock();
    if (a && *a) Executed(slot, pending, std::move(ran));
  });
}

bool ActorRuntimeCore::AnswerOnLoop(const std::shared_ptr<Slot>& slot) {
  Pending& front = slot->queue.front();
  if (!front.system) {
    if (front.event.idempotent) return AnswerFromRecord(slot);
    if (!front.event.message) return false;
    const IncomingMessage& m = *front.event.message;
    if (AppliedSeq(*slot->storage, m.from) < m.seq) {
      return false;  // not applied yet: the handler runs
    }
  }
  auto pending = std::make_shared<Pending>(std::move(slot->queue.front()));
  slot->queue.pop_front();
  pending->dispatched = pending->started = pending->ran = env_.MonoNow();
  EventResult result;
  if (!pending->system) {
    // Applied already (a delivery repeated after a lost answer, or by a node that held the
    // sender before): answered "applied" without running, through the output gate, since
    // the record may be in a batch not durable yet.
    result.message_duplicate = true;
  } else if (pending->system->resolve) {
    // An operator's retry or drop of a dead message, decided here at the input gate from
    // the state as of everything committed before it.
    SystemJob& job = *pending->system;
    const auto [seq, action] = *job.resolve;
    if (Status broken = slot->storage->failure(); !broken.ok()) {
      result.outcome = EventOutcome::kUnavailable;
      result.error = broken.ToString();
    } else {
      Result<Batch> batch =
          action == DeadAction::kRetry ? RetryDead(*slot->storage, seq, NowMs()) : DropDead(*slot->storage, seq);
      if (!batch.ok()) {
        job.resolved = batch.status();
      } else {
        // A retry fills the outbox again: its wake entry with it (KeepOutboxWake).
        KeepOutboxWake(*slot->storage, *batch, NowMs(), options_.message_wake_after_ms, options_.broken);
        slot->last_seq = slot->storage->Commit(std::move(*batch));
        job.committed = true;
        job.resolved = action == DeadAction::kRetry ? LastSentSeq(*slot->storage) : seq;
      }
    }
  } else if (pending->system->commit) {
    if (Status broken = slot->storage->failure(); !broken.ok()) {
      result.outcome = EventOutcome::kUnavailable;
      result.error = broken.ToString();
    } else if (!pending->system->commit->empty()) {
      // Built outside the gate (the delivery's outcomes): the wake entry follows the outbox
      // as the batch leaves it, judged here against the current state.
      KeepOutboxWake(*slot->storage, *pending->system->commit, NowMs(), options_.message_wake_after_ms,
                     options_.broken);
      slot->last_seq = slot->storage->Commit(std::move(*pending->system->commit));
    }
  } else {
    pending->system->outbox = ListOutbox(*slot->storage, pending->system->outbox_max);
    if (pending->system->outbox.ok()) slot->outbox_pending = !pending->system->outbox->empty();
    if (options_.broken.on(BrokenModel::kMessageBeforeDurable)) {
      // The broken model: the outbox is read and answered before its batches are durable.
      slot->undelivered++;
      slot->inflight.push_back(pending);
      std::weak_ptr<bool> alive = alive_;
      env_.Post([this, alive, slot, pending] {
        auto a = alive.lock();
        if (a && *a) Deliver(slot, pending, EventResult{}, Status::Ok());
      });
      return true;
    }
  }
  slot->undelivered++;
  slot->inflight.push_back(pending);
  Release(slot, pending, std::make_shared<EventResult>(std::move(result)), slot->last_seq);
  return true;
}

bool ActorRuntimeCore::AnswerFromRecord(const std::shared_ptr<Slot>& slot) {
  {
    const IdempotentRequest& idem = *slot->queue.front().event.idempotent;
    auto first = FindIdempotencyRecord(*slot->storage, idem.key, NowMs(), idem.ttl_ms);
    if (first.ok() && !first->has_value()) return false;  // the key's first use: run it
  }
  auto pending = std::make_shared<Pending>(std::move(slot->queue.front()));
  slot->queue.pop_front();
  const IdempotentRequest& idem = *pending->event.idempotent;
  auto found = FindIdempotencyRecord(*slot->storage, idem.key, NowMs(), idem.ttl_ms);
  pending->dispatched = pending->started = pending->ran = env_.MonoNow();
  EventResult result;
  if (!found.ok()) {
    // The record is damaged: refuse rather than run the request a second time.
    result.outcome = EventOutcome::kUnavailable;
    result.error = "the idempotency record of this key could not be read: " + found.status().ToString();
  } else if ((*found)->fingerprint == idem.fingerprint) {
    result = ReplayedResult(**found);
    ++stats_.idempotent_replays;
  } else {
    // The draft's rule: a key names one request; reusing it for another is the client's error.
    result.outcome = EventOutcome::kKeyReused;
    result.error = "the Idempotency-Key was first used with another method, path, query or body";
    ++stats_.idempotency_key_reused;
  }
  slot->undelivered++;
  slot->inflight.push_back(pending);
  // Through the output gate like any answer: the record may be in a batch not yet durable.
  Release(slot, pending, std::make_shared<EventResult>(std::move(result)), slot->last_seq);
  return true;
}

void ActorRuntimeCore::Executed(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending,
                                ExecutedEvent ran) {
  pending->started = ran.started;
  pending->ran = ran.ran;
  if (options_.on_event_time) options_.on_event_time(slot->id, ran.ran - ran.started);
  slot->last_seq = std::max(slot->last_seq, ran.wait_seq);
  stats_.idempotency_keys_forgotten += ran.idempotency_forgotten;
  if (options_.sockets != nullptr && ran.result.ok()) {
    // The handler succeeded: its tags hold from the actor's next event on (they are the
    // node's bookkeeping, seen by no client, so they need not wait for the output gate).
    if (!ran.result.sockets.tags.empty()) options_.sockets->Tagged(slot->id, std::move(ran.result.sockets.tags));
    if (options_.broken.on(BrokenModel::kSocketSendBeforeDurable) && !ran.result.sockets.actions.empty()) {
      // The broken model: what the event sends leaves before its batch is durable.
      options_.sockets->Release(slot->id, std::move(ran.result.sockets.actions));
    }
  }
  ran.result.sockets.tags.clear();
  if (options_.broken.on(BrokenModel::kMessageBeforeDurable) && ran.result.messages_sent > 0 && options_.on_outbox) {
    slot->outbox_pending = true;
    options_.on_outbox(slot->id);  // the broken model: delivery starts before the batch is durable
  }
  Release(slot, pending, std::make_shared<EventResult>(std::move(ran.result)), ran.wait_seq);
  ExecutionDone(slot, ran.memory, ran.instantiated);
}

void ActorRuntimeCore::Release(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending,
                               std::shared_ptr<EventResult> result, std::uint64_t wait_seq) {
  // The output gate: this event's answer waits until everything it may depend on (the
  // actor's last committed batch, its own or an earlier event's) is durable, and is
  // released only if the storage's hold is still valid then (storage.h), even for an event
  // that wrote nothing. Asked before the actor's next event is dispatched (ExecutionDone),
  // while no job of the actor uses the storage.
  std::weak_ptr<bool> alive = alive_;
  if (options_.broken.on(BrokenModel::kAnswerWithoutGate)) {
    env_.Post([this, alive, slot, pending, result] {
      auto a = alive.lock();
      if (a && *a) Deliver(slot, pending, std::move(*result), Status::Ok());
    });
  } else {
    // A copy of the hand-off: the callback may outlive the core.
    slot->storage->WhenReleasable(wait_seq, [this, to_loop = to_loop_, alive, slot, pending, result](Status s) {
      to_loop([this, alive, slot, pending, result, s = std::move(s)]() mutable {
        auto a = alive.lock();
        if (a && *a) Deliver(slot, pending, std::move(*result), std::move(s));
      });
    });
  }
}

void ActorRuntimeCore::ExecutionDone(const std::shared_ptr<Slot>& slot, const ActorMemory& memory,
                                     bool instantiated) {
  WK_CHECK(slot->state == Slot::State::kRunning && slot->running > 0, "execution done on a slot that was not running");
  if (--slot->running == 0) slot->state = Slot::State::kReady;
  slot->last_active = env_.MonoNow();
  by_activity_.splice(by_activity_.end(), by_activity_, slot->by_activity);
  SetStateBytes(*slot, memory.state);
  SetInstanceMemory(*slot, memory);
  if (instantiated) ++stats_.instantiations;
  Pump(slot);
  AfterProgress(slot);
  EnforceMemoryBudget();
}

void ActorRuntimeCore::Deliver(const std::shared_ptr<Slot>& slot, const std::shared_ptr<Pending>& pending,
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
  if (pending->system) {
    const SystemJob& job = *pending->system;
    if (result.ok() && job.committed && job.resolve && job.resolve->second == DeadAction::kRetry && options_.on_outbox) {
      // An operator's retry is durable now: the message is back in the outbox, and this
      // holder delivers it.
      slot->outbox_pending = true;
      options_.on_outbox(slot->id);
    }
    pending->done.Set(std::move(result));
    AfterProgress(slot);
    return;
  }
  if (options_.sockets != nullptr && result.ok() && !result.sockets.actions.empty()) {
    // Released: what the event sent and closed on its WebSockets goes out now, in order.
    options_.sockets->Release(slot->id, std::move(result.sockets.actions));
  }
  result.sockets.actions.clear();
  if (result.ok() && result.messages_sent > 0 && options_.on_outbox) {
    // Durable now: the messages exist, and this holder delivers them.
    slot->outbox_pending = true;
    options_.on_outbox(slot->id);
  }
  if (options_.broken.on(BrokenModel::kAppliedRecordNotInBatch) && result.ok() && !result.message_duplicate &&
      pending->event.message && slot->storage && slot->storage->failure().ok()) {
    // The broken model: the applied record is committed in a batch of its own once the
    // answer is out, so a node lost in between leaves the handler's writes without it.
    Batch record;
    RecordApplied(record, pending->event.message->from, pending->event.message->seq);
    slot->last_seq = slot->storage->Commit(std::move(record));
  }
  if (options_.broken.on(BrokenModel::kIdempotentAnswerNotInBatch) && result.ok() && result.replayed.empty() &&
      pending->event.idempotent && pending->event.request && slot->storage && slot->storage->failure().ok()) {
    // The broken model: the record is committed in a batch of its own once the answer is
    // out, so a node lost in between leaves the writes without their record.
    Batch record;
    AddIdempotencyRecord(*pending->event.idempotent, result.response, pending->event.now_ms, *slot->storage, record);
    slot->last_seq = slot->storage->Commit(std::move(record));
  }
  ++stats_.events;
  if (!result.ok()) ++stats_.failed_events;
  ObservePhases(*pending);
  pending->done.Set(std::move(result));
  AfterProgress(slot);
}

void ActorRuntimeCore::ObservePhases(const Pending& p) {
  event_phase_seconds_[0].Observe(ToSeconds(p.dispatched - p.arrived));
  event_phase_seconds_[1].Observe(ToSeconds(p.started - p.dispatched));
  event_phase_seconds_[2].Observe(ToSeconds(p.ran - p.started));
  event_phase_seconds_[3].Observe(ToSeconds(env_.MonoNow() - p.ran));
}

// ---------------------------------------------------------------------------------------
// Memory: each actor's figures, instances

void ActorRuntimeCore::SetInstanceMemory(Slot& slot, const ActorMemory& memory) {
  if (!memory.has_instance) {
    ForgetInstance(slot);  // it failed and was thrown away, or could not be made
    AfterInstancesGone(slot.exec->lane);
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

void ActorRuntimeCore::SetLinearBytes(Slot& slot, std::uint64_t bytes) {
  linear_bytes_ = linear_bytes_ - slot.linear_bytes + bytes;
  slot.tenant->linear_bytes = slot.tenant->linear_bytes - slot.linear_bytes + bytes;
  slot.linear_bytes = bytes;
}

void ActorRuntimeCore::SetStateBytes(Slot& slot, std::uint64_t bytes) {
  state_bytes_ = state_bytes_ - slot.state_bytes + bytes;
  slot.tenant->state_bytes = slot.tenant->state_bytes - slot.state_bytes + bytes;
  slot.state_bytes = bytes;
}

void ActorRuntimeCore::SetInstanceHeapBytes(Slot& slot, std::uint64_t bytes) {
  instance_heap_bytes_ = instance_heap_bytes_ - slot.instance_heap_bytes + bytes;
  slot.tenant->instance_heap_bytes = slot.tenant->instance_heap_bytes - slot.instance_heap_bytes + bytes;
  slot.instance_heap_bytes = bytes;
}

void ActorRuntimeCore::ForgetInstance(Slot& slot) {
  if (!slot.has_instance) return;
  instances_by_activity_.erase(slot.instance_by_activity);
  slot.has_instance = false;
  instance_reserved_bytes_ -= slot.reserved_bytes;
  executor_.InstanceForgotten(*slot.exec, slot.reserved_bytes);
  slot.reserved_bytes = 0;
  SetLinearBytes(slot, 0);
  linear_mapped_bytes_ -= slot.linear_mapped_bytes;
  slot.linear_mapped_bytes = 0;
  SetInstanceHeapBytes(slot, 0);
}

void ActorRuntimeCore::AfterInstancesGone(std::size_t lane) {
  executor_.AfterInstancesGone(lane, instances_by_activity_.size(), instance_reserved_bytes_);
}

void ActorRuntimeCore::DropInstance(Slot& slot, DropReason reason) {
  WK_CHECK(IsIdle(slot) && slot.has_instance, "dropping the instance of a busy actor, or one without an instance");
  ForgetInstance(slot);
  switch (reason) {
    case DropReason::kIdle: ++stats_.instances_dropped_idle; break;
    case DropReason::kMemory: ++stats_.instances_dropped_memory; break;
    case DropReason::kLimit: ++stats_.instances_dropped_limit; break;
  }
  // Queued on its lane like an event: an event dispatched after this finds no instance and
  // makes a fresh one over the committed state.
  executor_.DropInstance(slot.exec);
  AfterInstancesGone(slot.exec->lane);
}

void ActorRuntimeCore::MakeRoomForInstance(const Slot& next) {
  const std::uint64_t reserve = executor_.InstanceReservation(*next.exec);
  const std::uint64_t limit = executor_.live_reservation_limit();
  auto full = [&] {
    return instances_by_activity_.size() >= options_.max_instances || instance_reserved_bytes_ + reserve > limit;
  };
  for (auto it = instances_by_activity_.begin(); full() && it != instances_by_activity_.end();) {
    Slot* s = *it++;
    if (IsIdle(*s)) DropInstance(*s, DropReason::kLimit);
  }
}

std::uint64_t ActorRuntimeCore::MemoryBytes() const {
  const ExecutorStats e = executor_.stats();
  // The node's WebSockets count too: they stay open while their actors are away, and a
  // budget that did not see them could be filled by connections alone.
  const std::uint64_t sockets = options_.sockets != nullptr ? options_.sockets->MemoryBytes() : 0;
  return linear_bytes_ + state_bytes_ + e.heap_bytes + e.compiled_bytes +
         actors_.size() * kResidentActorBookkeepingBytes + sockets;
}

bool ActorRuntimeCore::MakeRoom() {
  return options_.memory_budget_bytes == 0 || EnforceMemoryBudget() <= options_.memory_budget_bytes;
}

bool ActorRuntimeCore::MakeRoomForTenant(const std::string& tenant, std::size_t keep, bool all_or_nothing) {
  auto t = tenant_totals_.find(tenant);
  if (t == tenant_totals_.end()) return true;
  // Those leaving are on their way out: not counted against the share.
  std::size_t staying = t->second.actors - t->second.closing;
  if (staying <= keep) return true;
  // The tenant's least recently active idle actors go first (a walk of the node's resident
  // actors, only for a tenant over its share).
  std::vector<std::shared_ptr<Slot>> leave;
  for (Slot* s : by_activity_) {
    if (staying <= keep) break;
    if (s->id.tenant != tenant || s->state != Slot::State::kReady || !IsIdle(*s) || s->outbox_pending) continue;
    leave.push_back(s->shared_from_this());
    --staying;
  }
  if (all_or_nothing && staying > keep) return false;  // too few idle: nothing is closed
  for (auto& s : leave) {
    WK_LOG_INFO("hibernating an idle actor: its tenant is at its resident_actors quota on this node",
                {{"actor", s->key}, {"keep", std::to_string(keep)}});
    ++stats_.resident_quota_hibernations;
    Close(s, UnloadReason::kHibernated);
  }
  return staying <= keep;
}

std::uint64_t ActorRuntimeCore::EnforceMemoryBudget() {
  std::uint64_t projected = MemoryBytes();
  if (projected <= options_.memory_budget_bytes) return projected;
  auto subtract = [&projected](double bytes) {
    projected -= std::min<std::uint64_t>(projected, static_cast<std::uint64_t>(bytes));
  };
  std::vector<bool> reclaim(executor_.lanes(), false);
  // First the instances of idle actors: making one again costs no bucket request, where
  // an evicted actor is acquired and restored.
  for (auto it = instances_by_activity_.begin();
       projected > options_.memory_budget_bytes && it != instances_by_activity_.end();) {
    Slot* s = *it++;
    if (!IsIdle(*s)) continue;
    subtract(static_cast<double>(s->linear_bytes + InstanceHeap(*s)));
    reclaim[s->exec->lane] = true;
    DropInstance(*s, DropReason::kMemory);
  }
  // Then compiled code no resident actor runs (a later start compiles it again, off the loop).
  if (projected > options_.memory_budget_bytes) {
    const std::uint64_t freed = executor_.DropUnusedCode(projected - options_.memory_budget_bytes);
    subtract(static_cast<double>(freed));
    // The workers' module objects hold the code until they are collected.
    if (freed > 0) std::fill(reclaim.begin(), reclaim.end(), true);
  }
  // Then idle actors themselves (their classes' code, once unused, goes when they have gone:
  // CloseDone).
  std::vector<std::shared_ptr<Slot>> evict;
  std::map<const void*, std::uint64_t> leaving_code;
  for (Slot* s : by_activity_) {
    if (projected <= options_.memory_budget_bytes) break;
    // Closing ones are on their way out: their bytes are still counted until CloseDone, and
    // no longer once it has come.
    if (s->state == Slot::State::kClosing && s->queue.empty()) {
      subtract(static_cast<double>(s->state_bytes + kResidentActorBookkeepingBytes +
                                   executor_.CodeFreedBy(*s->exec, leaving_code)));
      continue;
    }
    if (!IsIdle(*s) || s->outbox_pending) continue;  // delivering its outbox: kept
    const std::uint64_t bytes = s->linear_bytes + s->state_bytes + kResidentActorBookkeepingBytes;
    subtract(static_cast<double>(bytes + InstanceHeap(*s) + executor_.CodeFreedBy(*s->exec, leaving_code)));
    WK_LOG_INFO("evicting an idle actor: resident actors exceed actors.memory_budget_bytes",
                {{"actor", s->key}, {"memory_bytes", std::to_string(bytes)}});
    reclaim[s->exec->lane] = reclaim[s->exec->lane] || s->has_instance;
    evict.push_back(s->shared_from_this());
  }
  for (auto& s : evict) Close(s, UnloadReason::kEvicted);
  // Reclaimed per lane behind the jobs that threw the instances away, so the heap the
  // budget counts drops with them (otherwise it would keep its last measure until the next
  // event on that lane, and could refuse new actors with nothing left to evict).
  for (std::size_t i = 0; i < reclaim.size(); ++i) {
    if (reclaim[i]) executor_.ReclaimNow(i);
  }
  return projected;
}

// ---------------------------------------------------------------------------------------
// Lifecycle

void ActorRuntimeCore::ScheduleSweep() {
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

void ActorRuntimeCore::Sweep() {
  const MonoTime now = env_.MonoNow();
  std::vector<bool> dropped(executor_.lanes(), false);
  for (auto it = instances_by_activity_.begin(); it != instances_by_activity_.end();) {
    Slot* s = *it++;
    if (now - s->last_active < options_.idle_instance) break;  // the rest are more recent
    if (!IsIdle(*s)) continue;
    dropped[s->exec->lane] = true;
    DropInstance(*s, DropReason::kIdle);
  }
  std::vector<std::shared_ptr<Slot>> sleepy;
  for (Slot* s : by_activity_) {
    if (now - s->last_active < options_.idle_hibernate) break;
    if (IsIdle(*s) && !s->outbox_pending) sleepy.push_back(s->shared_from_this());
  }
  for (auto& s : sleepy) Close(s, UnloadReason::kHibernated);
  if (options_.resident_limit && !options_.broken.on(BrokenModel::kResidentShareIgnored)) {
    // A share lowered below what is resident (a quota changed, a node joined): the idle ones
    // over it leave now; busy ones as they become idle.
    std::vector<std::string> tenants;
    for (const auto& [tenant, t] : tenant_totals_) tenants.push_back(tenant);
    for (const std::string& tenant : tenants) {
      if (const auto limit = options_.resident_limit(tenant)) MakeRoomForTenant(tenant, *limit, false);
    }
  }
  executor_.AfterIdleSweep(dropped);
  if (!actors_.empty()) ScheduleSweep();
}

void ActorRuntimeCore::AfterProgress(const std::shared_ptr<Slot>& slot) {
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

bool ActorRuntimeCore::IsIdle(const Slot& slot) const {
  return slot.state == Slot::State::kReady && slot.queue.empty() && slot.undelivered == 0;
}

void ActorRuntimeCore::Unload(const ActorId& id) {
  auto it = actors_.find(id.ToString());
  if (it == actors_.end()) return;
  auto slot = it->second;
  if (IsIdle(*slot)) {
    Close(slot, UnloadReason::kRequested);
  } else {
    slot->unload_requested = true;
  }
}

void ActorRuntimeCore::Warm(const ActorId& id) {
  if (shutting_down_) return;
  std::string key = id.ToString();
  if (actors_.contains(key)) return;
  std::shared_ptr<ExecutorActor> exec = executor_.NewActor(id, key);
  if (!exec) return;
  if (options_.memory_budget_bytes > 0 && MemoryBytes() > options_.memory_budget_bytes) return;
  auto slot = NewSlot(id, std::move(key), std::move(exec));
  env_.Spawn(Start(slot), "actor warm start " + slot->key);
}

std::shared_ptr<ActorRuntimeCore::Slot> ActorRuntimeCore::NewSlot(const ActorId& id, std::string key,
                                                                  std::shared_ptr<ExecutorActor> exec) {
  auto slot = std::make_shared<Slot>();
  slot->id = id;
  slot->key = std::move(key);
  slot->exec = std::move(exec);
  slot->last_active = env_.MonoNow();
  slot->tenant = &tenant_totals_[slot->id.tenant];
  ++slot->tenant->actors;
  actors_.emplace(slot->key, slot);
  slot->by_activity = by_activity_.insert(by_activity_.end(), slot.get());
  if (sweep_timer_ == 0) ScheduleSweep();
  return slot;
}

void ActorRuntimeCore::Close(const std::shared_ptr<Slot>& slot, UnloadReason reason) {
  if (slot->state == Slot::State::kClosing) return;
  WK_CHECK(slot->state == Slot::State::kReady && slot->undelivered == 0, "closing a busy actor");
  slot->state = Slot::State::kClosing;
  ++slot->tenant->closing;
  ForgetInstance(*slot);  // its drop is queued below
  std::weak_ptr<bool> alive = alive_;
  executor_.Close(slot->exec, [this, alive, slot, reason] {
    auto a = alive.lock();
    if (a && *a) CloseDone(slot, reason);
  });
  AfterInstancesGone(slot->exec->lane);
}

void ActorRuntimeCore::CloseDone(const std::shared_ptr<Slot>& slot, UnloadReason reason) {
  --slot->tenant->closing;
  SetStateBytes(*slot, 0);
  // An actor that only leaves memory keeps its hold asleep (docs/node-lease.md, "Sleeping
  // holds"); one that leaves this node's care (requested: a drain, a move, quarantine), a
  // failed one (its restart takes a fresh restore) and a stopping node's release it.
  const bool only_memory = reason == UnloadReason::kHibernated || reason == UnloadReason::kEvicted;
  storage_.Close(slot->id, std::move(slot->storage), only_memory ? CloseIntent::kKeepHold : CloseIntent::kRelease);
  if (reason == UnloadReason::kHibernated) {
    ++stats_.hibernations;
  } else if (reason == UnloadReason::kEvicted) {
    ++stats_.evictions;
  }
  WK_LOG_DEBUG("actor unloaded", {{"actor", slot->key}, {"reason", std::string(UnloadReasonName(reason))}});
  if (on_unloaded_) on_unloaded_(slot->id, reason);
  const bool evicted = reason == UnloadReason::kEvicted;
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
  // Evicted for memory: its class's code may be unused once the slot is let go (after this
  // callback), and droppable then.
  if (evicted && options_.memory_budget_bytes > 0) {
    std::weak_ptr<bool> alive = alive_;
    env_.Post([this, alive] {
      auto a = alive.lock();
      if (a && *a && MemoryBytes() > options_.memory_budget_bytes) EnforceMemoryBudget();
    });
  }
}

void ActorRuntimeCore::Forget(Slot& slot) {
  ForgetInstance(slot);
  // Its state was taken off in CloseDone, or never counted (a failed start).
  if (--slot.tenant->actors == 0) tenant_totals_.erase(slot.id.tenant);
  slot.tenant = nullptr;
  by_activity_.erase(slot.by_activity);
  actors_.erase(slot.key);  // last: it may hold the last reference to the slot
}

Task<bool> ActorRuntimeCore::Shutdown(Duration limit) {
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
