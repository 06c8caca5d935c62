#include "cluster/cluster_node.h"

namespace wk {

ClusterNode::ClusterNode(Env& env, ObjectStore& store, NodeIdentity identity, LeaseTiming timing,
                         InstanceToken instance)
    : env_(env),
      lease_(env, store, std::move(identity), timing, std::move(instance)),
      membership_(env, store, timing),
      fence_watch_(env, store, lease_, timing),
      owners_(env, store, lease_, membership_, timing),
      hand_overs_(env, owners_, membership_, lease_.identity().node_id, timing),
      drain_control_(env, store, owners_, hand_overs_, lease_.identity().node_id, timing),
      move_control_(env, store, owners_, hand_overs_, membership_, lease_.identity().node_id, timing) {
  membership_.AddListener([this](const Membership::View& view) { fence_watch_.OnListing(view); });
  // Every listing, valid lease or not: the first check lets the node take actors.
  membership_.AddListener([this](const Membership::View&) { drain_control_.OnListing(lease_.IsValid()); });
  membership_.AddListener([this](const Membership::View&) {
    if (lease_.IsValid()) move_control_.OnListing();
  });
  NodeLease::Observer holds;
  holds.on_lapse = [this](std::uint64_t) { owners_.OnLapse(); };
  holds.on_lost = [this](const std::string&) { owners_.OnLost(); };
  lease_.AddObserver(std::move(holds));
}

void ClusterNode::set_broken_models(BrokenModels broken) {
  broken_ = broken;
  lease_.set_broken_models(broken);
  membership_.set_broken_models(broken);
  fence_watch_.set_broken_models(broken);
  owners_.set_broken_models(broken);
  hand_overs_.set_broken_models(broken);
  drain_control_.set_broken_models(broken);
  move_control_.set_broken_models(broken);
}

Task<LeaseEnd> ClusterNode::Run() {
  drain_control_.Start();
  // The listing runs on a task of its own so a slow listing never delays a lease write.
  StartHelpers();
  LeaseEnd end = co_await lease_.Run();
  listing_.Cancel();
  owners_.StopBackground();
  co_return end;
}

void ClusterNode::StartHelpers() {
  // Spawned from a plain function, not from inside the coroutine: GCC 12 miscompiled a
  // second Spawn(temporary Task, temporary string) in one coroutine body (the spawned
  // frame was garbage at its first resume).
  listing_ = env_.Spawn(membership_.Run(), "listing");
  owners_.StartBackground();
}

Task<Status> ClusterNode::Stop(Duration limit) {
  const MonoTime deadline = env_.MonoNow() + limit;
  // Releases still pending after half the limit are freed by the released write itself
  // (docs/node-lease.md, "Clean stop"), so the drain's own outcome does not decide the stop's.
  if (!broken_.on(BrokenModel::kStopSkipsReleases)) (void)co_await owners_.Drain(limit / 2);
  co_return co_await lease_.Stop(deadline - env_.MonoNow());
}

}  // namespace wk
