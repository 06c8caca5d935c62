// The operator commands' rules (ADR 0020 §2, §6), in virtual time.
#include "cluster/operator.h"

#include <gtest/gtest.h>

#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk {
namespace {

using std::chrono::seconds;

struct OperatorTest : ::testing::Test {
  SimWorld world{5};
  SimEnv env{world, FromUnixMs(1'764'000'000'000)};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();
  MemStore store{env, bucket};
  LeaseTiming timing;

  template <typename T>
  T Run(Task<T> t) {
    return std::move(*RunTask(world, env, std::move(t)));
  }
  NodeRecord Live(const std::string& id) {
    NodeRecord r;
    r.instance = InstanceToken("i-" + id);
    r.written_at = env.WallNow();
    r.node_id = NodeId(id);
    r.software_version = "0.1.0";
    r.started_at = env.WallNow();
    return r;
  }
  NodeRecord Read(const std::string& id) {
    return std::get<NodeRecord>(DecodeNodeObject(bucket->objects().at(NodeKey(NodeId(id))).body).value());
  }
};

TEST_F(OperatorTest, FenceKeepsInstanceAndWrittenAt) {
  NodeRecord r = Live("a");
  ASSERT_TRUE(bucket->ApplyPut("nodes/a", EncodeNodeRecord(r), Precondition::None()).ok());
  auto out = Run(OperatorFence(env, store, NodeId("a"), timing, std::nullopt));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->written);
  EXPECT_EQ(out->free_at, r.written_at + seconds(15));
  NodeRecord f = Read("a");
  EXPECT_EQ(f.state, LeaseState::kFenced);
  EXPECT_EQ(f.instance, r.instance);
  EXPECT_EQ(f.written_at, r.written_at);
  // Nothing over a fence.
  const Version v = bucket->objects().at("nodes/a").version;
  auto again = Run(OperatorFence(env, store, NodeId("a"), timing, std::nullopt));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->written);
  EXPECT_EQ(bucket->objects().at("nodes/a").version, v);
}

TEST_F(OperatorTest, FenceOfAnAbsentNodeCreatesOneWithoutInstance) {
  auto out = Run(OperatorFence(env, store, NodeId("gone"), timing, std::nullopt));
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->created);
  NodeRecord f = Read("gone");
  EXPECT_EQ(f.state, LeaseState::kFenced);
  EXPECT_TRUE(f.instance.empty());
  EXPECT_EQ(f.written_at, env.WallNow());
}

TEST_F(OperatorTest, FenceOnAStaleVersionIsRefused) {
  auto v1 = bucket->ApplyPut("nodes/a", EncodeNodeRecord(Live("a")), Precondition::None());
  world.RunFor(seconds(3));
  ASSERT_TRUE(bucket->ApplyPut("nodes/a", EncodeNodeRecord(Live("a")), Precondition::None()).ok());
  auto out = Run(OperatorFence(env, store, NodeId("a"), timing, *v1));
  EXPECT_EQ(out.code(), Code::kPreconditionFailed);
  EXPECT_EQ(Read("a").state, LeaseState::kLive);
}

TEST_F(OperatorTest, FenceRefusesAnOldFormatAndBadIds) {
  ASSERT_TRUE(bucket->ApplyPut("nodes/old", "wasmkeep-node 2\nwritten_at_ms 1\n", Precondition::None()).ok());
  EXPECT_EQ(Run(OperatorFence(env, store, NodeId("old"), timing, std::nullopt)).code(), Code::kInvalidArgument);
  EXPECT_EQ(Run(OperatorFence(env, store, NodeId("../x"), timing, std::nullopt)).code(), Code::kInvalidArgument);
}

TEST_F(OperatorTest, ForgetOnlyAStaleOldFormatHeartbeat) {
  const std::int64_t now = ToUnixMs(env.WallNow());
  ASSERT_TRUE(bucket->ApplyPut("nodes/fresh", "wasmkeep-node 1\nwritten_at_ms " + std::to_string(now - 1000) + "\n", Precondition::None()).ok());
  ASSERT_TRUE(bucket->ApplyPut("nodes/stale", "wasmkeep-node 1\nwritten_at_ms " + std::to_string(now - 60'000) + "\n", Precondition::None()).ok());
  ASSERT_TRUE(bucket->ApplyPut("nodes/new", EncodeNodeRecord(Live("new")), Precondition::None()).ok());
  EXPECT_EQ(Run(OperatorForget(env, store, NodeId("fresh"), timing)).code(), Code::kPreconditionFailed);
  EXPECT_EQ(Run(OperatorForget(env, store, NodeId("new"), timing)).code(), Code::kInvalidArgument);
  EXPECT_TRUE(Run(OperatorForget(env, store, NodeId("stale"), timing)).ok());
  EXPECT_EQ(bucket->objects().count("nodes/stale"), 0u);
  EXPECT_EQ(bucket->objects().count("nodes/fresh"), 1u);
}

TEST_F(OperatorTest, StatusClassifiesEveryKind) {
  NodeRecord live = Live("a");
  NodeRecord expired = Live("b");
  expired.written_at = env.WallNow() - seconds(12);
  NodeRecord released = Live("c");
  released.state = LeaseState::kReleased;
  ASSERT_TRUE(bucket->ApplyPut("nodes/a", EncodeNodeRecord(live), Precondition::None()).ok());
  ASSERT_TRUE(bucket->ApplyPut("nodes/b", EncodeNodeRecord(expired), Precondition::None()).ok());
  ASSERT_TRUE(bucket->ApplyPut("nodes/c", EncodeNodeRecord(released), Precondition::None()).ok());
  ASSERT_TRUE(bucket->ApplyPut("nodes/d", "wasmkeep-node 1\nwritten_at_ms " + std::to_string(ToUnixMs(env.WallNow())) + "\n", Precondition::None()).ok());
  ASSERT_TRUE(bucket->ApplyPut("nodes/e", "wasmkeep-node 2\nwritten_at_ms 1\n", Precondition::None()).ok());
  ASSERT_TRUE(bucket->ApplyPut("nodes/f", "garbage", Precondition::None()).ok());
  auto status = Run(ClusterStatus(env, store, timing));
  ASSERT_TRUE(status.ok());
  std::map<std::string, std::string> states;
  for (auto& n : *status) states[n.node_id.str()] = n.state;
  EXPECT_EQ(states, (std::map<std::string, std::string>{{"a", "live"}, {"b", "live-expired"}, {"c", "released"},
                                                         {"d", "old-running"}, {"e", "old-retired"}, {"f", "corrupt"}}));
}

}  // namespace
}  // namespace wk
