// BrokenModels: the switches that break a rule of the design on purpose, so that a test or
// the simulator can show that its proof of that rule fails without it ("a proof that cannot
// fail is a defect": docs/STATUS.md's column "caught by", scripts/check-proofs.sh).
//
// One mechanism for every broken model of the production code (FoundationDB's BUGGIFY is
// the model: a switch the release binary cannot turn on). A BrokenModels value is a set of
// named switches; the production code asks `on(BrokenModel::kX)` at the one place each
// switch changes. A value is made only from names (Parse), by:
//   - the simulator's --mutant NAME (sim/main.cc);
//   - the unit tests' harnesses, from the environment variable WASMKEEP_BROKEN_MODELS
//     (FromEnvironment; cluster/testing/harness.h and the replica tests), so that
//     scripts/check-proofs.sh can run one test with one switch on;
//   - `wasmkeep serve`, from the same variable, for the real-process cluster tests.
// In a build configured with WK_BROKEN_MODELS=OFF (the `release` preset: the binaries that
// ship) every switch is compiled out: on() is a constant false, so each broken branch is
// dead code the optimiser removes, Parse refuses every name, and `wasmkeep serve` refuses
// to start when WASMKEEP_BROKEN_MODELS is set. Nothing else can set a switch.
//
// Names are kebab-case and stable (tests and docs cite them). Each switch's line below
// says which component it breaks and how.
//
// Threading: an immutable value; copy it freely, read it from any thread.
#pragma once

#include <bitset>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/broken_models_build.h"  // generated: WK_BROKEN_MODELS_BUILT
#include "base/status.h"

