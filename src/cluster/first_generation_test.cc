// The first acquisition of an actor without an ownership record (first_generation.h;
// docs/node-lease.md, "Upgrading from per-actor leases"): seeded above every generation its log and
// leases/ carry, marked in leases/ for this version, refused while a live old per-actor lease holds
// it. Real ClusterNodes in virtual time; the old-format objects are written by the test, as the
// per-actor-lease versions wrote them (there is no older binary to run).
#include "cluster/first_generation.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "cluster/cluster_node.h"
#include "cluster/testing/fixture.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using Proc = cluster_testing::TestProc;  // a SimNode from plain strings (cluster/testing/harness.h)

// A log key as the replica writes it (replica/format.h: both numbers padded to 20 digits).
std::string LogKey(const std::string& prefix, std::uint64_t gen, std::uint64_t seq) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%020llu-%020llu", static_cast<unsigned long long>(gen),
                static_cast<unsigned long long>(seq));
  return prefix + buf;
}

// An old per-actor lease as the per-actor-lease versions wrote it (lease_marker.h).
std::string OldLeaseBody(const std::string& node, std::uint64_t generation, WallTime expires_at) {
  return "wasmkeep-lease 1\nnode " + node + "\ngeneration " + std::to_string(generation) + "\nexpires_at_ms " +
         std::to_string(ToUnixMs(expires_at)) + "\n";
}

struct FirstGenerationTest : cluster_testing::ClusterTest {
  FirstGenerationTest() : ClusterTest(41) {}

  void Put(const std::string& key, std::string body) {
    ASSERT_TRUE(bucket->ApplyPut(key, std::move(body), Precondition::None()).ok());
  }
  bool Has(const std::string& key) const { return bucket->objects().count(key) > 0; }
  LeaseMarker Marker() {
    auto obj = DecodeLeasesObject(bucket->objects().at(LeaseMarkerKey(actor)).body);
    EXPECT_TRUE(obj.ok()) << obj.status().ToString();
    EXPECT_TRUE(std::holds_alternative<LeaseMarker>(*obj)) << "leases/ holds a marker";
    return std::get<LeaseMarker>(*obj);
  }
  // A log left by holds of generations up to 5 (segments) and 6 (a snapshot), as an
  // upgraded actor or one whose record was lost has.
  void LeaveALog() {
    Put(LogKey(LogWalPrefix(actor), 3, 0), "x");
    Put(LogKey(LogWalPrefix(actor), 3, 1), "x");
    Put(LogKey(LogWalPrefix(actor), 5, 0), "x");
    Put(LogKey(LogSnapshotPrefix(actor), 6, 0), "x");
  }
};

TEST(LeaseMarkerTest, AMarkerRoundTripsAndOldCodeWouldReadItAsCorrupt) {
  const LeaseMarker m{Generation{7}, NodeId("node-b"), FromUnixMs(1'764'000'020'000)};
  const std::string body = EncodeLeaseMarker(m);
  EXPECT_EQ(body, "wasmkeep-lease 2\nseed 7\nmarked_by node-b\nmarked_at 1764000020000\n");
  auto back = DecodeLeasesObject(body);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<LeaseMarker>(*back), m);
  // Strict: anything else under that header is corrupt, never free.
  for (const std::string bad : {"wasmkeep-lease 2\nseed 7\n", "wasmkeep-lease 2\nseed -1\nmarked_by a\nmarked_at 1\n",
                                "wasmkeep-lease 2\nseed 7\nmarked_by a\nmarked_at 1\nextra 1\n", "wasmkeep-lease 3\n",
                                "wasmkeep-owner 1\nowner nobody\ngeneration 1\n", ""}) {
    EXPECT_FALSE(DecodeLeasesObject(bad).ok()) << bad;
  }
}

TEST(LeaseMarkerTest, AnOldLeaseIsReadLenientlyAndLiveUntilExpiryPlusGrace) {
  auto obj = DecodeLeasesObject("wasmkeep-lease 1\nnode a\ngeneration 9\nexpires_at_ms 1000\nholder_pid 42\n");
  ASSERT_TRUE(obj.ok());
  const OldLease& old = std::get<OldLease>(*obj);
  EXPECT_EQ(old.node_id, NodeId("a"));
  EXPECT_EQ(old.generation, Generation{9});
  const LeaseTiming timing;  // grace 5 s
  EXPECT_TRUE(OldLeaseLive(old, FromUnixMs(1000 + 4999), timing));
  EXPECT_FALSE(OldLeaseLive(old, FromUnixMs(1000 + 5000), timing));
  auto unreadable = DecodeLeasesObject("wasmkeep-lease 1\n{\"node\":\"a\"}\n");
  ASSERT_TRUE(unreadable.ok());
  EXPECT_TRUE(OldLeaseLive(std::get<OldLease>(*unreadable), FromUnixMs(INT64_MAX / 2), timing))
      << "an expiry that cannot be read is never taken for expired";
}

