// DrainControl: drains requested through the bucket (ADR 0020 §4, "a drain").
//
// An operator asks for a drain by writing control/drain/<node> (`wasmkeep cluster drain`),
// format `wasmkeep-drain 1`:
//
//   wasmkeep-drain 1
//   state requested          (or: drained)
//   at <unix ms>             (when the state was written)
//
// The node reads that object after each listing (one GET per heartbeat period). On
// `requested` it stops taking new actors, hands every resident actor over (HandOvers::Drain:
// each closed as hibernation does, its writes durable, then its hold released; requests
// for it meanwhile held, then forwarded to the peer that takes it), and writes `drained`
// (If-Match the version it read) only once no release is pending. While it drains it also
// lists control/drain/ (one LIST per listing), so it forwards nothing to a peer that drains
// too. While the
// object exists the node takes no new actors and reports not ready; deleting it
// (`wasmkeep cluster undrain`) puts the node back in service.
//
// Why the bucket and not an HTTP admin endpoint: the bucket's credentials already
// authenticate operators (no new secret, no port to expose), the request reaches a node
// the operator cannot route to, and it is durable: a node restarted mid-drain keeps
// draining.
//
// Threading: Env loop thread only.
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
