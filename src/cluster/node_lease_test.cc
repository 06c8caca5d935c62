// NodeLease in virtual time against a faulty in-memory bucket (docs/node-lease.md, "What the lease
// is", "Clean stop" and "Timings").
#include "cluster/node_lease.h"

#include <gtest/gtest.h>

#include "cluster/testing/harness.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A lone NodeLease on its own simulated host (cluster/testing/harness.h).
using Node = cluster_testing::SimLeaseNode;

struct LeaseTest : ::testing::Test {
  SimWorld world{11};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();

  NodeRecord Read(const std::string& id) {
    auto obj = DecodeNodeObject(bucket->objects().at(NodeKey(NodeId(id))).body);
    EXPECT_TRUE(obj.ok());
    return std::get<NodeRecord>(*obj);
  }
  Version VersionOf(const std::string& id) { return bucket->objects().at(NodeKey(NodeId(id))).version; }
};

TEST_F(LeaseTest, FreshNodeWaitsTtlPlusGraceThenRenewsEveryPeriod) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  a.Start();
  world.RunFor(seconds(14));
  EXPECT_FALSE(a.lease.IsValid()) << "the start check waits ttl + grace even with no object";
  EXPECT_EQ(bucket->objects().count("nodes/a"), 0u);
  world.RunFor(seconds(2));
  ASSERT_TRUE(a.lease.IsValid());
  // Without Announced() in IsReady (the readiness rule switched off) this and the next
  // not-ready check fail: the node would be ready before its peers trust its pin.
  EXPECT_FALSE(a.lease.IsReady()) << "valid, but its peers have not listed its record (and pin) yet";
  EXPECT_EQ(Read("a").state, LeaseState::kLive);
  EXPECT_EQ(Read("a").instance.str(), "i1");
  const auto writes = a.lease.stats().writes_ok;
  world.RunFor(seconds(4));
  EXPECT_FALSE(a.lease.Announced());
  EXPECT_FALSE(a.lease.IsReady());
  world.RunFor(seconds(2));
  EXPECT_TRUE(a.lease.Announced()) << "a heartbeat period (3 s) and an attempt timeout (2.7 s) after it became valid";
  EXPECT_TRUE(a.lease.IsReady());
  world.RunFor(seconds(54));
  EXPECT_TRUE(a.lease.IsValid());
  EXPECT_EQ(a.lease.stats().writes_ok - writes, 20u) << "one write per 3 s period";
  EXPECT_EQ(a.lease.epoch(), 1u);
}

// docs/node-lease.md, "What the lease is": each attempt is bounded by (ttl - safety) / 3 and
// retried within the period, so a node has two tries before its lease runs out. Here the first
// attempt of every period hangs (its request never arrives in time); the retry within the period
// lands, and the lease never lapses. (Fails with the broken models lease-attempt-unbounded: the
// hung attempt takes the whole period; and lease-no-retry: the next try waits for the next
// period, which hangs too.)
TEST_F(LeaseTest, ASlowLeaseWriteIsCutAtTheAttemptTimeoutAndRetriedWithinThePeriod) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  std::optional<MonoTime> last_put;
  std::vector<MonoTime> sends;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op != StoreOp::kPut) return f;
    const MonoTime now = world.Now();
    // The first attempt of a period (a full period after the previous send) hangs: its
    // request arrives a minute later, long after its condition stopped holding.
    if (last_put && now - *last_put >= milliseconds(2900)) f.request_delay = seconds(60);
    last_put = now;
    sends.push_back(now);
    return f;
  });
  a.Start();
  ASSERT_TRUE(world.RunUntil([&] { return a.lease.IsValid(); }, seconds(30)));
  world.RunFor(seconds(60));
  EXPECT_FALSE(a.end.has_value());
  EXPECT_TRUE(a.lease.IsValid());
  EXPECT_EQ(a.lease.stats().lapses, 0u) << "the retry within each period kept the lease";
  EXPECT_EQ(a.lease.epoch(), 1u);
  ASSERT_GE(sends.size(), 3u);
  // The first renewal hung; the retry went at its attempt timeout (2.67 s) plus a back-off.
  EXPECT_LE(sends[2] - sends[1], milliseconds(2667 + 200)) << "the hung attempt was not cut at (ttl - safety) / 3";
}