TEST(LogKeyTest, TheGenerationOfALogKeyIsReadStrictly) {
  const std::string p = "wal/t/c/a/";
  EXPECT_EQ(GenerationOfLogKey(p, LogKey(p, 42, 7)).value(), Generation{42});
  EXPECT_EQ(GenerationOfLogKey(p, LogKey(p, kMaxGeneration, 0)).value(), Generation{kMaxGeneration});
  // A stray key above the largest generation seeds nothing: a first acquisition above it
  // would wrap the count back to 0.
  EXPECT_EQ(GenerationOfLogKey(p, LogKey(p, kMaxGeneration + 1, 0)).status().code(), Code::kFatal);
  EXPECT_EQ(GenerationOfLogKey(p, LogKey(p, UINT64_MAX, 0)).status().code(), Code::kFatal);
  for (const std::string& bad : {p + "42-7", p + "00000000000000000042_00000000000000000007",
                                p + "99999999999999999999-00000000000000000000", "wal/t/c/b/" + LogKey("", 1, 1),
                                p + "0000000000000000004a-00000000000000000007"}) {
    EXPECT_EQ(GenerationOfLogKey(p, bad).status().code(), Code::kFatal) << bad;
  }
}

// The failure users could hit before: an actor whose owners/ record was lost (deleted by
// hand, a lifecycle rule) came back at generation 1 and its restore refused it ("already
// has generation N"). Its first acquisition now starts above every generation in its log,
// and marks leases/ with the seed. (Fails with the broken model unseeded-first-generation.)
TEST_F(FirstGenerationTest, AnActorWithoutARecordStartsAboveEveryGenerationInItsLog) {
  LeaveALog();
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(r.hold.generation(), Generation{7}) << "above the snapshot of generation 6";
  EXPECT_EQ(Record(), (OwnerRecord{NodeId("a"), InstanceToken("ia"), Generation{7}}));
  EXPECT_EQ(Marker().seed, Generation{6});
  EXPECT_EQ(Marker().marked_by, NodeId("a"));
  EXPECT_EQ(a.node.owners().stats().markers_written, 1u);
  // The record is lost again, after a hold of generation 8 wrote its fence.
  ASSERT_TRUE(Run(a.env, a.node.owners().Release(actor)).ok());
  auto again = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(again.hold.generation(), Generation{8});
  Put(LogKey(LogWalPrefix(actor), 8, 0), "x");
  ASSERT_TRUE(Run(a.env, a.node.owners().Release(actor)).ok());
  ASSERT_TRUE(bucket->ApplyDelete(OwnerKey(actor), Precondition::None()).ok());
  auto after_loss = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(after_loss.kind, AcquireResult::Kind::kAcquired) << after_loss.why;
  EXPECT_EQ(after_loss.hold.generation(), Generation{9}) << "the marker (seed 6) is below the log (8)";
  EXPECT_EQ(Marker().seed, Generation{6}) << "a marker is written once, then only read";
}

TEST_F(FirstGenerationTest, ANewActorIsMarkedAndStartsAtGenerationOne) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(r.hold.generation(), Generation{1});
  EXPECT_EQ(Marker().seed, Generation{0}) << "new actors are marked too: an old binary must never take them";
}

// docs/node-lease.md, "Upgrading from per-actor leases": an expired old lease is replaced by the
// marker (If-Match its version), seeded at the higher of its generation and the log's.
TEST_F(FirstGenerationTest, AnExpiredOldLeaseIsReplacedByAMarkerSeededAboveItsGeneration) {
  LeaveALog();
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  Put(LeaseMarkerKey(actor), OldLeaseBody("old-node", 9, a.env.WallNow() - seconds(6)));
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(r.hold.generation(), Generation{10});
  EXPECT_EQ(Marker().seed, Generation{9});
}

// docs/node-lease.md, "Upgrading from per-actor leases" and Verification: a live old lease refuses
// the first acquisition, whatever node it names, the starting node's own id included (an old record
// has no instance). Nothing is written; once expires_at + grace has passed on this node's clock,
// the actor is taken. (Fails with the broken model old-lease-ignored.)
TEST_F(FirstGenerationTest, ALiveOldLeaseRefusesEvenWhenItNamesThisNode) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  const WallTime expires = a.env.WallNow() + seconds(10);
  const std::string old = OldLeaseBody("a", 4, expires);
  Put(LeaseMarkerKey(actor), old);
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kHeldElsewhere) << r.why;
  EXPECT_NE(r.why.find("older version"), std::string::npos) << r.why;
  EXPECT_TRUE(r.owner.node_id.empty()) << "nobody to forward to";
  EXPECT_FALSE(Has(OwnerKey(actor)));
  EXPECT_EQ(bucket->objects().at(LeaseMarkerKey(actor)).body, old) << "the old lease is left as it was";
  EXPECT_EQ(a.node.owners().stats().old_lease_refusals, 1u);
  // Still held at expires_at + grace - 0.5 s; taken at expires_at + grace.
  world.RunUntil([&] { return a.env.WallNow() >= expires + seconds(5) - milliseconds(500); }, seconds(60));
  EXPECT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kHeldElsewhere);
  world.RunUntil([&] { return a.env.WallNow() >= expires + seconds(5); }, seconds(60));
  auto taken = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(taken.kind, AcquireResult::Kind::kAcquired) << taken.why;
  EXPECT_EQ(taken.hold.generation(), Generation{5});
  EXPECT_EQ(Marker().seed, Generation{4});
}

