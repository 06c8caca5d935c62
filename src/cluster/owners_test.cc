// Ownership records and holds (ADR 0020 §3, §4) with real ClusterNodes in virtual time.
#include "cluster/owners.h"

#include <gtest/gtest.h>

#include "cluster/cluster_node.h"
#include "cluster/testing.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A ClusterNode on its own simulated host, started at once (cluster/testing.h).
struct Proc : cluster_testing::SimNode {
  Proc(SimWorld& w, std::shared_ptr<MemBucket> b, std::string id, std::string inst)
      : SimNode(w, std::move(b), NodeId(std::move(id)), InstanceToken(std::move(inst)), "t") {}
};

// The record an acquisition by (node, instance) at generation g writes.
OwnerRecord Owner(std::string node, std::string instance, std::uint64_t g) {
  return OwnerRecord{NodeId(std::move(node)), InstanceToken(std::move(instance)), Generation{g}};
}

struct OwnersTest : ::testing::Test {
  SimWorld world{21};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();
  const ActorId actor{"acme", "counter", "x"};

  template <typename T>
  T Run(Env& env, Task<T> t) {
    auto out = RunTask(world, env, std::move(t), seconds(60));
    EXPECT_TRUE(out.has_value());
    return std::move(*out);
  }
  OwnerRecord Record() { return DecodeOwnerRecord(bucket->objects().at(OwnerKey(actor)).body).value(); }
  void Ready(Proc& p) { ASSERT_TRUE(world.RunUntil([&] { return p.node.lease().IsValid(); }, seconds(30))); }
};

TEST_F(OwnersTest, AcquireReleaseReacquireNeverReusesAGeneration) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_TRUE(r.hold.IsValid());
  EXPECT_EQ(Record(), Owner("a", "ia", 1));
  // Acquiring again returns the same hold.
  auto again = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(again.hold.generation(), Generation{1});
  ASSERT_TRUE(Run(a.env, a.node.owners().Release(actor)).ok());
  EXPECT_FALSE(r.hold.IsValid()) << "a released hold stops acting";
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
  auto wake = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(wake.kind, AcquireResult::Kind::kAcquired);
  EXPECT_EQ(wake.hold.generation(), Generation{2});
}

TEST_F(OwnersTest, AnotherNodesLiveHoldIsNotTaken) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  ASSERT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  auto r = Run(b.env, b.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kHeldElsewhere);
  EXPECT_EQ(r.owner.node_id, NodeId("a"));
  // Routing names a, live in b's view.
  world.RunFor(seconds(4));
  auto other = Run(b.env, b.node.owners().OtherOwner(actor));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other->has_value());
  EXPECT_EQ((*other)->node_id, NodeId("a"));
}

