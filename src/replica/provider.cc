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
  auto hold = co_await holds_.Acquire(id);
  if (!*alive) co_return Cancelled("storage provider gone");
  auto used = [this, &id](Generation g) {
    auto it = last_generation_.find(id);
    return it != last_generation_.end() && g <= it->second;
  };
  if (hold.ok() && used(hold->generation)) {
    // This generation already served a replica (its log keys are taken): a new hold.
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
  if (!*alive) co_return Cancelled("storage provider gone");
  const Generation generation = hold->generation;
  last_generation_[id] = generation;
  Replica::Deps deps = deps_;
  const MonoTime acquired = deps_.env.MonoNow();
  auto replica = co_await Replica::Open(std::move(deps), id, std::move(*hold), options_);
  if (!*alive) co_return Cancelled("storage provider gone");
  if (replica.ok() && log::Enabled(log::Level::kDebug)) {
    // Where a wake's time goes (the soak splits "writable again" with it: docs/benchmarks.md).
    const auto ms = [](Duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
    WK_LOG_DEBUG("actor opened", {{"actor", id.ToString()}, {"generation", std::to_string(generation.value)},
                                  {"acquire_ms", ms(acquired - started)}, {"restore_ms", ms(deps_.env.MonoNow() - acquired)}});
  }
  if (!replica.ok()) {
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

void ReplicaProvider::Close(const ActorId& id, std::unique_ptr<actor::ActorStorage> storage) {
  std::unique_ptr<Replica> replica(static_cast<Replica*>(storage.release()));
  auto it = open_.find(id);
  if (it != open_.end() && it->second == replica.get()) open_.erase(it);
  deps_.env.Spawn(CloseLater(alive_, this, id, std::move(replica), close_limit_), "replica close");
}

Task<void> ReplicaProvider::CloseLater(std::shared_ptr<bool> alive, ReplicaProvider* self, ActorId id,
                                       std::unique_ptr<Replica> replica, Duration limit) {
  const Generation generation = replica->generation();
  Status s = co_await replica->Close(limit);
  if (!*alive) co_return;
  if (!s.ok()) {
    WK_LOG_WARN("replica closed with writes not durable", {{"actor", id.ToString()}, {"error", s.ToString()}});
  }
  replica.reset();
  // Durable (or failed, and its hold already abandoned): the hold can go.
  co_await self->holds_.Release(id, generation);
  if (!*alive) co_return;
  // The hold is gone: the next acquisition writes a higher generation.
  if (auto it = self->last_generation_.find(id); it != self->last_generation_.end() && it->second == generation &&
      self->open_.count(id) == 0) {
    self->last_generation_.erase(it);
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
