#include "cluster/start_guard.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/log.h"

namespace wk {
namespace {

// A bound on the listing's pages, as the membership listing's (1000 keys a page).
constexpr int kMaxListingPages = 100;
// The horizon of the per-actor-lease versions: a node was live while its heartbeat was
// younger than this many heartbeat periods.
constexpr int kOldHorizonPeriods = 3;

std::string Seconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", ToSeconds(d));
  return buf;
}

}  // namespace

Duration OldHeartbeatFreshFor(const LeaseTiming& timing) {
  return kOldHorizonPeriods * timing.heartbeat_period + timing.takeover_after() + timing.max_skew;
}

bool OldHeartbeatFresh(const OldHeartbeat& old, WallTime now, const LeaseTiming& timing) {
  if (!old.written_at || *old.written_at > now) return true;
  return now - *old.written_at < OldHeartbeatFreshFor(timing);
}

StartGuard::StartGuard(Env& env, ObjectStore& store, LeaseTiming timing) : env_(env), store_(store), timing_(timing) {}

Task<Result<StartGuardOutcome>> StartGuard::Round(bool first, Duration* left, std::string* waiting_for) {
  const CallOptions call{timing_.attempt_timeout()};
  std::vector<std::string> keys;
  ListOptions options;
  options.prefix = std::string(kNodesPrefix);
  for (int page = 0; page < kMaxListingPages; ++page) {
    auto listed = co_await store_.List(options, call);
    if (!listed.ok()) co_return listed.status();
    for (auto& e : listed->entries) keys.push_back(e.key);
    if (!listed->next_continuation) break;
    options.continuation = *listed->next_continuation;
  }
  *left = Duration(0);
  for (const auto& key : keys) {
    const NodeId id(key.substr(kNodesPrefix.size()));
    if (!ValidateNodeId(id).ok()) continue;
    auto got = co_await store_.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;  // deleted since the listing
      co_return got.status();
    }
    auto obj = DecodeNodeObject(got->body);
    if (!obj.ok() || !std::holds_alternative<OldHeartbeat>(*obj)) continue;
    const OldHeartbeat& old = std::get<OldHeartbeat>(*obj);
    const MonoTime mono_now = env_.MonoNow();
    auto it = seen_.find(id);
    if (it != seen_.end() && it->second.body != got->body) {
      StartGuardOutcome out{StartGuardOutcome::Kind::kOldVersionRunning,
                            key + " is being rewritten in an old format (wasmkeep-node " +
                                std::to_string(old.format_version) +
                                "): an old version is running; stop every old node before starting this one (old and "
                                "new versions never run together)"};
      co_return out;
    }
    if (it == seen_.end()) {
      if (!first) {
        StartGuardOutcome out{StartGuardOutcome::Kind::kOldVersionRunning,
                              key + " appeared in an old format (wasmkeep-node " + std::to_string(old.format_version) +
                                  ") while this node waited: an old version is running; stop every old node before "
                                  "starting this one"};
        co_return out;
      }
      it = seen_.emplace(id, Seen{got->body, mono_now}).first;
    }
    const WallTime now = env_.WallNow();
    Duration remaining{0};
    if (old.written_at && *old.written_at <= now) {
      remaining = *old.written_at + OldHeartbeatFreshFor(timing_) - now;
    } else {
      // Dated ahead of this clock (or unreadable): counted from our first read of this very
      // body, on the monotonic clock.
      if (!it->second.warned_ahead) {
        it->second.warned_ahead = true;
        WK_LOG_WARN("start guard: an old-format heartbeat is dated ahead of this clock or has no readable time; "
                    "counted from this node's first read of it",
                    {{"object", key}, {"wait_at_most", Seconds(OldHeartbeatFreshFor(timing_))}});
      }
      remaining = it->second.first_read + OldHeartbeatFreshFor(timing_) - mono_now;
    }
    if (remaining > Duration(0) && !broken_.on(BrokenModel::kStartGuardOff)) {
      if (remaining > *left) *waiting_for = key;
      *left = std::max(*left, remaining);
    }
  }
  if (*left > Duration(0)) co_return StartGuardOutcome{StartGuardOutcome::Kind::kStopped, ""};
  co_return StartGuardOutcome{StartGuardOutcome::Kind::kGo, ""};
}

Task<StartGuardOutcome> StartGuard::Run() {
  const Duration every = timing_.heartbeat_period / 2;
  // Until one round completes, every old-format body is the baseline later ones are judged
  // against; after it, a body that appears or changes was written while we waited.
  bool first = true;
  for (;;) {
    ++stats_.listings;
    Duration left{0};
    std::string waiting_for;
    auto round = co_await Round(first, &left, &waiting_for);
    if (round.ok()) {
      first = false;
      if (round->kind != StartGuardOutcome::Kind::kStopped) {
        if (round->kind == StartGuardOutcome::Kind::kOldVersionRunning) {
          WK_LOG_ERROR("start guard: an old version is running; this node will not start", {{"why", round->message}});
        } else if (stats_.waits > 0) {
          WK_LOG_INFO("start guard: no old version can be running any more", {});
        }
        co_return std::move(*round);
      }
      ++stats_.waits;
      WK_LOG_INFO("start guard: waiting while an old-format heartbeat may belong to a running old version",
                  {{"object", waiting_for}, {"left", Seconds(left)}});
    } else {
      // Never go on a listing we could not finish.
      ++stats_.listing_failures;
      WK_LOG_WARN("start guard: cannot list nodes/; retrying", {{"error", round.status().ToString()}});
    }
    if (!co_await env_.SleepFor(every)) co_return StartGuardOutcome{StartGuardOutcome::Kind::kStopped, "cancelled"};
  }
}

}  // namespace wk
