#include "native_actor_host.h"

namespace wk::sim {

NativeActorHost::NativeActorHost(Env& env, actor::StorageProvider& storage, NativeActorHostOptions options)
    : env_(env), storage_(storage), options_(options) {}

NativeActorHost::~NativeActorHost() {
  *alive_ = false;
  for (auto& [id, slot] : slots_) {
    if (slot->idle_timer) env_.CancelTimer(*slot->idle_timer);
    slot->gone = true;
  }
}

bool NativeActorHost::IsResident(const ActorId& id) const { return slots_.count(id) > 0; }

void NativeActorHost::Unload(const ActorId& id) {
  auto it = slots_.find(id);
  if (it == slots_.end()) return;
  std::shared_ptr<Slot> slot = it->second;
  slot->unloading = true;
  if (slot->inflight == 0) Close(slot, "unloaded");
}

void NativeActorHost::Warm(const ActorId& id) {
  if (slots_.count(id)) return;
  std::shared_ptr<Slot> slot = slots_.emplace(id, std::make_shared<Slot>(env_, id)).first->second;
  ++slot->inflight;  // the start counts as an event in flight until the storage is open
  env_.Spawn(Open(slot), "warm start");
}

Task<void> NativeActorHost::Open(std::shared_ptr<Slot> slot) {
  std::shared_ptr<bool> alive = alive_;
  {
    AsyncMutex::Guard guard = co_await slot->mu.Lock();
    if (!*alive) co_return;
    if (guard.owns() && !slot->gone && !slot->storage) {
      const ActorId id = slot->id;
      auto opened = co_await storage_.Open(id);
      if (!*alive) co_return;
      if (opened.ok()) {
        ++stats_.starts;
        slot->storage = std::move(*opened);
      } else {
        ++stats_.start_failures;
        slot->gone = true;
        auto it = slots_.find(slot->id);
        if (it != slots_.end() && it->second == slot) slots_.erase(it);
      }
    }
  }
  --slot->inflight;
  AfterEvent(slot);
}

Task<actor::EventResult> NativeActorHost::HandleRequest(ActorId id, actor::Request request) {
  std::optional<actor::Request> r(std::move(request));
  actor::EventResult result = co_await Submit(std::move(id), std::move(r), actor::AlarmEvent{});
  co_return result;
}

Task<actor::EventResult> NativeActorHost::HandleAlarm(ActorId id, actor::AlarmEvent event) {
  std::optional<actor::Request> none;
  actor::EventResult result = co_await Submit(std::move(id), std::move(none), event);
  co_return result;
}

Task<actor::EventResult> NativeActorHost::Submit(ActorId id, std::optional<actor::Request> request,
                                                 actor::AlarmEvent alarm) {
  auto it = slots_.find(id);
  if (it == slots_.end()) it = slots_.emplace(id, std::make_shared<Slot>(env_, id)).first;
  std::shared_ptr<Slot> slot = it->second;
  ++slot->inflight;
  if (slot->idle_timer) {
    env_.CancelTimer(*slot->idle_timer);
    slot->idle_timer.reset();
  }
  std::shared_ptr<bool> alive = alive_;
  actor::EventResult result = co_await Run(slot, std::move(request), alarm);
  if (!*alive) co_return result;
  --slot->inflight;
  AfterEvent(slot);
  co_return result;
}

Task<actor::EventResult> NativeActorHost::Run(std::shared_ptr<Slot> slot, std::optional<actor::Request> request,
                                              actor::AlarmEvent alarm) {
  std::shared_ptr<bool> alive = alive_;
  actor::EventResult result;
  std::uint64_t wait_seq = 0;
  actor::ActorStorage* storage = nullptr;
  {
    AsyncMutex::Guard guard = co_await slot->mu.Lock();
    if (!*alive) co_return result;
    if (!guard.owns() || slot->gone || slot->broken) {
      result.outcome = actor::EventOutcome::kUnavailable;
      result.error = slot->broken ? "the actor's storage failed" : "the actor left memory";
      co_return result;
    }
    if (!slot->storage) {
      const ActorId id = slot->id;
      auto opened = co_await storage_.Open(id);
      if (!*alive) co_return result;
      if (!opened.ok()) {
        ++stats_.start_failures;
        slot->gone = true;
        auto it = slots_.find(slot->id);
        if (it != slots_.end() && it->second == slot) slots_.erase(it);
        result.outcome = actor::EventOutcome::kUnavailable;
        result.error = "cannot start: " + opened.status().ToString();
        co_return result;
      }
      ++stats_.starts;
      slot->storage = std::move(*opened);
    }
    if (Status failed = slot->storage->failure(); !failed.ok()) {
      // Failed for good (an upload failed or was Late, the hold ended): the state is void.
      slot->broken = true;
      result.outcome = actor::EventOutcome::kUnavailable;
      result.error = "the actor's storage failed: " + failed.ToString();
      co_return result;
    }
    ++stats_.events;
    if (request) {
      result.response = Execute(*slot, *request);
    } else {
      result = ExecuteAlarm(*slot, alarm);
    }
    wait_seq = slot->last_seq;
    storage = slot->storage.get();
  }  // the next event may run now: its batch joins this one's upload
  if (options_.answer_without_gate) co_return result;  // broken model: no output gate
  Status durable = co_await Gate(&env_, storage, wait_seq);
  if (!*alive) co_return result;
  if (!durable.ok()) {
    ++stats_.gate_failures;
    slot->broken = true;
    result = actor::EventResult{};
    result.outcome = actor::EventOutcome::kUnavailable;
    result.error = "not durable: " + durable.ToString();
  }
  co_return result;
}

actor::EventResult NativeActorHost::ExecuteAlarm(Slot& slot, const actor::AlarmEvent& alarm) {
  actor::EventResult r;
  actor::ActorStorage& storage = *slot.storage;
  const std::optional<std::int64_t> current = storage.Alarm();
  const std::int64_t now = ToUnixMs(env_.WallNow());
  if (slot.id.class_name != "alarm" || !actor::AlarmDue(current, now, options_.broken)) {
    r.alarm_after = current;  // nothing runs: a stale or early delivery (actor/alarm_event.h)
    return r;
  }
  const std::int64_t due = *current;
  const bool fail = PoisonedAlarm(due) || static_cast<int>(env_.RandomBelow(100)) < options_.alarm_failure_percent;
  if (options_.on_alarm_run) options_.on_alarm_run(slot.id, due, now, alarm.retry_count, fail, alarm.last_attempt);
  if (fail) {
    r.outcome = actor::EventOutcome::kActorFailed;
    r.error = "the alarm handler failed";
    if (alarm.last_attempt) {
      actor::Batch clear;
      clear.alarm = std::optional<std::int64_t>();
      slot.last_seq = storage.Commit(std::move(clear));
    }
    r.alarm_after = storage.Alarm();
    return r;
  }
  std::string log = storage.Get("log").value_or("");
  auto append = [&log](const std::string& op) { log = log.empty() ? op : log + "," + op; };
  append("f" + std::to_string(due) + ":" + std::to_string(alarm.retry_count) + ":" + std::to_string(now));
  actor::Batch batch;
  batch.alarm = std::optional<std::int64_t>();  // cleared as the handler starts
  if (static_cast<int>(env_.RandomBelow(100)) < options_.alarm_rearm_percent) {
    const std::int64_t next = now + 500 + static_cast<std::int64_t>(env_.RandomBelow(7500));
    batch.alarm = std::optional<std::int64_t>(next);
    append("s" + std::to_string(next));
  }
  batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", log});
  slot.last_seq = storage.Commit(std::move(batch));
  r.alarm_fired = true;
  r.alarm_after = storage.Alarm();
  return r;
}

actor::Response NativeActorHost::Execute(Slot& slot, const actor::Request& request) {
  actor::Response response;
  if (slot.id.class_name == "alarm") {
    std::string log = slot.storage->Get("log").value_or("");
    if (request.method == "GET") {
      response.body = log;
      return response;
    }
    actor::Batch batch;
    std::string op;
    if (request.method == "POST" && request.path == "/set" && request.query.starts_with("t=")) {
      const std::int64_t t = std::stoll(request.query.substr(2));
      batch.alarm = std::optional<std::int64_t>(t);
      op = "s" + std::to_string(t);
    } else if (request.method == "POST" && request.path == "/del") {
      batch.alarm = std::optional<std::int64_t>();
      op = "d";
    } else {
      response.status = 400;
      response.body = "the alarm actor takes GET, POST /set?t=<ms> and POST /del";
      return response;
    }
    batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", log.empty() ? op : log + "," + op});
    slot.last_seq = slot.storage->Commit(std::move(batch));
    response.body = op;
    return response;
  }
  const std::string list = slot.storage->Get("list").value_or("");
  if (request.method == "GET") {
    response.body = list;
    return response;
  }
  if (request.method != "POST") {
    response.status = 405;
    response.body = "the list actor takes GET and POST";
    return response;
  }
  actor::Batch batch;
  batch.mutations.push_back(
      actor::Mutation{actor::Mutation::Kind::kPut, "list", list.empty() ? request.body : list + "," + request.body});
  slot.last_seq = slot.storage->Commit(std::move(batch));
  response.body = "appended";
  return response;
}

Task<Status> NativeActorHost::Gate(Env* env, actor::ActorStorage* storage, std::uint64_t seq) {
  Latch<Status> done(*env, [] { return Cancelled("the event was cancelled"); });
  storage->WhenReleasable(seq, [done](Status s) { done.Set(std::move(s)); });
  Status s = co_await done.Wait();
  co_return s;
}

void NativeActorHost::AfterEvent(const std::shared_ptr<Slot>& slot) {
  if (slot->gone || slot->inflight > 0) return;
  if (slot->broken) {
    Close(slot, "storage failed");
    return;
  }
  if (slot->unloading) {
    Close(slot, "unloaded");
    return;
  }
  std::weak_ptr<Slot> weak = slot;
  std::shared_ptr<bool> alive = alive_;
  slot->idle_timer = env_.StartTimer(env_.MonoNow() + options_.idle_hibernate, [this, alive, weak] {
    if (!*alive) return;
    auto s = weak.lock();
    if (!s) return;
    s->idle_timer.reset();
    if (!s->gone && s->inflight == 0) Close(s, "hibernated");
  });
}

void NativeActorHost::Close(const std::shared_ptr<Slot>& slot, const std::string& why) {
  if (slot->gone) return;
  slot->gone = true;
  if (slot->idle_timer) {
    env_.CancelTimer(*slot->idle_timer);
    slot->idle_timer.reset();
  }
  auto it = slots_.find(slot->id);
  if (it != slots_.end() && it->second == slot) slots_.erase(it);
  ++stats_.closes;
  if (slot->storage) storage_.Close(slot->id, std::move(slot->storage));
  if (on_closed_) on_closed_(slot->id, why);
}

}  // namespace wk::sim
