// Ownership records and holds (docs/node-lease.md, "Actors" and "Drain") with real ClusterNodes in
// virtual time.
#include "cluster/owners.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cluster/cluster_node.h"
#include "cluster/operator.h"
#include "cluster/testing/fixture.h"
#include "store/tenant_store.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A ClusterNode on its own simulated host, started at once (cluster/testing/harness.h).
using Proc = cluster_testing::TestProc;

// The record an acquisition by (node, instance) at generation g writes.
OwnerRecord Owner(std::string node, std::string instance, std::uint64_t g) {
  return OwnerRecord{NodeId(std::move(node)), InstanceToken(std::move(instance)), Generation{g}};
}

struct OwnersTest : cluster_testing::ClusterTest {
  OwnersTest() : ClusterTest(21) {}

  NodeRecord Node(const std::string& id) {
    return std::get<NodeRecord>(DecodeNodeObject(bucket->objects().at(NodeKey(NodeId(id))).body).value());
  }
  // The world's monotonic time at which a wall time of a clock without skew is read.
  static MonoTime MonoOf(WallTime t) { return MonoTime(milliseconds(ToUnixMs(t) - cluster_testing::kSimOriginMs)); }
  void RunUntilTime(MonoTime t) { world.RunUntil([&] { return world.Now() >= t; }, seconds(600)); }
  // Fences nodes/<id> as an operator would, over whatever object is there.
  void FenceNow(const std::string& id) {
    NodeRecord fence = Node(id);
    fence.state = LeaseState::kFenced;
    ASSERT_TRUE(bucket->ApplyPut(NodeKey(NodeId(id)), EncodeNodeRecord(fence),
                                 Precondition::IfMatch(bucket->objects().at(NodeKey(NodeId(id))).version))
                    .ok());
  }
  static ActorId Nth(int i) { return ActorId{"acme", "counter", "x" + std::to_string(100 + i)}; }
  // Every request of p's fails before it reaches the bucket while `outage` is true.
  static void FailWhile(Proc& p, const bool& outage) {
    p.store.set_fault_hook([&outage](const OpInfo&) {
      OpFault f;
      if (outage) f.fail_before_apply = Retryable("outage");
      return f;
    });
  }
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

// Usage per tenant (store/tenant_store.h, docs/tenants.md "Usage"): every request the
// ownership protocol sends for a tenant's actor (the acquisition with its first-generation
// seed, the routing read, the release) is that tenant's, under kOwner; the node's own (its
// lease, the listing, the drain read) and a system actor's (an alarm shard) are nobody's.
TEST_F(OwnersTest, AnActorsOwnershipRequestsAreItsTenantsAndTheNodesOwnAreNobodys) {
  Proc a(world, bucket, "a", "ia");
  // Every request a's store sends, by whose key it names.
  int tenant_keys = 0, node_keys = 0, other_keys = 0;
  a.store.set_fault_hook([&](const OpInfo& op) {
    if (op.key.find("/acme/") != std::string::npos) {
      ++tenant_keys;
    } else if (op.key.starts_with("nodes/")) {
      ++node_keys;
    } else {
      ++other_keys;
    }
    return OpFault{};
  });
  TenantStores tenants(a.store);
  std::map<std::string, std::map<BucketPurpose, int>> seen;
  tenants.set_sink([&seen](const TenantRequest& r) { ++seen[std::string(r.tenant)][r.purpose]; });
  a.node.owners().set_tenant_stores(&tenants);
  Ready(a);
  world.RunFor(seconds(10));  // lease writes and listings
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  auto routed = Run(a.env, a.node.owners().OtherOwner(ActorId{"acme", "counter", "elsewhere"}));
  ASSERT_TRUE(routed.ok());
  ASSERT_TRUE(Run(a.env, a.node.owners().Release(actor)).ok());
  const ActorId shard{"_alarms", "shard", "07"};
  ASSERT_TRUE(ValidateSystemActorId(shard).ok());
  auto held = Run(a.env, a.node.owners().Acquire(shard));
  ASSERT_EQ(held.kind, AcquireResult::Kind::kAcquired) << held.why;
  world.RunFor(seconds(10));

  EXPECT_GT(node_keys, 10) << "the node's lease and listing ran";
  EXPECT_GT(other_keys, 0) << "the shard's record and the node's control reads";
  EXPECT_GE(tenant_keys, 5) << "a read, the seed, the write, the routing read, the release";
  ASSERT_EQ(seen.size(), 1u) << "acme's only";
  EXPECT_EQ(seen["acme"].size(), 1u) << "all under kOwner";
  EXPECT_EQ(seen["acme"][BucketPurpose::kOwner], tenant_keys) << "every request for acme's actors, and only those";
}

// A record (or a seed) at the largest generation is refused, not wrapped to 0 and not a
// crash of the node: Generation::Next() checks, and the acquisition asks first.
TEST_F(OwnersTest, ARecordAtTheLargestGenerationIsRefusedNotWrapped) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  ASSERT_TRUE(bucket
                  ->ApplyPut(OwnerKey(actor), EncodeOwnerRecord(OwnerRecord::Nobody(Generation{kMaxGeneration})),
                             Precondition::None())
                  .ok());
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kError) << r.why;
  EXPECT_NE(r.why.find("largest"), std::string::npos) << r.why;
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{kMaxGeneration}));
  std::string above = EncodeOwnerRecord(OwnerRecord::Nobody(Generation{1}));
  above.replace(above.find("generation 1"), 12, "generation " + std::to_string(kMaxGeneration + 1));
  EXPECT_FALSE(DecodeOwnerRecord(above).ok()) << "a record above the largest generation decodes";
}

