// The test harness for "a simulated world, a bucket and nodes", shared by the cluster and
// replica unit tests and the deterministic simulator (sim/world.h). Test-only library
// wk_cluster_testing: nothing real, only SimWorld/SimEnv, MemBucket/MemStore and the
// cluster code under test. SimLeaseNode and SimNode switch on the broken models
// WASMKEEP_BROKEN_MODELS names, so scripts/check-proofs.sh can run a unit test with one
// rule removed. Each holds its Env, store and node by value: the node's frames die with
// the Env (a kill). A SimHost's Env draws its seed from the world when it is built, so
// building hosts in the same order gives the same run.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cluster/cluster_node.h"
#include "cluster/node_lease.h"
#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk::cluster_testing {

// Every simulated wall clock starts here (2025-11-24), plus its skew.
inline constexpr std::int64_t kSimOriginMs = 1'764'000'000'000;

struct HostOptions {
  Duration skew{0};            // this host's wall clock ahead (+) or behind (-) true time
  FaultHook fault;             // the fault plan of each request; none: every call succeeds
  Env* transit = nullptr;      // times requests in flight (the bucket's clock; see MemStore)
  std::int64_t origin_ms = kSimOriginMs;
};

// One machine: its Env on the world (wall clock at kSimOriginMs plus a skew) and its
// MemStore view of the shared bucket (faults optional).
class SimHost {
 public:
  SimHost(SimWorld& world, std::shared_ptr<MemBucket> bucket, HostOptions options = {});
  SimEnv& env() { return env_; }
  MemStore& store() { return store_; }

 private:
  SimEnv env_;
  MemStore store_;
};

// The switches WASMKEEP_BROKEN_MODELS names (base/broken_models.h); none when unset. An
// unknown name stops the test binary with the reason.
BrokenModels TestBrokenModels();

// The identity the unit tests give a node named `node_id`.
NodeIdentity TestIdentity(NodeId node_id, std::string build = "test");

// What SimLeaseNode and SimNode share: their SimHost (as `env` and `store`) and the run of
// their Run task, whose LeaseEnd lands in `end`.
class SimProcess {
 protected:
  SimProcess(SimWorld& world, std::shared_ptr<MemBucket> bucket, HostOptions options);
  // Spawns task (a NodeLease's or a ClusterNode's Run) as `name`; `run` is its handle.
  void Spawn(Task<LeaseEnd> task, std::string name);

 private:
  SimHost host_;

 public:
  SimEnv& env;
  MemStore& store;
  TaskHandle run;
  std::optional<LeaseEnd> end;
};

// A lone NodeLease on its own SimHost, without the bucket check and the start guard
// (NodeLease::StartSteps), so its writes can be counted exactly.
class SimLeaseNode : public SimProcess {
 public:
  SimLeaseNode(SimWorld& world, std::shared_ptr<MemBucket> bucket, NodeId id, InstanceToken instance,
               Duration skew = Duration(0), LeaseTiming timing = {});
  // Spawns the lease's Run; `end` gets its LeaseEnd.
  void Start() { Spawn(lease.Run(), "lease"); }

  NodeLease lease;
};

// A ClusterNode (lease, listing, fence watch, owners) on its own SimHost.
class SimNode : public SimProcess {
 public:
  // Started at once unless start is false.
  SimNode(SimWorld& world, std::shared_ptr<MemBucket> bucket, NodeId id, InstanceToken instance,
          std::string build = "test", LeaseTiming timing = {}, bool start = true);
  // Spawns the node's Run; `end` gets its LeaseEnd.
  void Start() { Spawn(node.Run(), "node"); }

  ClusterNode node;
};

// A SimNode named by plain strings, build "t", default timing, started at once: the
// cluster unit tests' shorthand.
struct TestProc : SimNode {
  TestProc(SimWorld& world, std::shared_ptr<MemBucket> bucket, std::string id, std::string instance)
      : SimNode(world, std::move(bucket), NodeId(std::move(id)), InstanceToken(std::move(instance)), "t") {}
};

}  // namespace wk::cluster_testing
