// `cluster cost`'s arithmetic and inputs: the built-in price tables, the price file and its
// refusals (each names the key), durations, a node's /metrics text, the report, and what
// the bucket stores per tenant.
#include "cli/cost.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>

namespace wk::cli {
namespace {

std::size_t I(BucketOp op) { return static_cast<std::size_t>(op); }
std::size_t I(BucketPurpose p) { return static_cast<std::size_t>(p); }

constexpr std::string_view kGoodPrices = R"(name = "b2"
currency = "USD"
[per_1000_requests]
put = 0
get = 0.0004
head = 0.0004
list = 0.004
delete = 0
)";

TEST(CostTest, BuiltInPricesAreThePublishedOnes) {
  const PriceTable s3 = AwsS3StandardPrices();
  EXPECT_DOUBLE_EQ(s3.per_request[I(BucketOp::kPut)] * 1000, 0.005);
  EXPECT_DOUBLE_EQ(s3.per_request[I(BucketOp::kList)] * 1000, 0.005);
  EXPECT_DOUBLE_EQ(s3.per_request[I(BucketOp::kGet)] * 1000, 0.0004);
  EXPECT_DOUBLE_EQ(s3.per_request[I(BucketOp::kHead)] * 1000, 0.0004);
  EXPECT_EQ(s3.per_request[I(BucketOp::kDelete)], 0);
  const PriceTable r2 = CloudflareR2Prices();
  EXPECT_DOUBLE_EQ(r2.per_request[I(BucketOp::kPut)] * 1e6, 4.50);
  EXPECT_DOUBLE_EQ(r2.per_request[I(BucketOp::kList)] * 1e6, 4.50);
  EXPECT_DOUBLE_EQ(r2.per_request[I(BucketOp::kGet)] * 1e6, 0.36);
  EXPECT_EQ(r2.per_request[I(BucketOp::kDelete)], 0);
  EXPECT_EQ(LoadPriceTable("aws-s3")->name, "aws-s3");
  EXPECT_EQ(LoadPriceTable("r2")->name, "r2");
}

TEST(CostTest, APriceFileGivesEveryOperationAPrice) {
  auto t = ParsePriceToml(kGoodPrices, "b2.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "b2");
  EXPECT_DOUBLE_EQ(t->per_request[I(BucketOp::kList)] * 1000, 0.004);
  EXPECT_EQ(t->per_request[I(BucketOp::kPut)], 0);
  // From a file.
  const std::string path = ::testing::TempDir() + "/prices.toml";
  std::ofstream(path) << kGoodPrices;
  EXPECT_TRUE(LoadPriceTable(path).ok());
}

// `tenant usage --prices`: usage records count requests by purpose only, so a purpose's
// request costs the dearest operation it sends (exact for segment and snapshot: PUTs).
TEST(CostTest, UsageRequestsArePricedByPurposeAtTheDearestOperationItSends) {
  PriceTable t;
  t.per_request[I(BucketOp::kPut)] = 5.0 / 1000;
  t.per_request[I(BucketOp::kGet)] = 1.0 / 1000;
  t.per_request[I(BucketOp::kHead)] = 7.0 / 1000;  // dearest, but only where HEADs may be sent
  t.per_request[I(BucketOp::kList)] = 3.0 / 1000;
  t.per_request[I(BucketOp::kDelete)] = 0.1 / 1000;
  EXPECT_DOUBLE_EQ(PricePerRequestOf(t, BucketPurpose::kSegment) * 1000, 5.0);
  EXPECT_DOUBLE_EQ(PricePerRequestOf(t, BucketPurpose::kSnapshot) * 1000, 5.0);
  EXPECT_DOUBLE_EQ(PricePerRequestOf(t, BucketPurpose::kRestore) * 1000, 3.0);
  EXPECT_DOUBLE_EQ(PricePerRequestOf(t, BucketPurpose::kGc) * 1000, 3.0);
  EXPECT_DOUBLE_EQ(PricePerRequestOf(t, BucketPurpose::kAlarm) * 1000, 5.0);
  EXPECT_DOUBLE_EQ(PricePerRequestOf(t, BucketPurpose::kOwner) * 1000, 5.0);
  EXPECT_DOUBLE_EQ(PricePerRequestOf(t, BucketPurpose::kAdmin) * 1000, 7.0) << "any operation";
  EXPECT_FALSE(PurposeSends(BucketPurpose::kSegment, BucketOp::kGet));
  EXPECT_TRUE(PurposeSends(BucketPurpose::kGc, BucketOp::kDelete));
  std::array<std::uint64_t, kBucketPurposes> requests{};
  requests[I(BucketPurpose::kSegment)] = 2000;
  requests[I(BucketPurpose::kRestore)] = 1000;
  requests[I(BucketPurpose::kGc)] = 10;
  EXPECT_DOUBLE_EQ(RequestsMoney(t, requests), 10.0 + 3.0 + 0.03);
  EXPECT_DOUBLE_EQ(RequestsMoney(t, {}), 0);
  // With AWS S3's table a segment PUT is $0.005 per 1,000.
  EXPECT_DOUBLE_EQ(PricePerRequestOf(AwsS3StandardPrices(), BucketPurpose::kSegment) * 1000, 0.005);
}

TEST(CostTest, ABadPriceFileIsRefusedNamingWhatIsWrong) {
  struct Case {
    std::string text;
    std::string names;
  };
  const Case cases[] = {
      {"[per_1000_requests]\nput = 1\nget = 1\nhead = 1\nlist = 1\n", "missing per_1000_requests.delete"},
      {"[per_1000_requests]\nput = -1\nget = 1\nhead = 1\nlist = 1\ndelete = 0\n", "per_1000_requests.put"},
      {"[per_1000_requests]\nput = \"cheap\"\nget = 1\nhead = 1\nlist = 1\ndelete = 0\n", "per_1000_requests.put"},
      {"[per_1000_requests]\npost = 1\n", "unknown operation per_1000_requests.post"},
      {"price = 3\n", "unknown key price"},
      {"name = \"x\"\n", "missing the [per_1000_requests] table"},
      {"[per_1000_requests\nput = 1\n", "p.toml: line 1"},
      {"name = 3\n[per_1000_requests]\n", "name must be a non-empty string"},
  };
  for (const Case& c : cases) {
    auto t = ParsePriceToml(c.text, "p.toml");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.code(), Code::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.names), std::string::npos) << t.status().message();
  }
  auto missing = LoadPriceTable("/nonexistent/prices.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("neither aws-s3, r2 nor a readable price file"), std::string::npos);
  EXPECT_FALSE(LoadPriceTable("").ok());
}

TEST(CostTest, Durations) {
  EXPECT_EQ(ParseDurationArg("250ms").value(), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseDurationArg("30s").value(), std::chrono::seconds(30));
  EXPECT_EQ(ParseDurationArg("5m").value(), std::chrono::minutes(5));
  EXPECT_EQ(ParseDurationArg("2h").value(), std::chrono::hours(2));
  for (std::string_view bad : {"", "s", "0s", "-5s", "5", "5d", "1.5s", "99999999999s", "5 s"}) {
    auto d = ParseDurationArg(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_NE(d.status().message().find("is not a duration"), std::string::npos);
    }
  }
}

TEST(CostTest, ANodesMetricsTextIsReadAndOtherSeriesIgnored) {
  const std::string text =
      "# HELP wasmkeep_bucket_requests_total Requests\n"
      "# TYPE wasmkeep_bucket_requests_total counter\n"
      "wasmkeep_bucket_requests_total{op=\"put\",purpose=\"lease\",outcome=\"ok\"} 100\n"
      "wasmkeep_bucket_requests_total{op=\"put\",purpose=\"lease\",outcome=\"conflict\"} 2\n"
      "wasmkeep_bucket_requests_total{op=\"get\",purpose=\"listing\",outcome=\"ok\"} 7\n"
      "wasmkeep_bucket_requests_total{op=\"list\",purpose=\"listing\",outcome=\"ok\"} 50\n"
      "wasmkeep_bucket_requests_total{op=\"put\",purpose=\"newer-purpose\",outcome=\"ok\"} 3\n"
      "wasmkeep_bucket_sent_bytes_total{purpose=\"lease\"} 25000\n"
      "wasmkeep_process_start_time_seconds 1764000000.5\n"
      "wasmkeep_node_lease_writes_total 100\n"
      "garbage line\n"
      "wasmkeep_bucket_requests_total{op=\"put\",purpose=\"lease\" 9\n";
  auto c = ParseNodeMetrics(text);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->requests[I(BucketOp::kPut)][I(BucketPurpose::kLease)], 102);
  EXPECT_EQ(c->requests[I(BucketOp::kGet)][I(BucketPurpose::kListing)], 7);
  EXPECT_EQ(c->requests[I(BucketOp::kList)][I(BucketPurpose::kListing)], 50);
  EXPECT_EQ(c->requests[I(BucketOp::kPut)][I(BucketPurpose::kOther)], 3) << "an unknown purpose counts as other";
  EXPECT_EQ(c->sent_bytes[I(BucketPurpose::kLease)], 25000);
  EXPECT_DOUBLE_EQ(*c->start_time_seconds, 1764000000.5);
  EXPECT_FALSE(ParseNodeMetrics("wasmkeep_node_lease_writes_total 1\n").ok());
  EXPECT_FALSE(ParseNodeMetrics("").ok());
  EXPECT_FALSE(ParseNodeMetrics(std::string(1000, '{')).ok());
}

