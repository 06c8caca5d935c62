#include "cluster/testing.h"

namespace wk::cluster_testing {

SimHost::SimHost(SimWorld& world, std::shared_ptr<MemBucket> bucket, HostOptions options)
    : env_(world, FromUnixMs(options.origin_ms), options.skew),
      store_(env_, std::move(bucket), std::move(options.fault), options.transit) {}

NodeIdentity TestIdentity(NodeId node_id, std::string build) {
  return NodeIdentity{std::move(node_id), "127.0.0.1:1", std::move(build), ""};
}

SimLeaseNode::SimLeaseNode(SimWorld& world, std::shared_ptr<MemBucket> bucket, NodeId id, InstanceToken instance,
                           Duration skew, LeaseTiming timing)
    : host_(world, std::move(bucket), HostOptions{.skew = skew}),
      env(host_.env()),
      store(host_.store()),
      lease(env, store, TestIdentity(std::move(id)), timing, std::move(instance)) {}

void SimLeaseNode::Start() {
  run = env.Spawn([](SimLeaseNode* n) -> Task<void> { n->end = co_await n->lease.Run(); }(this), "lease");
}

SimNode::SimNode(SimWorld& world, std::shared_ptr<MemBucket> bucket, NodeId id, InstanceToken instance,
                 std::string build, LeaseTiming timing, bool start)
    : host_(world, std::move(bucket)),
      env(host_.env()),
      store(host_.store()),
      node(env, store, TestIdentity(std::move(id), std::move(build)), timing, std::move(instance)) {
  if (start) Start();
}

void SimNode::Start() {
  run = env.Spawn([](SimNode* n) -> Task<void> { n->end = co_await n->node.Run(); }(this), "node");
}

}  // namespace wk::cluster_testing
