// Hand-overs: the drain that waits and the move (cluster/hand_over.h), with real
// ClusterNodes in virtual time and a scripted host standing in for the actor runtime.
#include "cluster/hand_over.h"

#include <gtest/gtest.h>

#include "cluster/testing/fixture.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using Proc = cluster_testing::TestProc;  // a SimNode from plain strings (cluster/testing/harness.h)

Task<void> ReleaseNow(Owners* owners, ActorId actor) { (void)co_await owners->Release(std::move(actor)); }

// Releases the hold of `actor` on `owners` after `after`, as a replica's close does once
// its writes are durable (ReplicaProvider::Close). A timer, not a coroutine that sleeps and
// then releases: GCC 12 miscompiles that shape (docs/DEVELOPING.md).
void CloseLater(Env* env, Owners* owners, ActorId actor, Duration after) {
  env->StartTimer(env->MonoNow() + after, [env, owners, actor] { env->Spawn(ReleaseNow(owners, actor), "close"); });
}

struct HandOverTest : cluster_testing::ClusterTest {
  HandOverTest() : ClusterTest(33) {}

  // Every node has listed every other live (the drain's targets come from the view).
  void Listed(std::initializer_list<Proc*> procs) {
    ASSERT_TRUE(world.RunUntil(
        [&] {
          for (Proc* p : procs) {
            int live = 0;
            for (const auto& [id, v] : p->node.membership().view()) live += v.live() ? 1 : 0;
            if (live != static_cast<int>(procs.size())) return false;
          }
          return true;
        },
        seconds(30)));
  }
  HoldView Hold(Proc& p, const ActorId& a) {
    auto r = Run(p.env, p.node.owners().Acquire(a));
    EXPECT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
    return r.hold;
  }
  // A host whose actors close `close_after` after they are asked to (never, if negative).
  void CloseAfter(Proc& p, Duration close_after, std::set<ActorId>* unloaded = nullptr) {
    HandOverHost host;
    host.unload = [&p, close_after, unloaded](const ActorId& a) {
      if (unloaded) unloaded->insert(a);
      if (close_after >= Duration(0)) CloseLater(&p.env, &p.node.owners(), a, close_after);
      return true;
    };
    p.node.hand_overs().set_host(std::move(host));
  }
};

TEST_F(HandOverTest, AResidentActorIsClosedThenReleasedAndNothingStartsOnItMeanwhile) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  HoldView hold = Hold(a, actor);
  std::set<ActorId> unloaded;
  CloseAfter(a, milliseconds(400), &unloaded);
  std::optional<HandOverResult> result;
  a.env.Spawn([](HandOvers* h, ActorId x, std::optional<HandOverResult>* out) -> Task<void> {
    out->emplace(co_await h->HandOver(std::move(x), std::nullopt, seconds(5)));
  }(&a.node.hand_overs(), actor, &result), "hand-over");
  world.RunFor(milliseconds(100));
  EXPECT_TRUE(unloaded.count(actor)) << "the host was asked to close it";
  EXPECT_TRUE(a.node.hand_overs().Leaving(actor));
  EXPECT_TRUE(hold.IsValid()) << "it still acts while its writes are made durable";
  auto again = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(again.kind, AcquireResult::Kind::kNotValid) << "no event starts on a leaving actor, not even on its hold";
  ASSERT_TRUE(world.RunUntil([&] { return result.has_value(); }, seconds(10)));
  EXPECT_EQ(result->kind, HandOverResult::Kind::kReleased) << result->detail;
  EXPECT_FALSE(hold.IsValid());
  EXPECT_EQ(Record(actor), OwnerRecord::Nobody(Generation{1}));
  EXPECT_EQ(a.node.hand_overs().stats().closed, 1u);
  EXPECT_EQ(a.node.hand_overs().stats().cut, 0u);
  EXPECT_FALSE(a.node.hand_overs().Leaving(actor));
  EXPECT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired) << "it may come back later";
}

TEST_F(HandOverTest, ACloseThatOutlastsTheLimitIsCutByReleasingTheHoldUnderTheActor) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  HoldView hold = Hold(a, actor);
  CloseAfter(a, Duration(-1));  // never closes by itself
  const MonoTime start = world.Now();
  HandOverResult r = Run(a.env, a.node.hand_overs().HandOver(actor, std::nullopt, seconds(3)));
  EXPECT_EQ(r.kind, HandOverResult::Kind::kReleased) << r.detail;
  EXPECT_LE(world.Now() - start, seconds(3) + milliseconds(100)) << "bounded by its limit";
  EXPECT_FALSE(hold.IsValid());
  EXPECT_EQ(a.node.hand_overs().stats().cut, 1u);
  EXPECT_EQ(Record(actor), OwnerRecord::Nobody(Generation{1}));
}

