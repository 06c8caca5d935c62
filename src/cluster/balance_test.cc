// Moving actors on request (cluster/move_control.h) and balancing (cluster/balance.h).
#include "cluster/balance.h"

#include <gtest/gtest.h>

#include "cluster/move_control.h"
#include "cluster/testing/harness.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

ActorId A(int i) { return ActorId{"acme", "counter", "a" + std::to_string(1000 + i)}; }

ClusterLoad Load(std::map<std::string, int> counts) {
  ClusterLoad load;
  int next = 0;
  for (const auto& [node, n] : counts) {
    load.nodes.push_back(NodeId(node));
    auto& held = load.held[NodeId(node)];
    for (int i = 0; i < n; ++i) held.push_back(A(next++));
  }
  return load;
}

std::map<NodeId, int> After(const ClusterLoad& load, const std::vector<PlannedMove>& moves) {
  std::map<NodeId, int> out;
  for (const auto& [id, actors] : load.held) out[id] = static_cast<int>(actors.size());
  for (const PlannedMove& m : moves) {
    --out[m.from];
    ++out[m.to];
  }
  return out;
}

TEST(BalancePlanTest, ANodeThatJustJoinedGetsItsShareWithTheFewestMoves) {
  ClusterLoad load = Load({{"a", 10}, {"b", 10}, {"c", 0}});
  auto moves = PlanBalance(load);
  EXPECT_EQ(moves.size(), 6u);
  auto after = After(load, moves);
  EXPECT_EQ(after[NodeId("c")], 6);
  EXPECT_EQ(after[NodeId("a")] + after[NodeId("b")], 14);
  EXPECT_LE(std::abs(after[NodeId("a")] - after[NodeId("b")]), 1);
  for (const PlannedMove& m : moves) {
    EXPECT_EQ(m.to, NodeId("c"));
    const auto& from = load.held.at(m.from);
    EXPECT_NE(std::find(from.begin(), from.end(), m.actor), from.end()) << "only actors the giver holds";
  }
  EXPECT_EQ(PlanBalance(load), moves) << "deterministic";
}

TEST(BalancePlanTest, EveryNodeEndsWithinOneOfTheOthers) {
  for (const auto& counts : std::vector<std::map<std::string, int>>{
           {{"a", 7}, {"b", 0}}, {{"a", 1}, {"b", 0}, {"c", 0}}, {{"a", 100}, {"b", 3}, {"c", 50}, {"d", 0}},
           {{"a", 5}, {"b", 5}}, {{"a", 0}, {"b", 0}}, {{"a", 9}}}) {
    ClusterLoad load = Load(counts);
    auto moves = PlanBalance(load);
    auto after = After(load, moves);
    int lo = 1 << 30, hi = 0, total = 0, before = 0;
    for (const auto& [id, n] : after) {
      lo = std::min(lo, n);
      hi = std::max(hi, n);
      total += n;
    }
    for (const auto& [id, n] : counts) before += n;
    EXPECT_EQ(total, before);
    if (counts.size() > 1) {
      EXPECT_LE(hi - lo, 1) << moves.size();
    }
    // Each actor moves at most once, and only from a node above its share.
    std::set<ActorId> moved;
    for (const PlannedMove& m : moves) EXPECT_TRUE(moved.insert(m.actor).second);
  }
  EXPECT_TRUE(PlanBalance(Load({{"a", 5}, {"b", 5}})).empty()) << "balanced already";
  EXPECT_TRUE(PlanBalance(Load({{"a", 6}, {"b", 5}})).empty()) << "within one";
}