TEST_F(FirstGenerationTest, AnOldLeaseWithoutAReadableExpiryIsNeverTaken) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  Put(LeaseMarkerKey(actor), "wasmkeep-lease 1\n{\"node\":\"b\",\"gen\":3}\n");
  world.RunFor(seconds(120));
  EXPECT_EQ(Run(a.env, a.node.owners().Acquire(actor)).kind, AcquireResult::Kind::kHeldElsewhere);
  EXPECT_FALSE(Has(OwnerKey(actor)));
}

// A crash between the marker and the record leaves the marker: the next acquisition seeds
// the same way (the marker's seed, or the log if it is higher) and writes no second marker.
TEST_F(FirstGenerationTest, AMarkerLeftByACrashSeedsTheNextAcquisition) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  Put(LeaseMarkerKey(actor), EncodeLeaseMarker(LeaseMarker{Generation{4}, NodeId("b"), a.env.WallNow()}));
  Put(LogKey(LogWalPrefix(actor), 2, 0), "x");
  const Version before = bucket->objects().at(LeaseMarkerKey(actor)).version;
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(r.kind, AcquireResult::Kind::kAcquired) << r.why;
  EXPECT_EQ(r.hold.generation(), Generation{5});
  EXPECT_EQ(bucket->objects().at(LeaseMarkerKey(actor)).version, before);
  EXPECT_EQ(a.node.owners().stats().markers_written, 0u);
}

TEST_F(FirstGenerationTest, ACorruptLeasesObjectOrLogKeyIsNeverTaken) {
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  Put(LeaseMarkerKey(actor), "garbage\n");
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kError);
  EXPECT_NE(r.why.find("never taken"), std::string::npos) << r.why;
  ASSERT_TRUE(bucket->ApplyDelete(LeaseMarkerKey(actor), Precondition::None()).ok());
  Put(LogWalPrefix(actor) + "not-a-position", "x");
  r = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kError);
  EXPECT_FALSE(Has(OwnerKey(actor)));
  EXPECT_FALSE(Has(LeaseMarkerKey(actor)));
}

// The marker's write fails or its outcome is unknown: nothing is acquired, and the next
// acquisition reads what is there (the marker if it landed) and goes on.
TEST_F(FirstGenerationTest, AMarkerWriteThatDoesNotLandAcquiresNothing) {
  LeaveALog();
  Proc a(world, bucket, "a", "ia");
  Ready(a);
  int marker_puts = 0;
  a.store.set_fault_hook([&marker_puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("leases/") && ++marker_puts == 1) f.lose_reply = true;
    return f;
  });
  auto r = Run(a.env, a.node.owners().Acquire(actor));
  EXPECT_EQ(r.kind, AcquireResult::Kind::kError) << r.why;
  EXPECT_FALSE(Has(OwnerKey(actor)));
  EXPECT_TRUE(Has(LeaseMarkerKey(actor))) << "its reply was lost, the marker landed";
  auto next = Run(a.env, a.node.owners().Acquire(actor));
  ASSERT_EQ(next.kind, AcquireResult::Kind::kAcquired) << next.why;
  EXPECT_EQ(next.hold.generation(), Generation{7});
  EXPECT_EQ(marker_puts, 1) << "the landed marker is read, not written again";
}

// Two nodes acquire the same new actor at once: one marker and one record land; the loser
// is refused by a condition and never holds it.
TEST_F(FirstGenerationTest, TwoFirstAcquisitionsAtOnceGiveOneHolder) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  std::optional<AcquireResult> ra, rb;
  a.env.Spawn([](ClusterNode* n, ActorId id, std::optional<AcquireResult>* out) -> Task<void> {
    out->emplace(co_await n->owners().Acquire(std::move(id)));
  }(&a.node, actor, &ra), "a");
  b.env.Spawn([](ClusterNode* n, ActorId id, std::optional<AcquireResult>* out) -> Task<void> {
    out->emplace(co_await n->owners().Acquire(std::move(id)));
  }(&b.node, actor, &rb), "b");
  ASSERT_TRUE(world.RunUntil([&] { return ra && rb; }, seconds(30)));
  const int acquired = (ra->kind == AcquireResult::Kind::kAcquired) + (rb->kind == AcquireResult::Kind::kAcquired);
  EXPECT_EQ(acquired, 1) << ra->why << " / " << rb->why;
  EXPECT_EQ(Record().generation, Generation{1});
}

}  // namespace
}  // namespace wk
