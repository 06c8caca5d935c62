#include "control/quarantine_cache.h"

#include <algorithm>

namespace wk::control {

QuarantineCache::QuarantineCache(Env& env, ObjectStore& store, QuarantineCacheOptions options)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kControl)), options_(options) {}

void PublishQuarantineCacheMetrics(MetricsRegistry& registry, const QuarantineCache& cache) {
  const QuarantineCacheStats& stats = cache.stats();
  const std::string help = "Quarantine checks of actors that were about to start, by how they were answered.";
  for (const auto& [answer, field] : {std::pair{"cached", &stats.cached}, std::pair{"read", &stats.reads},
                                      std::pair{"failed", &stats.read_failures}}) {
    registry.AddCallbackCounter("wasmkeep_quarantine_checks_total", help, [field] { return static_cast<double>(*field); },
                                {{"answer", answer}});
  }
}

const QuarantineCache::Entry* QuarantineCache::Fresh(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end() || env_.MonoNow() - it->second.read_at >= options_.ttl) return nullptr;
  return &it->second;
}

namespace {

// Whether `a` is older news than `b` about one actor: b holds every strike of a, and more
// (strikes are only added to a record, until a lift deletes it or the window drops them).
bool OlderNews(const QuarantineRecord& a, const QuarantineRecord& b) {
  if (a.strikes.size() >= b.strikes.size()) return false;
  for (const Strike& s : a.strikes) {
    if (std::find(b.strikes.begin(), b.strikes.end(), s) == b.strikes.end()) return false;
  }
  return true;
}

}  // namespace

void QuarantineCache::Insert(std::string key, Entry entry) {
  // Older news never replaces newer: an answer whose strikes the remembered record holds
  // (and more) is kept out, whenever it arrived; otherwise an answer to a request sent before
  // the one remembered is.
  if (auto it = entries_.find(key);
      it != entries_.end() && !options_.broken.on(BrokenModel::kQuarantineCacheKeepsLateAnswer)) {
    Entry& old = it->second;
    if (old.record && entry.record) {
      if (OlderNews(*entry.record, *old.record)) return;
      if (OlderNews(*old.record, *entry.record)) {
        entry.read_at = std::max(entry.read_at, old.read_at);
        old = std::move(entry);
        return;
      }
    }
    if (old.read_at > entry.read_at) return;
  }
  if (entries_.size() >= options_.max_entries && !entries_.contains(key)) {
    const MonoTime now = env_.MonoNow();
    std::erase_if(entries_, [&](const auto& kv) { return now - kv.second.read_at >= options_.ttl; });
    if (entries_.size() >= options_.max_entries) {
      entries_.clear();
      ++stats_.clears;
    }
  }
  entries_[std::move(key)] = std::move(entry);
}

Task<Result<std::optional<QuarantineRecord>>> QuarantineCache::Check(ActorId actor, QuarantineRead read) {
  std::string key = actor.ToString();
  if (read != QuarantineRead::kAlways) {
    if (const Entry* e = Fresh(key)) {
      ++stats_.cached;
      if (e->record && e->record->QuarantinedAt(env_.WallNow())) co_return e->record;
      co_return std::optional<QuarantineRecord>();
    }
    if (read == QuarantineRead::kNever) co_return std::optional<QuarantineRecord>();
  }
  const MonoTime read_at = env_.MonoNow();
  auto got = co_await ReadQuarantine(store_, actor, options_.read);
  if (!got.ok()) {
    ++stats_.read_failures;
    co_return got.status();
  }
  ++stats_.reads;
  const WallTime now = env_.WallNow();
  std::optional<QuarantineRecord> answer;
  if (got->has_value() && (*got)->QuarantinedAt(now)) answer = **got;
  Insert(key, Entry{read_at, std::move(*got)});
  // Newer news that arrived first (a strike of this node's) quarantines it: that answer.
  if (auto kept = entries_.find(key); kept != entries_.end() && kept->second.record &&
                                      kept->second.record->QuarantinedAt(now)) {
    answer = kept->second.record;
  }
  co_return answer;
}

std::optional<QuarantineRecord> QuarantineCache::Peek(const ActorId& actor) const {
  const Entry* e = Fresh(actor.ToString());
  if (e == nullptr || !e->record || !e->record->QuarantinedAt(env_.WallNow())) return std::nullopt;
  return e->record;
}

void QuarantineCache::Remember(const QuarantineRecord& record, std::optional<MonoTime> asked_at) {
  const bool late_wins = options_.broken.on(BrokenModel::kQuarantineCacheKeepsLateAnswer);
  Entry entry{late_wins ? env_.MonoNow() : asked_at.value_or(env_.MonoNow()), record};
  Insert(record.actor.ToString(), std::move(entry));
}

void QuarantineCache::Forget(const ActorId& actor) { entries_.erase(actor.ToString()); }

}  // namespace wk::control