TEST_F(HandOverTest, RequestsHeldDuringAHandOverGoOnWhenItEndsOrAfterTheirWait) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  (void)Hold(a, actor);
  CloseAfter(a, milliseconds(600));
  bool left = false;
  MonoTime left_at{};
  a.env.Spawn([](HandOvers* h, ActorId x) -> Task<void> {
    (void)co_await h->HandOver(std::move(x), std::nullopt, seconds(5));
  }(&a.node.hand_overs(), actor), "hand-over");
  world.RunFor(milliseconds(50));
  ASSERT_TRUE(a.node.hand_overs().Leaving(actor));
  const MonoTime asked = world.Now();
  a.env.Spawn([](HandOvers* h, ActorId x, bool* done, MonoTime* at, SimWorld* w) -> Task<void> {
    co_await h->WaitLeft(std::move(x), seconds(5));
    *done = true;
    *at = w->Now();
  }(&a.node.hand_overs(), actor, &left, &left_at, &world), "request");
  ASSERT_TRUE(world.RunUntil([&] { return left; }, seconds(10)));
  EXPECT_LT(left_at - asked, seconds(1)) << "released by the hand-over's end, not the wait's bound";
  EXPECT_FALSE(a.node.hand_overs().Leaving(actor));

  // A hand-over that does not end in time: the request goes on at its own bound.
  const ActorId y{"acme", "counter", "y"};
  (void)Hold(a, y);
  CloseAfter(a, Duration(-1));
  a.env.Spawn([](HandOvers* h, ActorId x) -> Task<void> {
    (void)co_await h->HandOver(std::move(x), std::nullopt, seconds(5));
  }(&a.node.hand_overs(), y), "hand-over");
  world.RunFor(milliseconds(50));
  left = false;
  const MonoTime asked_y = world.Now();
  a.env.Spawn([](HandOvers* h, ActorId x, bool* done, MonoTime* at, SimWorld* w) -> Task<void> {
    co_await h->WaitLeft(std::move(x), seconds(1));
    *done = true;
    *at = w->Now();
  }(&a.node.hand_overs(), y, &left, &left_at, &world), "request");
  ASSERT_TRUE(world.RunUntil([&] { return left; }, seconds(10)));
  EXPECT_GE(left_at - asked_y, seconds(1));
  EXPECT_LT(left_at - asked_y, seconds(1) + milliseconds(50));
  EXPECT_TRUE(a.node.hand_overs().Leaving(y)) << "still closing";
}

TEST_F(HandOverTest, AMoveTellsItsTargetOnlyOnceTheReleaseLandedAndTheTargetTakesItAtTheNextGeneration) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  HoldView hold = Hold(a, actor);
  bool told = false;
  HandOverHost host = {};
  host.unload = [&](const ActorId& x) {
    CloseLater(&a.env, &a.node.owners(), x, milliseconds(200));
    return true;
  };
  host.take = [&](NodeId to, ActorId x, Version released, Generation g) -> Task<Status> {
    told = true;
    EXPECT_EQ(to, NodeId("b"));
    // Never two owners: the source stopped acting and its release landed first.
    EXPECT_FALSE(hold.IsValid()) << "the target is told while the source still acts";
    EXPECT_TRUE(Record(x).names_nobody()) << "the target is told before the release landed";
    return [](Owners* owners, ActorId x2, Version v, Generation g2) -> Task<Status> {
      AcquireResult r = co_await owners->AcquireHandedOver(std::move(x2), std::move(v), g2);
      if (r.kind == AcquireResult::Kind::kAcquired) co_return Status::Ok();
      co_return PreconditionFailed(r.why);
    }(&b.node.owners(), std::move(x), std::move(released), g);
  };
  a.node.hand_overs().set_host(std::move(host));
  HandOverResult r = Run(a.env, a.node.hand_overs().HandOver(actor, NodeId("b"), seconds(5)));
  EXPECT_TRUE(told);
  EXPECT_EQ(r.kind, HandOverResult::Kind::kMoved) << r.detail;
  EXPECT_EQ(Record(actor), (OwnerRecord{NodeId("b"), InstanceToken("ib"), Generation{2}}));
  EXPECT_TRUE(b.node.owners().Find(actor).IsValid());
  EXPECT_FALSE(hold.IsValid());
}

