#include "server/quarantine_service.h"

#include "base/log.h"

namespace wk {

QuarantineService::QuarantineService(Env& env, ObjectStore& store, control::QuarantineCache& cache,
                                     QuarantineServiceOptions options, RunningEvents* journal)
    : env_(env),
      policy_(options.policy),
      journal_(journal),
      strikes_(env, store, cache, control::QuarantineStrikesOptions{options.node_id, options.policy, options.call}) {}

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

QuarantineService::~QuarantineService() { *alive_ = false; }

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
  if (!policy_.enabled()) {
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

}  // namespace wk
