#include <gtest/gtest.h>

#include "base/log.h"
#include "scenario.h"

namespace wk::sim {
namespace {

TEST(SimTest, SameSeedSameHistory) {
  log::SetLevel(log::Level::kOff);
  RunOptions o;
  o.seed = 17;
  RunResult a = RunLeaseScenario(o);
  RunResult b = RunLeaseScenario(o);
  EXPECT_EQ(a.history_digest, b.history_digest);
  EXPECT_EQ(a.lease_writes, b.lease_writes);
  EXPECT_EQ(a.trace, b.trace);
  o.seed = 18;
  EXPECT_NE(RunLeaseScenario(o).history_digest, a.history_digest);
}

TEST(SimTest, ASeedExercisesTheFaults) {
  log::SetLevel(log::Level::kOff);
  RunResult total;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    RunOptions o;
    o.seed = seed;
    RunResult r = RunLeaseScenario(o);
    EXPECT_TRUE(r.ok) << "seed " << seed << ": " << (r.violations.empty() ? "" : r.violations[0]);
    total.lease_writes += r.lease_writes;
    total.fences += r.fences;
    total.kills += r.kills;
    total.lost_leases += r.lost_leases;
    total.lapses += r.lapses;
  }
  EXPECT_GT(total.lease_writes, 1000u);
  EXPECT_GT(total.fences, 0u) << "no seed fenced anybody: the scenario is too gentle";
  EXPECT_GT(total.kills, 0u);
  EXPECT_GT(total.lost_leases, 0u);
  EXPECT_GT(total.lapses, 0u);
}

}  // namespace
}  // namespace wk::sim