// A release of one generation leaves a later hold alone (OwnersHoldSource's release of a
// closed replica, which may have waited for the actor's lock while the actor was taken again).
TEST_F(OwnersTest, AReleaseOfOneGenerationLeavesALaterHoldAlone) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  ASSERT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  ASSERT_TRUE(Run(a.env, a.node.owners().Release(actor)).ok());
  auto second = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(second.hold.generation(), Generation{2});
  EXPECT_TRUE(Run(a.env, a.node.owners().Release(actor, Generation{1})).ok());
  EXPECT_TRUE(second.hold.IsValid()) << "the release of generation 1 ended generation 2's hold";
  EXPECT_EQ(Record(), Owner("a", "ia", 2));
  EXPECT_TRUE(Run(a.env, a.node.owners().Release(actor, Generation{2})).ok());
  EXPECT_FALSE(second.hold.IsValid());
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

// docs/node-lease.md, "Freeing a record": a record naming A is free on a fresh read of nodes/A that
// shows it fenced or released, once that object's kept written_at + ttl + grace has passed on the
// reader's clock, and not before. An operator's fence needs no watch, so it lands long before the
// bound: the time check alone keeps the acquisition out until then. (Fails with the
// broken model free-ignores-fence-bound.)
TEST_F(OwnersTest, AFencedNodesActorIsTakenAtTheNextGenerationAfterTheBound) {
  auto a = std::make_unique<Proc>(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(*a);
  Ready(b);
  ASSERT_EQ(Run(a->env, a->node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  a.reset();  // a dies without releasing
  auto fenced = Run(b.env, OperatorFence(b.env, b.store, NodeId("a"), LeaseTiming{}, std::nullopt));
  ASSERT_TRUE(fenced.ok() && fenced->written) << fenced.status().ToString();
  const MonoTime free_at = MonoOf(Node("a").written_at) + seconds(15);
  ASSERT_GT(free_at, world.Now() + seconds(5)) << "the fence landed well before the bound";
  auto early = Run(b.env, b.node.owners().Acquire(actor));
  EXPECT_EQ(early.kind, AcquireResult::Kind::kHeldElsewhere) << "fenced, but written_at + ttl + grace not passed";
  RunUntilTime(free_at - milliseconds(500));
  EXPECT_EQ(Run(b.env, b.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kHeldElsewhere)
      << "half a second before the bound";
  EXPECT_EQ(Record(), Owner("a", "ia", 1));
  RunUntilTime(free_at);
  auto r = Run(b.env, b.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(Record(), Owner("b", "ib", 2));
}

// The same bound after a clean stop whose release of the actor could not land: `released`
// frees the record, ttl + grace after its kept written_at. (Fails with the broken model
// free-ignores-fence-bound.)
TEST_F(OwnersTest, AReleasedNodesActorIsTakenAtTheNextGenerationAfterTheBound) {
  Proc b(world, bucket, "b", "ib");
  Proc c(world, bucket, "c", "ic");
  Ready(b);
  Ready(c);
  ASSERT_EQ(Run(c.env, c.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  c.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/")) f.fail_before_apply = Retryable("test: refused");
    return f;
  });
  (void)Run(c.env, c.node.Stop(seconds(4)));
  ASSERT_EQ(Node("c").state, LeaseState::kReleased);
  ASSERT_EQ(Record(), Owner("c", "ic", 1)) << "the release did not land";
  const MonoTime free_at = MonoOf(Node("c").written_at) + seconds(15);
  EXPECT_EQ(Run(b.env, b.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kHeldElsewhere);
  RunUntilTime(free_at - milliseconds(500));
  EXPECT_EQ(Run(b.env, b.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kHeldElsewhere);
  RunUntilTime(free_at);
  auto r = Run(b.env, b.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(Record(), Owner("b", "ib", 2));
}

// docs/node-lease.md, "Freeing a record": an old-format nodes/<A> (headers 1 and 2) frees nothing,
// however old: an old binary writes its heartbeat unconditionally and may have overwritten A's
// object while A was still valid. (Fails with the broken model free-on-old-format.)
TEST_F(OwnersTest, AnOldFormatHeartbeatFreesNothing) {
  auto a = std::make_unique<Proc>(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(*a);
  Ready(b);
  ASSERT_EQ(Run(a->env, a->node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  a.reset();
  for (const std::string old : {"wasmkeep-node 1\nnode a\nwritten_at_ms 1000\n", "wasmkeep-node 2\n{}\n"}) {
    ASSERT_TRUE(bucket->ApplyPut("nodes/a", old, Precondition::None()).ok());
    world.RunFor(seconds(60));
    auto r = Run(b.env, b.node.owners().Acquire(actor));
    EXPECT_EQ(r.kind, AcquireResult::Kind::kHeldElsewhere) << old;
    EXPECT_EQ(Record(), Owner("a", "ia", 1)) << old;
  }
  EXPECT_EQ(b.node.fence_watch().stats().fences_written, 0u) << "nobody fences an old format either";
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
  FailWhile(a, outage);
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

// docs/node-lease.md, "Actors", the per-actor lock: the first acquisition's write is lost in
// transit (unknown outcome, kept for the resolver at generation 1); a second acquisition writes the
// same generation, and it lands, but its reply takes a second. The resolver's next pass falls
// in that second, between the landing and the registration of the hold: it reads the
// record naming this instance at generation 1 with no hold registered yet. Holding the
// actor's lock, it waits for the acquisition and then sees the hold; without the lock it
// would release a hold that is about to act. Staged deterministically: the resolver runs
// every 250 ms. (Fails with the broken model resolver-without-lock.)
TEST_F(OwnersTest, ASecondAcquireAtTheSameGenerationIsNeverReleasedByTheResolver) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  int puts = 0;
  a.store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/")) {
      ++puts;
      if (puts == 1) f.request_delay = seconds(4);       // in transit past the deadline
      if (puts == 2) f.reply_delay = milliseconds(1000);  // lands at once, answered a second later
    }
    return f;
  });
  auto first = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(first.kind, AcquireResult::Kind::kUnknown);
  ASSERT_EQ(a.node.owners().pending(), 1u);
  // The second attempt reads no record either and writes the same generation.
  auto second = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(second.kind, AcquireResult::Kind::kAcquired) << second.why;
  EXPECT_EQ(second.hold.generation(), Generation{1});
  world.RunFor(seconds(10));
  EXPECT_TRUE(second.hold.IsValid()) << "the resolver must not release a hold that lives";
  EXPECT_EQ(Record(), Owner("a", "ia", 1));
  EXPECT_EQ(a.node.owners().stats().resolver_released, 0u);
  EXPECT_EQ(a.node.owners().stats().resolver_dropped, 1u);
  EXPECT_EQ(a.node.owners().pending(), 0u);
}

// docs/node-lease.md, "Actors": a pending release retries the very same write, If-Match the
// acquire's version, and never adopts a version read later. The dangerous order is forced: the
// release of generation 1 is parked, the background retries are paused, the node takes the actor
// again at generation 2, and only then is the parked release retried. (Fails with the
// broken model pending-release-adopts-version.)
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
  a.node.owners().StopBackground();  // no retry until the next hold has landed
  refuse_releases = false;
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(r.hold.generation(), Generation{2});
  ASSERT_EQ(Record(), Owner("a", "ia", 2));
  a.node.owners().StartBackground();  // now the parked release of generation 1 is retried
  world.RunFor(seconds(5));
  EXPECT_EQ(a.node.owners().pending(), 0u);
  EXPECT_EQ(a.node.owners().stats().pending_ended, 1u) << "ended by the read showing generation 2";
  EXPECT_EQ(a.node.owners().stats().pending_landed, 0u);
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

// A drain releases tenants' actors before system actors (alarm shards), so a bounded
// release phase reaches the actors clients wait for first; a system actor's first hold
// starts at 1 without a leases/ marker (nothing older ever held one).
TEST_F(OwnersTest, ADrainReleasesTenantsActorsBeforeSystemActors) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  const ActorId shard{"_alarms", "shard", "00"};
  const ActorId digit{"0t", "c", "x"};  // sorts before '_'
  const ActorId letter{"t", "c", "y"};  // sorts after '_'
  for (const ActorId& x : {shard, digit, letter}) {
    auto r = Run(a.env, a.node.owners().Acquire(x));
    ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
    EXPECT_EQ(r.hold.generation(), Generation{1});
  }
  EXPECT_EQ(bucket->objects().count("leases/_alarms/shard/00"), 0u);
  EXPECT_EQ(a.node.owners().stats().markers_written, 2u);
  std::vector<std::string> released;
  a.store.set_fault_hook([&released](const OpInfo& op) {
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/")) released.push_back(op.key);
    return OpFault{};
  });
  ASSERT_TRUE(Run(a.env, a.node.owners().Drain(seconds(10))).ok());
  EXPECT_EQ(released, (std::vector<std::string>{"owners/0t/c/x", "owners/t/c/y", "owners/_alarms/shard/00"}));
}

// wasmkeep_holds_system (and wasmkeep_holds_resident, holds() less it) reads a count kept as
// holds come and go: it follows acquisitions, a release, re-acquiring a held actor, and a
// lapse that ends every hold at once. (Checked to fail with EraseHold not counting down.)
TEST_F(OwnersTest, TheSystemHoldsCountFollowsHoldsAsTheyComeAndGo) {
  Proc a(world, bucket, "a", "ia");
  bool outage = false;
  FailWhile(a, outage);
  Ready(a);
  Owners& owners = a.node.owners();
  const ActorId shard0{"_alarms", "shard", "00"};
  const ActorId shard1{"_alarms", "shard", "01"};
  for (const ActorId& x : {shard0, shard1, actor, Nth(1)}) {
    ASSERT_EQ(Run(a.env, owners.Acquire(x)).kind, AcquireResult::Kind::kAcquired);
  }
  EXPECT_EQ(owners.holds(), 4u);
  EXPECT_EQ(owners.system_holds(), 2u);
  ASSERT_EQ(Run(a.env, owners.Acquire(shard0)).kind, AcquireResult::Kind::kAcquired);
  EXPECT_EQ(owners.system_holds(), 2u) << "acquiring a held actor again is not a second hold";
  ASSERT_TRUE(Run(a.env, owners.Release(shard1)).ok());
  ASSERT_TRUE(Run(a.env, owners.Release(actor)).ok());
  EXPECT_EQ(owners.holds(), 2u);
  EXPECT_EQ(owners.system_holds(), 1u);
  outage = true;  // the lease lapses: every hold ends at once
  world.RunFor(seconds(10));
  EXPECT_EQ(owners.holds(), 0u);
  EXPECT_EQ(owners.system_holds(), 0u);
  outage = false;
  world.RunFor(seconds(5));
  ASSERT_TRUE(a.node.lease().IsValid());
  ASSERT_EQ(Run(a.env, owners.Acquire(shard1)).kind, AcquireResult::Kind::kAcquired);
  EXPECT_EQ(owners.system_holds(), 1u);
}

// An unresolved acquire whose write never lands is closed: after ttl + grace the resolver
// writes `nobody` at the generation tried, conditioned as the lost write was, so the lost
// write can never land; the entry ends and a drain reports drained. (Fails with the broken
// model unresolved-never-closed.)
TEST_F(OwnersTest, AnAcquireWhoseWriteNeverLandsIsClosedAndTheDrainEnds) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  int puts = 0;
  a.store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/") && ++puts == 1) f.request_delay = seconds(600);
    return f;
  });
  ASSERT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kUnknown);
  const MonoTime asked = world.Now();
  Status drained = Run(a.env, a.node.owners().Drain(seconds(40)));
  EXPECT_TRUE(drained.ok()) << drained.ToString();
  EXPECT_GE(world.Now() - asked, seconds(15)) << "closed only after ttl + grace";
  EXPECT_EQ(a.node.owners().stats().resolver_closed, 1u);
  EXPECT_EQ(a.node.owners().pending(), 0u);
  ASSERT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
  world.RunFor(seconds(620));  // the lost write arrives: its condition no longer holds
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
  a.node.owners().SetAccepting(true);
  auto again = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(again.kind, AcquireResult::Kind::kAcquired) << again.why;
  EXPECT_EQ(again.hold.generation(), Generation{2});
}

// Parks the releases of `n` fresh holds of a by cutting its lease writes off until the
// lease lapses, then lets the lease renew.
void ParkByALapse(SimWorld& world, Proc& a, int n, bool* lease_down) {
  for (int i = 0; i < n; ++i) {
    auto r = RunTask(world, a.env, a.node.owners().Acquire(OwnersTest::Nth(i)), seconds(60));
    ASSERT_TRUE(r && r->kind == AcquireResult::Kind::kAcquired);
  }
  *lease_down = true;
  ASSERT_TRUE(world.RunUntil([&] { return a.node.owners().pending() == static_cast<std::size_t>(n); }, seconds(20)));
  ASSERT_FALSE(a.node.lease().IsValid());
  *lease_down = false;
}

// docs/node-lease.md, "Bounds": at most PENDING_CONCURRENCY (32) pending entries are worked at once.
// Forty holds end in a lapse; their releases take a second to answer; the first pass sends
// 32 of them at once, then the rest. (Fails with the broken model
// unbounded-pending-concurrency.)
TEST_F(OwnersTest, AtMost32PendingReleasesAreSentAtOnce) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  bool lease_down = false;
  std::map<MonoTime, int> releases_sent_at;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op != StoreOp::kPut) return f;
    if (op.key.starts_with("nodes/") && lease_down) f.fail_before_apply = Retryable("test: lease writes cut");
    if (op.key.starts_with("owners/") && a.node.owners().pending() > 0) {
      f.reply_delay = seconds(1);
      ++releases_sent_at[world.Now()];
    }
    return f;
  });
  ParkByALapse(world, a, 40, &lease_down);
  ASSERT_TRUE(world.RunUntil([&] { return a.node.owners().pending() == 0; }, seconds(30)));
  ASSERT_FALSE(releases_sent_at.empty());
  int most = 0, total = 0;
  for (auto& [t, n] : releases_sent_at) {
    most = std::max(most, n);
    total += n;
  }
  EXPECT_EQ(total, 40);
  EXPECT_EQ(most, kPendingConcurrency) << "at most 32 at once, and the bound is reached";
  EXPECT_EQ(Record(Nth(39)), OwnerRecord::Nobody(Generation{1}));
}

