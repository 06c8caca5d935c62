// Tenant quotas on mem:// in virtual time: the record's strict format, the `--quota`
// arguments (every refusal names the quota or the value), setting them (racing writers both
// land), and a node's cache (a change seen at the next refresh; a corrupt record keeps the
// last good quotas, never breaks the node).
#include "control/quotas.h"

#include <gtest/gtest.h>

#include "control/quota_cache.h"
#include "control/testing/fixture.h"

namespace wk::control {
namespace {

QuotaSetting Setting(const std::string& text) {
  auto s = ParseQuotaSetting(text);
  EXPECT_TRUE(s.ok()) << text;
  return s.ok() ? s.value() : QuotaSetting{};
}

TenantQuotas Sample() {
  TenantQuotas q;
  q.tenant = "acme";
  q.revision = 2;
  q.updated_at = FromUnixMs(1'764'000'000'000);
  q.limit[static_cast<std::size_t>(Quota::kRequestsPerSecond)] = 50;
  q.limit[static_cast<std::size_t>(Quota::kModuleBytes)] = 10ull << 20;
  return q;
}

TEST(QuotaFormatTest, ARecordAsStoredDecodesAndReencodesToTheSameBytes) {
  const std::string stored = "wasmkeep-quotas 1\n"
                             "tenant acme\n"
                             "revision 2\n"
                             "updated_at 1764000000000\n"
                             "quota requests_per_second 50\n"
                             "quota module_bytes 10485760\n";
  auto q = DecodeQuotas(stored, "acme");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(*q, Sample());
  EXPECT_EQ(EncodeQuotas(*q), stored);
}

TEST(QuotaFormatTest, AnythingElseIsRefusedNamingTheLine) {
  const std::string head = "wasmkeep-quotas 1\ntenant acme\nrevision 2\nupdated_at 1764000000000\n";
  ExpectRefused([](const std::string& body) { return DecodeQuotas(body, "acme"); },
                {
                    {"wasmkeep-quotas 1\ntenant other\nrevision 2\nupdated_at 1\n", "names another tenant"},
                    {"wasmkeep-quotas 1\ntenant acme\nrevision 0\nupdated_at 1\n", "'revision' is 0"},
                    {head + "quota bananas 3\n", "unknown quota 'bananas'"},
                    {head + "quota requests_per_second 0\n", "is not an integer"},
                    {head + "quota requests_per_second 007\n", "is not an integer"},
                    {head + "quota requests_per_second -1\n", "is not an integer"},
                    {head + "quota requests_per_second 99999999999999999999\n", "is not an integer"},
                    {head + "quota module_bytes 1\nquota requests_per_second 1\n", "out of order"},
                    {head + "quota requests_per_second 1\nquota requests_per_second 2\n", "repeated"},
                    {head + "quota requests_per_second\n", "line 5"},
                    {"wasmkeep-quotas 2\n", "wasmkeep-quotas 1"},
                });
}

TEST(QuotaSettingTest, NamesAndValuesAreCheckedAndRefusalsSayWhatIsAccepted) {
  auto rps = ParseQuotaSetting("requests_per_second=50");
  ASSERT_TRUE(rps.ok());
  EXPECT_EQ(rps->quota, Quota::kRequestsPerSecond);
  EXPECT_EQ(rps->value, 50u);
  auto bytes = ParseQuotaSetting("module_bytes=64MiB");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->value, 64ull << 20);
  auto off = ParseQuotaSetting("cpu_ms_per_second=unlimited");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->value.has_value());
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"requests_per_second", "is not NAME=VALUE"},
      {"rps=5", "unknown quota 'rps'"},
      {"requests_per_second=0", "'0' is not a positive integer"},
      {"requests_per_second=-3", "'-3' is not a positive integer"},
      {"requests_per_second=5MiB", "'5MiB' is not a positive integer, or 'unlimited'"},
      {"requests_per_second=", "'' is not"},
      {"module_bytes=1.5GiB", "optionally with KiB"},
      {"module_bytes=2000000TiB", "over the largest quota"},
  };
  for (const auto& [text, message] : refused) {
    auto s = ParseQuotaSetting(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find(message), std::string::npos) << s.status().message();
  }
}

