#include "cluster/cluster_node.h"

namespace wk {

ClusterNode::ClusterNode(Env& env, ObjectStore& store, NodeIdentity identity, LeaseTiming timing,
                         std::string instance)
    : env_(env),
      lease_(env, store, std::move(identity), timing, std::move(instance)),
      membership_(env, store, timing),
      fence_watch_(env, store, lease_, timing) {
  membership_.AddListener([this](const std::map<std::string, NodeView>& view) { fence_watch_.OnListing(view); });
}

Task<LeaseEnd> ClusterNode::Run() {
  // The listing runs on a task of its own so a slow listing never delays a lease write.
  TaskHandle listing = env_.Spawn(membership_.Run(), "listing");
  LeaseEnd end = co_await lease_.Run();
  listing.Cancel();
  co_return end;
}

Task<Status> ClusterNode::Stop(Duration limit) { co_return co_await lease_.Stop(limit); }

}  // namespace wk
