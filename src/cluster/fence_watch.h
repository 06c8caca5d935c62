// FenceWatch: fencing nodes whose lease ran out (docs/node-lease.md, "When to fence").
//
// Node B may fence node A only while B's own lease is valid, and only after B has seen
// A's object unchanged (the same instance and written_at; never by comparing version
// tokens) for a full lease period plus one attempt timeout, counted from B's first
// acknowledged lease write after any lapse of its own. B watches with the listing's
// bodies (Membership). Then one versioned GET of nodes/A decides, on that read alone:
//   - live, the watched instance and written_at, and written_at + ttl + grace passed on
//     B's clock: write the fence If-Match that GET's version (state fenced, A's instance,
//     A's written_at kept);
//   - anything else (A wrote, or it is no longer live): no fence; watch again.
// A fence that fails its condition means A wrote in between (A is alive): watch again.
// Fences run on a task of their own, at most FENCE_CONCURRENCY at once, so a hung fence
// never delays the listing.
//
// Threading: Env loop thread only.
#pragma once

#include <map>
#include <set>
#include <string>

#include "cluster/membership.h"
#include "cluster/node_lease.h"

namespace wk {

// Fences written at once (docs/node-lease.md, "Bounds").
inline constexpr int kFenceConcurrency = 8;

struct FenceStats {
  std::uint64_t fences_written = 0;
  std::uint64_t fences_refused = 0;   // condition failed: the node wrote meanwhile
  std::uint64_t decided_alive = 0;    // the deciding GET showed a change
  std::uint64_t fence_errors = 0;     // unknown outcome or unavailable
  std::uint64_t max_in_flight = 0;    // the most fences in flight at once (at most kFenceConcurrency)
};

class FenceWatch {
 public:
  // Called with (fenced node id, its instance, kept written_at) when a fence lands.
  using OnFence = std::function<void(const NodeId&, const InstanceToken&, WallTime)>;

  FenceWatch(Env& env, ObjectStore& store, const NodeLease& self, LeaseTiming timing);

  // Feeds one listing (register with Membership::AddListener).
  void OnListing(const Membership::View& view);

  const FenceStats& stats() const { return stats_; }
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }
  void set_on_fence(OnFence f) { on_fence_ = std::move(f); }

 private:
  // epoch: our lease's validity epoch when the watch decided; the fence is written only
  // if it is still the current one.
  Task<void> Fence(NodeId node_id, InstanceToken instance, WallTime written_at, std::uint64_t epoch);

  Env& env_;
  ObjectStore& store_;
  const NodeLease& self_;
  const LeaseTiming timing_;
  std::set<NodeId> in_flight_;
  FenceStats stats_;
  BrokenModels broken_;
  OnFence on_fence_;
};

}  // namespace wk
