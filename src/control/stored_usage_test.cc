// Stored byte-seconds on mem:// in virtual time (control/stored_usage.h): the record's strict
// format; a tenant's ledger sum integrated from each record's as_of to now, split at the hour;
// a slower integrator's write never replaces a newer count (the race staged: one reads, the
// other writes in between); what `tenant usage` sums.
#include "control/stored_usage.h"

#include <gtest/gtest.h>

#include <functional>

#include "control/stored_ledger.h"
#include "control/testing/fixture.h"
#include "store/store_wrapper.h"

namespace wk::control {
namespace {

using std::chrono::seconds;

// 2025-11-24T14 UTC.
constexpr UsageHour kHour = 20'416 * 24 + 14;

BrokenModels FromEnvironment() {
  auto b = BrokenModels::FromEnvironment();
  return b.ok() ? *b : BrokenModels{};
}

struct StoredUsageTest : ControlTest {
  void Ledger(const std::string& tenant, const std::string& node, std::int64_t bytes) {
    ASSERT_TRUE(bucket->ApplyPut(StoredKey(tenant, node), EncodeStored(StoredRecord{tenant, node, bytes, FromUnixMs(1)}),
                                 Precondition::None())
                    .ok());
  }
  std::uint64_t Summed(const std::string& tenant) {
    auto sum = Run(SumTenantUsage(store, tenant, std::nullopt));
    EXPECT_TRUE(sum.ok()) << sum.status().ToString();
    return sum.ok() ? sum->Total().stored_byte_seconds : 0;
  }
};

TEST_F(StoredUsageTest, TheRecordIsStrict) {
  const StoredUsageRecord r{"acme", kHour, 1234, HourStart(kHour) + seconds(10)};
  const std::string body = EncodeStoredUsage(r);
  EXPECT_EQ(body, "wasmkeep-stored_usage 1\ntenant acme\nhour 2025112414\nbyte_seconds 1234\nas_of " +
                      std::to_string(ToUnixMs(r.as_of)) + "\n");
  auto back = DecodeStoredUsage(body, "acme", kHour);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  const std::string in_hour = std::to_string(ToUnixMs(HourStart(kHour)));
  ExpectRefused([](std::string_view b) { return DecodeStoredUsage(b, "acme", kHour); },
                {{"wasmkeep-stored_usage 1\ntenant beta\nhour 2025112414\nbyte_seconds 1\nas_of " + in_hour + "\n",
                  "another tenant"},
                 {"wasmkeep-stored_usage 1\ntenant acme\nhour 2025112415\nbyte_seconds 1\nas_of " + in_hour + "\n",
                  "another hour"},
                 {"wasmkeep-stored_usage 1\ntenant acme\nhour 2025112414\nbyte_seconds -1\nas_of " + in_hour + "\n",
                  "byte_seconds"},
                 {"wasmkeep-stored_usage 1\ntenant acme\nhour 2025112414\nbyte_seconds 1\nas_of 1\n", "outside"},
                 {"wasmkeep-stored_usage 1\ntenant acme\nhour 2025112414\nbyte_seconds 1\nas_of " + in_hour + "\nx 1\n",
                  "unexpected"}});
}

// The sum of the tenant's ledger records, times the time since the last pass; a first pass
// starts the count; a sum below zero counts as nothing; an hour's end splits the interval.
TEST_F(StoredUsageTest, TheLedgersSumIsIntegratedFromPassToPassAndSplitAtTheHour) {
  Ledger("acme", "node-a", 1000);
  Ledger("acme", "node-b", 500);
  Ledger("beta", "node-a", -20);  // its actors moved in with state and shrank: counted as 0
  StoredUsageIntegrator integrator(store, seconds(0));  // every pass writes
  const WallTime t0 = HourStart(kHour) + seconds(3'000);
  ASSERT_TRUE(Run(integrator.Integrate(t0)).ok());
  EXPECT_EQ(Summed("acme"), 0u);
  ASSERT_TRUE(Run(integrator.Integrate(t0 + seconds(60))).ok());
  EXPECT_EQ(Summed("acme"), 1500u * 60);
  Ledger("acme", "node-b", 2500);  // the sum is now 3500
  ASSERT_TRUE(Run(integrator.Integrate(HourStart(kHour + 1) + seconds(20))).ok());
  auto sum = Run(SumTenantUsage(store, "acme", std::nullopt));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->by_hour.at(kHour).stored_byte_seconds, 1500u * 60 + 3500u * 540);
  EXPECT_EQ(sum->by_hour.at(kHour + 1).stored_byte_seconds, 3500u * 20);
  EXPECT_EQ(sum->stored_records, 2u);
  EXPECT_EQ(Summed("beta"), 0u);
  // A clock behind the record's as_of adds nothing (and does not move it back).
  ASSERT_TRUE(Run(integrator.Integrate(HourStart(kHour + 1) + seconds(5))).ok());
  EXPECT_EQ(Summed("acme"), 1500u * 60 + 3500u * 560);
  // `since` leaves earlier hours out.
  auto later = Run(SumTenantUsage(store, "acme", kHour + 1));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->Total().stored_byte_seconds, 3500u * 20);
}

// An integrator writes a tenant whose sum has not changed only every `refresh` (the time
// between counted at that sum when it does); a changed sum counts from the pass that first
// saw it.
TEST_F(StoredUsageTest, AnUnchangedSumIsWrittenOnlyEveryRefreshAndAChangeCountsFromThePassThatSawIt) {
  Ledger("acme", "node-a", 1000);
  StoredUsageIntegrator integrator(store, seconds(300));
  const WallTime t0 = HourStart(kHour) + seconds(60);
  ASSERT_TRUE(Run(integrator.Integrate(t0)).ok());  // the record starts at t0
  const std::uint64_t written = integrator.stats().written;
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(Run(integrator.Integrate(t0 + seconds(60 * i))).ok());
  EXPECT_EQ(integrator.stats().written, written) << "unchanged within the refresh: no write";
  EXPECT_EQ(integrator.stats().unchanged, 4u);
  EXPECT_EQ(Summed("acme"), 0u);
  Ledger("acme", "node-a", 3000);  // changed after the pass at t0 + 240 s
  ASSERT_TRUE(Run(integrator.Integrate(t0 + seconds(300))).ok());
  EXPECT_EQ(integrator.stats().written, written + 1);
  EXPECT_EQ(Summed("acme"), 1000u * 240 + 3000u * 60);
  ASSERT_TRUE(Run(integrator.Integrate(t0 + seconds(900))).ok());  // unchanged, but the refresh is due
  EXPECT_EQ(Summed("acme"), 1000u * 240 + 3000u * 660);
  Ledger("acme", "node-a", 0);  // everything deleted: counted as 0 from the pass that sees it
  ASSERT_TRUE(Run(integrator.Integrate(HourStart(kHour + 1) + seconds(30))).ok());
  auto sum = Run(SumTenantUsage(store, "acme", std::nullopt));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->by_hour.at(kHour).stored_byte_seconds, 1000u * 240 + 3000u * 660);
  EXPECT_EQ(sum->by_hour.at(kHour + 1).stored_byte_seconds, 0u);
}