TEST(CostTest, TheReportSumsEachNodesRateAndPricesIt) {
  // Two nodes, each 100 s: 1 lease PUT/s and 1 listing LIST/s each; one also 10 segment
  // PUTs/s and 1 listing GET/s.
  NodeWindow a{NodeId("a"), {}, 100};
  a.counts.requests[I(BucketOp::kPut)][I(BucketPurpose::kLease)] = 100;
  a.counts.requests[I(BucketOp::kList)][I(BucketPurpose::kListing)] = 100;
  NodeWindow b = a;
  b.node_id = NodeId("b");
  b.counts.requests[I(BucketOp::kPut)][I(BucketPurpose::kSegment)] = 1000;
  b.counts.requests[I(BucketOp::kGet)][I(BucketPurpose::kListing)] = 100;
  NodeWindow idle{NodeId("c"), {}, 0};
  CostReport r = ComputeCost({a, b, idle}, AwsS3StandardPrices(), "test");
  EXPECT_EQ(r.nodes, 2);
  EXPECT_DOUBLE_EQ(r.PerSecond(BucketPurpose::kLease), 2);
  EXPECT_DOUBLE_EQ(r.PerSecond(BucketPurpose::kListing), 3);
  EXPECT_DOUBLE_EQ(r.PerSecond(BucketPurpose::kSegment), 10);
  EXPECT_DOUBLE_EQ(r.TotalPerSecond(), 15);
  // Per day: lease 2/s = 172,800 PUTs = $0.864; listing 172,800 LISTs = $0.864 and 86,400
  // GETs = $0.03456; segments 864,000 PUTs = $4.32.
  EXPECT_NEAR(r.MoneyPerDay(BucketPurpose::kLease), 0.864, 1e-9);
  EXPECT_NEAR(r.MoneyPerDay(BucketPurpose::kListing), 0.864 + 0.03456, 1e-9);
  EXPECT_NEAR(r.TotalMoneyPerDay(), 0.864 + 0.864 + 0.03456 + 4.32, 1e-9);
  EXPECT_DOUBLE_EQ(r.NonSegmentPutsPerNodeSecond(), 1) << "2 lease PUTs/s over 2 nodes";
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("c: no time"), std::string::npos);
  const std::string text = FormatCostText(r);
  EXPECT_NE(text.find("2 live nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("lease"), std::string::npos);
  EXPECT_NE(text.find("6.08"), std::string::npos) << "the total per day: " << text;
  const std::string json = FormatCostJson(r);
  EXPECT_NE(json.find("\"non_segment_puts_per_node_second\": 1.0"), std::string::npos) << json;
  // At R2's prices the same traffic costs less.
  EXPECT_LT(ComputeCost({a, b}, CloudflareR2Prices(), "test").TotalMoneyPerDay(), r.TotalMoneyPerDay());
}


TEST(CostStorageTest, PricesStoragePerGbMonth) {
  EXPECT_DOUBLE_EQ(*AwsS3StandardPrices().per_gb_month, 0.023);
  EXPECT_DOUBLE_EQ(*CloudflareR2Prices().per_gb_month, 0.015);
  EXPECT_DOUBLE_EQ(StoragePerMonth(AwsS3StandardPrices(), 2ull << 30), 0.046);
  // A price file without [storage] does not price it; with it, it does.
  auto plain = ParsePriceToml(kGoodPrices, "b2.toml");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->per_gb_month);
  EXPECT_EQ(StoragePerMonth(*plain, 1ull << 40), 0);
  auto priced = ParsePriceToml(std::string(kGoodPrices) + "[storage]\nper_gb_month = 0.006\n", "b2.toml");
  ASSERT_TRUE(priced.ok()) << priced.status().ToString();
  EXPECT_DOUBLE_EQ(*priced->per_gb_month, 0.006);
  EXPECT_NE(priced->title.find("storage 0.006 per GB-month"), std::string::npos) << priced->title;
  auto unknown = ParsePriceToml(std::string(kGoodPrices) + "[storage]\nper_gb = 1\n", "b2.toml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("storage.per_gb"), std::string::npos) << unknown.status().message();
  auto negative = ParsePriceToml(std::string(kGoodPrices) + "[storage]\nper_gb_month = -1\n", "b2.toml");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("storage.per_gb_month must be a number"), std::string::npos);
  auto empty = ParsePriceToml(std::string(kGoodPrices) + "[storage]\n", "b2.toml");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("[storage] needs per_gb_month"), std::string::npos);
}

