// Usage records on mem:// in virtual time: the strict format, hours, the cluster's sum, and
// UsageBook's flushes across a restart and a kill -9 (what is lost is bounded by one flush).
#include "control/usage.h"

#include <gtest/gtest.h>

#include "control/testing/fixture.h"

namespace wk::control {
namespace {

UsageCounters Sample(std::uint64_t k) {
  UsageCounters c;
  for (std::size_t i = 0; i < kUsageOutcomes; ++i) c.requests[i] = k * (10 + i);
  c.cpu_ms = k * 100;
  c.stored_byte_seconds = k * 1000;
  c.ingress_bytes = k * 7;
  c.egress_bytes = k * 9;
  c.resident_actor_seconds = k * 3;
  for (std::size_t i = 0; i < kBucketPurposes; ++i) c.bucket_requests[i] = k * (1 + i);
  return c;
}

// What a sum gives for Sample(k) records: their stored byte-seconds left out (a node's record
// holds none; an earlier version's samples are ignored: stored_usage.h integrates them).
UsageCounters Summed(std::uint64_t k) {
  UsageCounters c = Sample(k);
  c.stored_byte_seconds = 0;
  return c;
}

// 2025-11-24T14 UTC.
constexpr UsageHour kHour = 20'416 * 24 + 14;

TEST(UsageFormatTest, HoursAndKeys) {
  EXPECT_EQ(HourKey(kHour), "2025112414");
  EXPECT_EQ(ParseHourKey("2025112414"), kHour);
  EXPECT_EQ(HourKey(0), "1970010100");
  EXPECT_EQ(HourOf(FromUnixMs(3'600'000 * kHour + 3'599'999)), kHour);
  EXPECT_EQ(HourOf(HourStart(kHour)), kHour);
  for (std::string_view bad : {"", "202511241", "20251124144", "2025112424", "2025022914", "1969123123", "2025-11-24",
                               "2025113114", "20251124a4"}) {
    EXPECT_FALSE(ParseHourKey(bad).has_value()) << bad;
  }
  EXPECT_EQ(ParseHourKey("2024022923"), ParseHourKey("2024030100").value() - 1);  // a leap day
  EXPECT_EQ(UsageKey("acme", "n1", kHour), "usage/acme/n1/2025112414");
  EXPECT_EQ(UsageOutcomeOfStatus(200), UsageOutcome::kOk);
  EXPECT_EQ(UsageOutcomeOfStatus(404), UsageOutcome::kClientError);
  EXPECT_EQ(UsageOutcomeOfStatus(429), UsageOutcome::kThrottled);
  EXPECT_EQ(UsageOutcomeOfStatus(500), UsageOutcome::kActorFailed);
  EXPECT_EQ(UsageOutcomeOfStatus(503), UsageOutcome::kUnavailable);
}

TEST(UsageFormatTest, RoundTripAndExactEncoding) {
  UsageRecord r{"acme", "n1", kHour, Sample(1)};
  const std::string body = EncodeUsageRecord(r);
  EXPECT_EQ(body,
            "wasmkeep-usage 1\ntenant acme\nnode n1\nhour 2025112414\nrequests_ok 10\nrequests_client_error 11\n"
            "requests_throttled 12\nrequests_actor_failed 13\nrequests_unavailable 14\ncpu_ms 100\n"
            "stored_byte_seconds 1000\ningress_bytes 7\negress_bytes 9\nresident_actor_seconds 3\nbucket_lease 1\n"
            "bucket_listing 2\nbucket_fence 3\nbucket_owner 4\nbucket_segment 5\nbucket_snapshot 6\nbucket_restore 7\n"
            "bucket_gc 8\nbucket_alarm 9\nbucket_control 10\nbucket_class 11\nbucket_admin 12\nbucket_other 13\n");
  auto decoded = DecodeUsageRecord(body, "acme", "n1", kHour);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, r);
  EXPECT_EQ(EncodeUsageRecord(*decoded), body);
  UsageRecord zero{"acme", "n1", kHour, {}};
  EXPECT_EQ(DecodeUsageRecord(EncodeUsageRecord(zero), "acme", "n1", kHour).value(), zero);
}

TEST(UsageFormatTest, StrictDecoder) {
  const std::string good = EncodeUsageRecord(UsageRecord{"acme", "n1", kHour, Sample(2)});
  auto replace = [&](std::string_view from, std::string_view to) {
    std::string b = good;
    b.replace(b.find(from), from.size(), to);
    return b;
  };
  ExpectRefused([](const std::string& body) { return DecodeUsageRecord(body, "acme", "n1", kHour); },
                {
                    {"", "line 1: expected the header 'wasmkeep-usage 1'"},
                    {replace("wasmkeep-usage 1", "wasmkeep-usage 2"), "line 1: expected the header"},
                    {replace("tenant acme", "tenant other"), "line 2: 'tenant' names another tenant"},
                    {replace("node n1", "node n2"), "line 3: 'node' names another node"},
                    {replace("hour 2025112414", "hour 2025112415"), "line 4: 'hour' names another hour"},
                    {replace("requests_ok 20", "requests_ok 020"), "line 5: 'requests_ok' is not a number"},
                    {replace("requests_ok 20", "requests_ok -1"), "line 5: 'requests_ok' is not a number"},
                    {replace("cpu_ms 200\n", ""), "expected the 'cpu_ms' line, found 'stored_byte_seconds'"},
                    {replace("cpu_ms 200", "cpu_ms 200\ncpu_ms 200"), "repeated 'cpu_ms'"},
                    {good + "colour red\n", "colour"},
                    {good.substr(0, good.size() - 1), "line"},
                    {replace("bucket_other 26\n", ""), "missing 'bucket_other'"},
                });
}

struct UsageTest : ControlTest {
  TenantUsage Sum(const std::string& tenant, std::optional<UsageHour> since = std::nullopt) {
    auto r = Run(SumTenantUsage(store, tenant, since));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : TenantUsage{};
  }
};

TEST_F(UsageTest, SumsTheNodesRecordsByHourAndFromAnHour) {
  for (auto [node, hour, k] : {std::tuple{"n1", kHour, 1}, {"n2", kHour, 2}, {"n1", kHour + 1, 4}, {"n3", kHour - 5, 8}}) {
    ASSERT_TRUE(Run(WriteUsageRecord(store, UsageRecord{"acme", node, hour, Sample(k)})).ok());
  }
  ASSERT_TRUE(Run(WriteUsageRecord(store, UsageRecord{"acme2", "n1", kHour, Sample(100)})).ok());
  TenantUsage all = Sum("acme");
  EXPECT_EQ(all.records, 4u);
  EXPECT_EQ(all.nodes, (std::set<std::string>{"n1", "n2", "n3"}));
  ASSERT_EQ(all.by_hour.size(), 3u);
  EXPECT_EQ(all.by_hour[kHour], Summed(3));
  EXPECT_EQ(all.by_hour[kHour + 1], Summed(4));
  EXPECT_EQ(all.Total(), Summed(15));
  TenantUsage recent = Sum("acme", kHour);
  EXPECT_EQ(recent.records, 3u);
  EXPECT_EQ(recent.Total(), Summed(7));
  EXPECT_EQ(Sum("nobody").records, 0u);
}

TEST_F(UsageTest, ACorruptRecordOrKeyFailsTheSumNamingIt) {
  ASSERT_TRUE(Run(WriteUsageRecord(store, UsageRecord{"acme", "n1", kHour, Sample(1)})).ok());
  Corrupt(UsageKey("acme", "n2", kHour), "wasmkeep-usage 1\ntenant acme\n");
  auto r = Run(SumTenantUsage(store, "acme", std::nullopt));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kFatal);
  EXPECT_NE(r.status().message().find("usage/acme/n2/2025112414: line 3: missing 'node'"), std::string::npos)
      << r.status().message();
  Corrupt(UsageKey("acme", "n2", kHour), EncodeUsageRecord(UsageRecord{"acme", "n2", kHour, Sample(1)}));
  Corrupt("usage/acme/n3/yesterday", "x");
  r = Run(SumTenantUsage(store, "acme", std::nullopt));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key usage/acme/n3/yesterday is not"), std::string::npos) << r.status().message();
}

