// NodeLease: this process's node lease, nodes/<id> (docs/node-lease.md, "What the lease is"
// and "Timings"): the bucket check and start guard, the start check, then a conditional
// renewal every period. Guarantees: the node is valid only until the send time of its last
// acknowledged write + ttl - safety, on the monotonic clock; validity lost to a lapse comes
// back only in a new epoch; a write conflict that is not its own lost reply ends the lease
// (kLost: exit without releasing). Threading: Env loop thread only; IsValid is a few
// comparisons. Details (each step, why monotonic): docs/internals.md, "NodeLease".
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/broken_models.h"
#include "cluster/node_record.h"
#include "cluster/start_guard.h"
#include "cluster/timing.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

struct NodeIdentity {
  NodeId node_id;
  std::string address;           // host:port of the peer listener; may be empty
  std::string software_version;  // printable, no spaces
  std::string cert_pin;          // this process's TLS pin (net/tls_identity.h); may be empty
};

enum class LeaseEndReason : std::uint8_t {
  kStopped,  // Stop() completed (released written, or the attempt given up)
  kLost,     // a conflict the re-read did not explain: fenced, another instance, gone
  kTwin,     // the start check saw another live process under this id
  kBucketUnfit,        // the bucket check refused the bucket (nothing was written): fix the setting it names
  kOldVersionRunning,  // the start guard saw an old-format heartbeat rewritten (docs/node-lease.md,
                       // "Upgrading from per-actor leases")
};
std::string_view LeaseEndReasonName(LeaseEndReason r);

struct LeaseEnd {
  LeaseEndReason reason;
  std::string message;
};

// Counters the metrics layer exports (ADR: successful lease writes,
// wasmkeep_node_lease_failures_total).
struct NodeLeaseStats {
  std::uint64_t writes_ok = 0;        // acknowledged (or adopted) live writes
  std::uint64_t write_failures = 0;   // attempts that did not succeed, any reason
  std::uint64_t adoptions = 0;        // conflicts explained by our own landed write
  std::uint64_t lapses = 0;           // times the lease ran out without a conflict
  std::uint64_t start_check_reads = 0;
};

class NodeLease {
 public:
  struct Observer {
    // Became valid: the first acknowledged write, or the first after a lapse.
    std::function<void(std::uint64_t epoch)> on_valid;
    // Ran out without a conflict (holds go to pending releases).
    std::function<void(std::uint64_t epoch)> on_lapse;
    // Lost: fenced, replaced or deleted (holds are dropped, nothing released).
    std::function<void(const std::string& why)> on_lost;
  };

  NodeLease(Env& env, ObjectStore& store, NodeIdentity identity, LeaseTiming timing,
            InstanceToken instance);

  // Runs the start check, then the renewal loop, until Stop() or the lease is lost.
  // REQUIRES: timing.Validate().ok(); called once.
  Task<LeaseEnd> Run();

  // Clean stop (docs/node-lease.md, "Clean stop", the lease's part): makes the lease locally
  // invalid at once, lets an attempt in flight finish, ends the loop, then writes `released`
  // If-Match the last acknowledged version (with the re-read rule on conflict), within `limit`.
  // Returns once released is written or given up; Run then returns kStopped.
  Task<Status> Stop(Duration limit);

  // True while the last acknowledged write's validity lasts and no stop began.
  bool IsValid() const;
  // Ready (for /readyz): valid with the margin of one attempt timeout left, so a node
  // about to lapse stops taking work first, and Announced().
  bool IsReady() const;
  // Whether the peers have had time to list this process's record, and so to trust its TLS
  // pin (docs/security.md, "Keys and pins"): its first acknowledged write is at least one
  // heartbeat period (a peer lists nodes/ once a period) plus an attempt timeout (for that
  // listing's own requests) old. Until then what it forwards is refused by its peers. Kept
  // through later lapses: the record stays the same process's.
  bool Announced() const;
  // Increments each time the lease becomes valid after being invalid. A hold taken in
  // epoch e is valid only while IsValid() && epoch() == e ("no lapse since acquired").
  std::uint64_t epoch() const { return epoch_; }
  // Monotonic time of the first acknowledged write after the latest lapse (or the start):
  // peers are judged only from then on (docs/node-lease.md, "When to fence"). nullopt while not
  // valid.
  std::optional<MonoTime> valid_since() const { return valid_since_; }
  // The send time validity runs from, and when it ends (monotonic).
  MonoTime valid_until() const { return valid_until_; }

