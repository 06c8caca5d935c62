#include "cluster/testing/harness.h"

#include "base/check.h"

namespace wk::cluster_testing {

SimHost::SimHost(SimWorld& world, std::shared_ptr<MemBucket> bucket, HostOptions options)
    : env_(world, FromUnixMs(options.origin_ms), options.skew),
      store_(env_, std::move(bucket), std::move(options.fault), options.transit) {}

BrokenModels TestBrokenModels() {
  auto broken = BrokenModels::FromEnvironment();
  WK_CHECK(broken.ok(), broken.status().message());
  return *broken;
}

NodeIdentity TestIdentity(NodeId node_id, std::string build) {
  return NodeIdentity{std::move(node_id), "127.0.0.1:1", std::move(build), ""};
}

SimProcess::SimProcess(SimWorld& world, std::shared_ptr<MemBucket> bucket, HostOptions options)
    : host_(world, std::move(bucket), std::move(options)), env(host_.env()), store(host_.store()) {}

void SimProcess::Spawn(Task<LeaseEnd> task, std::string name) {
  // The task by value into the coroutine's frame (docs/DEVELOPING.md, "Coroutines").
  run = env.Spawn([](SimProcess* p, Task<LeaseEnd> t) -> Task<void> { p->end = co_await t; }(this, std::move(task)),
                  std::move(name));
}

SimLeaseNode::SimLeaseNode(SimWorld& world, std::shared_ptr<MemBucket> bucket, NodeId id, InstanceToken instance,
                           Duration skew, LeaseTiming timing)
    : SimProcess(world, std::move(bucket), HostOptions{.skew = skew}),
      lease(env, store, TestIdentity(std::move(id)), timing, std::move(instance)) {
  lease.set_broken_models(TestBrokenModels());
  // The lease's own tests count its writes and times exactly: without the bucket check and
  // the start guard, which the ClusterNodes of SimNode run (start_guard_test.cc tests them).
  lease.set_start_steps({.bucket_check = false, .start_guard = false});
}

SimNode::SimNode(SimWorld& world, std::shared_ptr<MemBucket> bucket, NodeId id, InstanceToken instance,
                 std::string build, LeaseTiming timing, bool start)
    : SimProcess(world, std::move(bucket), HostOptions{}),
      node(env, store, TestIdentity(std::move(id), std::move(build)), timing, std::move(instance)) {
  node.set_broken_models(TestBrokenModels());
  if (start) Start();
}

}  // namespace wk::cluster_testing
