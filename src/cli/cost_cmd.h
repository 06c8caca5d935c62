// `wasmkeep cluster cost`: the cluster's bucket requests per second by purpose and their
// price per day, and what the bucket stores per tenant and its price per month (cli/cost.h
// computes; cost_cmd.cc finds the nodes, scrapes them and lists the bucket).
// Documented in docs/cli.md ("cluster cost").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/cost.h"
#include "cluster/timing.h"

namespace wk::cli {

struct CostArgs {
  std::string since;                 // "" (rates since each process started) or a duration
  std::string prices = "aws-s3";     // aws-s3, r2 or a price file
  std::vector<std::string> metrics;  // scrape these URLs instead of finding the nodes
  bool json = false;
  bool no_storage = false;  // do not list the bucket (its size per tenant is left out)
};

// The arguments checked and loaded (the price table, the window), before anything is
// opened or read: a bad one is kInvalidArgument naming the option or the price file's key.
struct PreparedCost {
  PriceTable prices;
  std::optional<Duration> since;  // nullopt: rates since each process started
};
Result<PreparedCost> PrepareClusterCost(const CostArgs& args);

// Runs the command on env's loop; returns the exit code. store: the bucket, to find the
// live nodes; may be null when args.metrics names the nodes to scrape (nothing is read from
// the bucket then).
int RunClusterCost(RealEnv& env, ObjectStore* store, LeaseTiming timing, const CostArgs& args, PreparedCost prepared);

}  // namespace wk::cli
