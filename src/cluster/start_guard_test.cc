// The start steps (docs/node-lease.md, "Upgrading from per-actor leases") with real ClusterNodes in
// virtual time: the start guard beside the start check (old-format heartbeats are written by the
// test, as the per-actor-lease versions wrote them) and the bucket check before both.
#include "cluster/start_guard.h"

#include <gtest/gtest.h>

#include "cluster/cluster_node.h"
#include "cluster/testing/harness.h"
#include "store/store_wrapper.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string OldHeartbeatBody(const std::string& node, WallTime written_at) {
  return "wasmkeep-node 1\nnode " + node + "\nwritten_at_ms " + std::to_string(ToUnixMs(written_at)) + "\n";
}

struct StartGuardTest : ::testing::Test {
  SimWorld world{51};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();
  const LeaseTiming timing;  // fresh for 3 x 3 s + 10 s + 5 s + 1 s = 25 s

  // A clock without skew (every SimHost's wall clock here): the origin plus virtual time.
  WallTime WallNow() {
    return FromUnixMs(cluster_testing::kSimOriginMs) +
           std::chrono::duration_cast<milliseconds>(world.Now().time_since_epoch());
  }
  void PutOld(const std::string& node, WallTime written_at) {
    ASSERT_TRUE(bucket->ApplyPut(NodeKey(NodeId(node)), OldHeartbeatBody(node, written_at), Precondition::None()).ok());
  }
  // How long after start the node's lease first became valid (nullopt: not within limit).
  std::optional<Duration> ValidAfter(cluster_testing::SimNode& n, Duration limit) {
    const MonoTime start = world.Now();
    if (!world.RunUntil([&] { return n.node.lease().IsValid() || n.end.has_value(); }, limit)) return std::nullopt;
    if (!n.node.lease().IsValid()) return std::nullopt;
    return world.Now() - start;
  }
};

TEST(OldHeartbeatFreshTest, FreshForThreePeriodsPlusTtlGraceAndSkew) {
  const LeaseTiming t;
  EXPECT_EQ(OldHeartbeatFreshFor(t), seconds(25));
  const WallTime now = FromUnixMs(1'000'000);
  EXPECT_TRUE(OldHeartbeatFresh(OldHeartbeat{1, now - seconds(25) + milliseconds(1)}, now, t));
  EXPECT_FALSE(OldHeartbeatFresh(OldHeartbeat{1, now - seconds(25)}, now, t));
  EXPECT_TRUE(OldHeartbeatFresh(OldHeartbeat{2, std::nullopt}, now, t)) << "unknown age";
  EXPECT_TRUE(OldHeartbeatFresh(OldHeartbeat{1, now + seconds(3600)}, now, t)) << "dated ahead";
}

// docs/node-lease.md, "Upgrading from per-actor leases": a fresh old-format heartbeat holds the
// first lease write until it is no longer fresh (written_at + 25 s), beyond the start check's 15 s;
// the guard runs beside the check, not after it. (Fails with the broken model start-guard-off:
// valid at 15 s.)
TEST_F(StartGuardTest, AFreshOldHeartbeatHoldsTheFirstWriteUntilItCannotBeRunning) {
  world.RunFor(seconds(10));
  PutOld("old", WallNow() - seconds(2));  // an old node stopped 2 s ago
  cluster_testing::SimNode a(world, bucket, NodeId("a"), InstanceToken("ia"));
  auto after = ValidAfter(a, seconds(60));
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, seconds(23)) << "not before the old heartbeat's written_at + 25 s";
  EXPECT_LE(*after, seconds(26)) << "re-read every half period";
  ASSERT_NE(a.node.lease().start_guard_stats(), nullptr);
  EXPECT_GT(a.node.lease().start_guard_stats()->waits, 0u);
}

// Old nodes stopped long ago (a retired node's heartbeat): the start check alone decides.
TEST_F(StartGuardTest, AStaleOldHeartbeatDoesNotDelayTheStart) {
  world.RunFor(seconds(100));
  PutOld("retired", WallNow() - seconds(3600));
  cluster_testing::SimNode a(world, bucket, NodeId("a"), InstanceToken("ia"));
  auto after = ValidAfter(a, seconds(60));
  ASSERT_TRUE(after.has_value());
  EXPECT_LT(*after, seconds(16));
  EXPECT_EQ(a.node.lease().start_guard_stats()->waits, 0u);
}