struct QuotasTest : ControlTest {};

Task<void> SetOne(QuotasTest* t, std::string setting, int* landed) {
  std::vector<QuotaSetting> settings{Setting(setting)};
  auto set = co_await SetQuotas(t->store, t->env, "acme", std::move(settings));
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  if (set.ok()) ++*landed;
}

TEST_F(QuotasTest, SetQuotasChangesOnlyWhatItNamesAndRacingWritersBothLand) {
  Create("acme");
  EXPECT_EQ(Run(SetQuotas(store, env, "nobody", {Setting("resident_actors=5")})).code(), Code::kNotFound);
  auto none = Run(ReadQuotas(store, "acme"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->Unlimited());
  EXPECT_EQ(none->revision, 0u);
  // Two operators at once, each setting one quota: both land.
  int landed = 0;
  env.Spawn(SetOne(this, "requests_per_second=50", &landed), "set quotas");
  env.Spawn(SetOne(this, "resident_actors=1000", &landed), "set quotas");
  world.RunFor(std::chrono::seconds(30));
  ASSERT_EQ(landed, 2);
  auto both = Run(ReadQuotas(store, "acme"));
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->Get(Quota::kRequestsPerSecond), 50u);
  EXPECT_EQ(both->Get(Quota::kResidentActors), 1000u);
  EXPECT_EQ(both->revision, 2u);
  // Unlimited removes one; setting the same value again writes nothing.
  auto off = Run(SetQuotas(store, env, "acme", {Setting("requests_per_second=unlimited")}));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->Get(Quota::kRequestsPerSecond).has_value());
  EXPECT_EQ(off->revision, 3u);
  auto same = Run(SetQuotas(store, env, "acme", {Setting("resident_actors=1000")}));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->revision, 3u);
}

TEST_F(QuotasTest, ANodesCacheSeesAChangeAtItsNextRefreshAndKeepsTheLastGoodOnCorruption) {
  Create("acme");
  Create("beta");
  QuotaCache cache(env, store);
  ASSERT_TRUE(Run(cache.Refresh()).ok());
  EXPECT_EQ(cache.For("acme"), nullptr);
  ASSERT_TRUE(Run(SetQuotas(store, env, "acme", {Setting("requests_per_second=7")})).ok());
  EXPECT_EQ(cache.For("acme"), nullptr);  // not before the next refresh
  ASSERT_TRUE(Run(cache.Refresh()).ok());
  ASSERT_NE(cache.For("acme"), nullptr);
  EXPECT_EQ(cache.For("acme")->Get(Quota::kRequestsPerSecond), 7u);
  EXPECT_EQ(cache.For("beta"), nullptr);
  // A record mangled by hand: the node keeps acme's last good quotas, and counts it.
  Corrupt(QuotasKey("acme"), "wasmkeep-quotas 1\ntenant acme\nrevision 9\nupdated_at 1\nquota bananas 1\n");
  ASSERT_TRUE(Run(cache.Refresh()).ok());
  ASSERT_NE(cache.For("acme"), nullptr);
  EXPECT_EQ(cache.For("acme")->Get(Quota::kRequestsPerSecond), 7u);
  EXPECT_EQ(cache.stats().corrupt_records, 1u);
  // Set right again, then removed (the record deleted): unlimited.
  ASSERT_TRUE(bucket->ApplyPut(QuotasKey("acme"), EncodeQuotas(Sample()), Precondition::None()).ok());
  ASSERT_TRUE(Run(cache.Refresh()).ok());
  EXPECT_EQ(cache.For("acme")->Get(Quota::kRequestsPerSecond), 50u);
  ASSERT_TRUE(Run(store.Delete(QuotasKey("acme"), Precondition::None(), CallOptions{})).ok());
  ASSERT_TRUE(Run(cache.Refresh()).ok());
  EXPECT_EQ(cache.For("acme"), nullptr);
  EXPECT_EQ(cache.stats().tenants_limited, 0u);
}

}  // namespace
}  // namespace wk::control