TEST_F(HandOverTest, ATakeFromAReleaseThatSomeoneElseFollowedIsRefusedByItsCondition) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Proc c(world, bucket, "c", "ic");
  Ready(a);
  Ready(b);
  Ready(c);
  (void)Hold(a, actor);
  ASSERT_TRUE(Run(a.env, a.node.owners().Release(actor)).ok());
  const Version released = bucket->objects().at(OwnerKey(actor)).version;
  // c takes the actor between the release and the target's take.
  HoldView cs = Hold(c, actor);
  auto r = Run(b.env, b.node.owners().AcquireHandedOver(actor, released, Generation{1}));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kHeldElsewhere) << r.why;
  EXPECT_FALSE(b.node.owners().Find(actor).IsValid()) << "two owners";
  EXPECT_TRUE(cs.IsValid());
  EXPECT_EQ(Record(actor), (OwnerRecord{NodeId("c"), InstanceToken("ic"), Generation{2}}));
}

TEST_F(HandOverTest, DrainHandsEveryHoldOverAtMost32AtOnceAndReportsDrainedOnlyWithNothingPending) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  std::vector<ActorId> actors;
  for (int i = 0; i < 70; ++i) actors.push_back(ActorId{"acme", "counter", "d" + std::to_string(i)});
  for (const ActorId& x : actors) (void)Hold(a, x);
  int closing = 0, most = 0;
  HandOverHost host;
  host.unload = [&](const ActorId& x) {
    most = std::max(most, ++closing);
    a.env.StartTimer(a.env.MonoNow() + milliseconds(300), [&a, x, &closing] {
      --closing;
      a.env.Spawn(ReleaseNow(&a.node.owners(), x), "close");
    });
    return true;
  };
  a.node.hand_overs().set_host(std::move(host));
  Status s = Run(a.env, a.node.hand_overs().Drain(seconds(30)));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(most, kHandOverConcurrency);
  EXPECT_EQ(a.node.hand_overs().stats().closed, actors.size());
  EXPECT_EQ(a.node.owners().holds(), 0u);
  EXPECT_EQ(a.node.owners().pending(), 0u);
  for (const ActorId& x : actors) EXPECT_TRUE(Record(x).names_nobody()) << x.ToString();
  EXPECT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kNotValid) << "no new actors";
}

TEST_F(HandOverTest, ADrainWithAReleaseThatCannotLandDoesNotReportDrained) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  HoldView hold = Hold(a, actor);
  CloseAfter(a, milliseconds(100));
  int refusals = 0;
  a.store.set_fault_hook([&refusals](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/") && refusals++ < 30) f.fail_before_apply = Retryable("throttled");
    return f;
  });
  Status short_drain = Run(a.env, a.node.hand_overs().Drain(milliseconds(1500)));
  EXPECT_EQ(short_drain.code(), Code::kUnknownOutcome) << "not drained while a release is pending";
  EXPECT_FALSE(hold.IsValid()) << "it stopped acting at once";
  EXPECT_EQ(a.node.hand_overs().stats().pending, 1u);
  Status drained = Run(a.env, a.node.hand_overs().Drain(seconds(30)));
  EXPECT_TRUE(drained.ok()) << drained.ToString();
  EXPECT_EQ(Record(actor), OwnerRecord::Nobody(Generation{1}));
}

TEST_F(HandOverTest, DrainTargetsSpreadOverLivePeersAndSkipThisNodeAndDrainingOnes) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Proc c(world, bucket, "c", "ic");
  Ready(a);
  Ready(b);
  Ready(c);
  Listed({&a, &b, &c});
  std::map<NodeId, int> count;
  for (int i = 0; i < 300; ++i) {
    auto to = a.node.hand_overs().DrainTarget(ActorId{"acme", "counter", "s" + std::to_string(i)});
    ASSERT_TRUE(to.has_value());
    ++count[*to];
  }
  EXPECT_EQ(count.count(NodeId("a")), 0u) << "never itself";
  EXPECT_GT(count[NodeId("b")], 100);
  EXPECT_GT(count[NodeId("c")], 100);
  a.node.hand_overs().set_draining_peers({NodeId("b")});
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.node.hand_overs().DrainTarget(ActorId{"acme", "counter", "s" + std::to_string(i)}), NodeId("c"));
  }
  a.node.hand_overs().set_draining_peers({NodeId("b"), NodeId("c")});
  EXPECT_FALSE(a.node.hand_overs().DrainTarget(actor).has_value()) << "no peer left";
}

}  // namespace
}  // namespace wk
