#include "cluster/operator.h"

#include "base/log.h"
#include "cluster/start_guard.h"

namespace wk {
namespace {

std::string Seconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", ToSeconds(d));
  return buf;
}

}  // namespace

NodeStatus DescribeNode(const NodeView& v, WallTime now, const LeaseTiming& timing) {
  NodeStatus s;
  s.node_id = v.node_id;
  if (v.record) {
    const NodeRecord& r = *v.record;
    s.instance = r.instance;
    s.address = r.address;
    s.software_version = r.software_version;
    s.age = now - r.written_at;
    switch (r.state) {
      case LeaseState::kLive:
        if (*s.age <= timing.ttl) {
          s.state = "live";
          s.detail = "lease renewed " + Seconds(*s.age) + " ago";
        } else {
          s.state = "live-expired";
          s.detail = "no renewal for " + Seconds(*s.age) + "; peers fence it after ttl + grace (" +
                     FormatDuration(timing.takeover_after()) + ")";
        }
        break;
      case LeaseState::kReleased:
        s.state = "released";
        s.detail = "stopped cleanly";
        break;
      case LeaseState::kFenced:
        s.state = "fenced";
        s.detail = r.instance.empty() ? "fenced by an operator while absent" : "fenced; its process exits at its next write";
        break;
    }
    return s;
  }
  if (v.old) {
    s.software_version = "old format " + std::to_string(v.old->format_version);
    if (!v.old->written_at) {
      s.state = "old-running";
      s.error = true;
      s.detail = "old-format heartbeat of unknown age: an old version may be running";
    } else {
      s.age = now - *v.old->written_at;
      const bool fresh = OldHeartbeatFresh(*v.old, now, timing);  // the start guard's test
                                                                  // (docs/node-lease.md, "Upgrading
                                                                  // from per-actor leases")
      s.state = fresh ? "old-running" : "old-retired";
      s.error = fresh;
      s.detail = fresh ? "an old version is running under this id: stop it (old and new versions never run together)"
                       : "a retired node's old-format heartbeat; `cluster forget` removes it";
    }
    return s;
  }
  s.state = "corrupt";
  s.error = true;
  s.detail = v.error;
  return s;
}

Task<Result<std::vector<NodeStatus>>> ClusterStatus(Env& env, ObjectStore& store, LeaseTiming timing) {
  Membership membership(env, store, timing);
  Status s = co_await membership.ListOnce();
  if (!s.ok()) co_return s;
  std::vector<NodeStatus> out;
  const WallTime now = env.WallNow();
  for (const auto& [id, v] : membership.view()) out.push_back(DescribeNode(v, now, timing));
  co_return out;
}

namespace {
// One read and one conditional write; *overtaken: the write was refused because the node
// wrote after the read (a refusal worth another attempt).
Task<Result<FenceOutcome>> FenceOnce(Env& env, ObjectStore& store, NodeId node_id, LeaseTiming timing,
                                    std::optional<Version> if_match, bool force, BrokenModels broken, bool* overtaken);
}  // namespace

Task<Result<FenceOutcome>> OperatorFence(Env& env, ObjectStore& store, NodeId node_id, LeaseTiming timing,
                                         std::optional<Version> if_match, bool force, BrokenModels broken) {
  if (Status s = ValidateNodeId(node_id); !s.ok()) co_return s;
  // Only a fence decided on the caller's own read (if_match) is tried once; otherwise a
  // renewal that landed between our read and our write is read again, and so is a request
  // the bucket failed without deciding (operator.h).
  const int attempts = if_match ? 1 : kOperatorFenceAttempts;
  bool maybe_written = false;  // an earlier attempt's write may have landed (reply lost)
  for (int attempt = 1;; ++attempt) {
    bool overtaken = false;
    Result<FenceOutcome> out = co_await FenceOnce(env, store, node_id, timing, if_match, force, broken, &overtaken);
    if (out.ok()) {
      // Found fenced after a write whose reply was lost: most likely that write. Said as
      // written, so the command does not claim someone else had fenced it.
      if (!out->written && maybe_written) out->written = true;
      co_return out;
    }
    const bool transient = out.code() == Code::kRetryable || out.code() == Code::kUnknownOutcome;
    if ((!overtaken && !transient) || attempt >= attempts) co_return out;
    maybe_written = maybe_written || out.code() == Code::kUnknownOutcome;
    if (transient) {
      // The bucket failed the request (throttled, timed out, connection lost): a moment's
      // pause before reading again. A renewal that overtook the write is read at once (the
      // next one is a heartbeat period away).
      if (!co_await env.SleepFor(kOperatorFenceRetryPause)) co_return out;
    }
  }
}

