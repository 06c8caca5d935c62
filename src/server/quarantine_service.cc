#include "server/quarantine_service.h"

#include "base/log.h"

namespace wk {

QuarantineService::QuarantineService(Env& env, ObjectStore& store, control::QuarantineCache& cache,
                                     QuarantineServiceOptions options, RunningEvents* journal)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kControl)), cache_(cache), options_(std::move(options)), journal_(journal) {}

void PublishQuarantineMetrics(MetricsRegistry& registry, const QuarantineService& service) {
  const QuarantineStats& stats = service.stats();
  auto counter = [&registry](std::string name, std::string help, const std::uint64_t& field, MetricLabels labels) {
    registry.AddCallbackCounter(std::move(name), std::move(help), [&field] { return static_cast<double>(field); },
                                std::move(labels));
  };
  const std::string help = "Quarantine strikes this node recorded, by cause.";
  counter("wasmkeep_quarantine_strikes_total", help, stats.instance_strikes, {{"cause", "instance"}});
  counter("wasmkeep_quarantine_strikes_total", help, stats.crash_strikes, {{"cause", "crash"}});
  counter("wasmkeep_quarantines_total", "Actors quarantined by a strike of this node.", stats.quarantines, {});
  counter("wasmkeep_quarantine_strike_failures_total", "Strikes the bucket did not take (the strike is lost).",
          stats.strike_failures, {});
  counter("wasmkeep_quarantine_records_deleted_total",
          "Spent quarantine records (ended, no strike that still counts) this node's sweeps deleted.",
          stats.records_deleted, {});
}

QuarantineService::~QuarantineService() {
  *alive_ = false;
  if (sweep_.valid()) sweep_.Cancel();
}

void QuarantineService::StartSweeps(Duration period) {
  if (!options_.policy.enabled()) return;
  const auto first = static_cast<std::int64_t>(env_.RandomBelow(static_cast<std::uint64_t>(period.count()) + 1));
  ScheduleSweep(Duration(first), period);
}

void QuarantineService::ScheduleSweep(Duration after, Duration period) {
  std::weak_ptr<bool> alive = alive_;
  env_.StartTimer(env_.MonoNow() + after, [this, alive, period] {
    if (auto a = alive.lock(); !a || !*a) return;
    if (!sweep_.valid() || sweep_.done()) sweep_ = env_.Spawn(Sweep(), "quarantine sweep");
    ScheduleSweep(period, period);
  });
}

Task<void> QuarantineService::Sweep() {
  std::shared_ptr<bool> alive = alive_;
  auto deleted = co_await control::DeleteSpentQuarantines(store_, env_, options_.policy, options_.call);
  if (!*alive) co_return;
  if (!deleted.ok()) {
    WK_LOG_WARN("quarantine sweep failed; the next one tries again", {{"error", deleted.status().ToString()}});
    co_return;
  }
  stats_.records_deleted += *deleted;
  if (*deleted > 0) WK_LOG_INFO("spent quarantine records deleted", {{"records", std::to_string(*deleted)}});
}

bool QuarantineService::IsStrike(engine::CallOutcome outcome) {
  switch (outcome) {
    case engine::CallOutcome::kHeapLimit:  // the worker's heap is shared: a threat to the node
      return true;
    case engine::CallOutcome::kReturned:
    case engine::CallOutcome::kTrapped:
    // The actor's own linear memory at its own maximum: bounded by actors.max_memory_bytes
    // and counted in the node's budget, so it harms nobody else (and "out of memory" is
    // the engine's guess about a trap, docs/security.md "What counts as a strike").
    case engine::CallOutcome::kOutOfMemory:
    case engine::CallOutcome::kHostError:
    case engine::CallOutcome::kTerminated:  // a slow event is not a crash (see the header)
    case engine::CallOutcome::kEngineError:
      return false;
  }
  return false;
}

std::string QuarantineService::StrikeReason(engine::CallOutcome outcome, std::string_view message) {
  switch (outcome) {
    case engine::CallOutcome::kHeapLimit:
      return "an event exhausted the worker's V8 heap, which the worker's other actors share: " +
             std::string(message) + " (actors.isolate_heap_limit_bytes)";
    default:
      return std::string(message);
  }
}

actor::RuntimeHooks QuarantineService::Hooks() {
  actor::RuntimeHooks hooks;
  RunningEvents* journal = journal_;
  if (journal != nullptr) {
    hooks.on_event_start = [journal](const ActorId& actor, std::size_t worker) { journal->Started(worker, actor); };
  }
  if (!options_.policy.enabled()) {
    if (journal != nullptr) {
      hooks.on_event_end = [journal](const ActorId&, std::size_t worker, const actor::EventEnd&) {
        journal->Ended(worker);
      };
    }
    return hooks;
  }
  Env* env = &env_;
  std::weak_ptr<bool> alive = alive_;
  hooks.on_event_end = [this, env, alive, journal](const ActorId& actor, std::size_t worker,
                                                   const actor::EventEnd& end) {
    if (journal != nullptr) journal->Ended(worker);
    if (!IsStrike(end.outcome)) return;
    std::string reason = StrikeReason(end.outcome, end.message);
    // Rare (the instance was just thrown away): hand it to the loop, which owns the cache
    // and the bucket writes.
    env->PostFromAnyThread([this, alive, actor, reason = std::move(reason)]() mutable {
      auto a = alive.lock();
      if (a && *a) Strike(actor, std::move(reason), false);
    });
  };
  return hooks;
}

void QuarantineService::RecordCrashStrikes(const std::vector<ActorId>& actors) {
  for (const ActorId& actor : actors) {
    Strike(actor,
           "the node process ended while an event of this actor was running (a crash of a worker, an abort, the "
           "process's memory exhausted, or a kill)",
           true);
  }
}

void QuarantineService::Strike(const ActorId& actor, std::string reason, bool crash) {
  if (!options_.policy.enabled()) return;
  ++in_flight_;
  env_.Spawn(RunStrike(actor, std::move(reason), crash), "quarantine strike " + actor.ToString());
}

Task<void> QuarantineService::RunStrike(ActorId actor, std::string reason, bool crash) {
  std::shared_ptr<bool> alive = alive_;
  const std::string name = actor.ToString();
  auto outcome = co_await control::RecordStrike(store_, env_, actor, options_.node_id.str(), reason, options_.policy,
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
  const control::QuarantineRecord& record = outcome->record;
  cache_.Remember(record);
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
                                      {"until", control::FormatUtc(record.until)},
                                      {"strikes", std::to_string(record.strikes.size())},
                                      {"reason", record.reason}});
  }
  if (record.QuarantinedAt(env_.WallNow()) && unload_) unload_(actor);
}

Task<Result<replica::Replica::Hold>> QuarantineHoldSource::Acquire(ActorId actor) {
  if (auto q = cache_.Peek(actor)) co_return Retryable(control::DescribeQuarantine(*q));
  co_return co_await inner_.Acquire(std::move(actor));
}

Task<void> QuarantineHoldSource::Release(ActorId actor, Generation generation) {
  co_await inner_.Release(std::move(actor), generation);
}

}  // namespace wk
