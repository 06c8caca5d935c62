#include "control/quarantine_cache.h"

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

void QuarantineCache::Insert(std::string key, Entry entry) {
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
  Entry entry{read_at, {}};
  if (got->has_value() && (*got)->QuarantinedAt(env_.WallNow())) entry.record = std::move(**got);
  std::optional<QuarantineRecord> answer = entry.record;
  Insert(std::move(key), std::move(entry));
  co_return answer;
}

std::optional<QuarantineRecord> QuarantineCache::Peek(const ActorId& actor) const {
  const Entry* e = Fresh(actor.ToString());
  if (e == nullptr || !e->record || !e->record->QuarantinedAt(env_.WallNow())) return std::nullopt;
  return e->record;
}

void QuarantineCache::Remember(const QuarantineRecord& record) {
  Entry entry{env_.MonoNow(), {}};
  if (record.QuarantinedAt(env_.WallNow())) entry.record = record;
  Insert(record.actor.ToString(), std::move(entry));
}

void QuarantineCache::Forget(const ActorId& actor) { entries_.erase(actor.ToString()); }

}  // namespace wk::control