// Integrator A reads the hour's record; before its write lands, integrator B's pass in the
// next hour closes that hour at its end and starts the next. A's write, conditional on the
// version it read, is refused (a conflict): the closed hour keeps every second to its end.
// Written unconditionally (broken model stored-usage-unconditional), A's older count would
// replace it, and nobody looks at a closed hour again: its tail lost for good.
class PutHook final : public StoreWrapper {
 public:
  explicit PutHook(ObjectStore& inner) : StoreWrapper(inner) {}
  std::function<Task<void>()> before_put;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions call) override {
    if (before_put && key.starts_with(kStoredUsagePrefix)) {
      auto hook = std::exchange(before_put, nullptr);
      co_await hook();
    }
    co_return co_await inner().Put(std::move(key), std::move(body), std::move(condition), call);
  }
};

TEST_F(StoredUsageTest, ASlowerIntegratorsWriteNeverReplacesANewerCount) {
  Ledger("acme", "node-a", 1000);
  const WallTime t0 = HourStart(kHour) + seconds(3'000);
  StoredUsageIntegrator first(store);
  ASSERT_TRUE(Run(first.Integrate(t0)).ok());  // the count starts at t0
  PutHook hooked(store);
  StoredUsageIntegrator a(hooked, seconds(0), FromEnvironment());
  StoredUsageIntegrator b(store, seconds(0), FromEnvironment());
  hooked.before_put = [&]() -> Task<void> { (void)co_await b.Integrate(HourStart(kHour + 1) + seconds(5)); };
  ASSERT_TRUE(Run(a.Integrate(t0 + seconds(10))).ok());
  EXPECT_EQ(b.stats().written, 2u) << "B closed the hour and started the next";
  EXPECT_EQ(a.stats().conflicts, 1u) << "A's write, on the version it read, was refused";
  ASSERT_TRUE(Run(a.Integrate(HourStart(kHour + 1) + seconds(20))).ok());
  auto sum = Run(SumTenantUsage(store, "acme", std::nullopt));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->by_hour.at(kHour).stored_byte_seconds, 1000u * 600) << "every second from t0 to the hour's end, once";
  EXPECT_EQ(sum->by_hour.at(kHour + 1).stored_byte_seconds, 1000u * 20);
}

// A corrupt stored-usage record is never overwritten (counted once, however many passes meet
// it); the next hour starts afresh beside it; the sum names it.
TEST_F(StoredUsageTest, ACorruptRecordIsLeftAloneAndNamed) {
  Ledger("acme", "node-a", 1000);
  Corrupt(StoredUsageKey("acme", kHour), "wasmkeep-stored_usage 1\ntenant acme\n");
  StoredUsageIntegrator integrator(store, seconds(0));
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(Run(integrator.Integrate(HourStart(kHour) + seconds(10 * i))).ok());
  EXPECT_EQ(integrator.stats().corrupt, 1u);
  EXPECT_EQ(integrator.stats().written, 0u);
  ASSERT_TRUE(Run(integrator.Integrate(HourStart(kHour + 1) + seconds(10))).ok());
  ASSERT_TRUE(Run(integrator.Integrate(HourStart(kHour + 1) + seconds(40))).ok());
  EXPECT_EQ(integrator.stats().corrupt, 1u);
  auto next = Run(ReadStoredUsage(store, "acme", kHour + 1));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->at(kHour + 1), 1000u * 30) << "the next hour counted from its first pass";
  auto sum = Run(SumTenantUsage(store, "acme", std::nullopt));
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("stored-usage/acme/2025112414"), std::string::npos) << sum.status().ToString();
}

}  // namespace
}  // namespace wk::control
