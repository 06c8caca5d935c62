// Drains requested through control/drain/<node> (docs/node-lease.md, "Drain").
#include "cluster/drain_control.h"

#include <gtest/gtest.h>

#include "cluster/cluster_node.h"
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

}  // namespace
}  // namespace wk
