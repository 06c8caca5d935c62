// Drains requested through control/drain/<node> (docs/node-lease.md, "Drain").
#include "cluster/drain_control.h"

#include <gtest/gtest.h>

#include "cluster/cluster_node.h"
#include "cluster/testing/fixture.h"
#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk {
namespace {

using std::chrono::seconds;

TEST(DrainRecordTest, RoundTripAndStrict) {
  DrainRecord r{DrainState::kDrained, FromUnixMs(1234)};
  EXPECT_EQ(EncodeDrainRecord(r), "wasmkeep-drain 1\nstate drained\nat 1234\n");
  auto d = DecodeDrainRecord(EncodeDrainRecord(r));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state, DrainState::kDrained);
  EXPECT_EQ(d->at, r.at);
  for (std::string_view bad : {"", "wasmkeep-drain 2\nstate drained\nat 1\n", "wasmkeep-drain 1\nstate done\nat 1\n",
                               "wasmkeep-drain 1\nstate drained\nat x\n", "wasmkeep-drain 1\nstate drained\nat 1"}) {
    EXPECT_FALSE(DecodeDrainRecord(bad).ok()) << bad;
  }
}

TEST(DrainControlTest, RequestedDrainReleasesEverythingThenReportsDrainedAndUndrainRestores) {
  SimWorld world(4);
  SimEnv env(world, FromUnixMs(1'764'000'000'000));
  auto bucket = std::make_shared<MemBucket>();
  MemStore store(env, bucket);
  ClusterNode node(env, store, NodeIdentity{NodeId("a"), "x", "t", ""}, LeaseTiming{}, InstanceToken("ia"));
  env.Spawn([](ClusterNode* n) -> Task<void> { (void)co_await n->Run(); }(&node), "node");
  ASSERT_TRUE(world.RunUntil([&] { return node.lease().IsValid(); }, seconds(30)));
  auto acquire = [&](ActorId id) { return *RunTask(world, env, node.owners().Acquire(std::move(id)), seconds(10)); };
  auto h1 = acquire(ActorId{"t", "c", "one"});
  auto h2 = acquire(ActorId{"t", "c", "two"});
  ASSERT_TRUE(h1.hold.IsValid() && h2.hold.IsValid());

  ASSERT_TRUE(bucket->ApplyPut(DrainKey(NodeId("a")), EncodeDrainRecord(DrainRecord{}), Precondition::IfNoneMatchAny()).ok());
  world.RunFor(seconds(8));
  EXPECT_FALSE(h1.hold.IsValid());
  EXPECT_FALSE(h2.hold.IsValid());
  EXPECT_TRUE(node.drain_control().drained_or_draining());
  auto rec = DecodeDrainRecord(bucket->objects().at(DrainKey(NodeId("a"))).body);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->state, DrainState::kDrained);
  for (const auto& [key, obj] : bucket->objects()) {
    if (key.starts_with("owners/")) {
      EXPECT_TRUE(DecodeOwnerRecord(obj.body)->names_nobody()) << key;
    }
  }
  EXPECT_EQ(acquire(ActorId{"t", "c", "three"}).kind, AcquireResult::Kind::kNotValid) << "no new actors while drained";

  ASSERT_TRUE(bucket->ApplyDelete(DrainKey(NodeId("a")), Precondition::None()).ok());
  world.RunFor(seconds(4));
  EXPECT_FALSE(node.drain_control().drained_or_draining());
  EXPECT_EQ(acquire(ActorId{"t", "c", "three"}).kind, AcquireResult::Kind::kAcquired);
}

struct DrainControlClusterTest : cluster_testing::ClusterTest {
  DrainControlClusterTest() : ClusterTest(21) {}
  void PutDrain(const char* node, DrainState state) {
    ASSERT_TRUE(bucket->ApplyPut(DrainKey(NodeId(node)), EncodeDrainRecord(DrainRecord{state, FromUnixMs(1)}),
                                 Precondition::None())
                    .ok());
  }
  DrainState StateOf(const char* node) {
    return DecodeDrainRecord(bucket->objects().at(DrainKey(NodeId(node))).body).value().state;
  }
};

