// The cluster's published series (docs/node-lease.md, "Metrics") read back from a scrape:
// each one shows what its component counted, after a run that makes each non-zero.
#include "cluster/cluster_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "cluster/cluster_node.h"
#include "cluster/testing/harness.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using Proc = cluster_testing::TestProc;

// The value of one sample ("name" or "name{labels}") in a scrape; NaN if absent.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(series + " ")) return std::stod(line.substr(series.size() + 1));
  }
  return std::nan("");
}

TEST(ClusterMetricsTest, EverySeriesShowsWhatItsComponentCounted) {
  SimWorld world{41};
  auto bucket = std::make_shared<MemBucket>();
  Proc a(world, bucket, "a", "ia");
  Proc b(world, bucket, "b", "ib");
  auto c = std::make_unique<Proc>(world, bucket, "c", "ic");
  // One of a's lease writes fails (then is retried within its period).
  int a_puts = 0;
  a.store.set_fault_hook([&a_puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key == "nodes/a" && ++a_puts == 3) f.fail_before_apply = Retryable("test: refused");
    return f;
  });
  ASSERT_TRUE(world.RunUntil([&] { return a.node.lease().IsValid() && b.node.lease().IsValid(); }, seconds(30)));
  world.RunFor(seconds(10));
  // c dies. a's first fence of it is refused: c's object changes while the fence is in
  // flight (as if c wrote once more); the next one lands.
  c.reset();
  bool refused_once = false;
  a.store.set_fault_hook([&](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key == "nodes/c" && !refused_once) {
      refused_once = true;
      auto r = std::get<NodeRecord>(DecodeNodeObject(bucket->objects().at("nodes/c").body).value());
      r.written_at = r.written_at + milliseconds(1);
      EXPECT_TRUE(bucket->ApplyPut("nodes/c", EncodeNodeRecord(r), Precondition::None()).ok());
    }
    return f;
  });
  b.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key == "nodes/c") f.fail_before_apply = Retryable("test: only a fences");
    return f;
  });
  ASSERT_TRUE(world.RunUntil(
      [&] {
        auto obj = DecodeNodeObject(bucket->objects().at("nodes/c").body);
        return obj.ok() && std::get<NodeRecord>(*obj).state == LeaseState::kFenced;
      },
      seconds(60)));
  world.RunFor(seconds(4));  // a lists the fence

  MetricsRegistry registry;
  PublishClusterMetrics(registry, a.node);
  const std::string text = registry.RenderText();
  const NodeLeaseStats& lease = a.node.lease().stats();
  ASSERT_GT(lease.writes_ok, 5u);
  EXPECT_EQ(Sample(text, "wasmkeep_node_lease_writes_total"), static_cast<double>(lease.writes_ok));
  EXPECT_EQ(lease.write_failures, 1u);
  EXPECT_EQ(Sample(text, "wasmkeep_node_lease_failures_total"), 1.0);
  EXPECT_EQ(Sample(text, "wasmkeep_node_lease_valid"), 1.0);
  EXPECT_EQ(Sample(text, "wasmkeep_node_lease_epoch"), 1.0);
  EXPECT_EQ(Sample(text, "wasmkeep_fences_total"), 1.0);
  EXPECT_EQ(Sample(text, "wasmkeep_fences_refused_total"), 1.0);
  const ListingStats& listing = a.node.membership().stats();
  ASSERT_GT(listing.listings, 5u);
  EXPECT_EQ(Sample(text, "wasmkeep_listing_seconds_count"), static_cast<double>(listing.listings));
  EXPECT_EQ(Sample(text, "wasmkeep_cluster_nodes{state=\"live\"}"), 2.0);
  EXPECT_EQ(Sample(text, "wasmkeep_cluster_nodes{state=\"fenced\"}"), 1.0);
  EXPECT_EQ(Sample(text, "wasmkeep_cluster_nodes{state=\"released\"}"), 0.0);
  // The listing read each new object once, took most renewals for such, and read c's body
  // when it stopped changing (the watch) and when the fence changed its size.
  EXPECT_EQ(listing.reads[static_cast<std::size_t>(ReadReason::kNew)], 3u);
  EXPECT_EQ(Sample(text, "wasmkeep_listing_reads_total{reason=\"new\"}"), 3.0);
  EXPECT_GE(Sample(text, "wasmkeep_listing_reads_total{reason=\"watch\"}"), 1.0);
  EXPECT_GE(Sample(text, "wasmkeep_listing_reads_total{reason=\"size_changed\"}"), 1.0);
  ASSERT_GT(listing.renewals_assumed, 5u);
  EXPECT_EQ(Sample(text, "wasmkeep_listing_renewals_assumed_total"), static_cast<double>(listing.renewals_assumed));
  // After a lapse: not valid, and the next validity is a new epoch.
  a.store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key == "nodes/a") f.fail_before_apply = Retryable("test: cut off");
    return f;
  });
  world.RunFor(seconds(10));
  EXPECT_EQ(Sample(registry.RenderText(), "wasmkeep_node_lease_valid"), 0.0);
  EXPECT_EQ(Sample(registry.RenderText(), "wasmkeep_node_lease_lapses_total"), 1.0);
  a.store.set_fault_hook(nullptr);
  ASSERT_TRUE(world.RunUntil([&] { return a.node.lease().IsValid(); }, seconds(10)));
  EXPECT_EQ(Sample(registry.RenderText(), "wasmkeep_node_lease_epoch"), 2.0);
}

}  // namespace
}  // namespace wk
