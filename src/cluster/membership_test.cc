// The ETag-aware listing (Membership, docs/node-lease.md "The listing reads only what
// changed") with real ClusterNodes in virtual time: what a healthy cluster's listing costs,
// and that every change a decision needs is read at the first listing that shows it.
#include "cluster/membership.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "cluster/cluster_node.h"
#include "cluster/testing/harness.h"
#include "store/counting_store.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A node whose every bucket request is counted by purpose, as in `wasmkeep serve`.
struct CountedNode {
  CountedNode(SimWorld& world, std::shared_ptr<MemBucket> bucket, const std::string& id, const std::string& instance)
      : host(world, std::move(bucket)),
        counting(host.store()),
        node(host.env(), counting, cluster_testing::TestIdentity(NodeId(id)), LeaseTiming{}, InstanceToken(instance)) {
    node.set_broken_models(cluster_testing::TestBrokenModels());
    host.env().Spawn([](ClusterNode* n) -> Task<void> { (void)co_await n->Run(); }(&node), "node " + id);
  }
  const BucketRequestStats& stats() const { return counting.stats(); }
  const ListingStats& listing() { return node.membership().stats(); }
  std::uint64_t ListingGets() const { return stats().Requests(BucketOp::kGet, BucketPurpose::kListing); }

  cluster_testing::SimHost host;
  CountingStore counting;
  ClusterNode node;
};

struct MembershipTest : ::testing::Test {
  SimWorld world{53};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();

  void Ready(CountedNode& n) { ASSERT_TRUE(world.RunUntil([&] { return n.node.lease().IsValid(); }, seconds(30))); }
  // Runs until `n` has made `listings` more listings.
  void Listings(CountedNode& n, std::uint64_t listings) {
    const std::uint64_t until = n.listing().listings + listings;
    ASSERT_TRUE(world.RunUntil([&] { return n.listing().listings >= until; }, seconds(10) * static_cast<int>(listings)));
  }
  const NodeView& ViewOf(CountedNode& n, const std::string& id) { return n.node.membership().view().at(NodeId(id)); }
};