ListEntry Entry(std::string key, std::uint64_t size) {
  ListEntry e;
  e.key = std::move(key);
  e.size = size;
  return e;
}

std::string Pos(std::uint64_t g, std::uint64_t s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%020llu-%020llu", static_cast<unsigned long long>(g),
                static_cast<unsigned long long>(s));
  return buf;
}

TEST(CostStorageTest, CountsEachTenantsObjectsAndKeepsHistoryApart) {
  const std::vector<ListEntry> entries = {
      // acme/kv/a: a snapshot at 2-5, so everything before it is history.
      Entry("wal/acme/kv/a/" + Pos(1, 0), 10), Entry("wal/acme/kv/a/" + Pos(1, 1), 100),
      Entry("snapshot/acme/kv/a/" + Pos(1, 1), 50), Entry("wal/acme/kv/a/" + Pos(2, 0), 10),
      Entry("snapshot/acme/kv/a/" + Pos(2, 5), 60), Entry("wal/acme/kv/a/" + Pos(2, 6), 7),
      // acme/kv/b: no snapshot, no history.
      Entry("wal/acme/kv/b/" + Pos(1, 0), 1000),
      Entry("classes/acme/kv/modules/abc", 5000), Entry("classes/acme/kv/current", 40),
      Entry("owners/acme/kv/a", 30), Entry("leases/acme/kv/a", 20), Entry("quarantine/acme/kv/a", 9),
      Entry("alarms/03/00000000001700000000000/acme/kv/a/" + Pos(1, 1), 11),
      Entry("control/tenants/acme", 100), Entry("control/move/n1/acme/kv/a", 12),
      Entry("wal/globex/chat/r/" + Pos(3, 0), 70),
      // The cluster's own.
      Entry("nodes/n1", 200), Entry("owners/_alarms/shard/03", 25), Entry("control/cluster-secret", 44),
      Entry("control/endpoints/n1", 33), Entry("control/operators", 55),
  };
  const StorageReport r = ComputeStorage(entries);
  ASSERT_EQ(r.tenants.size(), 2u);
  const StorageUse& acme = r.tenants.at("acme");
  EXPECT_EQ(acme.objects, 15u);
  EXPECT_EQ(acme.log_bytes, 10u + 100 + 50 + 10 + 60 + 7 + 1000);
  EXPECT_EQ(acme.history_bytes, 10u + 100 + 50 + 10);  // before snapshot 2-5, that snapshot kept
  EXPECT_EQ(acme.module_bytes, 5040u);
  EXPECT_EQ(acme.bytes, acme.log_bytes + acme.module_bytes + 30 + 20 + 9 + 11 + 100 + 12);
  const StorageUse& globex = r.tenants.at("globex");
  EXPECT_EQ(globex.objects, 1u);
  EXPECT_EQ(globex.history_bytes, 0u);
  EXPECT_EQ(r.cluster.objects, 5u);
  EXPECT_EQ(r.cluster.bytes, 200u + 25 + 44 + 33 + 55);
  EXPECT_EQ(r.Total().objects, entries.size());
  EXPECT_EQ(r.Total().bytes, acme.bytes + globex.bytes + r.cluster.bytes);
}