TEST(MoveRecordTest, RoundTripAndStrict) {
  MoveRecord r{NodeId("b"), MoveState::kMoved, FromUnixMs(1234), "taken by b"};
  EXPECT_EQ(EncodeMoveRecord(r), "wasmkeep-move 1\nto b\nstate moved\nat 1234\ndetail taken by b\n");
  auto d = DecodeMoveRecord(EncodeMoveRecord(r));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->to, NodeId("b"));
  EXPECT_EQ(d->state, MoveState::kMoved);
  EXPECT_EQ(d->detail, "taken by b");
  MoveRecord empty{NodeId("b"), MoveState::kRequested, FromUnixMs(1), "\n bad\tbytes \n"};
  EXPECT_EQ(EncodeMoveRecord(empty), "wasmkeep-move 1\nto b\nstate requested\nat 1\ndetail ? bad?bytes ?\n");
  EXPECT_EQ(DecodeMoveRecord(EncodeMoveRecord(MoveRecord{NodeId("b"), MoveState::kRequested, FromUnixMs(1), ""}))->detail, "");
  for (std::string_view bad : {"", "wasmkeep-move 2\nto b\nstate moved\nat 1\ndetail -\n",
                               "wasmkeep-move 1\nto b\nstate gone\nat 1\ndetail -\n",
                               "wasmkeep-move 1\nto b/c\nstate moved\nat 1\ndetail -\n",
                               "wasmkeep-move 1\nto b\nstate moved\nat 1\n"}) {
    EXPECT_FALSE(DecodeMoveRecord(bad).ok()) << bad;
  }
}

struct Proc : cluster_testing::SimNode {
  Proc(SimWorld& w, std::shared_ptr<MemBucket> b, std::string id, std::string inst)
      : SimNode(w, std::move(b), NodeId(std::move(id)), InstanceToken(std::move(inst)), "t") {
    node.move_control().set_enabled(true);
  }
};

// The target side of a hand-over, as the front does it: acquire from the released record.
Task<Status> Take(Owners* owners, ActorId actor, Version released, Generation g) {
  AcquireResult r = co_await owners->AcquireHandedOver(std::move(actor), std::move(released), g);
  if (r.kind == AcquireResult::Kind::kAcquired) co_return Status::Ok();
  co_return PreconditionFailed(r.why);
}

struct MoveControlTest : ::testing::Test {
  SimWorld world{8};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();

  void Ready(Proc& p) { ASSERT_TRUE(world.RunUntil([&] { return p.node.lease().IsValid(); }, seconds(30))); }
  OwnerRecord Record(const ActorId& of) { return DecodeOwnerRecord(bucket->objects().at(OwnerKey(of)).body).value(); }
  // Hand-overs from `from` go to `to`'s owners directly (the front's part in a real node).
  void Wire(Proc& from, Proc& to) {
    HandOverHost host;
    host.take = [&to](NodeId, ActorId actor, Version released, Generation g) {
      return Take(&to.node.owners(), std::move(actor), std::move(released), g);
    };
    from.node.hand_overs().set_host(std::move(host));
  }
};

TEST_F(MoveControlTest, ARequestedMoveIsCarriedOutAndItsOutcomeWrittenOverTheRequest) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  Wire(a, b);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(RunTask(world, a.env, a.node.owners().Acquire(A(i)), seconds(10))->kind, AcquireResult::Kind::kAcquired);
  world.RunFor(seconds(4));  // both listed
  SimEnv& op = a.env;        // the operator's requests, from any clock
  for (int i = 0; i < 3; ++i) {
    auto s = RunTask(world, op, RequestMove(op, a.store, PlannedMove{A(i), NodeId("a"), NodeId("b")}, CallOptions{seconds(5)}), seconds(10));
    ASSERT_TRUE(s && s->ok());
  }
  auto again = RunTask(world, op, RequestMove(op, a.store, PlannedMove{A(0), NodeId("a"), NodeId("b")}, CallOptions{seconds(5)}), seconds(10));
  EXPECT_EQ(again->code(), Code::kPreconditionFailed) << "one request at a time per actor";
  // A request for an actor a does not hold is refused.
  auto stray = RunTask(world, op, RequestMove(op, a.store, PlannedMove{A(9), NodeId("a"), NodeId("b")}, CallOptions{seconds(5)}), seconds(10));
  ASSERT_TRUE(stray && stray->ok());
  for (int i : {0, 1, 2, 9}) {
    auto r = RunTask(world, op, AwaitMove(op, a.store, NodeId("a"), A(i), op.MonoNow() + seconds(20), CallOptions{seconds(5)}), seconds(30));
    ASSERT_TRUE(r && r->ok());
    if (i == 9) {
      EXPECT_EQ((*r)->state, MoveState::kRefused);
      EXPECT_EQ((*r)->detail, "this node does not hold it");
    } else {
      EXPECT_EQ((*r)->state, MoveState::kMoved) << (*r)->detail;
      EXPECT_EQ(Record(A(i)), (OwnerRecord{NodeId("b"), InstanceToken("ib"), Generation{2}}));
      EXPECT_TRUE(b.node.owners().Find(A(i)).IsValid());
    }
    EXPECT_EQ(bucket->objects().count(MoveKey(NodeId("a"), A(i))), 0u) << "the finished request is deleted";
  }
  EXPECT_EQ(a.node.move_control().stats().moved, 3u);
}