// docs/node-lease.md, "Bounds": a pass stops after 32 refusals in a row, so a refusing bucket gets no
// burst of writes. A hundred holds end in a lapse and the bucket refuses every record
// write: the first pass sends 32. (Fails with the broken model no-refusal-limit.)
TEST_F(OwnersTest, APassStopsAfter32RefusalsInARow) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  bool lease_down = false;
  bool refuse = false;
  std::vector<MonoTime> sent;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op != StoreOp::kPut) return f;
    if (op.key.starts_with("nodes/") && lease_down) f.fail_before_apply = Retryable("test: lease writes cut");
    if (op.key.starts_with("owners/") && refuse) {
      f.fail_before_apply = Retryable("test: SlowDown");
      sent.push_back(world.Now());
    }
    return f;
  });
  ParkByALapse(world, a, 100, &lease_down);
  refuse = true;
  ASSERT_TRUE(world.RunUntil([&] { return !sent.empty(); }, seconds(20)));
  world.RunFor(milliseconds(100));  // the first pass, and less than the next tick
  EXPECT_EQ(sent.size(), static_cast<std::size_t>(kMaxRefusalsInARow));
  EXPECT_EQ(a.node.owners().pending(), 100u);
}

// docs/node-lease.md, "Actors": pending releases pause while the node lease is invalid. The lease
// writes are cut off, the hold lapses into a pending release, the records stay reachable: nothing
// is sent until the lease is valid again. (Fails with the broken model
// pending-retries-while-invalid.)
TEST_F(OwnersTest, PendingReleasesPauseWhileTheLeaseIsInvalid) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  bool lease_down = false;
  int record_writes_while_invalid = 0;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op != StoreOp::kPut) return f;
    if (op.key.starts_with("nodes/") && lease_down) f.fail_before_apply = Retryable("test: lease writes cut");
    if (op.key.starts_with("owners/") && !a.node.lease().IsValid()) ++record_writes_while_invalid;
    return f;
  });
  ParkByALapse(world, a, 1, &lease_down);
  lease_down = true;  // keep it invalid a while
  world.RunFor(seconds(20));
  EXPECT_EQ(record_writes_while_invalid, 0);
  EXPECT_EQ(a.node.owners().pending(), 1u);
  lease_down = false;
  ASSERT_TRUE(world.RunUntil([&] { return a.node.owners().pending() == 0; }, seconds(20)));
  EXPECT_EQ(Record(Nth(0)), OwnerRecord::Nobody(Generation{1}));
}

