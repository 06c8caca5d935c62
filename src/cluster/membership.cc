#include "cluster/membership.h"

#include "base/log.h"
#include "cluster/start_guard.h"

namespace wk {
namespace {

// A bound on the listing's pages: 1000 keys a page, so up to 100,000 nodes.
constexpr int kMaxListingPages = 100;

bool SameFingerprint(const NodeView& a, const NodeView& b) {
  if (a.record.has_value() != b.record.has_value() || a.old.has_value() != b.old.has_value()) return false;
  if (a.record) {
    return a.record->state == b.record->state && a.record->instance == b.record->instance &&
           a.record->written_at == b.record->written_at;
  }
  if (a.old) return a.old->written_at == b.old->written_at;
  return a.error == b.error;
}

}  // namespace

Membership::Membership(Env& env, ObjectStore& store, LeaseTiming timing)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kListing)), timing_(timing) {}

bool Membership::IsLive(const NodeId& node_id, const InstanceToken& instance) const {
  auto it = view_.find(node_id);
  return it != view_.end() && it->second.live() && it->second.record->instance == instance;
}

std::string_view ReadReasonName(ReadReason r) {
  switch (r) {
    case ReadReason::kNew: return "new";
    case ReadReason::kNotLive: return "not_live";
    case ReadReason::kSizeChanged: return "size_changed";
    case ReadReason::kAfterSilence: return "after_silence";
    case ReadReason::kWatch: return "watch";
    case ReadReason::kRefresh: return "refresh";
  }
  return "?";
}

Task<Status> Membership::ListOnce() {
  const MonoTime start = env_.MonoNow();
  const CallOptions call{timing_.lease_period()};
  std::vector<ListEntry> entries;
  ListOptions options;
  options.prefix = std::string(kNodesPrefix);
  for (int page = 0; page < kMaxListingPages; ++page) {
    auto listed = co_await store_.List(options, call);
    if (!listed.ok()) {
      ++stats_.failures;
      co_return listed.status();
    }
    for (auto& e : listed->entries) entries.push_back(std::move(e));
    if (!listed->next_continuation) break;
    options.continuation = *listed->next_continuation;
  }

  View next;
  std::map<NodeId, Listed> next_listed;
  const MonoTime listed_at = env_.MonoNow();
  const Duration refresh_after = kRefreshPeriods * timing_.heartbeat_period;
  for (const auto& entry : entries) {
    const NodeId id(entry.key.substr(kNodesPrefix.size()));
    if (!ValidateNodeId(id).ok()) continue;  // not a node object (nothing else lives here)
    auto prev = view_.find(id);
    auto seen = listed_.find(id);
    const bool known = prev != view_.end() && seen != listed_.end();
    const bool changed = known && entry.version != seen->second.version;
    // Whether to read the body (the header's ReadReason), or keep what this node holds.
    std::optional<ReadReason> reason;
    if (!known) {
      reason = ReadReason::kNew;
    } else if (!changed) {
      const NodeView& held = prev->second;
      if (held.body_current) {
        // The same version as the body held: the same bytes.
      } else if (listed_at - held.unchanged_since >= timing_.fence_watch()) {
        reason = ReadReason::kWatch;
      } else if (listed_at - seen->second.read_at >= refresh_after) {
        reason = ReadReason::kRefresh;
      }
    } else if (broken_.on(BrokenModel::kListingAssumesRenewals) && prev->second.live()) {
      // Broken model: every new version of a live record taken for its renewal.
    } else if (!prev->second.live()) {
      reason = ReadReason::kNotLive;
    } else if (entry.size != seen->second.size) {
      reason = ReadReason::kSizeChanged;
    } else if (listed_at - seen->second.version_since >= timing_.fence_watch()) {
      reason = ReadReason::kAfterSilence;
    } else if (listed_at - seen->second.read_at >= refresh_after) {
      reason = ReadReason::kRefresh;
    }

    Listed now_listed{entry.version, entry.size, changed || !known ? listed_at : seen->second.version_since,
                      known ? seen->second.read_at : MonoTime{}};
    if (!reason) {
      // Kept: the same version as before, or a renewal of a live record (same instance,
      // state, address and pin; a later written_at this node does not know).
      NodeView v = prev->second;
      if (changed) {
        ++stats_.renewals_assumed;
        v.body_current = false;
        v.unchanged_since = listed_at;  // it wrote: the fence watch starts again
      } else {
        ++stats_.unchanged;
      }
      next.emplace(id, std::move(v));
      next_listed.emplace(id, now_listed);
      continue;
    }
    auto got = co_await store_.Get(entry.key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;  // deleted since the LIST
      ++stats_.failures;
      co_return got.status();
    }
    ++stats_.reads[static_cast<std::size_t>(*reason)];
    NodeView v;
    v.node_id = id;
    auto obj = DecodeNodeObject(got->body);
    if (!obj.ok()) {
      v.error = obj.status().message();
    } else if (auto* r = std::get_if<NodeRecord>(&*obj)) {
      v.record = *r;
    } else {
      v.old = std::get<OldHeartbeat>(*obj);
      ReportOldFormat(id, *v.old);
    }
    // Taken at the read (docs/node-lease.md, "When to fence": the watch runs from when B saw the
    // object, and a body can describe no later instant than its GET's reply).
    const MonoTime read_at = env_.MonoNow();
    const MonoTime watch_from = broken_.on(BrokenModel::kWatchFromListingStart) ? listed_at : read_at;
    if (prev != view_.end() && SameFingerprint(prev->second, v)) {
      v.unchanged_since = prev->second.unchanged_since;
    } else if (known && !changed && !prev->second.body_current && got->version == entry.version) {
      // The version taken for a renewal when it was first listed, read now (for the watch):
      // the same version, so the same bytes since that listing, which the watch already
      // counts from. (Versions are compared only for equality of one object's token: equal
      // tokens are one version; unequal ones, R2's read-after-write quirk or a newer write,
      // fall back to the read's time.)
      v.unchanged_since = prev->second.unchanged_since;
    } else {
      v.unchanged_since = watch_from;
    }
    now_listed.read_at = read_at;
    next.emplace(id, std::move(v));
    next_listed.emplace(id, now_listed);
  }
  view_ = std::move(next);
  listed_ = std::move(next_listed);
  for (auto it = old_reported_.begin(); it != old_reported_.end();) {
    auto v = view_.find(it->first);
    it = (v == view_.end() || !v->second.old) ? old_reported_.erase(it) : std::next(it);
  }
  stats_.last_duration = env_.MonoNow() - start;
  stats_.total_seconds += ToSeconds(stats_.last_duration);
  stats_.seconds.Observe(ToSeconds(stats_.last_duration));
  ++stats_.listings;
  for (auto& l : listeners_) l(view_);
  co_return Status::Ok();
}

