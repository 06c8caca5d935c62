#include "replica/provider.h"

#include "base/log.h"

namespace wk::replica {

ReplicaProvider::ReplicaProvider(Replica::Deps deps, HoldSource& holds, ReplicaOptions options, Duration close_limit)
    : deps_(std::move(deps)), holds_(holds), options_(options), close_limit_(close_limit) {
  // The index outlives this provider (its owner's order); a replica still closing in a task
  // when the provider goes is destroyed later, with the Env's tasks, and must not report.
  if (deps_.alarms != nullptr && deps_.alarms_alive == nullptr) deps_.alarms_alive = alive_;
}

ReplicaProvider::~ReplicaProvider() { *alive_ = false; }

Task<Result<std::unique_ptr<actor::ActorStorage>>> ReplicaProvider::Open(const ActorId& id_ref) {
  const ActorId id = id_ref;
  std::shared_ptr<bool> alive = alive_;
  const MonoTime started = deps_.env.MonoNow();
  // A replica of this actor still closing: its hold sleeps (or is released) once it closed.
  if (closing_.count(id) > 0) {
    co_await WaitClosed(id, close_limit_ + kReleaseTries);
    if (!*alive) co_return Cancelled("storage provider gone");
  }
  // 1. The sleeping hold, woken: the same hold, no acquisition (docs/node-lease.md,
  // "Sleeping holds").
  auto woken = co_await holds_.Wake(id);
  if (!*alive) co_return Cancelled("storage provider gone");
  if (woken) {
    const Generation generation = woken->first.generation;
    auto opened = co_await OpenUnder(id, std::move(woken->first), woken->second, started);
    if (!*alive) co_return Cancelled("storage provider gone");
    if (opened.ok() || opened.code() != Code::kPreconditionFailed) co_return opened;
    // The log does not end where the hold slept: never continue an uncertain log; a new
    // hold (generation + 1) restores whatever is there, as after a failure.
    WK_LOG_WARN("a woken hold's log is not as it slept; taking a new hold",
                {{"actor", id.ToString()}, {"generation", std::to_string(generation.value)},
                 {"error", opened.status().ToString()}});
    co_await holds_.Release(id, generation);
    if (!*alive) co_return Cancelled("storage provider gone");
  }
  // 2. A hold acquired (or the one this node has).
  auto hold = co_await holds_.Acquire(id);
  if (!*alive) co_return Cancelled("storage provider gone");
  auto used = [this, &id](Generation g) {
    auto it = last_generation_.find(id);
    return it != last_generation_.end() && g <= it->second;
  };
  if (hold.ok() && used(hold->generation)) {
    // This generation already served a replica (its log keys are taken) and does not sleep
    // (it failed, or its close could not keep it): a new hold.
    const Generation stale = hold->generation;
    co_await holds_.Release(id, stale);
    if (!*alive) co_return Cancelled("storage provider gone");
    hold = co_await holds_.Acquire(id);
    if (!*alive) co_return Cancelled("storage provider gone");
    if (hold.ok() && used(hold->generation)) {
      co_return Retryable("the hold of " + id.ToString() + " at generation " + std::to_string(hold->generation.value) +
                          " is still being released");
    }
  }
  if (!hold.ok()) co_return hold.status();
  co_return co_await OpenUnder(id, std::move(*hold), std::nullopt, started);
}

Task<Result<std::unique_ptr<actor::ActorStorage>>> ReplicaProvider::OpenUnder(ActorId id, Replica::Hold hold,
                                                                             std::optional<HoldResume> resume,
                                                                             MonoTime started) {
  std::shared_ptr<bool> alive = alive_;
  const Generation generation = hold.generation;
  last_generation_[id] = generation;
  Replica::Deps deps = DepsFor(id);
  const MonoTime acquired = deps_.env.MonoNow();
  auto replica = co_await Replica::Open(std::move(deps), id, std::move(hold), options_, resume);
  if (!*alive) co_return Cancelled("storage provider gone");
  if (replica.ok() && log::Enabled(log::Level::kDebug)) {
    // Where a wake's time goes (the soak splits "writable again" with it: docs/benchmarks.md).
    const auto ms = [](Duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
    WK_LOG_DEBUG("actor opened", {{"actor", id.ToString()}, {"generation", std::to_string(generation.value)},
                                  {"woken", resume ? "yes" : "no"},
                                  {"acquire_ms", ms(acquired - started)}, {"restore_ms", ms(deps_.env.MonoNow() - acquired)}});
  }
  if (!replica.ok()) {
    if (replica.code() == Code::kPreconditionFailed && resume) co_return replica.status();  // Open decides
    WK_LOG_WARN("restore failed", {{"actor", id.ToString()}, {"generation", std::to_string(generation.value)},
                                   {"error", replica.status().ToString()}});
    co_await holds_.Release(id, generation);
    co_return replica.status();
  }
  Replica* raw = replica->get();
  open_[id] = raw;
  (*replica)->set_on_failed([this, alive, id, generation](Status) {
    if (!*alive) return;
    // Abandon the hold: nothing of this replica will be acknowledged any more.
    deps_.env.Spawn(ReleaseLater(alive, &holds_, id, generation), "abandon hold");
  });
  std::unique_ptr<actor::ActorStorage> storage = std::move(*replica);
  co_return storage;
}

Replica::Deps ReplicaProvider::DepsFor(const ActorId& id) {
  if (tenant_stores_ == nullptr) return deps_;
  // Every field of deps_ but the store (a reference: Deps cannot be copied and rebound).
  return Replica::Deps{.env = deps_.env,
                       .store = tenant_stores_->Of(id),
                       .post = deps_.post,
                       .totals = deps_.totals,
                       .broken = deps_.broken,
                       .alarms = deps_.alarms,
                       .alarms_alive = deps_.alarms_alive};
}

Task<Result<std::unique_ptr<Replica>>> ReplicaProvider::OpenOwned(ActorId id, Replica::Hold hold) {
  Replica::Deps deps = deps_;
  co_return co_await Replica::Open(std::move(deps), std::move(id), std::move(hold), options_);
}

void ReplicaProvider::Close(const ActorId& id, std::unique_ptr<actor::ActorStorage> storage, actor::CloseIntent intent) {
  std::unique_ptr<Replica> replica(static_cast<Replica*>(storage.release()));
  auto it = open_.find(id);
  if (it != open_.end() && it->second == replica.get()) open_.erase(it);
  closing_[id];  // Opens of id wait for this close
  deps_.env.Spawn(CloseLater(alive_, this, id, std::move(replica), close_limit_, intent), "replica close");
}

Task<void> ReplicaProvider::WaitClosed(ActorId id, Duration limit) {
  Latch<bool> done(deps_.env, [] { return false; });
  closing_[id].push_back(done);
  const auto timer = deps_.env.StartTimer(deps_.env.MonoNow() + limit, [done] { done.Set(false); });
  (void)co_await done.Wait();
  deps_.env.CancelTimer(timer);
}

Task<void> ReplicaProvider::CloseLater(std::shared_ptr<bool> alive, ReplicaProvider* self, ActorId id,
                                       std::unique_ptr<Replica> replica, Duration limit, actor::CloseIntent intent) {
  const Generation generation = replica->generation();
  Status s = co_await replica->Close(limit);
  if (!*alive) co_return;
  if (!s.ok()) {
    WK_LOG_WARN("replica closed with writes not durable", {{"actor", id.ToString()}, {"error", s.ToString()}});
  }
  // Durable and unbroken: where a next replica of this hold would continue.
  const bool clean = s.ok() && replica->failure().ok();
  const HoldResume resume = replica->resume_point();
  replica.reset();
  // Kept asleep only if the actor merely left memory and its hold is still this node's,
  // valid, with every write durable; otherwise the hold goes.
  const bool kept = clean && intent == actor::CloseIntent::kKeepHold && self->holds_.Sleep(id, generation, resume);
  if (!kept) {
    co_await self->holds_.Release(id, generation);
    if (!*alive) co_return;
  }
  // Either way this generation need not be remembered: a released hold's next acquisition
  // writes a higher one, and a sleeping hold is woken, never reused as a new one (Open wakes
  // before it acquires). The map stays as small as what is open.
  if (auto it = self->last_generation_.find(id); it != self->last_generation_.end() && it->second == generation &&
      self->open_.count(id) == 0) {
    self->last_generation_.erase(it);
  }
  // Opens waiting for this close go on (a second close of id meanwhile keeps its own entry).
  if (auto c = self->closing_.find(id); c != self->closing_.end()) {
    std::vector<Latch<bool>> waiters = std::move(c->second);
    self->closing_.erase(c);
    for (auto& w : waiters) w.Set(true);
  }
}

Task<void> ReplicaProvider::ReleaseLater(std::shared_ptr<bool> alive, HoldSource* holds, ActorId id,
                                         Generation generation) {
  if (*alive) co_await holds->Release(id, generation);
}

void ReplicaProvider::Cut(const ActorId& id, std::string why) {
  auto it = open_.find(id);
  if (it != open_.end()) it->second->Cut(std::move(why));
}

Task<Result<Replica::Hold>> OwnersHoldSource::Acquire(ActorId actor) {
  AcquireResult r = co_await owners_.Acquire(actor);
  switch (r.kind) {
    case AcquireResult::Kind::kAcquired: {
      HoldView view = r.hold;
      co_return Replica::Hold{view.generation(), [view] { return view.IsValid(); }};
    }
    case AcquireResult::Kind::kHeldElsewhere:
      co_return PreconditionFailed(actor.ToString() + " is held by " +
                                   (r.owner.node_id.empty() ? std::string("another node") : r.owner.node_id.str()));
    case AcquireResult::Kind::kNotValid:
    case AcquireResult::Kind::kUnknown:
      co_return Retryable("cannot acquire " + actor.ToString() + ": " + r.why);
    case AcquireResult::Kind::kError:
      break;
  }
  co_return Retryable("cannot acquire " + actor.ToString() + ": " + r.why);
}

bool OwnersHoldSource::Sleep(const ActorId& actor, Generation generation, HoldResume resume) {
  return owners_.Sleep(actor, generation, resume);
}

Task<std::optional<std::pair<Replica::Hold, HoldResume>>> OwnersHoldSource::Wake(ActorId actor) {
  auto woken = owners_.Wake(actor);
  if (!woken) co_return std::nullopt;
  HoldView view = woken->first;
  co_return std::make_pair(Replica::Hold{view.generation(), [view] { return view.IsValid(); }}, woken->second);
}

Task<void> OwnersHoldSource::Release(ActorId actor, Generation generation) {
  // Only this generation's hold, checked under the actor's lock: a later hold acquired while
  // the release waited for the lock is not ours to end.
  Status s = co_await owners_.Release(actor, generation);
  // A release that could not land is pending: the background task finishes it.
  s.IgnoreError();
}

const Replica* ReplicaProvider::Find(const ActorId& id) const {
  auto it = open_.find(id);
  return it == open_.end() ? nullptr : it->second;
}

std::vector<ActorId> ReplicaProvider::OpenActors() const {
  std::vector<ActorId> out;
  out.reserve(open_.size());
  for (const auto& [id, replica] : open_) out.push_back(id);
  return out;
}

}  // namespace wk::replica