// The measurement the listing was changed for: three live, healthy nodes, 20 minutes. Each
// node lists once a period, writes its lease once a period and lists the drain requests
// once a period; of the bodies in nodes/ it reads only those kRefreshPeriods periods old
// (every object changes every period, each a renewal), where the ADR's listing read all
// three every period. Prints the figures.
TEST_F(MembershipTest, ThreeHealthyNodesListOnceAPeriodAndReadBodiesOnlyToRefreshThem) {
  auto a = std::make_unique<CountedNode>(world, bucket, "a", "ia");
  auto b = std::make_unique<CountedNode>(world, bucket, "b", "ib");
  auto c = std::make_unique<CountedNode>(world, bucket, "c", "ic");
  for (CountedNode* n : {a.get(), b.get(), c.get()}) Ready(*n);
  world.RunFor(seconds(60));  // every node has read every object once (kNew)
  struct Before {
    std::uint64_t lists, gets, lease_puts, control_lists, listings, renewals;
  };
  std::vector<Before> before;
  for (CountedNode* n : {a.get(), b.get(), c.get()}) {
    before.push_back({n->stats().Requests(BucketOp::kList, BucketPurpose::kListing), n->ListingGets(),
                      n->stats().Requests(BucketOp::kPut, BucketPurpose::kLease),
                      n->stats().Requests(BucketOp::kList, BucketPurpose::kControl), n->listing().listings,
                      n->listing().renewals_assumed});
  }
  const Duration measured = std::chrono::minutes(20);
  world.RunFor(measured);
  const double periods = ToSeconds(measured) / ToSeconds(LeaseTiming{}.heartbeat_period);  // 400
  double gets_all = 0, lists_all = 0;
  int i = 0;
  for (CountedNode* n : {a.get(), b.get(), c.get()}) {
    const Before& was = before[static_cast<std::size_t>(i++)];
    const double lists = static_cast<double>(n->stats().Requests(BucketOp::kList, BucketPurpose::kListing) - was.lists);
    const double gets = static_cast<double>(n->ListingGets() - was.gets);
    const double lease_puts = static_cast<double>(n->stats().Requests(BucketOp::kPut, BucketPurpose::kLease) - was.lease_puts);
    const double control = static_cast<double>(n->stats().Requests(BucketOp::kList, BucketPurpose::kControl) - was.control_lists);
    const double renewals = static_cast<double>(n->listing().renewals_assumed - was.renewals);
    EXPECT_NEAR(lists / periods, 1.0, 0.02) << "one LIST a period";
    EXPECT_NEAR(lease_puts / periods, 1.0, 0.02) << "one lease write a period";
    EXPECT_NEAR(control / periods, 1.0, 0.02) << "one LIST of the drain requests a period";
    EXPECT_EQ(n->stats().Requests(BucketOp::kGet, BucketPurpose::kControl), 0u) << "no drain request to read";
    // Three objects, each read once per kRefreshPeriods periods (or a listing later).
    EXPECT_LE(gets / periods, 3.0 / kRefreshPeriods + 0.02) << "bodies read per period";
    EXPECT_GE(gets / periods, 3.0 / (kRefreshPeriods + 2)) << "each body refreshed";
    EXPECT_GT(renewals / periods, 2.5) << "the other renewals taken as such";
    EXPECT_EQ(n->stats().Requests(BucketPurpose::kOther), 0u) << "every request has its purpose";
    gets_all += gets;
    lists_all += lists;
    EXPECT_EQ(n->listing().reads[static_cast<std::size_t>(ReadReason::kSizeChanged)], 0u);
    EXPECT_EQ(n->listing().reads[static_cast<std::size_t>(ReadReason::kNotLive)], 0u);
  }
  std::printf("three healthy nodes, %.0f periods: %.3f LISTs and %.3f body reads per period cluster-wide "
              "(the ADR's listing: 3 LISTs and 9 reads)\n",
              periods, lists_all / periods, gets_all / periods);
  // Every view is current in what matters: each node live under its instance.
  for (CountedNode* n : {a.get(), b.get(), c.get()}) {
    for (const char* id : {"a", "b", "c"}) {
      EXPECT_TRUE(n->node.membership().IsLive(NodeId(id), InstanceToken(std::string("i") + id)));
    }
  }
}

// The part of the listing trusted least: a new version of a live record taken for a
// renewal. A process restarted under the same id writes a live record of the same size
// over its predecessor's (nobody fenced it here), so only the silence before that write
// (the start check waits ttl + grace) tells it from a renewal. The first listing after the
// write shows the new instance. (Fails with the broken model listing-assumes-renewals: the
// view keeps the dead instance, so routing and the peer pins would trust a dead process.)
TEST_F(MembershipTest, ARestartUnderTheSameIdIsReadAtTheFirstListingAfterItsWrite) {
  auto a = std::make_unique<CountedNode>(world, bucket, "a", "ia");
  auto b = std::make_unique<CountedNode>(world, bucket, "b", "ib");
  Ready(*a);
  Ready(*b);
  world.RunFor(seconds(20));
  // a never fences b (its fence writes refused), so b2 writes over b's live record.
  a->host.store().set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key == "nodes/b") f.fail_before_apply = Retryable("test: a does not fence");
    return f;
  });
  const std::size_t size_before = bucket->objects().at("nodes/b").body.size();
  b.reset();  // kill -9
  auto b2 = std::make_unique<CountedNode>(world, bucket, "b", "iB");  // same length: same size
  Ready(*b2);
  ASSERT_EQ(bucket->objects().at("nodes/b").body.size(), size_before);
  Listings(*a, 1);
  EXPECT_TRUE(a->node.membership().IsLive(NodeId("b"), InstanceToken("iB")))
      << "the view shows instance " << ViewOf(*a, "b").record->instance.str();
  EXPECT_FALSE(a->node.membership().IsLive(NodeId("b"), InstanceToken("ib")));
  EXPECT_GE(a->listing().reads[static_cast<std::size_t>(ReadReason::kAfterSilence)], 1u);
}

