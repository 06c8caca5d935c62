#include "cluster/hand_over.h"

#include <algorithm>
#include <deque>

#include "base/log.h"

namespace wk {
namespace {

constexpr Duration kDrainPoll = std::chrono::milliseconds(250);

// FNV-1a over the node id, a separator and the actor: the rendezvous score (DrainTarget).
std::uint64_t Score(const NodeId& node, const ActorId& actor) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::string_view s) {
    for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  };
  mix(node.str());
  mix(std::string_view("\0", 1));
  mix(actor.ToString());
  // One more round of mixing: FNV's low bits alone spread short keys poorly.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

std::string_view HandOverKindName(HandOverResult::Kind kind) {
  switch (kind) {
    case HandOverResult::Kind::kMoved: return "moved";
    case HandOverResult::Kind::kReleased: return "released";
    case HandOverResult::Kind::kPending: return "pending";
    case HandOverResult::Kind::kNotHeld: return "not-held";
  }
  return "?";
}

HandOvers::HandOvers(Env& env, Owners& owners, const Membership& membership, NodeId self, LeaseTiming timing)
    : env_(env), owners_(owners), membership_(membership), self_(std::move(self)), timing_(timing) {
  owners_.set_on_hold_ended([this](const HoldEnded& ended) { OnHoldEnded(ended); });
}

HandOvers::~HandOvers() {
  *alive_ = false;
  owners_.set_on_hold_ended(nullptr);
}

void HandOvers::OnHoldEnded(const HoldEnded& ended) {
  auto it = entries_.find(ended.actor);
  if (it == entries_.end() || it->second.end || it->second.generation != ended.generation) return;
  it->second.end = ended;
  for (Latch<bool>& l : it->second.end_waiters) l.Set(true);
  it->second.end_waiters.clear();
}

std::optional<HoldEnded> HandOvers::EndOf(const ActorId& actor) const {
  auto it = entries_.find(actor);
  if (it == entries_.end()) return std::nullopt;
  return it->second.end;
}

Task<void> HandOvers::WaitEnd(ActorId actor, MonoTime until) {
  auto it = entries_.find(actor);
  if (it == entries_.end() || it->second.end || env_.MonoNow() >= until) co_return;
  Latch<bool> done(env_, [] { return false; });
  it->second.end_waiters.push_back(done);
  const Env::TimerId timer = env_.StartTimer(until, [done] { done.Set(false); });
  std::shared_ptr<bool> alive = alive_;
  (void)co_await done.Wait();
  if (*alive) env_.CancelTimer(timer);
}

Task<void> HandOvers::WaitLeft(ActorId actor, Duration limit) {
  auto it = entries_.find(actor);
  if (it == entries_.end()) co_return;
  ++stats_.waited;
  Latch<bool> left(env_, [] { return false; });
  it->second.waiters.push_back(left);
  const Env::TimerId timer = env_.StartTimer(env_.MonoNow() + limit, [left] { left.Set(false); });
  std::shared_ptr<bool> alive = alive_;
  (void)co_await left.Wait();
  if (*alive) env_.CancelTimer(timer);
}

void HandOvers::Finish(const ActorId& actor) {
  auto it = entries_.find(actor);
  if (it == entries_.end()) return;
  std::vector<Latch<bool>> waiters = std::move(it->second.waiters);
  std::vector<Latch<bool>> end_waiters = std::move(it->second.end_waiters);
  entries_.erase(it);
  owners_.SetLeaving(actor, false);
  for (Latch<bool>& l : end_waiters) l.Set(false);
  for (Latch<bool>& l : waiters) l.Set(true);
}

Task<HandOverResult> HandOvers::HandOver(ActorId actor, std::optional<NodeId> to, Duration limit) {
  HandOverResult result;
  if (Leaving(actor)) {
    co_await WaitLeft(actor, limit);
    result.detail = "already being handed over";
    co_return result;
  }
  std::shared_ptr<bool> alive = alive_;
  const MonoTime deadline = env_.MonoNow() + limit;
  const HoldView hold = owners_.Find(actor);
  // 1. Leaving: no new event starts on it here from now on.
  Entry& entry = entries_[actor];
  entry.to = to;
  entry.generation = hold.generation();
  owners_.SetLeaving(actor, true);
  ++stats_.started;
  const bool resident_only = !hold.IsValid();
  if (resident_only) {
    // Not held (or its hold ended already: a pending release goes on by itself). A
    // resident actor whose hold ended is closed anyway, so it does not come back here.
    if (host_.unload) (void)host_.unload(actor);
    Finish(actor);
    result.detail = hold.empty() ? "this node does not hold it" : "its hold already ended (a release may be pending)";
    co_return result;
  }
  const Generation generation = hold.generation();
  if (to && host_.take && broken_.on(BrokenModel::kMoveAcquiresBeforeReleaseLands)) {
    // Broken model: the target is told at once, with the record as this hold's acquisition
    // left it, while this node still acts for the actor.
    NodeId target = *to;
    Version acquired = hold.version();
    ActorId taken = actor;
    Status early = co_await host_.take(std::move(target), std::move(taken), std::move(acquired), generation);
    if (!*alive) co_return result;
    (void)early;
  }

  // 2. Close, the way hibernation does; cut at the limit.
  const bool under_actors = broken_.on(BrokenModel::kDrainReleasesUnderActors);
  const bool resident = !under_actors && host_.unload && host_.unload(actor);
  if (resident) {
    const MonoTime cut_at = std::max(env_.MonoNow(), deadline - kReleaseTries);
    co_await WaitEnd(actor, cut_at);
    if (!*alive) co_return result;
  }
  if (!EndOf(actor)) {
    if (resident) {
      ++stats_.cut;
      WK_LOG_WARN("hand-over: the actor did not close in time; its hold is released under it",
                  {{"node", self_.str()}, {"actor", actor.ToString()}});
    }
    // Owners::Release reports the hold's end before it returns, if it still had the hold.
    (void)co_await owners_.Release(actor);
    if (!*alive) co_return result;
    // Otherwise a release was already under way (the close's): its end is reported when
    // its write returns, within one attempt.
    if (!EndOf(actor)) co_await WaitEnd(actor, env_.MonoNow() + kReleaseTries + timing_.attempt_timeout());
    if (!*alive) co_return result;
  } else {
    ++stats_.closed;
  }

  // 3. How the hold ended; 4. the target takes it, only once the release landed.
  const std::optional<HoldEnded> end = EndOf(actor);
  if (!end) {
    ++stats_.pending;
    result.kind = HandOverResult::Kind::kPending;
    result.detail = "the hold's end was not observed in time: the release is pending";
  } else if (end->how == HoldEnd::kReleased) {
    result.kind = HandOverResult::Kind::kReleased;
    if (to && host_.take && !broken_.on(BrokenModel::kMoveAcquiresBeforeReleaseLands)) {
      NodeId target = *to;
      Version released = end->version;
      ActorId taken = actor;
      Status took = co_await host_.take(std::move(target), std::move(taken), std::move(released), end->generation);
      if (!*alive) co_return result;
      if (!took.ok() && !broken_.on(BrokenModel::kMoveOutcomeUnchecked)) {
        // The answer may be lost after the target's take landed: the record says who holds
        // the actor now, so the outcome reported is what happened, not what was heard.
        auto holder = co_await owners_.OtherOwner(actor);
        if (!*alive) co_return result;
        if (holder.ok() && holder->has_value() && (*holder)->node_id == *to) {
          result.detail = " (its answer was lost: " + took.ToString() + ")";
          took = Status::Ok();
        } else if (!holder.ok()) {
          result.detail = "released; whether " + to->str() + " took it is unknown (the owner record could not be read: " +
                          holder.status().ToString() + "); its answer: " + took.ToString();
          Finish(actor);
          co_return result;
        }
      }
      if (took.ok()) {
        ++stats_.moved;
        result.kind = HandOverResult::Kind::kMoved;
        result.detail = "taken by " + to->str() + result.detail;
      } else {
        result.detail = "released; " + to->str() + " did not take it: " + took.ToString();
      }
    }
  } else {
    ++stats_.pending;
    result.kind = HandOverResult::Kind::kPending;
    result.detail = end->how == HoldEnd::kDropped ? "the node lease was lost: the fence frees it"
                                                  : "the release is pending (it lands later, or the stop or a fence frees it)";
  }
  // 5. Requests held meanwhile are routed again.
  Finish(actor);
  co_return result;
}

Task<void> HandOvers::DrainWorker(std::shared_ptr<std::deque<ActorId>> queue, MonoTime deadline) {
  std::shared_ptr<bool> alive = alive_;
  while (!queue->empty() && env_.MonoNow() < deadline) {
    ActorId actor = std::move(queue->front());
    queue->pop_front();
    HandOverResult r = co_await HandOver(std::move(actor), std::nullopt, kHandOverLimit);
    if (!*alive) co_return;
    (void)r;
  }
}

Task<Status> HandOvers::Drain(Duration limit) {
  owners_.SetAccepting(false);
  std::shared_ptr<bool> alive = alive_;
  const MonoTime deadline = env_.MonoNow() + limit;
  // Drained only while the node lease is valid: a lost lease drops holds and pending
  // releases without writing anything (the fence frees those records later), so empty sets
  // then prove nothing about the records.
  auto drained = [this] {
    if (broken_.on(BrokenModel::kDrainIgnoresPending)) return owners_.holds() == 0;
    return owners_.lease_valid() && owners_.holds() == 0 && entries_.empty() && owners_.pending() == 0 &&
           owners_.locks_in_use() == 0;
  };
  while (env_.MonoNow() < deadline && owners_.lease_valid()) {
    // Holds can still appear from acquisitions that were past their checks when the
    // drain began: hand over until none is left.
    auto queue = std::make_shared<std::deque<ActorId>>();
    for (ActorId& a : owners_.HeldActors()) {
      if (!Leaving(a)) queue->push_back(std::move(a));
    }
    // Tenants' actors in memory first, then sleeping holds (one release write each: docs/
    // node-lease.md, "Sleeping holds"), system actors (alarm shards) last: clients wait for
    // an active actor at its next owner, a sleeping one is idle, and a shard's release only
    // delays the scan of its alarms (docs/alarms.md); the workers take the queue in order.
    auto rank = [this](const ActorId& a) { return IsSystemActor(a) ? 2 : owners_.IsSleeping(a) ? 1 : 0; };
    std::stable_sort(queue->begin(), queue->end(), [&rank](const ActorId& a, const ActorId& b) { return rank(a) < rank(b); });
    if (!queue->empty()) {
      std::vector<TaskHandle> workers;
      const std::size_t n = std::min<std::size_t>(kHandOverConcurrency, queue->size());
      for (std::size_t i = 0; i < n; ++i) workers.push_back(env_.Spawn(DrainWorker(queue, deadline), "drain hand-over"));
      bool cancelled = false;
      for (TaskHandle& w : workers) {
        if (!co_await w.Join()) cancelled = true;
      }
      if (cancelled) {
        for (TaskHandle& w : workers) w.Cancel();
        co_return Cancelled("drain cancelled");
      }
      if (!*alive) co_return Cancelled("drain cancelled");
    }
    if (drained()) co_return Status::Ok();
    if (env_.MonoNow() >= deadline) break;
    if (!co_await env_.SleepFor(std::min<Duration>(kDrainPoll, deadline - env_.MonoNow()))) break;
  }
  if (drained()) co_return Status::Ok();
  co_return UnknownOutcome(std::to_string(owners_.holds() + owners_.pending() + entries_.size()) +
                           " holds, hand-overs or releases still pending");
}

std::optional<NodeId> HandOvers::ForwardTarget(const ActorId& actor) const {
  auto it = entries_.find(actor);
  if (it != entries_.end() && it->second.to) return it->second.to;
  if (!owners_.accepting()) return DrainTarget(actor);
  return std::nullopt;
}

std::optional<NodeId> HandOvers::DrainTarget(const ActorId& actor) const {
  std::optional<NodeId> best;
  std::uint64_t best_score = 0;
  for (const auto& [id, view] : membership_.view()) {
    if (id == self_ || !view.live() || view.record->address.empty() || draining_peers_.count(id)) continue;
    const std::uint64_t s = Score(id, actor);
    if (!best || s > best_score) {
      best = id;
      best_score = s;
    }
  }
  return best;
}

}  // namespace wk
