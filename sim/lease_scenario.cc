// The `lease` scenario (docs/simulation.md, "The `lease` scenario"; ADR 0020 §1, §2, §5):
// node leases, the listing and the fence watch of three nodes, under a faulty bucket, clock
// skew at the bound, kills, restarts, twins, partitions, outages and clean stops
// (faults.h), judged by checkers 1-7 (checkers.h). No workload: the nodes only keep their
// leases and watch each other. With --nodes, the scale mode (scale.h).
#include "checkers.h"
#include "faults.h"
#include "scale.h"
#include "scenario.h"
#include "world.h"

namespace wk::sim {

RunResult RunLeaseScenario(const RunOptions& options) {
  // --nodes N or --s3-limits: N nodes on the S3 bucket model, and the scaling report.
  if (options.scaled()) return RunScaled(options, /*owners=*/false, nullptr);
  World world(options, /*actors=*/0);
  Faults faults(world, FaultOptions{});
  Checkers checkers(world, CheckerOptions{});
  return world.Run(Connect(world, faults, checkers));
}

}  // namespace wk::sim