TEST_F(MoveControlTest, MovesAreStartedAtTheConfiguredRate) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  Wire(a, b);
  a.node.move_control().set_per_second(2);
  std::vector<MonoTime> started;
  HandOverHost host;
  host.take = [&](NodeId, ActorId actor, Version released, Generation g) {
    return Take(&b.node.owners(), std::move(actor), std::move(released), g);
  };
  host.unload = [&](const ActorId&) {
    started.push_back(world.Now());
    return false;  // not resident: released at once
  };
  a.node.hand_overs().set_host(std::move(host));
  for (int i = 0; i < 6; ++i) ASSERT_EQ(RunTask(world, a.env, a.node.owners().Acquire(A(i)), seconds(10))->kind, AcquireResult::Kind::kAcquired);
  world.RunFor(seconds(4));
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(RunTask(world, a.env, RequestMove(a.env, a.store, PlannedMove{A(i), NodeId("a"), NodeId("b")}, CallOptions{seconds(5)}), seconds(10))->ok());
  }
  ASSERT_TRUE(world.RunUntil([&] { return started.size() == 6; }, seconds(30)));
  EXPECT_GE(started.back() - started.front(), milliseconds(2500)) << "2 per second: 6 take at least 2.5 s";
  ASSERT_TRUE(world.RunUntil([&] { return b.node.owners().holds() == 6; }, seconds(30)));
}

TEST_F(MoveControlTest, TheLoadCountsLiveNodesHoldsAndSkipsDrainingNodes) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(RunTask(world, a.env, a.node.owners().Acquire(A(i)), seconds(10))->kind, AcquireResult::Kind::kAcquired);
  ASSERT_EQ(RunTask(world, b.env, b.node.owners().Acquire(A(7)), seconds(10))->kind, AcquireResult::Kind::kAcquired);
  ASSERT_TRUE(RunTask(world, a.env, a.node.owners().Release(A(3)), seconds(10))->ok());
  auto load = RunTask(world, a.env, ReadClusterLoad(a.env, a.store, LeaseTiming{}), seconds(30));
  ASSERT_TRUE(load && load->ok());
  EXPECT_EQ((*load)->nodes, (std::vector<NodeId>{NodeId("a"), NodeId("b")}));
  EXPECT_EQ((*load)->held[NodeId("a")], (std::vector<ActorId>{A(0), A(1), A(2)})) << "a released record is nobody's";
  EXPECT_EQ((*load)->held[NodeId("b")], (std::vector<ActorId>{A(7)}));
  ASSERT_TRUE(bucket->ApplyPut("control/drain/b", "x", Precondition::None()).ok());
  load = RunTask(world, a.env, ReadClusterLoad(a.env, a.store, LeaseTiming{}), seconds(30));
  EXPECT_EQ((*load)->nodes, (std::vector<NodeId>{NodeId("a")})) << "a draining node takes nothing";
}

}  // namespace
}  // namespace wk