// An acknowledgement that arrives after validity ended (the write was sent in time, its
// reply came late) is a lapse: validity never comes back inside one epoch, so a hold cut in
// the gap stays cut (docs/simulation.md, "The `storage` scenario": a hold could come back). (Fails with the broken
// model ack-after-lapse-keeps-epoch.)
TEST_F(LeaseTest, AnAcknowledgementAfterValidityEndedStartsANewEpoch) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  bool late_reply_given = false;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op != StoreOp::kPut) return f;
    const MonoTime now = world.Now();
    if (now >= MonoTime(seconds(17)) && now < MonoTime(seconds(22))) {
      f.fail_before_apply = Retryable("test: refused");
    } else if (now >= MonoTime(seconds(22)) && !late_reply_given) {
      late_reply_given = true;
      f.reply_delay = milliseconds(1500);  // applied at once, answered after validity ended
    }
    return f;
  });
  std::vector<std::string> events;
  a.lease.AddObserver({[&](std::uint64_t e) { events.push_back("valid " + std::to_string(e)); },
                       [&](std::uint64_t e) { events.push_back("lapse " + std::to_string(e)); },
                       [&](const std::string&) { events.push_back("lost"); }});
  a.Start();
  ASSERT_TRUE(world.RunUntil([&] { return a.lease.IsValid(); }, seconds(20)));
  const MonoTime valid_until = a.lease.valid_until();
  world.RunUntil([&] { return world.Now() >= valid_until + milliseconds(100); }, seconds(30));
  EXPECT_FALSE(a.lease.IsValid()) << "validity ended: the late write was not acknowledged yet";
  ASSERT_TRUE(world.RunUntil([&] { return a.lease.IsValid(); }, seconds(5)));
  EXPECT_EQ(a.lease.epoch(), 2u) << "validity came back in a new epoch";
  EXPECT_EQ(a.lease.stats().lapses, 1u);
  EXPECT_EQ(events, (std::vector<std::string>{"valid 1", "lapse 1", "valid 2"}));
}

// docs/node-lease.md, "What the lease is": a first write whose outcome is unknown follows the
// re-read rule, then goes back to the check. Here it never arrived: the re-read finds no object, so
// the process goes back to the check (waiting ttl + grace again) with the same instance, instead of
// taking the absence for a deletion and exiting.
TEST_F(LeaseTest, AFirstWriteWithAnUnknownOutcomeThatDidNotLandGoesBackToTheCheck) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  int puts = 0;
  a.store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && ++puts == 1) f.request_delay = seconds(100);  // arrives long after
    return f;
  });
  a.Start();
  world.RunFor(seconds(20));
  EXPECT_FALSE(a.end.has_value()) << a.end->message;
  EXPECT_FALSE(a.lease.IsValid()) << "back in the check";
  EXPECT_EQ(bucket->objects().count("nodes/a"), 0u);
  ASSERT_TRUE(world.RunUntil([&] { return a.lease.IsValid(); }, seconds(20)));
  EXPECT_GE(world.Now(), MonoTime(seconds(15 + 2) + seconds(15))) << "a second full check";
  world.RunFor(seconds(100));  // the stray first write arrives, and its condition fails
  EXPECT_TRUE(a.lease.IsValid());
  EXPECT_EQ(Read("a").instance.str(), "i1");
  EXPECT_EQ(a.lease.epoch(), 1u);
}

// The same re-read finding this process's own first write fenced (it landed, its reply was
// lost, and a peer or an operator fenced it meanwhile): that instance may never be valid,
// since records naming it may be free already. The lease is lost. (Fails with the broken
// model own-fence-not-lost.)
TEST_F(LeaseTest, AFirstWriteThatLandedAndWasFencedLosesTheLease) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  int puts = 0;
  bool fence_before_next_read = false;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && ++puts == 1) {
      f.lose_reply = true;  // lands, never answered
      fence_before_next_read = true;
    } else if (op.op == StoreOp::kGet && fence_before_next_read) {
      fence_before_next_read = false;
      NodeRecord fence = Read("a");
      fence.state = LeaseState::kFenced;
      EXPECT_TRUE(bucket->ApplyPut("nodes/a", EncodeNodeRecord(fence), Precondition::IfMatch(VersionOf("a"))).ok());
    }
    return f;
  });
  a.Start();
  world.RunFor(seconds(60));
  ASSERT_TRUE(a.end.has_value());
  EXPECT_EQ(a.end->reason, LeaseEndReason::kLost);
  EXPECT_NE(a.end->message.find("fenced"), std::string::npos) << a.end->message;
  EXPECT_EQ(a.lease.epoch(), 0u) << "never valid";
  EXPECT_EQ(Read("a").state, LeaseState::kFenced);
}