namespace {
Task<Result<FenceOutcome>> FenceOnce(Env& env, ObjectStore& store, NodeId node_id, LeaseTiming timing,
                                    std::optional<Version> if_match, bool force, BrokenModels broken, bool* overtaken) {
  const std::string key = NodeKey(node_id);
  const CallOptions call{timing.ttl};
  auto got = co_await store.Get(key, call);
  FenceOutcome out;
  if (!got.ok() && got.code() != Code::kNotFound) co_return got.status();
  if (!got.ok()) {
    // Absent (deleted by mistake, the machine gone): a fence with no instance, dated by
    // the operator's clock. Records naming this id are free ttl + grace later; a process
    // still running under it fails its next write and exits. That argument holds only if
    // the operator's clock is within max_skew of true time (docs/node-lease.md, "When to fence":
    // "within the skew bound"), so it is held against the bucket's first.
    if (!force && !broken.on(BrokenModel::kOperatorFenceTrustsClock)) {
      auto bucket = co_await store.BucketTime(call);
      if (!bucket.ok()) {
        co_return PreconditionFailed(key + " is absent, and the bucket's clock cannot be read to check this "
                                     "machine's (" + bucket.status().message() + "); nothing written (--force dates the "
                                     "fence by this machine's clock anyway)");
      }
      const WallTime now = env.WallNow();
      const auto ms = [](Duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
      if (now < bucket->earliest - timing.max_skew || now > bucket->latest + timing.max_skew) {
        const bool behind = now < bucket->earliest;
        co_return PreconditionFailed(
            "this machine's clock is " + (behind ? ms(bucket->earliest - now) + " ms behind" : ms(now - bucket->latest) + " ms ahead of") +
            " the bucket's, more than max_skew (" + ms(timing.max_skew) + " ms): a fence of the absent " + key +
            " dated by it could free records too early; nothing written. Fix the clock (NTP), or pass --force");
      }
    }
    NodeRecord fence;
    fence.state = LeaseState::kFenced;
    fence.written_at = env.WallNow();
    fence.started_at = fence.written_at;
    fence.node_id = node_id;
    fence.software_version = "operator";
    auto put = co_await store.Put(key, EncodeNodeRecord(fence), Precondition::IfNoneMatchAny(), call);
    if (!put.ok()) co_return put.status();
    out.written = out.created = true;
    out.written_at = fence.written_at;
    out.free_at = fence.written_at + std::chrono::duration_cast<std::chrono::milliseconds>(timing.takeover_after());
    WK_LOG_WARN("operator fenced an absent node", {{"node", node_id.str()}});
    co_return out;
  }
  auto obj = DecodeNodeObject(got->body);
  if (!obj.ok()) co_return Fatal(key + " is unreadable (" + obj.status().message() + "); nothing written");
  if (std::holds_alternative<OldHeartbeat>(*obj)) {
    co_return InvalidArgument(key + " is an old-format heartbeat; nothing written (use `cluster forget` once it is stale)");
  }
  NodeRecord r = std::get<NodeRecord>(*obj);
  out.instance = r.instance;
  out.written_at = r.written_at;
  out.free_at = r.written_at + std::chrono::duration_cast<std::chrono::milliseconds>(timing.takeover_after());
  if (r.state == LeaseState::kFenced) co_return out;  // nothing over a fence
  // No watch needed: the time bound alone keeps an operator's fence safe (docs/node-lease.md, "When
  // to fence").
  r.state = LeaseState::kFenced;  // instance, written_at and the rest kept
  const Version condition = if_match ? *if_match : got->version;
  // If-Match the version read: a node that wrote in between is alive, and its write must
  // not be overwritten with an older written_at (docs/node-lease.md, "When to fence").
  Precondition precondition = broken.on(BrokenModel::kOperatorFenceUnconditional) ? Precondition::None()
                                                                                   : Precondition::IfMatch(condition);
  auto put = co_await store.Put(key, EncodeNodeRecord(r), precondition, call);
  if (!put.ok()) {
    if (put.code() == Code::kPreconditionFailed) {
      *overtaken = true;
      co_return PreconditionFailed(key + " changed after it was read (the node wrote); nothing written");
    }
    co_return put.status();
  }
  out.written = true;
  WK_LOG_WARN("operator fenced a node", {{"node", node_id.str()}, {"instance", r.instance.str()}});
  co_return out;
}
}  // namespace

Task<Status> OperatorForget(Env& env, ObjectStore& store, NodeId node_id, LeaseTiming timing) {
  if (Status s = ValidateNodeId(node_id); !s.ok()) co_return s;
  const std::string key = NodeKey(node_id);
  const CallOptions call{timing.ttl};
  auto got = co_await store.Get(key, call);
  if (!got.ok()) co_return got.status();
  auto obj = DecodeNodeObject(got->body);
  if (!obj.ok() || !std::holds_alternative<OldHeartbeat>(*obj)) {
    co_return InvalidArgument(key + " is not an old-format heartbeat; `cluster forget` removes only those (node "
                              "leases are never deleted: use `cluster fence`)");
  }
  const auto& old = std::get<OldHeartbeat>(*obj);
  if (!old.written_at) co_return PreconditionFailed(key + " has no readable written_at: its age cannot be judged");
  const Duration age = env.WallNow() - *old.written_at;
  const Duration stale_after = OldHeartbeatFreshFor(timing);
  if (OldHeartbeatFresh(old, env.WallNow(), timing)) {
    co_return PreconditionFailed(key + " was written " + FormatDuration(age) + " ago; an old version may still run (stale after " +
                                 FormatDuration(stale_after) + ")");
  }
  Precondition condition = store.SupportsConditionalDelete() ? Precondition::IfMatch(got->version) : Precondition::None();
  co_return co_await store.Delete(key, condition, call);
}

}  // namespace wk
