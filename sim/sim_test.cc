#include <gtest/gtest.h>

#include "base/log.h"
#include "scenario.h"
#include "storage_history.h"

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

TEST(SimTest, StorageSameSeedSameHistory) {
  log::SetLevel(log::Level::kOff);
  RunOptions o;
  o.seed = 5;
  RunResult a = RunStorageScenario(o);
  RunResult b = RunStorageScenario(o);
  EXPECT_EQ(a.history_digest, b.history_digest);
  EXPECT_EQ(a.acked_writes, b.acked_writes);
  EXPECT_EQ(a.segments, b.segments);
  EXPECT_EQ(a.trace, b.trace);
  o.seed = 6;
  EXPECT_NE(RunStorageScenario(o).history_digest, a.history_digest);
}

// The routing checker's own ability to fail is the CTest entry
// sim.routing.mutant.answer-without-gate (caught at seed 1).
TEST(SimTest, RoutingSameSeedSameHistoryAndTheHistoryIsChecked) {
  log::SetLevel(log::Level::kOff);
  RunOptions o;
  o.seed = 3;
  RunResult a = RunRoutingScenario(o);
  RunResult b = RunRoutingScenario(o);
  EXPECT_TRUE(a.ok) << (a.violations.empty() ? "" : a.violations.front());
  EXPECT_EQ(a.history_digest, b.history_digest);
  EXPECT_EQ(a.acked_appends, b.acked_appends);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_GT(a.acked_appends, 0u);
  EXPECT_GT(a.ok_reads, 0u);
  o.seed = 4;
  EXPECT_NE(RunRoutingScenario(o).history_digest, a.history_digest);
}

TEST(SimTest, StorageSeedsExerciseTheFaults) {
  log::SetLevel(log::Level::kOff);
  RunResult total;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    RunOptions o;
    o.seed = seed;
    RunResult r = RunStorageScenario(o);
    EXPECT_TRUE(r.ok) << "seed " << seed << ": " << (r.violations.empty() ? "" : r.violations[0]);
    total.acked_writes += r.acked_writes;
    total.restores += r.restores;
    total.snapshots += r.snapshots;
    total.gc_deletes += r.gc_deletes;
    total.late_uploads += r.late_uploads;
    total.off_chain_segments += r.off_chain_segments;
    total.replica_failures += r.replica_failures;
  }
  EXPECT_GT(total.acked_writes, 1000u);
  EXPECT_GT(total.restores, 0u);
  EXPECT_GT(total.snapshots, 0u);
  EXPECT_GT(total.gc_deletes, 0u);
  EXPECT_GT(total.late_uploads, 0u) << "no upload completed after its hold ended: the scenario is too gentle";
  EXPECT_GT(total.off_chain_segments, 0u) << "no segment landed after the next owner restored";
  EXPECT_GT(total.replica_failures, 0u);
}

// The checkers themselves: each catches what it is for (a checker that cannot fail proves
// nothing about the runs it passes).
TEST(StorageHistoryTest, CatchesLostReorderedAndDuplicatedWrites) {
  StorageHistory h;
  EXPECT_TRUE(h.OnAcknowledged("a", "w1").empty());
  EXPECT_TRUE(h.OnAcknowledged("a", "w1,w2,w3").empty());
  EXPECT_TRUE(h.OnRestored("a", "w1,w2,w3,w4", {"w1", "w2", "w3", "w4"}).empty());  // w4 unacknowledged: fine
  EXPECT_FALSE(h.OnRestored("a", "w1,w2", {"w1", "w2"}).empty());                  // w3 lost
  EXPECT_FALSE(h.OnRestored("a", "w1,w3,w2", {"w1", "w2", "w3"}).empty());         // out of order
  EXPECT_FALSE(h.OnRestored("a", "w1,w2,w3,w3", {"w1", "w2", "w3"}).empty());      // applied twice
  EXPECT_FALSE(h.OnRestored("a", "w1,w2,w3", {"w1", "w2", "w3", "w9"}).empty());   // an off-chain entry
  EXPECT_FALSE(h.OnRestored("a", "w1,w2,w3", {"w1", "w3"}).empty());               // an entry missing
  EXPECT_TRUE(h.OnRestored("b", "", {}).empty());                                  // another actor
  EXPECT_FALSE(h.OnAcknowledged("a", "w1,w2,w5").empty());  // w3 lost by a later acknowledgement
  EXPECT_EQ(h.acknowledged("a"), "w1,w2,w5");
  EXPECT_EQ(StorageHistory::SplitLog("w1,w2"), (std::vector<std::string>{"w1", "w2"}));
  EXPECT_TRUE(StorageHistory::SplitLog("").empty());
}

}  // namespace
}  // namespace wk::sim