// A node restarted while its record says drained takes nothing: not an actor, not a shard,
// not even in the moment between its lease becoming valid and its first drain check.
// Broken model drain-accepts-before-check.
TEST_F(DrainControlClusterTest, ANodeStartedWhileDrainedTakesNoActorFromItsFirstMoment) {
  PutDrain("a", DrainState::kDrained);
  cluster_testing::TestProc a(world, bucket, "a", "ia");
  // The drain requests cannot be listed until the lease is valid: it becomes valid before
  // the first check.
  bool lists_fail = true;
  a.store.set_fault_hook([&lists_fail](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kList && op.key == kDrainPrefix && lists_fail) f.fail_before_apply = Retryable("staged");
    return f;
  });
  ASSERT_TRUE(world.RunUntil([&] { return a.node.lease().IsValid(); }, seconds(30)));
  EXPECT_FALSE(a.node.drain_control().checked()) << "the staged failures did not hold the first check back";
  EXPECT_FALSE(a.node.owners().accepting()) << "accepting before it knew whether it is drained";
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kNotValid) << r.why;
  lists_fail = false;
  world.RunFor(seconds(10));
  EXPECT_TRUE(a.node.drain_control().drained_or_draining());
  EXPECT_EQ(a.node.owners().holds(), 0u);
  EXPECT_EQ(StateOf("a"), DrainState::kDrained);
}

// A record that says drained while the node holds something (an acquisition that was past
// its checks) hands it over again instead of keeping it unserved.
TEST_F(DrainControlClusterTest, ADrainedRecordWithSomethingHeldHandsItOverAgain) {
  cluster_testing::TestProc a(world, bucket, "a", "ia");
  Ready(a);
  world.RunFor(seconds(4));
  auto held = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(held.kind, AcquireResult::Kind::kAcquired) << held.why;
  PutDrain("a", DrainState::kDrained);
  world.RunFor(seconds(8));
  EXPECT_FALSE(held.hold.IsValid()) << "held on a node that says it is drained";
  EXPECT_TRUE(Record().names_nobody());
}

// "Drained only when nothing is pending" with a release pending: its write fails until the
// bucket lets it through, and the record says drained only after it landed.
TEST_F(DrainControlClusterTest, DrainedIsWrittenOnlyOnceAPendingReleaseLanded) {
  cluster_testing::TestProc a(world, bucket, "a", "ia");
  Ready(a);
  world.RunFor(seconds(4));
  auto held = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(held.kind, AcquireResult::Kind::kAcquired) << held.why;
  bool refuse_owner_writes = true;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (refuse_owner_writes && op.op == StoreOp::kPut && op.key == OwnerKey(actor)) {
      f.fail_before_apply = Retryable("staged: the bucket refuses the release");
    }
    return f;
  });
  PutDrain("a", DrainState::kRequested);
  world.RunFor(seconds(30));
  EXPECT_GT(a.node.owners().pending(), 0u) << "the staged failure did not park the release";
  EXPECT_EQ(StateOf("a"), DrainState::kRequested) << "drained with a release pending";
  refuse_owner_writes = false;
  world.RunFor(seconds(20));
  EXPECT_EQ(a.node.owners().pending(), 0u);
  EXPECT_TRUE(Record().names_nobody());
  EXPECT_EQ(StateOf("a"), DrainState::kDrained);
}

// Every node learns which nodes drain (the alarm shards' ranking and the drain target
// skip them), not only the node that drains.
TEST_F(DrainControlClusterTest, EveryNodeLearnsWhichNodesDrain) {
  cluster_testing::TestProc a(world, bucket, "a", "ia");
  cluster_testing::TestProc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  PutDrain("a", DrainState::kRequested);
  world.RunFor(seconds(8));
  EXPECT_EQ(b.node.drain_control().draining_nodes(), std::set<NodeId>{NodeId("a")});
  EXPECT_EQ(a.node.drain_control().draining_nodes(), std::set<NodeId>{NodeId("a")});
  EXPECT_FALSE(b.node.hand_overs().DrainTarget(actor) == std::optional<NodeId>(NodeId("a")));
  ASSERT_TRUE(bucket->ApplyDelete(DrainKey(NodeId("a")), Precondition::None()).ok());
  world.RunFor(seconds(8));
  EXPECT_TRUE(b.node.drain_control().draining_nodes().empty());
  EXPECT_TRUE(a.node.owners().accepting());
}

}  // namespace
}  // namespace wk