TEST_F(LeaseTest, ValidityRunsFromTheSendNotTheReply) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  a.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut) f.reply_delay = milliseconds(1500);
    return f;
  });
  a.Start();
  world.RunUntil([&] { return a.lease.IsValid(); }, seconds(30));
  ASSERT_TRUE(a.lease.IsValid());
  // Acknowledged 1.5 s after the send: 6.5 s of validity left, not 8.
  EXPECT_EQ(a.lease.valid_until() - a.env.MonoNow(), milliseconds(6500));
}

TEST_F(LeaseTest, ATwinIsRefusedAndTheRunningNodeIsUnaffected) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  a.Start();
  world.RunFor(seconds(20));
  ASSERT_TRUE(a.lease.IsValid());
  Node twin(world, bucket, NodeId("a"), InstanceToken("i2"));
  twin.Start();
  world.RunFor(seconds(20));
  ASSERT_TRUE(twin.end.has_value());
  EXPECT_EQ(twin.end->reason, LeaseEndReason::kTwin);
  EXPECT_NE(twin.end->message.find("in use by another process"), std::string::npos) << twin.end->message;
  EXPECT_FALSE(twin.lease.IsValid());
  EXPECT_TRUE(a.lease.IsValid());
  EXPECT_EQ(Read("a").instance.str(), "i1");
}

TEST_F(LeaseTest, AFenceMakesTheNodeLoseItsLease) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  a.Start();
  world.RunFor(seconds(20));
  ASSERT_TRUE(a.lease.IsValid());
  NodeRecord fence = Read("a");
  fence.state = LeaseState::kFenced;
  ASSERT_TRUE(bucket->ApplyPut("nodes/a", EncodeNodeRecord(fence), Precondition::IfMatch(VersionOf("a"))).ok());
  world.RunFor(seconds(4));
  ASSERT_TRUE(a.end.has_value());
  EXPECT_EQ(a.end->reason, LeaseEndReason::kLost);
  EXPECT_NE(a.end->message.find("fenced"), std::string::npos) << a.end->message;
  EXPECT_FALSE(a.lease.IsValid());
  EXPECT_EQ(Read("a").state, LeaseState::kFenced) << "a lost node writes nothing more";
}

TEST_F(LeaseTest, ALostReplyIsAdoptedNotTakenForAFence) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  int puts = 0;
  a.store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && ++puts == 3) f.lose_reply = true;  // the 2nd renewal
    return f;
  });
  a.Start();
  world.RunFor(seconds(40));
  EXPECT_FALSE(a.end.has_value()) << a.end->message;
  EXPECT_TRUE(a.lease.IsValid());
  EXPECT_EQ(a.lease.stats().adoptions, 1u);
  EXPECT_EQ(a.lease.epoch(), 1u) << "adoption kept the lease valid throughout";
}

TEST_F(LeaseTest, AnOutageLapsesTheLeaseWithoutLosingIt) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  bool outage = false;
  std::vector<std::string> events;
  a.lease.AddObserver({[&](std::uint64_t e) { events.push_back("valid " + std::to_string(e)); },
                        [&](std::uint64_t e) { events.push_back("lapse " + std::to_string(e)); },
                        [&](const std::string&) { events.push_back("lost"); }});
  a.store.set_fault_hook([&outage](const OpInfo&) {
    OpFault f;
    if (outage) f.fail_before_apply = Retryable("bucket unreachable");
    return f;
  });
  a.Start();
  world.RunFor(seconds(20));
  ASSERT_TRUE(a.lease.IsValid());
  outage = true;
  world.RunFor(seconds(12));
  EXPECT_FALSE(a.lease.IsValid());
  EXPECT_FALSE(a.lease.IsReady());
  EXPECT_FALSE(a.end.has_value());
  outage = false;
  world.RunFor(seconds(4));
  EXPECT_TRUE(a.lease.IsValid()) << "valid again once a write lands";
  EXPECT_TRUE(a.lease.IsReady()) << "the same process, announced long ago: ready again at once";
  EXPECT_EQ(a.lease.epoch(), 2u);
  EXPECT_EQ(events, (std::vector<std::string>{"valid 1", "lapse 1", "valid 2"}));
  EXPECT_GT(a.lease.valid_since().value(), MonoTime(seconds(30)));
}