// Routing (docs/node-lease.md, "Actors"): a record naming a node the membership view does not show
// live, under the named instance, is not trusted: the request is served here (the acquisition then
// reads nodes/<A> fresh). (Fails with the broken model route-to-any-owner.)
TEST_F(OwnersTest, ARecordNamingANodeThatIsNotLiveIsAcquiredHere) {
  Proc b(world, bucket, "b", "ib");
  Proc c(world, bucket, "c", "ic");
  Ready(b);
  Ready(c);
  ASSERT_EQ(Run(c.env, c.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  world.RunFor(seconds(4));
  auto live = Run(b.env, b.node.owners().OtherOwner(actor));
  ASSERT_TRUE(live.ok() && live->has_value()) << "c is live in b's view: route there";
  // c stops cleanly, its release refused: the record names c, whose object is `released`.
  c.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/")) f.fail_before_apply = Retryable("test: refused");
    return f;
  });
  (void)Run(c.env, c.node.Stop(seconds(4)));
  world.RunFor(seconds(4));  // b lists it
  ASSERT_EQ(Record().node_id, NodeId("c"));
  auto released = Run(b.env, b.node.owners().OtherOwner(actor));
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(released->has_value()) << "c is not live: acquire here";
  // A record naming a node the view does not have at all.
  const ActorId ghost_actor{"acme", "counter", "ghost"};
  ASSERT_TRUE(bucket->ApplyPut(OwnerKey(ghost_actor), EncodeOwnerRecord(Owner("ghost", "ig", 3)), Precondition::None()).ok());
  auto ghost = Run(b.env, b.node.owners().OtherOwner(ghost_actor));
  ASSERT_TRUE(ghost.ok());
  EXPECT_FALSE(ghost->has_value()) << "a node missing from the view is not live";
}

