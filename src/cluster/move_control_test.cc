// Moves requested through the bucket (cluster/move_control.h): the outcome written is what
// happened, even when the target's answer or the outcome's own write is lost.
#include "cluster/move_control.h"

#include <gtest/gtest.h>

#include "cluster/testing/fixture.h"

namespace wk {
namespace {

using std::chrono::seconds;
using Proc = cluster_testing::TestProc;

struct MoveOutcomeTest : cluster_testing::ClusterTest {
  MoveOutcomeTest() : ClusterTest(44) {}

  // a holds the actor; its hand-overs close at once and tell b to take it, over a link that
  // loses the answer when lose_take_answer is set.
  void SetUp() override {
    Ready(a);
    Ready(b);
    world.RunFor(seconds(4));
    ASSERT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
    HandOverHost host;
    host.unload = [](const ActorId&) { return false; };
    host.take = [this](NodeId, ActorId x, Version released, Generation g) -> Task<Status> {
      return [](Owners* owners, ActorId x2, Version v, Generation g2, bool lose) -> Task<Status> {
        AcquireResult r = co_await owners->AcquireHandedOver(std::move(x2), std::move(v), g2);
        if (lose) co_return UnknownOutcome("staged: the take's answer was lost");
        if (r.kind == AcquireResult::Kind::kAcquired) co_return Status::Ok();
        co_return PreconditionFailed(r.why);
      }(&b.node.owners(), std::move(x), std::move(released), g, lose_take_answer);
    };
    a.node.hand_overs().set_host(std::move(host));
    a.node.move_control().set_enabled(true);
  }
  void Request() {
    ASSERT_TRUE(bucket
                    ->ApplyPut(MoveKey(NodeId("a"), actor),
                               EncodeMoveRecord(MoveRecord{NodeId("b"), MoveState::kRequested, FromUnixMs(1), ""}),
                               Precondition::None())
                    .ok());
  }
  MoveRecord Outcome() { return DecodeMoveRecord(bucket->objects().at(MoveKey(NodeId("a"), actor)).body).value(); }

  Proc a{world, bucket, "a", "ia"};
  Proc b{world, bucket, "b", "ib"};
  bool lose_take_answer = false;
};

// The target took the actor but its answer was lost: the record says who holds it, and the
// outcome is `moved`, not `released`. Broken model move-outcome-unchecked.
TEST_F(MoveOutcomeTest, ALostAnswerOfATakeThatLandedIsReportedMoved) {
  lose_take_answer = true;
  Request();
  world.RunFor(seconds(15));
  EXPECT_TRUE(b.node.owners().Find(actor).IsValid());
  MoveRecord out = Outcome();
  EXPECT_EQ(out.state, MoveState::kMoved) << out.detail;
}

// The outcome's write fails: the next pass writes it again, and never carries the move out a
// second time (which would find the actor gone and write `refused` over a move that
// happened). Broken model move-outcome-unchecked.
TEST_F(MoveOutcomeTest, AnOutcomeWhoseWriteFailedIsWrittenAgainNotRefused) {
  int refused_writes = 0;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key == MoveKey(NodeId("a"), actor) && refused_writes < 1) {
      ++refused_writes;
      f.fail_before_apply = Retryable("staged: the bucket refuses the outcome");
    }
    return f;
  });
  Request();
  world.RunFor(seconds(20));
  EXPECT_EQ(refused_writes, 1);
  EXPECT_TRUE(b.node.owners().Find(actor).IsValid());
  MoveRecord out = Outcome();
  EXPECT_EQ(out.state, MoveState::kMoved) << out.detail;
  EXPECT_EQ(a.node.move_control().stats().moved, 1u);
  EXPECT_EQ(a.node.move_control().stats().refused, 0u);
}

}  // namespace
}  // namespace wk
