// DrainControl: drains requested through the bucket (`wasmkeep cluster drain`;
// docs/node-lease.md, "Drain"): control/drain/<node>, format `wasmkeep-drain 1`, state
// `requested` or `drained`. While it exists the node takes no new actors and reports not
// ready; it writes `drained` (If-Match the version read) only once nothing is pending;
// deleting it puts the node back in service. Guarantees: the node takes no actor before its
// first check found no record (a node restarted drained stays drained); a node whose record
// says `drained` but that holds anything hands it over again; every node knows which nodes
// drain (Draining(), one LIST per listing), so alarm shards and drained actors go to
// peers that serve. Threading: Env loop thread only. Details (the format, why the bucket):
// docs/internals.md, "DrainControl".
#pragma once

#include <set>
#include <string>

#include "cluster/hand_over.h"
#include "cluster/membership.h"
#include "cluster/owners.h"

namespace wk {

enum class DrainState : std::uint8_t { kRequested, kDrained };

struct DrainRecord {
  DrainState state = DrainState::kRequested;
  WallTime at{};
};

inline constexpr std::string_view kDrainPrefix = "control/drain/";
inline std::string DrainKey(const NodeId& node) { return std::string(kDrainPrefix) + node.str(); }
std::string EncodeDrainRecord(const DrainRecord& r);
Result<DrainRecord> DecodeDrainRecord(std::string_view body);

class DrainControl {
 public:
  DrainControl(Env& env, ObjectStore& store, Owners& owners, HandOvers& hand_overs, NodeId node_id, LeaseTiming timing);

  // The node starts (ClusterNode::Run): it takes no actor until the first check.
  void Start();
  // Register with Membership::AddListener: lists control/drain/ after each listing, and
  // drains this node (only while lease_valid) when its record is there.
  void OnListing(bool lease_valid);
  // True while a drain is requested or done (the node takes no new actors).
  bool drained_or_draining() const { return held_; }
  // True once a check read control/drain/ (until then the node takes no actors).
  bool checked() const { return checked_; }
  // Whether `node` drains: a peer with a drain record at the last listing that succeeded
  // (HandOvers keeps that set), or this node while its own record holds it.
  bool Draining(const NodeId& node) const {
    return node == node_id_ ? held_ : hand_overs_.draining_peers().count(node) > 0;
  }
  // Every node that drains, this one included (Draining, as a set).
  std::set<NodeId> draining_nodes() const;
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }

 private:
  Task<void> Check(bool lease_valid);

  Env& env_;
  ObjectStore& store_;
  Owners& owners_;
  HandOvers& hand_overs_;
  const NodeId node_id_;
  const LeaseTiming timing_;
  bool held_ = false;     // a control object exists: not accepting
  bool checked_ = false;  // a listing of control/drain/ succeeded
  BrokenModels broken_;
  TaskHandle check_;
};

}  // namespace wk