  const InstanceToken& instance() const { return instance_; }
  const NodeIdentity& identity() const { return identity_; }
  const LeaseTiming& timing() const { return timing_; }
  const NodeLeaseStats& stats() const { return stats_; }
  const std::optional<Version>& version() const { return version_; }

  // The steps before the first write (docs/node-lease.md, "Upgrading from per-actor leases"). Both
  // on by default; the lease's own unit tests switch them off to count its writes and times
  // exactly. Set before Run.
  struct StartSteps {
    bool bucket_check = true;
    bool start_guard = true;
  };
  void set_start_steps(StartSteps steps) { start_steps_ = steps; }
  const StartGuardStats* start_guard_stats() const { return guard_ ? &guard_->stats() : nullptr; }

  // Observers are called in the order added.
  void AddObserver(Observer o) { observers_.push_back(std::move(o)); }
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }

 private:
  enum class CheckResult { kGo, kTwin, kLost };
  // The bucket check, probed until decided (or a stop): OK, or why the bucket is unfit.
  Task<Status> CheckBucket();
  // Spawns the start guard into guard_task_ (a plain function: GCC 12 and Spawn inside a
  // coroutine, docs/DEVELOPING.md).
  void SpawnStartGuard();
  // *why explains a kTwin or kLost.
  Task<CheckResult> StartCheck(std::string* twin_message);
  // One write of a live record. Returns the status; on success updates the lease.
  Task<Status> WriteLive(Precondition condition, Duration timeout);
  // What one read of nodes/<id> after a failed condition or an unknown outcome shows.
  enum class ReReadKind {
    kUndecided,  // the read failed: read again
    kOursLive,   // our own live write (its reply was lost): adopted
    kOursEnded,  // our own instance, fenced or released by another writer
    kAbsent,     // no object
    kForeign,    // another process's object (live or not), an old format or a corrupt body
  };
  struct ReRead {
    ReReadKind kind = ReReadKind::kUndecided;
    std::string what;  // the object as found, for the log or the exit message
  };
  // The re-read rule (docs/node-lease.md, "What the lease is"): one versioned read; our own live
  // write is adopted.
  Task<ReRead> ReReadAndAdopt();
  // Sleeps until deadline or until Stop() asks the loop to end. Returns false if woken by
  // a stop (or cancelled).
  Task<bool> WaitUntil(MonoTime deadline);
  void Acknowledged(const Version& version, WallTime written_at, MonoTime sent, MonoTime replied);
  void CheckLapse();
  void Lose(const std::string& why);
  NodeRecord LiveRecord(WallTime written_at) const;

  Env& env_;
  ObjectStore& store_;
  const NodeIdentity identity_;
  const LeaseTiming timing_;
  const InstanceToken instance_;
  const std::string key_;
  const WallTime started_at_;

  // The last acknowledged (or adopted) write.
  std::optional<Version> version_;
  WallTime written_at_{};
  bool valid_ = false;  // cleared by a lapse, a loss or a stop
  MonoTime valid_until_{};
  std::optional<MonoTime> valid_since_;
  std::optional<MonoTime> first_valid_since_;  // the first validity of this process (Announced)
  std::uint64_t epoch_ = 0;
  bool stopping_ = false;
  bool lost_ = false;
  bool aborted_ = false;  // the task was cancelled: end at once, write nothing
  std::string lost_why_;
  // Attempts sent since the last acknowledgement: written_at (ms) → send time, so an
  // adopted write's validity runs from its own send.
  std::deque<std::pair<std::int64_t, MonoTime>> unacked_sends_;
  MonoTime last_send_{};
  // The version the start check read last (nullopt: no object), for the first write.
  std::optional<Version> last_check_version_;
  // Wakes the loop early for a stop.
  std::optional<Latch<bool>> wake_;
  bool loop_ended_ = false;
  std::optional<Latch<bool>> loop_end_latch_;

  NodeLeaseStats stats_;
  BrokenModels broken_;
  std::vector<Observer> observers_;
  StartSteps start_steps_;
  std::unique_ptr<StartGuard> guard_;
  TaskHandle guard_task_;
  std::shared_ptr<std::optional<StartGuardOutcome>> guard_outcome_;
};

}  // namespace wk
