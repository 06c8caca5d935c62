// DrainControl: drains requested through the bucket (`wasmkeep cluster drain`;
// docs/node-lease.md, "Drain"): control/drain/<node>, format `wasmkeep-drain 1`, state
// `requested` or `drained`. While it exists the node takes no new actors and reports not
// ready; it writes `drained` (If-Match the version read) only once nothing is pending;
// deleting it puts the node back in service. Threading: Env loop thread only. Details (the
// format, why the bucket): docs/internals.md, "DrainControl".
#pragma once

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

  // Register with Membership::AddListener: checks the control object after each listing.
  void OnListing();
  // True while a drain is requested or done (the node takes no new actors).
  bool drained_or_draining() const { return held_; }

 private:
  Task<void> Check();
  // Lists control/drain/ and tells the hand-overs which peers drain.
  Task<void> ListDrainingPeers();

  Env& env_;
  ObjectStore& store_;
  Owners& owners_;
  HandOvers& hand_overs_;
  const NodeId node_id_;
  const LeaseTiming timing_;
  bool held_ = false;       // a control object exists: not accepting
  TaskHandle check_;
};

}  // namespace wk
