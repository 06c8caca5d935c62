// The operator's cluster commands (docs/node-lease.md, "When to fence" and "When to forget"): status, fence, forget. The CLI
// (`wasmkeep cluster ...`) prints what these return; they are here, beside the protocol,
// so their rules are tested with it.
//
// Threading: Env loop thread only.
#pragma once

#include <string>
#include <vector>

#include "base/broken_models.h"
#include "cluster/membership.h"
#include "cluster/timing.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

// One node as `cluster status` shows it.
struct NodeStatus {
  NodeId node_id;
  // live | live-expired | released | fenced | old-running | old-retired | corrupt
  std::string state;
  std::string detail;       // a sentence for people
  InstanceToken instance;   // empty if none
  std::string address;
  std::string software_version;
  std::optional<Duration> age;  // operator's clock minus written_at
  bool error = false;           // an old version running, a corrupt object
};

// Classifies one listed node against the operator's clock.
NodeStatus DescribeNode(const NodeView& view, WallTime now, const LeaseTiming& timing);

// Lists nodes/ and classifies every node.
Task<Result<std::vector<NodeStatus>>> ClusterStatus(Env& env, ObjectStore& store, LeaseTiming timing);

struct FenceOutcome {
  bool written = false;         // false: nothing to do (already fenced)
  bool created = false;         // the object was absent: a fence with no instance
  InstanceToken instance;       // the instance fenced (empty when created)
  WallTime written_at{};        // kept, or the operator's clock when created
  WallTime free_at{};           // records naming it are free from then (written_at + ttl + grace)
};

// `cluster fence NODE`: over the current object, If-Match the version read (or
// if_match, when given: a fence decided on that earlier read); created with
// If-None-Match: * when absent. Nothing over a fence (written=false) or an old format
// (kInvalidArgument). kPreconditionFailed: the object changed in between: with
// if_match, at once; without, after kOperatorFenceAttempts reads each overtaken by a write
// of the node (a live node renews every heartbeat period, and a fence read just before a
// renewal loses to it: each attempt reads again and fences what it read, so each is as
// safe as the first). Without if_match, a request the bucket failed without deciding
// (kRetryable, kUnknownOutcome: throttled, timed out, reply lost) is also tried again, after
// kOperatorFenceRetryPause, within the same kOperatorFenceAttempts; a fence found in place
// after a write whose reply was lost is reported as written. (A fence in the cluster tests
// failed once against RGW loaded by the whole suite, its error not recorded; an operator's
// command should ride out a bucket that is briefly slow or throttling either way.)
//
// A fence created over an absent object is dated by the operator's clock, which nothing
// else bounds: it is compared first with the bucket's (ObjectStore::BucketTime), and the
// fence is refused (kPreconditionFailed, nothing written) when the two differ by more than
// max_skew, unless `force`. broken: tests only (base/broken_models.h).
inline constexpr int kOperatorFenceAttempts = 8;
inline constexpr Duration kOperatorFenceRetryPause = std::chrono::milliseconds(200);
Task<Result<FenceOutcome>> OperatorFence(Env& env, ObjectStore& store, NodeId node_id,
                                         LeaseTiming timing, std::optional<Version> if_match,
                                         bool force = false, BrokenModels broken = {});

// `cluster forget NODE`: deletes an old-format heartbeat once stale by the start guard's
// test (OldHeartbeatFresh, start_guard.h: written_at + 3 heartbeat periods + ttl + grace +
// max_skew passed on the operator's clock). Anything else
// is refused (kInvalidArgument / kPreconditionFailed) with the reason.
Task<Status> OperatorForget(Env& env, ObjectStore& store, NodeId node_id, LeaseTiming timing);

}  // namespace wk