// The proof of "at most one flush lost": a node counts known usage, flushes, counts more,
// and is killed -9 (its book discarded unflushed). The restarted process continues the
// hour's record: the sum is everything but what came after the last flush.
TEST_F(UsageTest, ARestartContinuesTheHourAndAKillLosesOnlyTheUnflushedPart) {
  UsageCounters flushed;
  {
    UsageBook book("n1");
    book.At("acme", kHour) += Sample(1);
    book.At("beta", kHour) += Sample(2);
    ASSERT_TRUE(Run(book.Flush(store, kHour)).ok());
    book.At("acme", kHour) += Sample(4);
    ASSERT_TRUE(Run(book.Flush(store, kHour)).ok());
    EXPECT_EQ(book.flushes(), 2u);
    flushed = Summed(5);
    book.At("acme", kHour) += Sample(16);  // counted after the last flush: lost with the kill
  }
  EXPECT_EQ(Sum("acme").Total(), flushed);
  {
    UsageBook book("n1");  // the restarted process
    book.At("acme", kHour) += Sample(32);
    book.At("acme", kHour + 1) += Sample(64);
    ASSERT_TRUE(Run(book.Flush(store, kHour + 1)).ok());
    EXPECT_EQ(book.Totals("acme", kHour), std::nullopt);  // a past hour, written: forgotten
    EXPECT_EQ(book.Totals("acme", kHour + 1), Sample(64));
    book.At("acme", kHour + 1) += Sample(128);
    ASSERT_TRUE(Run(book.Flush(store, kHour + 1)).ok());  // the clean stop's flush
  }
  TenantUsage acme = Sum("acme");
  EXPECT_EQ(acme.by_hour[kHour], Summed(37));
  EXPECT_EQ(acme.by_hour[kHour + 1], Summed(192));
  EXPECT_EQ(Sum("beta").Total(), Summed(2));
}

TEST_F(UsageTest, AFailedFlushIsWrittenByTheNext) {
  UsageBook book("n1");
  book.At("acme", kHour) += Sample(1);
  store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut) f.fail_before_apply = Retryable("injected");
    return f;
  });
  EXPECT_FALSE(Run(book.Flush(store, kHour + 1)).ok());
  store.set_fault_hook(nullptr);
  EXPECT_EQ(book.flush_failures(), 1u);
  EXPECT_EQ(book.entries(), 1u);  // kept though its hour is past
  ASSERT_TRUE(Run(book.Flush(store, kHour + 1)).ok());
  EXPECT_EQ(book.entries(), 0u);
  EXPECT_EQ(Sum("acme").Total(), Summed(1));
}

}  // namespace
}  // namespace wk::control
