// `wasmkeep cluster cost`: the cluster's bucket requests per second by purpose and their
// price per day (cli/cost.h computes; cost_cmd.cc finds the nodes and scrapes them).
// Documented in docs/cli.md ("cluster cost").
#pragma once

#include <string>
#include <vector>

#include "cli/common.h"
#include "cluster/timing.h"

namespace wk::cli {

struct CostArgs {
  std::string since;                 // "" (rates since each process started) or a duration
  std::string prices = "aws-s3";     // aws-s3, r2 or a price file
  std::vector<std::string> metrics;  // scrape these URLs instead of finding the nodes
  bool json = false;
};

// Runs the command on env's loop; returns the exit code. Bad arguments (prices, duration)
// are refused before anything is read.
int RunClusterCost(RealEnv& env, ObjectStore& store, LeaseTiming timing, const CostArgs& args);

}  // namespace wk::cli
