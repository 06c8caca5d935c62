// The listing (Membership) and the fence watch (docs/node-lease.md, "When to fence") with real
// ClusterNodes in virtual time: the watch counted from the read, the fence decided on one fresh
// read and refused by its condition when the node wrote in between, and FENCE_CONCURRENCY.
#include "cluster/fence_watch.h"

#include <gtest/gtest.h>

#include <map>

#include "cluster/cluster_node.h"
#include "cluster/testing/harness.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using Proc = cluster_testing::TestProc;

struct FenceWatchTest : ::testing::Test {
  SimWorld world{31};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();

  NodeRecord Node(const std::string& id) {
    return std::get<NodeRecord>(DecodeNodeObject(bucket->objects().at(NodeKey(NodeId(id))).body).value());
  }
  void Ready(Proc& p) { ASSERT_TRUE(world.RunUntil([&] { return p.node.lease().IsValid(); }, seconds(30))); }
  NodeRecord Live(const std::string& id, WallTime written_at) {
    NodeRecord r;
    r.instance = InstanceToken("i-" + id);
    r.written_at = written_at;
    r.node_id = NodeId(id);
    r.software_version = "t";
    r.started_at = written_at;
    return r;
  }
};

// docs/node-lease.md, "When to fence": the fence is decided on one fresh versioned GET and written
// If-Match that GET's version. Here node a is cut off from the bucket long enough to be fenced; b's
// deciding read shows it stale; then, while b's fence is on its way, a's bucket comes back and a's
// renewal lands first. The fence's condition fails: refused, and a keeps its lease. (Fails
// with the broken model unconditional-fence: the fence overwrites a live write.)
TEST_F(FenceWatchTest, AFenceDecidedOnAStaleReadIsRefusedByItsCondition) {
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  Ready(a);
  Ready(b);
  world.RunFor(seconds(10));  // b watches from its own first write
  bool a_cut = true;
  a.store.set_fault_hook([&a_cut](const OpInfo& op) {
    OpFault f;
    if (a_cut && op.op == StoreOp::kPut) f.fail_before_apply = Retryable("test: a is cut off");
    return f;
  });
  bool fence_sent = false;
  b.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key == "nodes/a") {
      fence_sent = true;
      a_cut = false;                  // a's bucket comes back...
      f.request_delay = seconds(2);  // ...while the fence is on its way (within its deadline)
    }
    return f;
  });
  ASSERT_TRUE(world.RunUntil([&] { return fence_sent; }, seconds(60)));
  world.RunFor(seconds(10));
  EXPECT_EQ(b.node.fence_watch().stats().fences_refused, 1u);
  EXPECT_EQ(b.node.fence_watch().stats().fences_written, 0u);
  EXPECT_FALSE(a.end.has_value()) << a.end->message;
  EXPECT_TRUE(a.node.lease().IsValid()) << "a renewed in time: it keeps its lease";
  EXPECT_EQ(Node("a").state, LeaseState::kLive);
  EXPECT_EQ(Node("a").instance.str(), "ia");
}

// docs/node-lease.md, "Bounds": at most FENCE_CONCURRENCY (8) fences at once. Nine nodes die at the
// same moment; the survivor's fences take two seconds to answer; it sends eight, then the
// ninth at a later listing. (Fails with the broken model unbounded-fence-concurrency.)
TEST_F(FenceWatchTest, AtMostEightFencesAtOnce) {
  Proc s(world, bucket, "s", "is");
  std::vector<std::unique_ptr<Proc>> victims;
  for (int i = 0; i < 9; ++i) victims.push_back(std::make_unique<Proc>(world, bucket, "v" + std::to_string(i), "iv" + std::to_string(i)));
  Ready(s);
  for (auto& v : victims) Ready(*v);
  world.RunFor(seconds(10));
  std::map<MonoTime, int> fences_sent_at;
  s.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.starts_with("nodes/v")) {
      ++fences_sent_at[world.Now()];
      f.reply_delay = seconds(2);
    }
    return f;
  });
  victims.clear();  // all nine die at once
  ASSERT_TRUE(world.RunUntil(
      [&] {
        for (int i = 0; i < 9; ++i)
          if (Node("v" + std::to_string(i)).state != LeaseState::kFenced) return false;
        return true;
      },
      seconds(60)));
  world.RunFor(seconds(3));  // the last fence's reply
  int most = 0;
  for (auto& [t, n] : fences_sent_at) most = std::max(most, n);
  EXPECT_EQ(most, kFenceConcurrency) << "at most eight at once, and the bound is reached";
  EXPECT_EQ(s.node.fence_watch().stats().fences_written, 9u);
  EXPECT_EQ(s.node.fence_watch().stats().max_in_flight, static_cast<std::uint64_t>(kFenceConcurrency));
}

