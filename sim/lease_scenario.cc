// The `lease` scenario (docs/simulation.md, "The `lease` scenario"; ADR 0020 §1, §2, §5):
// node leases, the listing and the fence watch of three nodes, under a faulty bucket, clock
// skew at the bound, kills, restarts, twins, partitions, outages and clean stops
// (faults.h), judged by checkers 1-7 (checkers.h). No workload: the nodes only keep their
// leases and watch each other.
#include "checkers.h"
#include "faults.h"
#include "scenario.h"
#include "world.h"

namespace wk::sim {

RunResult RunLeaseScenario(const RunOptions& options) {
  World world(options, /*actors=*/0);
  Faults faults(world, FaultOptions{});
  Checkers checkers(world, CheckerOptions{});
  return world.Run(Connect(world, faults, checkers));
}

// Every scenario, in a fixed order; a new scenario adds its line here.
const std::vector<Scenario>& Scenarios() {
  static const std::vector<Scenario> all = {
      {"lease", "node leases, listing and fencing of 3 nodes (ADR 0020 §1, §2, §5)",
       {"unconditional-fence", "no-watch-wait", "validity-from-reply", "listing-assumes-renewals"}, &RunLeaseScenario},
      {"ownership", "3 nodes acquiring, using, hibernating and releasing 6 actors (ADR 0020 §3, §4)",
       {"wake-reuses-generation", "resolver-without-lock", "free-on-view", "free-on-absent-node"},
       &RunOwnershipScenario},
      {"storage", "3 nodes writing 3 actors through the durable replica as holds move (docs/architecture.md, Durable storage)",
       {"ack-before-durable", "ack-late-upload", "restore-ignores-fence", "gc-deletes-chain", "release-without-validity"}, &RunStorageScenario},
      {"routing", "clients appending to and reading 3 list actors through the front of 3 nodes (docs/architecture.md, How a request flows)",
       {"release-without-validity", "answer-without-gate", "input-gate-concurrent"}, &RunRoutingScenario},
      {"move", "the routing scenario with actors moved between nodes and nodes drained (docs/architecture.md, Drain and move)",
       {"move-acquires-before-release-lands", "take-unconditional", "drain-ignores-pending"}, &RunMoveScenario},
      {"alarms", "clients setting, deleting and reading the alarms of 22 actors on 3 nodes that fire them (docs/alarms.md)",
       {"index-entry-removed-before-durable", "fire-before-due", "drop-handed-alarm", "segment-before-entry",
        "earlier-entries-before-fence"},
       &RunAlarmsScenario},
  };
  return all;
}

}  // namespace wk::sim
