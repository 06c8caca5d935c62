#include "replica/gc.h"

#include <gtest/gtest.h>

namespace wk::replica {
namespace {

bool Contains(const std::vector<Position>& v, Position p) { return std::find(v.begin(), v.end(), p) != v.end(); }

// Hold 3 restored from snapshot 1-4 with run [1-5, 2-0, 2-1]; 2-2 landed late (off chain);
// hold 3 has written 3-0..3-4 and a snapshot at 3-3.
GcInput Sample() {
  GcInput in;
  in.generation = Generation{3};
  in.snapshot = Position{3, 3};
  in.chain = {{1, 5}, {2, 0}, {2, 1}};
  in.segments = {{1, 0}, {1, 4}, {1, 5}, {2, 0}, {2, 1}, {2, 2}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4}};
  in.snapshots = {{1, 4}, {3, 3}};
  in.broken = BrokenModels::FromEnvironment().value();  // scripts/check-proofs.sh
  return in;
}

TEST(GcTest, CoveredSegmentsAndOlderSnapshotsGoTheFenceAndTheTailStay) {
  GcInput in = Sample();
  GcPlan plan = PlanGc(in);
  for (Position p : {Position{1, 5}, Position{2, 0}, Position{2, 1}, Position{3, 1}, Position{3, 2}, Position{3, 3}}) {
    EXPECT_TRUE(Contains(plan.segments, p)) << p.ToString();
  }
  EXPECT_FALSE(Contains(plan.segments, Position{3, 0})) << "the owner's fence";
  EXPECT_FALSE(Contains(plan.segments, Position{3, 4})) << "after the snapshot";
  EXPECT_FALSE(Contains(plan.segments, Position{2, 2})) << "off chain, not yet past the bound";
  EXPECT_FALSE(Contains(plan.segments, Position{1, 0})) << "before the restore's base: chain unknown, waits for the bound";
  EXPECT_TRUE(plan.waiting_for_bound);
  EXPECT_EQ(plan.snapshots, (std::vector<Position>{{1, 4}}));

  in.off_chain_ripe = true;
  plan = PlanGc(in);
  EXPECT_TRUE(Contains(plan.segments, Position{2, 2}));
  EXPECT_TRUE(Contains(plan.segments, Position{1, 0}));
  EXPECT_FALSE(plan.waiting_for_bound);
}

TEST(GcTest, WithoutASnapshotOfItsOwnTheRunAfterTheBaseStays) {
  GcInput in = Sample();
  in.snapshot = Position{1, 4};
  in.snapshots = {{1, 4}};
  in.segments = {{1, 4}, {1, 5}, {2, 0}, {2, 1}, {2, 2}, {3, 0}};
  in.off_chain_ripe = true;
  GcPlan plan = PlanGc(in);
  EXPECT_EQ(plan.segments, (std::vector<Position>{{1, 4}, {2, 2}}));
  EXPECT_TRUE(plan.snapshots.empty()) << "the base is the chain's snapshot";

  if (!BrokenModels::kBuilt) GTEST_SKIP() << "built with WK_BROKEN_MODELS=OFF";
  in.broken = BrokenModels::Of({BrokenModel::kGcDeletesChain});
  plan = PlanGc(in);
  EXPECT_TRUE(Contains(plan.segments, Position{2, 1})) << "the broken model deletes what the chain needs";
}

TEST(GcTest, AnOlderHoldsLateSnapshotIsOffChain) {
  GcInput in = Sample();
  in.snapshot = Position{1, 4};  // no snapshot of its own yet
  in.snapshots = {{1, 4}, {2, 2}};
  GcPlan plan = PlanGc(in);
  EXPECT_TRUE(plan.snapshots.empty());
  EXPECT_TRUE(plan.waiting_for_bound);
  in.off_chain_ripe = true;
  plan = PlanGc(in);
  EXPECT_EQ(plan.snapshots, (std::vector<Position>{{2, 2}}));

  // Once the owner has a snapshot of its own, every older one goes at once.
  in = Sample();
  in.snapshots = {{1, 4}, {2, 2}, {3, 3}};
  plan = PlanGc(in);
  EXPECT_EQ(plan.snapshots, (std::vector<Position>{{1, 4}, {2, 2}}));
}

}  // namespace
}  // namespace wk::replica
