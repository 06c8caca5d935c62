// Membership: the listing task (docs/node-lease.md, "The listing reads only what changed"),
// apart from the lease task so a slow listing never delays a lease write. Every heartbeat
// period it lists nodes/ and reads only the bodies that can change a decision (ReadReason);
// the result is the view of which nodes are live, by their objects alone, handed to every
// listener (the fence watch). Decisions that need an object's exact state make their own
// fresh read. Threading: Env loop thread only; Run is one task. Details (why each read is
// made or skipped, the fence watch's clock): docs/internals.md, "Membership".
#pragma once

#include <array>
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
  // For a version taken for a renewal: the LIST's reply that first showed it.
  MonoTime unchanged_since{};
  // Whether `record` was read at the version the last listing showed. False after renewals
  // the listing did not read: instance, state, address and pin are still the object's,
  // written_at is older than its. The fence watch judges only current bodies.
  bool body_current = true;

  bool live() const { return record && record->state == LeaseState::kLive; }
};

// Why a listing read a body (Membership's header).
enum class ReadReason : std::uint8_t { kNew, kNotLive, kSizeChanged, kAfterSilence, kWatch, kRefresh };
std::string_view ReadReasonName(ReadReason r);  // "new", "not_live", "size_changed", ...

// A body taken for renewals is read again at least this many periods after its last read.
inline constexpr int kRefreshPeriods = 10;
inline constexpr std::size_t kReadReasons = 6;

struct ListingStats {
  std::uint64_t listings = 0;
  std::uint64_t failures = 0;
  Duration last_duration{0};
  double total_seconds = 0;
  // Old-format heartbeats reported in the log (once per change of each: an error while it
  // is fresh, an old version running; a notice once stale, a retired node's).
  std::uint64_t old_format_errors = 0;
  std::uint64_t old_format_notices = 0;
  // Seconds per complete listing (the list and the reads it made).
  Histogram seconds{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  // Bodies read, by ReadReason; versions taken for renewals; versions unchanged.
  std::array<std::uint64_t, kReadReasons> reads{};  // indexed by ReadReason
  std::uint64_t renewals_assumed = 0;
  std::uint64_t unchanged = 0;
  std::uint64_t bodies_read() const {
    std::uint64_t n = 0;
    for (auto r : reads) n += r;
    return n;
  }
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
  // Per node, what the listings showed of its object (the ETag-aware listing).
  struct Listed {
    Version version;        // the last listing's
    std::uint64_t size = 0;
    MonoTime version_since{};  // the LIST reply that first showed `version`
    MonoTime read_at{};        // the last read of the body
  };
  std::map<NodeId, Listed> listed_;
};

}  // namespace wk
