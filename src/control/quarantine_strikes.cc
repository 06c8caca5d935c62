#include "control/quarantine_strikes.h"

#include "base/log.h"

namespace wk::control {

QuarantineStrikes::QuarantineStrikes(Env& env, ObjectStore& store, QuarantineCache& cache,
                                     QuarantineStrikesOptions options)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kControl)), cache_(cache), options_(std::move(options)) {}

QuarantineStrikes::~QuarantineStrikes() {
  *alive_ = false;
  if (sweep_.valid()) sweep_.Cancel();
}

void QuarantineStrikes::StartSweeps(Duration period) {
  if (!options_.policy.enabled()) return;
  const auto first = static_cast<std::int64_t>(env_.RandomBelow(static_cast<std::uint64_t>(period.count()) + 1));
  ScheduleSweep(Duration(first), period);
}

void QuarantineStrikes::ScheduleSweep(Duration after, Duration period) {
  std::weak_ptr<bool> alive = alive_;
  env_.StartTimer(env_.MonoNow() + after, [this, alive, period] {
    if (auto a = alive.lock(); !a || !*a) return;
    if (!sweep_.valid() || sweep_.done()) sweep_ = env_.Spawn(Sweep(), "quarantine sweep");
    ScheduleSweep(period, period);
  });
}

Task<void> QuarantineStrikes::Sweep() {
  std::shared_ptr<bool> alive = alive_;
  auto deleted = co_await DeleteSpentQuarantines(store_, env_, options_.policy, options_.call);
  if (!*alive) co_return;
  if (!deleted.ok()) {
    WK_LOG_WARN("quarantine sweep failed; the next one tries again", {{"error", deleted.status().ToString()}});
    co_return;
  }
  stats_.records_deleted += *deleted;
  if (*deleted > 0) WK_LOG_INFO("spent quarantine records deleted", {{"records", std::to_string(*deleted)}});
}

void QuarantineStrikes::Strike(const ActorId& actor, std::string reason, bool crash) {
  if (!options_.policy.enabled()) return;
  ++in_flight_;
  env_.Spawn(RunStrike(actor, std::move(reason), crash), "quarantine strike " + actor.ToString());
}

Task<void> QuarantineStrikes::RunStrike(ActorId actor, std::string reason, bool crash) {
  std::shared_ptr<bool> alive = alive_;
  const std::string name = actor.ToString();
  const MonoTime sent = env_.MonoNow();
  auto outcome = co_await RecordStrike(store_, env_, actor, options_.node_id.str(), reason, options_.policy,
                                       options_.call);
  if (!*alive) co_return;
  --in_flight_;
  const char* cause = crash ? "crash" : "instance";
  if (!outcome.ok()) {
    ++stats_.strike_failures;
    WK_LOG_WARN("quarantine strike not recorded",
                {{"node", options_.node_id.str()}, {"actor", name}, {"cause", cause}, {"error", outcome.status().ToString()}});
    co_return;
  }
  const QuarantineRecord& record = outcome->record;
  cache_.Remember(record, sent);
  if (outcome->counted) {
    if (crash) {
      ++stats_.crash_strikes;
    } else {
      ++stats_.instance_strikes;
    }
    WK_LOG_WARN("actor strike", {{"node", options_.node_id.str()},
                                 {"actor", name},
                                 {"cause", cause},
                                 {"strikes", std::to_string(record.strikes.size()) + "/" +
                                                 std::to_string(options_.policy.strikes)},
                                 {"reason", record.reason}});
  } else {
    ++stats_.not_counted;
  }
  if (outcome->quarantined_now) {
    ++stats_.quarantines;
    WK_LOG_WARN("actor quarantined", {{"node", options_.node_id.str()},
                                      {"actor", name},
                                      {"until", FormatUtc(record.until)},
                                      {"strikes", std::to_string(record.strikes.size())},
                                      {"reason", record.reason}});
  }
  if (record.QuarantinedAt(env_.WallNow()) && unload_) unload_(actor);
}

}  // namespace wk::control
