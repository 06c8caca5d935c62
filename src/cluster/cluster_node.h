// ClusterNode: the cluster part of one node process — its node lease, the listing
// (membership) and the fence watch — wired together on one Env and one ObjectStore.
// `wasmkeep serve` runs one; the simulator runs several in one process.
//
// Run() returns when the lease ends: kStopped after Stop(), kLost or kTwin otherwise, in
// which case the process must exit at once with a non-zero status (docs/node-lease.md, "What the
// lease is"), releasing nothing.
//
// Threading: Env loop thread only. Destroy only after Run has returned or the Env's tasks
// were cancelled.
#pragma once

#include <memory>

#include "cluster/drain_control.h"
#include "cluster/fence_watch.h"
#include "cluster/hand_over.h"
#include "cluster/membership.h"
#include "cluster/move_control.h"
#include "cluster/node_lease.h"
#include "cluster/owners.h"

namespace wk {

class ClusterNode {
 public:
  ClusterNode(Env& env, ObjectStore& store, NodeIdentity identity, LeaseTiming timing,
              InstanceToken instance);

  Task<LeaseEnd> Run();
  // Clean stop (docs/node-lease.md, "Clean stop"): release every hold and wait for the releases
  // (bounded by half the limit), then make the lease locally invalid, end the lease task after any
  // attempt in flight, and write `released` last.
  Task<Status> Stop(Duration limit);

  NodeLease& lease() { return lease_; }
  const NodeLease& lease() const { return lease_; }
  Membership& membership() { return membership_; }
  FenceWatch& fence_watch() { return fence_watch_; }
  Owners& owners() { return owners_; }
  // Drains and moves: the hand-over of actors to other nodes (hand_over.h).
  HandOvers& hand_overs() { return hand_overs_; }
  DrainControl& drain_control() { return drain_control_; }
  MoveControl& move_control() { return move_control_; }
  // Broken models (base/broken_models.h) for the lease, the fence watch and the owners:
  // tests and the simulator only. Set before Run.
  void set_broken_models(BrokenModels broken);
  const BrokenModels& broken_models() const { return broken_; }

 private:
  void StartHelpers();

  Env& env_;
  NodeLease lease_;
  Membership membership_;
  FenceWatch fence_watch_;
  Owners owners_;
  HandOvers hand_overs_;
  DrainControl drain_control_;
  MoveControl move_control_;
  TaskHandle listing_;
  BrokenModels broken_;
};

}  // namespace wk