TEST_F(LeaseTest, ADeletedObjectMakesTheNodeLoseItsLease) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  a.Start();
  world.RunFor(seconds(20));
  ASSERT_TRUE(bucket->ApplyDelete("nodes/a", Precondition::None()).ok());
  world.RunFor(seconds(4));
  ASSERT_TRUE(a.end.has_value());
  EXPECT_EQ(a.end->reason, LeaseEndReason::kLost);
  EXPECT_NE(a.end->message.find("deleted"), std::string::npos);
  EXPECT_EQ(bucket->objects().count("nodes/a"), 0u) << "a lost node must not recreate its object";
}

TEST_F(LeaseTest, CleanStopCutsAtOnceAndWritesReleasedKeepingWrittenAt) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  a.Start();
  world.RunFor(seconds(20));
  const auto last_written = Read("a").written_at;
  Status stopped = Status(Code::kCancelled, "not run");
  a.env.Spawn([](Node* n, Status* out) -> Task<void> { *out = co_await n->lease.Stop(seconds(5)); }(&a, &stopped), "stop");
  world.RunFor(milliseconds(1));
  EXPECT_FALSE(a.lease.IsValid()) << "invalid from the moment the stop begins";
  world.RunFor(seconds(5));
  EXPECT_TRUE(stopped.ok()) << stopped.ToString();
  ASSERT_TRUE(a.end.has_value());
  EXPECT_EQ(a.end->reason, LeaseEndReason::kStopped);
  NodeRecord r = Read("a");
  EXPECT_EQ(r.state, LeaseState::kReleased);
  EXPECT_EQ(r.instance.str(), "i1");
  EXPECT_EQ(r.written_at, last_written);
}

// The clock of a node with no skew reads kSimOriginMs plus the world's monotonic time.
MonoTime MonoOf(WallTime t) { return MonoTime(milliseconds(ToUnixMs(t) - cluster_testing::kSimOriginMs)); }

// (Fails with the broken model no-release-shortcut.)
TEST_F(LeaseTest, RestartAfterARelease_TakesTheShortcut) {
  Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
  a.Start();
  world.RunFor(seconds(20));
  a.env.Spawn([](Node* n) -> Task<void> { (void)co_await n->lease.Stop(seconds(5)); }(&a), "stop");
  world.RunFor(seconds(1));
  const NodeRecord released = Read("a");
  ASSERT_EQ(released.state, LeaseState::kReleased);
  // A fresh process under the same id, right away: the release proves i1 lapsed once its
  // kept written_at + ttl + grace has passed, so the check ends then (at its next read, a
  // period at most later), not a full ttl + grace after the check began.
  const MonoTime free_at = MonoOf(released.written_at) + seconds(15);
  Node b(world, bucket, NodeId("a"), InstanceToken("i2"));
  const MonoTime start = world.Now();
  ASSERT_GE(start + seconds(15) - free_at, seconds(3)) << "the shortcut must be measurably earlier than a full check";
  b.Start();
  ASSERT_FALSE(world.RunUntil([&] { return b.lease.IsValid(); }, free_at - start - milliseconds(1)))
      << "valid before the released object's written_at + ttl + grace";
  world.RunUntil([&] { return b.lease.IsValid(); }, seconds(60));
  ASSERT_TRUE(b.lease.IsValid());
  EXPECT_EQ(Read("a").instance.str(), "i2");
  EXPECT_LE(world.Now(), free_at + seconds(3) + milliseconds(100)) << "the check ended at its first read after the bound";
  EXPECT_LT(world.Now() - start, seconds(15)) << "not a full check";
}

TEST_F(LeaseTest, RestartAfterACrashWaitsThenTakesOver) {
  {
    Node a(world, bucket, NodeId("a"), InstanceToken("i1"));
    a.Start();
    world.RunFor(seconds(20));
    a.run.Cancel();  // the process dies: no release
    world.RunFor(milliseconds(1));
  }
  Node b(world, bucket, NodeId("a"), InstanceToken("i2"));
  b.Start();
  world.RunFor(seconds(14));
  EXPECT_FALSE(b.lease.IsValid());
  world.RunFor(seconds(3));
  EXPECT_TRUE(b.lease.IsValid());
  EXPECT_EQ(Read("a").instance.str(), "i2");
}

}  // namespace
}  // namespace wk
