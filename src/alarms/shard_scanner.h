// ShardScanner: finds the due alarms of actors that no node has a timer for (their node was
// killed, stopped or drained) by listing the index (docs/alarms.md, "Who fires", "Shards
// are held like actors"). Each pass (every kPassInterval) follows the membership view: the
// shards assigned to this node are acquired through their ownership records
// owners/_alarms/shard/<s>, the others released. A shard is scanned, and delivered from
// through AlarmService::Deliver, only while its hold is valid; a scan lists and never reads
// an entry. Safety rests on the actors' own holds, not the shards'. How shards are assigned
// and a scan delivers: docs/internals.md, "alarms: an actor's own time".
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