// docs/node-lease.md, "When to fence": the watch runs from when B saw the object. A body can
// describe no later instant than its GET's reply, so "unchanged since" is taken when the read
// returns; taken at the listing's start instead, a slow listing would shorten the watch by its own
// duration. Each read here takes a second. (Fails with the broken model watch-from-listing-start.)
TEST_F(FenceWatchTest, TheWatchRunsFromTheReadNotFromTheListingsStart) {
  const WallTime now = FromUnixMs(cluster_testing::kSimOriginMs);
  for (const std::string id : {"a", "b", "c"}) {
    ASSERT_TRUE(bucket->ApplyPut(NodeKey(NodeId(id)), EncodeNodeRecord(Live(id, now)), Precondition::None()).ok());
  }
  std::map<std::string, MonoTime> replied_at;
  cluster_testing::SimHost host(world, bucket, {.fault = [&](const OpInfo& op) {
                                  OpFault f;
                                  if (op.op == StoreOp::kGet) {
                                    f.reply_delay = seconds(1);
                                    replied_at[op.key] = world.Now() + seconds(1);
                                  }
                                  return f;
                                }});
  Membership membership(host.env(), host.store(), LeaseTiming{});
  membership.set_broken_models(cluster_testing::TestBrokenModels());
  world.RunFor(seconds(5));
  const MonoTime listed = world.Now();
  auto s = RunTask(world, host.env(), membership.ListOnce());
  ASSERT_TRUE(s && s->ok());
  EXPECT_EQ(world.Now() - listed, seconds(3)) << "three reads, one after another";
  for (const std::string id : {"a", "b", "c"}) {
    EXPECT_EQ(membership.view().at(NodeId(id)).unchanged_since, replied_at.at("nodes/" + id)) << id;
  }
  // Unchanged at the next listing: the time stays the first read's.
  auto again = RunTask(world, host.env(), membership.ListOnce());
  ASSERT_TRUE(again && again->ok());
  EXPECT_EQ(membership.view().at(NodeId("c")).unchanged_since, listed + seconds(3));
}

// An old-format heartbeat frees nothing and is reported in the log once per change, not at
// every listing: as an error while it is fresh (an old version may be running), as a
// notice once stale (a retired node's).
TEST_F(FenceWatchTest, AnOldFormatHeartbeatIsReportedOncePerChange) {
  cluster_testing::SimHost host(world, bucket);
  Membership membership(host.env(), host.store(), LeaseTiming{});
  auto list = [&] {
    auto s = RunTask(world, host.env(), membership.ListOnce());
    ASSERT_TRUE(s && s->ok());
  };
  auto old = [&](const std::string& id, WallTime at) {
    ASSERT_TRUE(bucket->ApplyPut("nodes/" + id, "wasmkeep-node 1\nnode " + id + "\nwritten_at_ms " + std::to_string(ToUnixMs(at)) + "\n",
                                 Precondition::None())
                    .ok());
  };
  world.RunFor(seconds(100));
  old("fresh", host.env().WallNow());
  old("retired", host.env().WallNow() - seconds(3600));
  for (int i = 0; i < 5; ++i) list();
  EXPECT_EQ(membership.stats().old_format_errors, 1u);
  EXPECT_EQ(membership.stats().old_format_notices, 1u);
  world.RunFor(seconds(1));
  old("fresh", host.env().WallNow());  // rewritten: an old version is running
  for (int i = 0; i < 3; ++i) list();
  EXPECT_EQ(membership.stats().old_format_errors, 2u);
  EXPECT_EQ(membership.stats().old_format_notices, 1u);
}

}  // namespace
}  // namespace wk