void Membership::ReportOldFormat(const NodeId& id, const OldHeartbeat& old) {
  // Once per change, not at every listing: a retired node's heartbeat stays for good.
  const std::int64_t written_ms = old.written_at ? ToUnixMs(*old.written_at) : -1;
  auto [it, fresh_entry] = old_reported_.try_emplace(id, written_ms);
  if (!fresh_entry && it->second == written_ms) return;
  it->second = written_ms;
  // Fresh by the start guard's test (docs/node-lease.md, "When to forget"): an old version
  // may be running under this id, which is an error; stale: a retired node's, a notice.
  const bool fresh = OldHeartbeatFresh(old, env_.WallNow(), timing_);
  if (fresh) {
    ++stats_.old_format_errors;
    WK_LOG_ERROR("old-format heartbeat in the bucket, fresh: an old version may be running under this id (it frees "
                 "nothing; stop it)",
                 {{"node", id.str()}, {"format", std::to_string(old.format_version)}});
  } else {
    ++stats_.old_format_notices;
    WK_LOG_INFO("old-format heartbeat of a retired node (it frees nothing; `cluster forget` removes it)",
                {{"node", id.str()}, {"format", std::to_string(old.format_version)}});
  }
}

Task<void> Membership::Run() {
  for (;;) {
    const MonoTime next = env_.MonoNow() + timing_.heartbeat_period;
    Status s = co_await ListOnce();
    if (!s.ok()) WK_LOG_WARN("node listing failed", {{"error", s.ToString()}});
    if (!co_await env_.SleepUntil(next)) co_return;  // cancelled
  }
}

}  // namespace wk