// docs/node-lease.md, "Upgrading from per-actor leases": an old-format heartbeat that is rewritten
// while the guard waits means an old node is running: the node refuses to start, and writes
// nothing.
TEST_F(StartGuardTest, AnOldHeartbeatRewrittenMeanwhileRefusesTheStart) {
  world.RunFor(seconds(10));
  cluster_testing::SimNode a(world, bucket, NodeId("a"), InstanceToken("ia"), "t", timing, false);
  PutOld("old", a.env.WallNow());
  a.Start();
  world.RunFor(seconds(5));
  PutOld("old", a.env.WallNow());  // the old node's next heartbeat
  ASSERT_TRUE(world.RunUntil([&] { return a.end.has_value(); }, seconds(60)));
  EXPECT_EQ(a.end->reason, LeaseEndReason::kOldVersionRunning);
  EXPECT_NE(a.end->message.find("nodes/old is being rewritten in an old format"), std::string::npos) << a.end->message;
  EXPECT_EQ(bucket->objects().count("nodes/a"), 0u) << "nothing written";
}

// While the guard waits (for `old`), another old-format heartbeat appears: written
// meanwhile, so an old node is running.
TEST_F(StartGuardTest, AnOldHeartbeatThatAppearsWhileTheGuardWaitsRefusesTheStart) {
  world.RunFor(seconds(10));
  PutOld("old", WallNow());
  cluster_testing::SimNode a(world, bucket, NodeId("a"), InstanceToken("ia"));
  world.RunFor(seconds(4));
  PutOld("other", WallNow());
  ASSERT_TRUE(world.RunUntil([&] { return a.end.has_value(); }, seconds(60)));
  EXPECT_EQ(a.end->reason, LeaseEndReason::kOldVersionRunning);
  EXPECT_NE(a.end->message.find("nodes/other appeared"), std::string::npos) << a.end->message;
}

// docs/node-lease.md, "Upgrading from per-actor leases": a heartbeat dated ahead of this node's
// clock (a retired node's clock was wrong) lapses 25 s after this node first read that same body,
// on its monotonic clock.
TEST_F(StartGuardTest, AnOldHeartbeatDatedAheadLapsesOnThisNodesCount) {
  world.RunFor(seconds(10));
  PutOld("ahead", WallNow() + seconds(3600));
  cluster_testing::SimNode a(world, bucket, NodeId("a"), InstanceToken("ia"));
  auto after = ValidAfter(a, seconds(60));
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, seconds(25));
  EXPECT_LE(*after, seconds(28));
}

// Stopping a node whose start guard waits ends it at once, writing nothing.
TEST_F(StartGuardTest, AStopDuringTheGuardEndsTheRun) {
  world.RunFor(seconds(10));
  cluster_testing::SimNode a(world, bucket, NodeId("a"), InstanceToken("ia"), "t", timing, false);
  PutOld("old", a.env.WallNow());
  a.Start();
  world.RunFor(seconds(18));  // past the start check, the guard still waiting
  auto stopped = RunTask(world, a.env, a.node.Stop(seconds(5)), seconds(10));
  ASSERT_TRUE(stopped.has_value());
  ASSERT_TRUE(world.RunUntil([&] { return a.end.has_value(); }, seconds(10)));
  EXPECT_EQ(a.end->reason, LeaseEndReason::kStopped);
  EXPECT_EQ(bucket->objects().count("nodes/a"), 0u);
}

// The bucket check comes first: a bucket that refuses If-Match on its own versions (Ceph
// RGW sent a quoted ETag) is refused before anything is written, naming the setting.
class RefusesIfMatch : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override {
    if (condition.kind() == Precondition::Kind::kIfMatch) return Refused();
    return inner().Put(std::move(key), std::move(body), std::move(condition), options);
  }
  std::string IfMatchRefusedHint() const override { return "add if_match_quoted=false"; }

 private:
  static Task<Result<Version>> Refused() { co_return PreconditionFailed("412"); }
};

TEST_F(StartGuardTest, TheBucketCheckRefusesABucketThatRefusesIfMatchBeforeAnyWrite) {
  cluster_testing::SimHost host(world, bucket);
  RefusesIfMatch store(host.store());
  ClusterNode node(host.env(), store, cluster_testing::TestIdentity(NodeId("a")), timing, InstanceToken("ia"));
  auto end = RunTask(world, host.env(), node.Run(), seconds(30));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->reason, LeaseEndReason::kBucketUnfit);
  EXPECT_NE(end->message.find("add if_match_quoted=false"), std::string::npos) << end->message;
  EXPECT_EQ(bucket->objects().count("nodes/a"), 0u);
}

}  // namespace
}  // namespace wk