TEST_F(OwnersTest, AFencedNodesActorIsTakenAtTheNextGenerationAfterTheBound) {
  auto a = std::make_unique<Proc>(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(*a);
  Ready(b);
  ASSERT_EQ(Run(a->env, a->node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  a.reset();  // a dies without releasing
  EXPECT_EQ(Run(b.env, b.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kHeldElsewhere);
  // b's fence watch fences a after ttl + grace; then the record is free.
  world.RunFor(seconds(25));
  auto r = Run(b.env, b.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(Record(), Owner("b", "ib", 2));
}

TEST_F(OwnersTest, ADeletedHeartbeatFreesNothing) {
  auto a = std::make_unique<Proc>(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(*a);
  Ready(b);
  ASSERT_EQ(Run(a->env, a->node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  a.reset();
  ASSERT_TRUE(bucket->ApplyDelete("nodes/a", Precondition::None()).ok());
  world.RunFor(seconds(60));
  EXPECT_EQ(Run(b.env, b.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kHeldElsewhere);
  EXPECT_EQ(Record().node_id, NodeId("a"));
}

TEST_F(OwnersTest, ARestartedNodeTakesItsPredecessorsActorBackAtANewGeneration) {
  auto a = std::make_unique<Proc>(world, bucket, "a", "ia");
  Ready(*a);
  ASSERT_EQ(Run(a->env, a->node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  a.reset();
  Proc a2(world, bucket, "a", "ia2");
  Ready(a2);
  auto r = Run(a2.env, a2.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(Record(), Owner("a", "ia2", 2));
}

TEST_F(OwnersTest, ALapseEndsHoldsIntoPendingReleasesThatLandLater) {
  Proc a(world, bucket, "a", "ia");
  bool outage = false;
  a.store.set_fault_hook([&outage](const OpInfo&) {
    OpFault f;
    if (outage) f.fail_before_apply = Retryable("outage");
    return f;
  });
  Ready(a);
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_TRUE(r.hold.IsValid());
  outage = true;
  world.RunFor(seconds(10));
  EXPECT_FALSE(r.hold.IsValid());
  EXPECT_EQ(a.node.owners().pending(), 1u);
  outage = false;
  world.RunFor(seconds(5));
  EXPECT_TRUE(a.node.lease().IsValid());
  EXPECT_EQ(a.node.owners().pending(), 0u);
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
  EXPECT_FALSE(r.hold.IsValid()) << "a lapsed hold never comes back";
}

TEST_F(OwnersTest, ALostAcquireReplyIsReadBackAsOurs) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  a.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/")) f.lose_reply = true;
    return f;
  });
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(r.hold.generation(), Generation{1});
  EXPECT_EQ(a.node.owners().pending(), 0u);
}

TEST_F(OwnersTest, AnAcquireWithUnknownOutcomeIsReleasedIfItLanded) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  bool slow = true;
  a.store.set_fault_hook([&slow](const OpInfo& op) {
    OpFault f;
    if (slow && op.op == StoreOp::kPut && op.key.starts_with("owners/")) f.request_delay = seconds(4);  // past the deadline
    return f;
  });
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kUnknown);
  slow = false;
  world.RunFor(seconds(5));  // the write lands, the resolver finds it and releases it
  EXPECT_EQ(a.node.owners().pending(), 0u);
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
  EXPECT_EQ(a.node.owners().stats().resolver_released, 1u);
}

TEST_F(OwnersTest, ASecondAcquireAtTheSameGenerationIsNeverReleasedByTheResolver) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  int puts = 0;
  a.store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/") && ++puts == 1) f.request_delay = seconds(4);
    return f;
  });
  auto first = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(first.kind, AcquireResult::Kind::kUnknown);
  // The second attempt reads the old record too and writes the same generation.
  auto second = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(second.kind, AcquireResult::Kind::kAcquired) << second.why;
  EXPECT_EQ(second.hold.generation(), Generation{1});
  world.RunFor(seconds(10));
  EXPECT_TRUE(second.hold.IsValid()) << "the resolver must not release a hold that lives";
  EXPECT_EQ(Record(), Owner("a", "ia", 1));
}

TEST_F(OwnersTest, APendingReleaseNeverAppliesToALaterHold) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  ASSERT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  bool refuse_releases = true;
  a.store.set_fault_hook([&refuse_releases](const OpInfo& op) {
    OpFault f;
    if (refuse_releases && op.op == StoreOp::kPut && op.key.starts_with("owners/")) f.fail_before_apply = Retryable("throttled");
    return f;
  });
  EXPECT_EQ(Run(a.env, a.node.owners().Release(actor)).code(), Code::kUnknownOutcome);
  EXPECT_EQ(a.node.owners().pending(), 1u);
  refuse_releases = false;
  // Re-acquire before the pending release is retried: g = 2 over the unreleased g = 1.
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(r.hold.generation(), Generation{2});
  world.RunFor(seconds(5));
  EXPECT_EQ(a.node.owners().pending(), 0u);
  EXPECT_TRUE(r.hold.IsValid());
  EXPECT_EQ(Record(), Owner("a", "ia", 2)) << "the old release must not apply";
}

TEST_F(OwnersTest, DrainReportsDrainedOnlyWhenNothingIsPending) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  ASSERT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  int refusals = 0;
  a.store.set_fault_hook([&refusals](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/") && refusals++ < 30) f.fail_before_apply = Retryable("throttled");
    return f;
  });
  Status short_drain = Run(a.env, a.node.owners().Drain(milliseconds(1500)));
  EXPECT_EQ(short_drain.code(), Code::kUnknownOutcome) << "not drained while a release is pending";
  Status drained = Run(a.env, a.node.owners().Drain(seconds(30)));
  EXPECT_TRUE(drained.ok()) << drained.ToString();
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
}

TEST_F(OwnersTest, CleanStopReleasesThenWritesReleased) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_TRUE(Run(a.env, a.node.Stop(seconds(10))).ok());
  EXPECT_FALSE(r.hold.IsValid());
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
  auto node = std::get<NodeRecord>(DecodeNodeObject(bucket->objects().at("nodes/a").body).value());
  EXPECT_EQ(node.state, LeaseState::kReleased);
}

}  // namespace
}  // namespace wk