namespace wk {

enum class BrokenModel : std::uint8_t {
  // ---- NodeLease (cluster/node_lease.*), docs/node-lease.md, "What the lease is" and "Clean stop"
  kValidityFromReply,        // validity counted from the reply's arrival, not the send
  kLeaseAttemptUnbounded,    // a lease write attempt may take its whole period, not (ttl - safety) / 3
  kLeaseNoRetry,             // a failed lease write is not retried within its period
  kLeaseWriteUnconditional,  // renewals are written without If-Match (a write in flight overwrites a fence)
  kConflictIsLost,           // a failed condition is taken for a fence, without the re-read
  kLapseIsLost,              // a lease that only ran out is treated as lost (the process exits)
  kAckAfterLapseKeepsEpoch,  // an acknowledgement after validity ended extends it in the same epoch
  kStartCheckNoWait,         // the start check ends at once when it finds no object
  kNoReleaseShortcut,        // the start check waits ttl + grace in full after a clean stop
  kOwnFenceNotLost,          // the start check takes its own instance fenced for another process's object
  kStartCheckIgnoresChanges, // a live object that changes during the start check is no twin
  kStopKeepsLeaseValid,      // a clean stop leaves the lease valid until `released` is written
  // ---- Membership and FenceWatch (cluster/membership.*, fence_watch.*), docs/node-lease.md, "When to fence"
  kWatchFromListingStart,    // "unchanged since" is the listing's start, before the body was read
  kListingAssumesRenewals,   // the listing takes every new version of a live record for its renewal (no size,
                             // silence or refresh check): a restarted node's new instance is never read
  kUnconditionalFence,       // the fence is written without If-Match
  kNoWatchWait,              // fencing without the watch after the fencer's own lapse
  kUnboundedFenceConcurrency,  // every stale node fenced at once (no FENCE_CONCURRENCY)
  // ---- Operator commands (cluster/operator.*), docs/node-lease.md, "When to fence"
  kOperatorFenceUnconditional,  // `cluster fence` writes without If-Match the version it read
  kOperatorFenceTrustsClock,    // `cluster fence` of an absent node dates it without checking the bucket's clock
  // ---- The upgrade path (cluster/first_generation.*, start_guard.*), docs/node-lease.md, "Upgrading from per-actor leases"
  kUnseededFirstGeneration,  // an actor without a record starts at its marker's generation, not above its log
  kOldLeaseIgnored,          // a live old per-actor lease (`wasmkeep-lease 1`) does not refuse the first acquisition
  kStartGuardOff,            // the start guard does not wait for fresh old-format heartbeats
  // ---- Owners (cluster/owners.*, cluster_node.*), docs/node-lease.md, "Actors"
  kFreeOnView,               // a record is freed from the membership view, not a fresh read of nodes/<A>
  kFreeOnAbsentNode,         // an absent nodes/<A> frees A's records
  kFreeOnOldFormat,          // an old-format nodes/<A> frees A's records
  kFreeIgnoresFenceBound,    // a fenced or released nodes/<A> frees at once, not after written_at + ttl + grace
  kRestartFreesNothing,      // a live nodes/<A> under another instance does not free A's old records
  kWakeReusesGeneration,     // re-acquiring a record naming nobody (or our instance) keeps its generation
  kNoAcquireReadBack,        // an acquire without a clear answer is not read back under the lock
  kResolverWithoutLock,      // the resolver does not take the actor's lock
  kResolverNeverReleases,    // the resolver drops an unresolved acquire that landed instead of releasing it
  kResolverIgnoresLost,      // background tasks in flight still send after the lease is lost
  kUnresolvedNeverClosed,    // an unresolved acquire whose write never lands is read forever
  kPendingReleaseAdoptsVersion,  // a pending release retries If-Match a version read later
  kUnboundedPendingConcurrency,  // every pending entry worked at once (no PENDING_CONCURRENCY)
  kNoRefusalLimit,           // a pass of pending entries never stops on refusals in a row
  kPendingRetriesWhileInvalid,  // pending releases are retried while the node lease is invalid
  kLapseKeepsHolds,          // a lapse leaves the holds in place instead of parking their releases
  kDrainIgnoresPending,      // a drain reports drained with releases still pending
  kStopSkipsReleases,        // a clean stop writes `released` without releasing its holds first
  kRouteToAnyOwner,          // the routing read trusts a holder the membership view does not show live
  kRoutingReadUnbounded,     // the routing read waits for the bucket beyond the admission wait
  // ---- Hand-overs: drain and move (cluster/hand_over.*), docs/node-lease.md, "Drain" and "Moving actors"
  kMoveAcquiresBeforeReleaseLands,  // a move tells its target to acquire before its own release landed
  kTakeUnconditional,        // the target of a move writes the record without If-Match the released version
  kDrainReleasesUnderActors, // a drain releases holds under resident actors instead of closing them first
  // ---- HoldGate and Replica (replica/*), docs/storage.md
  kAckBeforeDurable,         // WhenReleasable says Ok at commit
  kAckLateUpload,            // an upload acknowledged after validity ended counts
  kReleaseWithoutValidity,   // an already-durable sequence is released without the validity check
  kRestoreIgnoresFence,      // restore applies every listed segment after the newest snapshot, in key order
  kGcDeletesChain,           // GC deletes older generations' segments, on the chain or not
  // ---- Alarms (alarms/*, actor/alarm_event.h, replica/replica.cc), docs/alarms.md
  kIndexEntryRemovedBeforeDurable,  // an alarm's index entries are removed at commit, not once the change is durable
  kFireBeforeDue,            // an alarm runs up to kFireBeforeDueMs before its time
  kDropHandedAlarm,          // a handed alarm is never looked at again by the node that handed it
  kSegmentBeforeEntry,       // the segment setting an alarm is sent without waiting for its index entry
  kEarlierEntriesBeforeFence,  // earlier holds' index entries are removed before this hold's fence landed
  // ---- The engine's memory pool (engine/engine.cc), docs/architecture.md "Memory"
  kPoolSkipsZeroing,         // a memory kept for reuse is not zeroed: the next instance sees the last one's bytes
  // ---- The actor runtime's core (actor/runtime_core.*), docs/architecture.md "How a request flows"
  kAnswerWithoutGate,        // an event's answer is released without asking the output gate (WhenReleasable)
  kInputGateConcurrent,      // the input gate lets an actor's next event run while its previous one still runs
  kIdempotentAnswerNotInBatch,  // an Idempotency-Key's record is committed apart, after the answer is released
  // ---- Messages between actors (actor/runtime_core.cc, routing/message_delivery.cc), docs/messages.md
  kMessageBeforeDurable,     // an outbox is read and delivered before the batch that sent its messages is durable
  kAppliedRecordNotInBatch,  // a receiver's applied record is committed apart, after the handler's answer is released
  kOutboxLostOnRestore,      // an actor restored with messages in its outbox never delivers them
  kMessagesOutOfOrder,       // one sender's messages to one receiver are delivered at once, not one after another
  kOutboxNeverWakes,         // a pending outbox writes no wake entry: a sender whose node died waits for a caller
  // ---- Where features meet (docs/node-lease.md "Drain", docs/alarms.md, docs/security.md)
  kDrainAcceptsBeforeCheck,  // a starting node takes actors before its first read of control/drain/
  kShardRankIncludesDrained, // the alarm shards' ranking counts draining nodes (their shards go unscanned)
  kAlarmWakesQuarantined,    // an alarm delivery starts an actor without the fresh quarantine read
  kStartSkipsQuarantineRead, // a start trusts only what the node remembers of the actor's quarantine (no read on a miss)
  kQuarantineCacheKeepsLateAnswer,  // the quarantine cache takes a late reply (a read's, a strike's, a listing's)
                                    // for fresh news, over a newer answer
  kQuarantineListingOutlivesTtl,  // the quarantine cache trusts its listing of quarantine/ however old it is
  kMoveOutcomeUnchecked,     // a move's outcome is what was heard: a lost take reply is `released`, a failed outcome write is dropped
  // ---- Sleeping holds (cluster/owners.*, replica/*), docs/node-lease.md "Sleeping holds"
  kWakeAcquiresNothingAfterRelease,  // a sleeping hold that was released (idle, count, drain, move) is woken as valid, without an acquisition
  kSleepingHoldSurvivesLeaseLoss,    // a sleeping hold outlives a lapse (its release is parked as for any hold) and is woken as valid in the next epoch
  kWakeForgetsOwnSegments,   // a woken hold restores only the chain its fence names, not the segments it wrote before it slept
  // ---- History and point-in-time restore (replica/history.*, gc.*, server/actor_admin.*), docs/storage.md
  kGcIgnoresRetention,       // GC collects as without retention: what the window still needs is deleted
  kRestoreWithoutAcquire,    // an operator's restore writes the old state into the log after its tip, under the
                             // generation it read, without a hold of its own
  kHistoryIgnoresFence,      // the history takes every listed segment in key order, late uploads of fenced holds too
  // ---- WebSockets (actor/runtime_core.cc, routing/socket_hub.*), docs/websockets.md
  kSocketSendBeforeDurable,  // what an event sends on its WebSockets leaves when the handler returns, before its batch is durable
  kSocketBroadcastAtRelease, // a broadcast goes to the connections with its tag when it is released, not the ones its event saw
  // ---- Class versions (control/class_versions.*, actor/v8_executor.cc), docs/tenants.md "Deploying"
  kRolloutUnstable,          // an actor's place in a rollout is drawn again for every share: it may flip between versions
  kUpgradeOutsideBatch,      // a migration's writes are committed apart from its version mark (the mark waits for the next write)
  kBrokenStateRuns,          // a broken version's state whose migration failed falls back to the broken version
  // ---- Tenants (actor/fair_queue.h, routing/front.cc, actor/stored_quota.*, actor/runtime_core.cc,
  // control/stored_usage.*), docs/tenants.md "Fair shares", "Quotas" and "Usage"
  kFairShareOff,             // a worker runs its jobs first come, first served, whatever their tenant
  kQuotaAfterRun,            // the front asks a tenant's request quota after running the request: a 429 may come with its effects
  kStoredQuotaUnreserved,    // a put checks the stored_bytes quota against committed bytes only: events at once may pass it together
  kResidentShareIgnored,     // a start ignores the tenant's resident_actors share (nothing hibernated, nothing refused)
  kStoredUsageUnconditional, // stored byte-seconds are written without If-Match: a slower integrator's write replaces a newer count
  kCount
};

class BrokenModels {
 public:
  // False in a build configured with WK_BROKEN_MODELS=OFF: every switch is compiled out.
  static constexpr bool kBuilt = WK_BROKEN_MODELS_BUILT != 0;
  static constexpr std::string_view kEnvironmentVariable = "WASMKEEP_BROKEN_MODELS";

  // None on: the design.
  BrokenModels() = default;

  // "name,name,...": each a known name (Name). Empty text: none on. kInvalidArgument names
  // an unknown name, and refuses any name at all in a build without broken models.
  static Result<BrokenModels> Parse(std::string_view names);
  // Parse(getenv(WASMKEEP_BROKEN_MODELS)), none when unset.
  static Result<BrokenModels> FromEnvironment();
  // REQUIRES: kBuilt (tests that name a switch in code skip themselves otherwise).
  static BrokenModels Of(std::initializer_list<BrokenModel> models);

  bool on(BrokenModel m) const {
    if constexpr (!kBuilt) {
      return false;
    } else {
      return bits_.test(static_cast<std::size_t>(m));
    }
  }
  bool any() const { return kBuilt && bits_.any(); }
  // The names switched on, comma-separated ("" for none).
  std::string ToString() const;

  static std::string_view Name(BrokenModel m);
  static std::vector<std::string_view> AllNames();

 private:
  std::bitset<static_cast<std::size_t>(BrokenModel::kCount)> bits_;
};

}  // namespace wk
