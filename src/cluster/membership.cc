#include "cluster/membership.h"

#include "base/log.h"

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

Task<Status> Membership::ListOnce() {
  const MonoTime start = env_.MonoNow();
  const CallOptions call{timing_.lease_period()};
  std::vector<std::string> keys;
  ListOptions options;
  options.prefix = std::string(kNodesPrefix);
  for (int page = 0; page < kMaxListingPages; ++page) {
    auto listed = co_await store_.List(options, call);
    if (!listed.ok()) {
      ++stats_.failures;
      co_return listed.status();
    }
    for (auto& e : listed->entries) keys.push_back(e.key);
    if (!listed->next_continuation) break;
    options.continuation = *listed->next_continuation;
  }

  View next;
  const MonoTime listed_at = env_.MonoNow();
  for (const auto& key : keys) {
    const NodeId id(key.substr(kNodesPrefix.size()));
    if (!ValidateNodeId(id).ok()) continue;  // not a node object (nothing else lives here)
    auto got = co_await store_.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;  // deleted since the LIST
      ++stats_.failures;
      co_return got.status();
    }
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
    // Taken at the read (ADR §2: the watch runs from when B saw the object, and a body can
    // describe no later instant than its GET's reply).
    const MonoTime read_at = broken_.on(BrokenModel::kWatchFromListingStart) ? listed_at : env_.MonoNow();
    auto prev = view_.find(id);
    v.unchanged_since = (prev != view_.end() && SameFingerprint(prev->second, v)) ? prev->second.unchanged_since : read_at;
    next.emplace(id, std::move(v));
  }
  view_ = std::move(next);
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
  const bool fresh = !old.written_at || env_.WallNow() - *old.written_at < timing_.takeover_after() + timing_.max_skew;
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
