// Replica: one resident actor's durable storage under one hold (actor/storage.h): the
// in-memory map the actor reads, its writes uploaded as segments of the hold's generation
// (one upload in flight: group commit), snapshots and garbage collection (docs/storage.md).
// Guarantees: nothing is released before it is durable and the hold still valid (the output
// gate, hold_gate.h); the fence <gen>-0 is acknowledged before any batch; a failure is
// sticky: the state is void and every waiter gets kRetryable. Threading: the storage calls
// from any one thread at a time (the worker running the event), the rest on the Env loop
// thread; simulator-clean. REQUIRES: Close (or a failure) before destruction. Details:
// docs/internals.md, "Replica".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "actor/state_map.h"
#include "actor/storage.h"
#include "base/metrics.h"
#include "cluster/owner_record.h"
#include "cluster/owners.h"
#include "env/env.h"
#include "replica/alarm_hook.h"
#include "replica/hold_gate.h"
#include "replica/restore.h"
#include "store/object_store.h"

namespace wk::replica {

// How long an actor's history is kept (docs/storage.md, "History and point-in-time
// restore"): storage.retention_ms for every tenant, or a tenant's own
// (storage.retention_ms_by_tenant). 0: only what a restore needs.
struct Retention {
  Retention() = default;
  template <typename Rep, typename Period>
  Retention(std::chrono::duration<Rep, Period> every)  // NOLINT: a plain duration is for every tenant
      : all(std::chrono::duration_cast<Duration>(every)) {}
  Duration all{};
  std::map<std::string, Duration, std::less<>> tenants;
  Duration For(std::string_view tenant) const {
    auto it = tenants.find(tenant);
    return it == tenants.end() ? all : it->second;
  }
};

struct ReplicaOptions {
  // A segment closes at this many bytes of batches or this many batches (a single larger
  // batch goes alone).
  std::uint64_t segment_max_bytes = 8ull << 20;
  std::uint32_t segment_max_batches = 10'000;
  // A snapshot follows this many segments or bytes of segments since the chain's last.
  std::uint32_t snapshot_every_segments = 64;
  std::uint64_t snapshot_every_bytes = 32ull << 20;
  // One segment or snapshot PUT; past it the outcome is unknown and the hold is abandoned.
  Duration upload_timeout = std::chrono::seconds(10);
  RestoreOptions restore;
  Duration gc_delete_interval = std::chrono::milliseconds(20);
  int gc_max_deletes_per_pass = 500;
  // Off-chain objects of older generations are deleted only once the hold is this old
  // (ttl + grace: the fencing bound).
  Duration gc_off_chain_after = std::chrono::seconds(15);
  // Point-in-time history (docs/storage.md, "History and point-in-time restore"): GC keeps
  // every object needed to rebuild the state at any batch durable within this long (the
  // actor's tenant's); 0 keeps only what a restore needs.
  Retention retention;
  // On top of the retention, for the bucket's clock against the nodes': a base is collected
  // only once its listed time is older than the window by this much.
  Duration retention_margin = std::chrono::hours(1);
};
// The error names the setting.
Status ValidateReplicaOptions(const ReplicaOptions& options);

// What every replica of a process did, summed (one per process, shared by its replicas;
// replicas come and go, the totals stay). Loop thread only.
struct ReplicaTotals {
  std::uint64_t segments = 0;         // segment PUTs acknowledged
  std::uint64_t segment_bytes = 0;
  std::uint64_t batches = 0;          // batches in acknowledged segments (batches / segments: group commit)
  std::uint64_t late = 0;             // uploads that completed after validity ended
  std::uint64_t upload_failures = 0;  // uploads that failed or whose outcome is unknown
  std::uint64_t snapshots = 0;
  std::uint64_t snapshot_failures = 0;
  std::uint64_t gc_deleted = 0;
  std::uint64_t restores = 0;
  std::uint64_t restore_failures = 0;
  Histogram restore_seconds{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  Histogram upload_seconds{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
};

// Publishes the totals as wasmkeep_replica_* (base/metrics.h, "How WasmKeep publishes").
// REQUIRES: totals outlives every RenderText(), which runs on the loop thread.
void PublishReplicaMetrics(MetricsRegistry& registry, const ReplicaTotals& totals);

struct ReplicaStats {
  std::uint64_t segments = 0;  // acknowledged, fence included
  std::uint64_t batches = 0;   // in acknowledged segments
  std::uint64_t segment_bytes = 0;
  std::uint64_t snapshots = 0;
  std::uint64_t gc_deleted = 0;
  bool late = false;
};

class Replica final : public actor::ActorStorage {
 public:
  struct Hold {
    Generation generation;
    // LeaseView::is_valid of the hold: asked by the gate on every acknowledgement and every
    // release (loop thread only).
    std::function<bool()> is_valid;
  };
  struct Deps {
    Env& env;
    ObjectStore& store;
    // Hands a function to the loop thread from whatever thread Commit or WhenReleasable
    // runs on.
    std::function<void(std::function<void()>)> post;
    ReplicaTotals* totals = nullptr;
    // Broken models (base/broken_models.h): the gate's (ack-before-durable, ack-late-upload,
    // release-without-validity), the restore's and GC's, and the alarm index's
    // (segment-before-entry, index-entry-removed-before-durable); tests and the simulator only.
    BrokenModels broken;
    // The alarm index (alarm_hook.h): told of the alarm at open, at each commit that changes
    // it (a set holds back its segment until its index entry is written) and as it becomes
    // durable. Null: no alarm index (tests of the replica alone).
    AlarmIndexHook* alarms = nullptr;
    // When set, the index is told nothing more once *alarms_alive is false. Its owner clears
    // it before the index goes: a replica whose close the Env's teardown interrupts is
    // destroyed with the Env's tasks, after the index (ReplicaProvider sets its own flag).
    std::shared_ptr<const bool> alarms_alive;
  };

  // Restores the actor for `hold` and sends its fence. Returns once restored; the fence may
  // still be in flight (nothing is acknowledged before it lands). With `resume`, the hold is
  // a sleeping one that wakes (docs/node-lease.md, "Sleeping holds"): its fence and segments
  // up to resume.segment are durable already, so nothing is sent; the log continues at
  // resume.segment + 1 and the batches at resume.batch + 1 (kPreconditionFailed if the log
  // does not end there: Restore).
  static Task<Result<std::unique_ptr<Replica>>> Open(Deps deps, ActorId actor, Hold hold, ReplicaOptions options,
                                                     std::optional<HoldResume> resume = std::nullopt);
  ~Replica() override;
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // actor::ActorStorage.
  std::optional<std::string> Get(std::string_view key) const override;
  void List(const actor::ListQuery& query, const actor::ListVisitor& visit) const override;
  std::optional<std::int64_t> Alarm() const override;
  std::optional<std::string> GetSystem(std::string_view key) const override;
  void ListSystem(const actor::ListQuery& query, const actor::ListVisitor& visit) const override;
  std::uint64_t SystemBytes() const override;
  std::uint64_t StoredBytes() const override;
  std::uint64_t MemoryBytes() const override;
  std::uint64_t Commit(actor::Batch batch) override;
  void WhenReleasable(std::uint64_t seq, std::function<void(Status)> done) override;
  // Ok while the gate is open; its failure (sticky) once the replica failed.
  Status failure() const override;
  // The runtime gives up on this replica (an exec-durable wait timed out): the gate fails
  // at once, and the replica as for any failure (on the loop thread).
  void Break(Status why) override;

  // Loop thread. Called once when the replica fails (upload failed or Late, or Cut).
  void set_on_failed(std::function<void(Status)> fn);
  // The lost-lease cut: the hold ended. Nothing unacknowledged will be; the replica fails.
  void Cut(std::string why);
  // Waits (bounded) until every committed batch is acknowledged or the replica failed, then
  // stops the background work. OK: everything committed is durable, the hold may be released.
  Task<Status> Close(Duration limit);

  const ActorId& actor() const;
  Generation generation() const;
  // Where a next replica of this hold continues (loop thread; meaningful once Close said OK:
  // every segment sent was acknowledged).
  HoldResume resume_point() const;
  ReplicaStats stats() const;
  const Restored& restored() const;  // what Open found (the restore's facts)

  struct Core;

 private:
  explicit Replica(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace wk::replica
