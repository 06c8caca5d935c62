// QuarantineService: turns what happens to a node's actors into quarantine strikes
// (control/quarantine.h) and acts on the answer (docs/security.md, "Poisoned actors").
// A strike is an event that exhausted its worker's V8 heap (IsStrike), or a crash of the
// process while an actor's event ran, read from the local journal at the next start
// (RecordCrashStrikes, running_events.h); never a failure the engine contained (the table
// and the reasons: docs/security.md, "What counts as a strike"). Recording, remembering,
// unloading and the sweeps are control::QuarantineStrikes, which the simulator runs too;
// this class adds what needs the V8 runtime and the journal. Every strike is a log line
// and a metric (PublishQuarantineMetrics).
//
// Threading: the Env loop thread, except the runtime hooks (Hooks()), which run on worker
// threads: they touch only the journal (its own slot per worker) and post to the loop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actor/runtime.h"
#include "base/ids.h"
#include "base/metrics.h"
#include "control/quarantine.h"
#include "control/quarantine_cache.h"
#include "control/quarantine_strikes.h"
#include "routing/quarantine_hold_source.h"
#include "server/running_events.h"

namespace wk {

struct QuarantineServiceOptions {
  NodeId node_id;
  control::QuarantinePolicy policy;
  // One attempt of a strike's read or write.
  CallOptions call{std::chrono::seconds(10)};
};

// Counts kept by the loop thread (published as the metrics above).
using QuarantineStats = control::QuarantineStats;
using control::kQuarantineSweepPeriod;

class QuarantineService {
 public:
  // journal: may be null (node.data_dir unset): crash strikes are then not recorded.
  QuarantineService(Env& env, ObjectStore& store, control::QuarantineCache& cache, QuarantineServiceOptions options,
                    RunningEvents* journal);
  ~QuarantineService();
  QuarantineService(const QuarantineService&) = delete;
  QuarantineService& operator=(const QuarantineService&) = delete;

  // Whether an event that ended so is a strike (see above).
  static bool IsStrike(engine::CallOutcome outcome);
  // The reason recorded for a strike of an event that ended so, with the engine's message.
  static std::string StrikeReason(engine::CallOutcome outcome, std::string_view message);

  // on_event_start / on_event_end for the runtime (thread-safe; see the file comment).
  // on_unloaded is left empty for the caller.
  actor::RuntimeHooks Hooks();
  // How to unload a resident actor that got quarantined (the runtime's Unload), set once the
  // runtime exists. Loop thread.
  void set_unload(std::function<void(const ActorId&)> unload) { strikes_.set_unload(std::move(unload)); }

  // Deletes spent records every `period` (loop thread); stops with the service. Nothing
  // when the policy is off.
  void StartSweeps(Duration period = kQuarantineSweepPeriod) { strikes_.StartSweeps(period); }

  // One strike per actor, each on its own task (loop thread): the previous process died
  // while their events ran.
  void RecordCrashStrikes(const std::vector<ActorId>& actors);
  // One strike (loop thread). Exposed for tests; the hooks call it through a post.
  void Strike(const ActorId& actor, std::string reason, bool crash) { strikes_.Strike(actor, std::move(reason), crash); }

  const QuarantineStats& stats() const { return strikes_.stats(); }
  // Strike tasks not finished yet (tests wait for them).
  int strikes_in_flight() const { return strikes_.in_flight(); }

 private:
  Env& env_;
  control::QuarantinePolicy policy_;
  RunningEvents* journal_;
  control::QuarantineStrikes strikes_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Publishes the strike and quarantine counters over the service's stats (base/metrics.h,
// "How WasmKeep publishes"). REQUIRES: service outlives every RenderText() (loop thread).
void PublishQuarantineMetrics(MetricsRegistry& registry, const QuarantineService& service);

}  // namespace wk
