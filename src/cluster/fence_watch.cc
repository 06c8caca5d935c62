#include "cluster/fence_watch.h"

#include "base/log.h"

namespace wk {

FenceWatch::FenceWatch(Env& env, ObjectStore& store, const NodeLease& self, LeaseTiming timing)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kFence)), self_(self), timing_(timing) {}

void FenceWatch::OnListing(const Membership::View& view) {
  if (!self_.IsValid()) return;  // only a node with a valid lease judges others
  const MonoTime now = env_.MonoNow();
  const WallTime wall = env_.WallNow();
  const MonoTime judged_from = *self_.valid_since();
  for (const auto& [id, v] : view) {
    // Only a body read at the version listed: after renewals the listing took for such
    // (Membership), written_at is older than the object's; the listing reads it before the
    // watch can be due.
    if (id == self_.identity().node_id || !v.live() || !v.body_current) continue;
    if (in_flight_.count(id)) continue;
    if (static_cast<int>(in_flight_.size()) >= kFenceConcurrency &&
        !broken_.on(BrokenModel::kUnboundedFenceConcurrency)) {
      continue;  // the next listing tries again
    }
    if (!broken_.on(BrokenModel::kNoWatchWait)) {
      const MonoTime watch_start = std::max(v.unchanged_since, judged_from);
      if (now - watch_start < timing_.fence_watch()) continue;
    }
    // The time bound (checked again on the deciding read): not before written_at + ttl +
    // grace on our clock.
    if (wall < v.record->written_at + timing_.takeover_after()) continue;
    in_flight_.insert(id);
    stats_.max_in_flight = std::max<std::uint64_t>(stats_.max_in_flight, in_flight_.size());
    env_.Spawn(Fence(id, v.record->instance, v.record->written_at, self_.epoch()), "fence " + id.str());
  }
}

Task<void> FenceWatch::Fence(NodeId node_id, InstanceToken instance, WallTime written_at, std::uint64_t epoch) {
  const std::string key = NodeKey(node_id);
  const CallOptions call{timing_.attempt_timeout()};
  auto got = co_await store_.Get(key, call);
  auto done = [&] { in_flight_.erase(node_id); };
  if (!got.ok()) {
    ++stats_.fence_errors;
    done();
    co_return;
  }
  auto obj = DecodeNodeObject(got->body);
  const NodeRecord* r = obj.ok() ? std::get_if<NodeRecord>(&*obj) : nullptr;
  // Decide on this read alone.
  if (r == nullptr || r->state != LeaseState::kLive || r->instance != instance ||
      r->written_at != written_at) {
    ++stats_.decided_alive;
    done();
    co_return;
  }
  // Our watch counts only within one validity epoch: a lapse of our own since the decision
  // voids it (the ADR counts from our first acknowledged write after any lapse).
  if (env_.WallNow() < r->written_at + timing_.takeover_after() || !self_.IsValid() || self_.epoch() != epoch) {
    done();
    co_return;
  }
  NodeRecord fence = *r;
  fence.state = LeaseState::kFenced;  // instance and written_at kept
  Precondition condition = broken_.on(BrokenModel::kUnconditionalFence) ? Precondition::None()
                                                        : Precondition::IfMatch(got->version);
  auto put = co_await store_.Put(key, EncodeNodeRecord(fence), condition, call);
  if (put.ok()) {
    ++stats_.fences_written;
    WK_LOG_WARN("fenced a node whose lease ran out",
                {{"node", node_id.str()}, {"instance", instance.str()}, {"written_at", std::to_string(ToUnixMs(written_at))}});
    if (on_fence_) on_fence_(node_id, instance, written_at);
  } else if (put.code() == Code::kPreconditionFailed) {
    ++stats_.fences_refused;  // it wrote in between: alive
  } else {
    ++stats_.fence_errors;  // unknown: the next listing shows whether it landed
  }
  done();
}

}  // namespace wk