// Routing (docs/node-lease.md, "Actors"): one GET of the record within the 250 ms admission wait; a
// slower bucket answers this request 503 instead of holding it. (Fails with the broken model
// routing-read-unbounded.)
TEST_F(OwnersTest, TheRoutingReadGivesUpAfterTheAdmissionWait) {
  Proc b(world, bucket, "b", "ib");
  Proc c(world, bucket, "c", "ic");
  Ready(b);
  Ready(c);
  ASSERT_EQ(Run(c.env, c.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  world.RunFor(seconds(4));
  b.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kGet && op.key.starts_with("owners/")) f.reply_delay = milliseconds(1000);
    return f;
  });
  const MonoTime start = world.Now();
  auto slow = Run(b.env, b.node.owners().OtherOwner(actor));
  EXPECT_FALSE(slow.ok()) << "answered after a second";
  EXPECT_LE(world.Now() - start, kAdmissionWait + milliseconds(5));
}

// docs/node-lease.md, "What the lease is": a lost lease sends nothing more. A resolver read in
// flight when the lease is lost (its node was fenced, and its next renewal found out) comes back
// naming this instance with no hold: it must not send the release. The timeline is the harness's
// (no latency): valid at 15 s, renewals every 3 s, the resolver every 250 ms; the
// unresolved acquire is found at 17.667 s, the resolver reads at 17.75 s, the fence lands
// then, the renewal of 18 s loses the lease, and the read answers at 18.75 s. (Fails with
// the broken model resolver-ignores-lost.)
TEST_F(OwnersTest, NothingIsSentAfterTheLeaseIsLost) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  int record_puts = 0, record_gets = 0;
  std::optional<MonoTime> lost_at;
  std::vector<MonoTime> sent;
  a.node.lease().AddObserver({nullptr, nullptr, [&](const std::string&) { lost_at = world.Now(); }});
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (!op.key.starts_with("owners/")) return f;
    if (op.op == StoreOp::kPut) {
      sent.push_back(world.Now());
      if (++record_puts == 1) f.lose_reply = true;  // the acquisition lands, unanswered
    } else if (op.op == StoreOp::kGet) {
      ++record_gets;
      if (record_gets == 2) f.fail_before_apply = Retryable("test: read back fails");
      if (record_gets == 3) {  // the resolver's read: the node is fenced while it is in flight
        NodeRecord fence = Node("a");
        fence.state = LeaseState::kFenced;
        EXPECT_TRUE(bucket->ApplyPut("nodes/a", EncodeNodeRecord(fence),
                                     Precondition::IfMatch(bucket->objects().at("nodes/a").version))
                        .ok());
        f.reply_delay = seconds(1);
      }
    }
    return f;
  });
  ASSERT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kUnknown);
  world.RunFor(seconds(10));
  ASSERT_EQ(record_gets, 3);
  ASSERT_TRUE(lost_at.has_value());
  for (MonoTime t : sent) EXPECT_LT(t, *lost_at) << "a record write sent after the lease was lost";
  EXPECT_EQ(Record(), Owner("a", "ia", 1)) << "left for the fence to free";
}

