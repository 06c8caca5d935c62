// ShardScanner: finds the due alarms of actors that no node has a timer for — their node
// was killed, stopped or drained — by listing the index (docs/alarms.md, "Who fires",
// "Shards are held like actors").
//
// Holding. Shard s is held through the ownership record owners/_alarms/shard/<s>
// (format.h, ShardActor), with Owners' acquisitions, generations, holds, releases, lapses
// and fences, exactly as an actor. Each pass, the membership view assigns every shard to
// one live node by rendezvous hashing (the highest Crc32c(node id + "/" + shard) among the
// live nodes that are not draining — DrainControl::Draining(), this node included —
// this node counted while its lease is valid), so a node joining, leaving or draining moves
// only its share. A node acquires the shards assigned to it (another node's live
// hold makes it wait: it is asked again next pass) and releases those no longer assigned.
// It scans a shard, and delivers from it, only while its hold is valid
// (HoldView::IsValid): a node whose lease lapsed, was lost, or that is draining (Owners
// refuses acquisitions, the drain releases every hold) stops at once, and the shard is
// taken over as its actors are. Safety does not rest on the holds (the actor's own hold
// decides what fires and what is removed: alarm_index.h); they keep one scanner per shard
// in the normal case, and make every shard's scanning survive its node.
//
// A scan: list alarms/<shard>/ in pages of 1,000, in due order, stopping at the first entry
// due later than now (on this node's clock): never a read of an entry. Entries due for at
// least scan_lag (the owner's own timer goes first) are delivered, one delivery per actor
// (its earliest due entry), through AlarmService::Deliver (which skips actors with a
// delivery running or a hand-over waiting for its recheck). A shard is scanned every
// scan_period; a pass runs every second (kPassInterval) to follow the view.
//
// Threading: Env loop thread only. Simulator-clean.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "alarms/alarm_service.h"
#include "alarms/format.h"
#include "base/metrics.h"
#include "cluster/drain_control.h"
#include "cluster/membership.h"
#include "cluster/node_lease.h"
#include "cluster/owners.h"
#include "store/object_store.h"

namespace wk::alarms {

inline constexpr Duration kPassInterval = std::chrono::seconds(1);

struct ShardScannerStats {
  std::uint64_t scans = 0;
  std::uint64_t scan_failures = 0;
  std::uint64_t lists = 0;            // LIST pages read
  std::uint64_t due_entries = 0;      // due entries seen, all scans
  std::uint64_t foreign_keys = 0;     // keys under alarms/ that are not entries (left alone)
  std::uint64_t acquisitions = 0;     // shard holds acquired
  std::uint64_t releases = 0;         // shard holds released (no longer assigned)
  std::size_t shards_held = 0;        // now
  std::size_t index_due_entries = 0;  // due entries in this node's shards at their last scans
};

class ShardScanner {
 public:
  ShardScanner(Env& env, ObjectStore& store, Owners& owners, const Membership& membership, const NodeLease& lease,
               const DrainControl& drains, AlarmService& service);
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }
  ~ShardScanner();
  ShardScanner(const ShardScanner&) = delete;
  ShardScanner& operator=(const ShardScanner&) = delete;

  void Start();
  void Stop();

  // The shards the current view assigns to this node (bit s).
  std::array<bool, kShards> Assigned() const;
  const ShardScannerStats& stats() const { return stats_; }

 private:
  void ScheduleTick();
  static Task<void> Pass(std::shared_ptr<bool> alive, ShardScanner* self);
  Task<void> Scan(int shard);

  Env& env_;
  ObjectStore& store_;
  Owners& owners_;
  const Membership& membership_;
  const NodeLease& lease_;
  const DrainControl& drains_;
  AlarmService& service_;
  BrokenModels broken_;
  std::array<MonoTime, kShards> next_scan_{};
  std::array<std::size_t, kShards> due_entries_{};
  std::optional<Env::TimerId> tick_;
  TaskHandle pass_;
  bool running_ = false;
  ShardScannerStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Publishes wasmkeep_alarms_* (docs/alarms.md, "Metrics") over the service's, the index's
// and the scanner's stats (base/metrics.h, "How WasmKeep publishes"). REQUIRES: all three
// outlive every RenderText(), which runs on the loop thread.
void PublishAlarmMetrics(MetricsRegistry& registry, const AlarmService& service, const AlarmIndex& index,
                         const ShardScanner& scanner);

}  // namespace wk::alarms
