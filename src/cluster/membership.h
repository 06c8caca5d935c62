// Membership: the listing task (ADR 0020 §1, "the heartbeat listing"), separate from the
// lease task so a slow listing never delays a lease write.
//
// Every heartbeat period it lists nodes/ and reads each body, one after another (the
// ADR's cost model: one LIST and N GETs per period). The result is the membership view:
// which nodes are live, by their objects alone. A fenced or released object, an old
// format, a corrupt body or a missing object is not live, whatever its age.
//
// Listeners (the fence watch) get every completed listing. The view carries no versions:
// only a fence decision needs one, and it makes its own versioned read (§2).
//
// Threading: Env loop thread only; Run is one task.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/broken_models.h"
#include "cluster/node_record.h"
#include "cluster/timing.h"
#include "base/metrics.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

struct NodeView {
  NodeId node_id;
  std::optional<NodeRecord> record;     // a wasmkeep-node 3 object
  std::optional<OldHeartbeat> old;      // an old-format heartbeat
  std::string error;                    // corrupt or unreadable, if neither
  // When this (state, instance, written_at) was first read: the time the GET of the first
  // listing that showed it returned (the latest instant that body can describe), so a
  // watch counted from it is never shorter than it says, however long the listing took.
  MonoTime unchanged_since{};

  bool live() const { return record && record->state == LeaseState::kLive; }
};

struct ListingStats {
  std::uint64_t listings = 0;
  std::uint64_t failures = 0;
  Duration last_duration{0};
  double total_seconds = 0;
  // Old-format heartbeats reported in the log (once per change of each: an error while it
  // is fresh, an old version running; a notice once stale, a retired node's).
  std::uint64_t old_format_errors = 0;
  std::uint64_t old_format_notices = 0;
  // Seconds per complete listing (the list and a read of each body).
  Histogram seconds{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
};

class Membership {
 public:
  using View = std::map<NodeId, NodeView>;
  using Listener = std::function<void(const View&)>;

  Membership(Env& env, ObjectStore& store, LeaseTiming timing);

  // Lists every heartbeat period until cancelled.
  Task<void> Run();
  // One listing now (also used by `cluster status`). Returns the view or the error.
  Task<Status> ListOnce();

  const View& view() const { return view_; }
  // Whether the view shows node_id live under exactly this instance (routing's test).
  bool IsLive(const NodeId& node_id, const InstanceToken& instance) const;
  const ListingStats& stats() const { return stats_; }
  void AddListener(Listener l) { listeners_.push_back(std::move(l)); }
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }

 private:
  // Logs an old-format heartbeat the first time it is seen and whenever it changes.
  void ReportOldFormat(const NodeId& id, const OldHeartbeat& old);

  Env& env_;
  ObjectStore& store_;
  const LeaseTiming timing_;
  View view_;
  ListingStats stats_;
  std::vector<Listener> listeners_;
  BrokenModels broken_;
  // Per node, the old-format heartbeat last reported (its written_at, -1 if unreadable).
  std::map<NodeId, std::int64_t> old_reported_;
};

}  // namespace wk