// The per-actor locks: an entry lives only while its lock is held or awaited, so the table
// does not grow with every actor a node ever saw.
TEST_F(OwnersTest, TheLockTableKeepsOnlyTheLocksInUse) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(Run(a.env, a.node.owners().Acquire(Nth(i))).kind, AcquireResult::Kind::kAcquired);
    ASSERT_TRUE(Run(a.env, a.node.owners().Release(Nth(i))).ok());
  }
  EXPECT_EQ(a.node.owners().locks_in_use(), 0u);
  a.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("owners/")) f.reply_delay = seconds(1);
    return f;
  });
  auto handle = a.env.Spawn([](Proc* p, const ActorId* x) -> Task<void> { (void)co_await p->node.owners().Acquire(*x); }(&a, &actor),
                            "acquire");
  world.RunFor(milliseconds(500));
  EXPECT_EQ(a.node.owners().locks_in_use(), 1u) << "one acquisition in flight";
  world.RunFor(seconds(2));
  EXPECT_EQ(a.node.owners().locks_in_use(), 0u);
}

// ---- sleeping holds (docs/node-lease.md, "Sleeping holds")

// A hold kept as its actor leaves memory wakes with no bucket request at all, at the same
// generation, with the resume point it slept with; the record is never written.
TEST_F(OwnersTest, ASleepingHoldWakesWithoutAnyWriteAtItsGeneration) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  Owners& owners = a.node.owners();
  ASSERT_EQ(Run(a.env, owners.Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  const Version acquired = bucket->objects().at(OwnerKey(actor)).version;
  ASSERT_TRUE(owners.Sleep(actor, Generation{1}, HoldResume{3, 7}));
  EXPECT_TRUE(owners.IsSleeping(actor));
  EXPECT_EQ(owners.sleeping(), 1u);
  EXPECT_FALSE(owners.Sleep(actor, Generation{1}, HoldResume{3, 7})) << "a hold sleeps once";
  world.RunFor(seconds(60));  // many renewals later
  auto woken = owners.Wake(actor);
  ASSERT_TRUE(woken.has_value());
  EXPECT_TRUE(woken->first.IsValid());
  EXPECT_EQ(woken->first.generation(), Generation{1});
  EXPECT_EQ(woken->second.segment, 3u);
  EXPECT_EQ(woken->second.batch, 7u);
  EXPECT_FALSE(owners.Wake(actor).has_value()) << "an awake hold is not woken twice";
  EXPECT_EQ(owners.sleeping(), 0u);
  EXPECT_EQ(bucket->objects().at(OwnerKey(actor)).version, acquired) << "the record was written";
  EXPECT_EQ(Record(), Owner("a", "ia", 1));
  EXPECT_EQ(owners.stats().acquisitions, 1u);
  EXPECT_EQ(owners.stats().slept, 1u);
  EXPECT_EQ(owners.stats().woken, 1u);
  // Only the hold of that generation sleeps: a stale close of an older one keeps nothing.
  EXPECT_FALSE(owners.Sleep(actor, Generation{2}, HoldResume{}));
}

// The policy's bounds: past max_sleeping the oldest sleeping hold is released at once; past
// keep_for every one is. A wake in between takes a hold out of the queue (it is not released
// under its awake actor).
TEST_F(OwnersTest, SleepingHoldsAreReleasedPastTheirCountAndTheirTime) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  Owners& owners = a.node.owners();
  owners.set_sleep_policy(SleepPolicy{seconds(5), 2});
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Run(a.env, owners.Acquire(Nth(i))).kind, AcquireResult::Kind::kAcquired);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(owners.Sleep(Nth(i), Generation{1}, HoldResume{}));
    world.RunFor(milliseconds(500));
  }
  // Four slept, two kept: the two oldest were released, newest kept.
  EXPECT_EQ(owners.sleeping(), 2u);
  EXPECT_EQ(Record(Nth(0)), OwnerRecord::Nobody(Generation{1}));
  EXPECT_EQ(Record(Nth(1)), OwnerRecord::Nobody(Generation{1}));
  EXPECT_EQ(Record(Nth(2)), Owner("a", "ia", 1));
  EXPECT_EQ(owners.stats().sleep_released_limit, 2u);
  ASSERT_TRUE(owners.Wake(Nth(2)).has_value());
  world.RunFor(seconds(6));
  EXPECT_EQ(owners.sleeping(), 0u);
  EXPECT_EQ(Record(Nth(3)), OwnerRecord::Nobody(Generation{1})) << "past keep_for";
  EXPECT_EQ(Record(Nth(2)), Owner("a", "ia", 1)) << "the woken hold was released under its actor";
  EXPECT_TRUE(owners.Find(Nth(2)).IsValid());
  EXPECT_EQ(owners.stats().sleep_released_idle, 1u);
  // Woken and asleep again: a new sleep, timed from now.
  ASSERT_TRUE(owners.Sleep(Nth(2), Generation{1}, HoldResume{}));
  world.RunFor(seconds(3));
  EXPECT_TRUE(owners.IsSleeping(Nth(2)));
}