// A fence (a state that is not live, and another size) is read at the first listing that
// shows it; so is the next live record after it, whatever its size; and a dead node's last
// body is read once, when its version has stood still for the fence watch.
TEST_F(MembershipTest, AFenceAndTheRestartAfterItAreReadAtOnce) {
  auto a = std::make_unique<CountedNode>(world, bucket, "a", "ia");
  auto b = std::make_unique<CountedNode>(world, bucket, "b", "ib");
  Ready(*a);
  Ready(*b);
  world.RunFor(seconds(20));
  b.reset();  // kill -9; a fences it after ttl + grace and the watch
  ASSERT_TRUE(world.RunUntil(
      [&] {
        auto obj = DecodeNodeObject(bucket->objects().at("nodes/b").body);
        return obj.ok() && std::get<NodeRecord>(*obj).state == LeaseState::kFenced;
      },
      seconds(40)));
  EXPECT_LE(a->listing().reads[static_cast<std::size_t>(ReadReason::kWatch)], 1u) << "b's last body, once at most";
  Listings(*a, 1);
  ASSERT_TRUE(ViewOf(*a, "b").record.has_value());
  EXPECT_EQ(ViewOf(*a, "b").record->state, LeaseState::kFenced);
  EXPECT_TRUE(ViewOf(*a, "b").body_current);
  const std::uint64_t gets = a->ListingGets();
  Listings(*a, 3);
  EXPECT_EQ(a->ListingGets(), gets) << "an unchanged fence is not read again";
  auto b2 = std::make_unique<CountedNode>(world, bucket, "b", "iB");
  Ready(*b2);
  Listings(*a, 1);
  EXPECT_TRUE(a->node.membership().IsLive(NodeId("b"), InstanceToken("iB")));
  EXPECT_GE(a->listing().reads[static_cast<std::size_t>(ReadReason::kNotLive)], 1u);
}

// What the refresh bounds: an old binary writing its old-format heartbeat over a live
// record, at the same size and the same cadence, looks like renewals to the listing. Within
// kRefreshPeriods periods (and a listing) the listing reads it and reports it.
TEST_F(MembershipTest, AnOldFormatHeartbeatThatLooksLikeRenewalsIsSeenWithinTheRefreshBound) {
  auto a = std::make_unique<CountedNode>(world, bucket, "a", "ia");
  auto b = std::make_unique<CountedNode>(world, bucket, "b", "ib");
  Ready(*a);
  Ready(*b);
  world.RunFor(seconds(20));
  const std::size_t size = bucket->objects().at("nodes/b").body.size();
  b.reset();
  // An old binary's heartbeat, padded to the live record's size, rewritten every period.
  auto old_body = [&](int n) {
    std::string body = "wasmkeep-node 2\nnode b\nwritten_at_ms " + std::to_string(ToUnixMs(a->host.env().WallNow())) + "\n";
    body += "pad " + std::to_string(n % 10);
    body.resize(size - 1, 'x');
    return body + "\n";
  };
  int writes = 0;
  bool seen = false;
  const MonoTime started = world.Now();
  MonoTime seen_at{};
  while (world.Now() - started < seconds(3) * (kRefreshPeriods + 3)) {
    ASSERT_TRUE(bucket->ApplyPut("nodes/b", old_body(writes++), Precondition::None()).ok());
    world.RunFor(seconds(3));
    if (!seen && ViewOf(*a, "b").old.has_value()) {
      seen = true;
      seen_at = world.Now();
    }
  }
  ASSERT_TRUE(seen) << "the old format was never read";
  EXPECT_LE(seen_at - started, seconds(3) * (kRefreshPeriods + 2));
  EXPECT_GE(a->listing().old_format_errors, 1u);
}

}  // namespace
}  // namespace wk
