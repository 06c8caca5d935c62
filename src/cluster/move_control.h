// MoveControl: moves requested through the bucket (`wasmkeep actor move`, `wasmkeep cluster
// balance`; docs/node-lease.md, "Moving actors"): control/move/<source>/<actor>, format
// `wasmkeep-move 1`, written `requested` by the command and answered by the source node
// with `moved`, `released`, `pending` or `refused` (If-Match the version it read), at most
// `per_second` hand-overs started per second. An outcome whose write did not land is kept
// and written again by the next pass (never carried out twice, never overwritten by a
// `refused` of a second try). Threading: Env loop thread only. Details
// (the format, the states, why the bucket carries it): docs/internals.md, "MoveControl".
#pragma once

#include <map>
#include <string>
#include <utility>

#include "cluster/hand_over.h"
#include "cluster/membership.h"
#include "cluster/owners.h"

namespace wk {

inline constexpr std::string_view kMovePrefix = "control/move/";
// control/move/<node>/ : the requests node must carry out.
inline std::string MovePrefix(const NodeId& node) { return std::string(kMovePrefix) + node.str() + "/"; }
inline std::string MoveKey(const NodeId& node, const ActorId& actor) { return MovePrefix(node) + actor.ToString(); }

enum class MoveState : std::uint8_t { kRequested, kMoved, kReleased, kPending, kRefused };
std::string_view MoveStateName(MoveState s);

struct MoveRecord {
  NodeId to;
  MoveState state = MoveState::kRequested;
  WallTime at{};
  std::string detail;  // printable ASCII; EncodeMoveRecord cleans and bounds it
};
std::string EncodeMoveRecord(const MoveRecord& r);
Result<MoveRecord> DecodeMoveRecord(std::string_view body);

// The default of [moves] per_second: hand-overs a node starts per second for requested
// moves (a balance of a thousand actors from one node takes under two minutes).
inline constexpr double kDefaultMovesPerSecond = 10;

struct MoveControlStats {
  std::uint64_t requests = 0;  // requests found `requested`
  std::uint64_t moved = 0;
  std::uint64_t refused = 0;
  std::uint64_t other = 0;  // released or pending
};

class MoveControl {
 public:
  // per_second: at most this many hand-overs started per second (> 0).
  MoveControl(Env& env, ObjectStore& store, Owners& owners, HandOvers& hand_overs, const Membership& membership,
              NodeId node_id, LeaseTiming timing, double per_second = kDefaultMovesPerSecond);
  ~MoveControl();

  // Register with Membership::AddListener: one pass over this node's requests at a time.
  // Nothing until enabled (`wasmkeep serve` enables it; the simulator's scenarios that do
  // not model moves leave it off, so their bucket requests stay as they were).
  void OnListing();
  void set_enabled(bool enabled) { enabled_ = enabled; }
  void set_per_second(double per_second) { per_second_ = per_second; }
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }
  const MoveControlStats& stats() const { return stats_; }

 private:
  Task<void> Pass();
  Task<void> Carry(std::string key, Version version, ActorId actor, MoveRecord request);
  Task<void> Finish(std::string key, Version version, MoveRecord request, MoveState state, std::string detail);
  // Writes an outcome If-Match the request's version; kept in unwritten_ while it has not landed.
  Task<void> WriteOutcome(std::string key, Version version, MoveRecord outcome);

  Env& env_;
  ObjectStore& store_;
  Owners& owners_;
  HandOvers& hand_overs_;
  const Membership& membership_;
  const NodeId node_id_;
  const LeaseTiming timing_;
  double per_second_;
  bool enabled_ = false;
  TaskHandle pass_;
  MoveControlStats stats_;
  BrokenModels broken_;
  // Outcomes whose write did not land, by request key: the request's version and the outcome.
  std::map<std::string, std::pair<Version, MoveRecord>> unwritten_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