// A lapse ends sleeping holds like every other (their releases parked); none wakes again in
// the next epoch, and the actor's next use acquires generation + 1. (Fails with the broken
// model sleeping-hold-survives-lease-loss.) A drain keeps nothing asleep.
TEST_F(OwnersTest, ALapseEndsSleepingHoldsAndADrainingNodeKeepsNone) {
  Proc a(world, bucket, "a", "ia");
  bool outage = false;
  FailWhile(a, outage);
  Ready(a);
  Owners& owners = a.node.owners();
  ASSERT_EQ(Run(a.env, owners.Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  ASSERT_TRUE(owners.Sleep(actor, Generation{1}, HoldResume{1, 1}));
  outage = true;
  world.RunFor(seconds(10));
  EXPECT_EQ(owners.sleeping(), 0u);
  outage = false;
  world.RunFor(seconds(5));
  ASSERT_TRUE(a.node.lease().IsValid());
  EXPECT_FALSE(owners.Wake(actor).has_value()) << "a sleeping hold outlived the lapse";
  world.RunFor(seconds(2));
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1})) << "its parked release landed";
  auto again = Run(a.env, owners.Acquire(actor));
  ASSERT_EQ(again.kind, AcquireResult::Kind::kAcquired);
  EXPECT_EQ(again.hold.generation(), Generation{2});
  owners.SetAccepting(false);
  EXPECT_FALSE(owners.Sleep(actor, Generation{2}, HoldResume{})) << "a draining node kept a hold asleep";
}

// A release of a sleeping hold (a drain's, a move's, the policy's) ends it for good: a later
// wake finds nothing and the actor is acquired again. (Fails with the broken model
// wake-acquires-nothing-after-release.)
TEST_F(OwnersTest, AReleasedSleepingHoldIsNeverWoken) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  Owners& owners = a.node.owners();
  ASSERT_EQ(Run(a.env, owners.Acquire(actor)).kind, AcquireResult::Kind::kAcquired);
  ASSERT_TRUE(owners.Sleep(actor, Generation{1}, HoldResume{}));
  ASSERT_TRUE(Run(a.env, owners.Release(actor)).ok());
  EXPECT_EQ(Record(), OwnerRecord::Nobody(Generation{1}));
  EXPECT_FALSE(owners.Wake(actor).has_value()) << "a released sleeping hold woke";
  EXPECT_FALSE(owners.Find(actor).IsValid());
}

}  // namespace
}  // namespace wk