TEST(CostStorageTest, ReportsStoragePerTenantInTextAndJson) {
  StorageReport storage = ComputeStorage({Entry("wal/acme/kv/a/" + Pos(1, 0), 3ull << 30), Entry("nodes/n1", 100)});
  storage.lists = 1;
  const CostReport report = ComputeCost({}, AwsS3StandardPrices(), "rates since each node's process started");
  const std::string text = FormatCostText(report, &storage);
  EXPECT_NE(text.find("STORAGE: 2 objects listed with 1 LIST request\n"), std::string::npos) << text;
  EXPECT_NE(text.find("USD/MONTH"), std::string::npos) << text;
  EXPECT_NE(text.find("acme"), std::string::npos) << text;
  EXPECT_NE(text.find("0.0690"), std::string::npos) << text;  // 3 GiB at $0.023
  EXPECT_NE(text.find("(cluster)"), std::string::npos) << text;
  const std::string json = FormatCostJson(report, &storage);
  EXPECT_NE(json.find("\"history_bytes\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"acme\""), std::string::npos) << json;
  // Not listed: a note says why, and the JSON's storage is null.
  const std::string skipped = FormatCostText(report, nullptr, "not listed (--no-storage)");
  EXPECT_NE(skipped.find("storage: not listed (--no-storage)"), std::string::npos) << skipped;
  EXPECT_NE(FormatCostJson(report, nullptr, "x").find("\"storage\": null"), std::string::npos);
}

}  // namespace
}  // namespace wk::cli
