// Tokens and TenantAuth on mem:// in virtual time: the token format, revocation within the
// cache TTL, one tenant per token, the cache's reads.
#include "control/tokens.h"

#include <gtest/gtest.h>

#include "control/testing/fixture.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ControlFormatTest, Tokens) {
  const std::string secret(64, '1');
  auto p = ParseToken("wk.acme.0123456789abcdef." + secret);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tenant, "acme");
  EXPECT_EQ(p->token_id, "0123456789abcdef");
  for (const std::string& bad :
       std::vector<std::string>{"wk.acme.0123456789abcdef", "xx.acme.0123456789abcdef." + secret, "wk.Acme.0123456789abcdef." + secret,
        "wk.acme.0123456789abcde." + secret, "wk.acme.0123456789abcdef." + secret + ".x",
        "wk.acme.0123456789abcdef." + std::string(64, 'G'), "wk..0123456789abcdef." + secret}) {
    auto r = ParseToken(bad);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
    if (!r.ok()) { EXPECT_EQ(r.status().message().find(secret), std::string::npos) << "never echoes the secret"; }
  }
}

TEST_F(ControlTest, TokensAddRevokeAndRevocationTakesEffectWithinTheCacheTtl) {
  NewToken first = Create("acme");
  auto second = Run(AddToken(store, env, "acme"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_NE(second->token_id, first.token_id);
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + first.token).value(), "acme");
  EXPECT_EQ(Auth(auth, "Bearer " + second->token).value(), "acme");

  ASSERT_TRUE(Run(RevokeToken(store, env, "acme", first.token_id)).ok());
  // Within the TTL this node may still answer from its cache; from TTL on, never.
  world.RunFor(kDefaultAuthCacheTtl);
  EXPECT_EQ(Auth(auth, "Bearer " + first.token).code(), Code::kNotFound);
  EXPECT_EQ(Auth(auth, "Bearer " + second->token).value(), "acme");
  // A node without a cache refuses at once.
  TenantAuth fresh(env, store);
  EXPECT_EQ(Auth(fresh, "Bearer " + first.token).code(), Code::kNotFound);

  EXPECT_EQ(Run(RevokeToken(store, env, "acme", first.token_id)).code(), Code::kNotFound) << "already revoked";
  EXPECT_EQ(Run(RevokeToken(store, env, "acme", "nothex")).code(), Code::kInvalidArgument);
  EXPECT_EQ(Run(RevokeToken(store, env, "ghost", first.token_id)).code(), Code::kNotFound);
  auto record = Run(ReadTenant(store, "acme"));
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->tokens.size(), 1u);
  EXPECT_EQ(record->revision, 3u) << "created, added, revoked";
}

TEST_F(ControlTest, ATokenOpensItsOwnTenantOnly) {
  NewToken acme = Create("acme");
  Create("globex");
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + acme.token).value(), "acme");
  // The same id and secret presented as globex's: refused.
  std::string forged = acme.token;
  forged.replace(3, 4, "globex");
  EXPECT_EQ(Auth(auth, "Bearer " + forged).code(), Code::kNotFound);
  // A wrong secret with a right id: refused.
  std::string wrong = acme.token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(Auth(auth, "Bearer " + wrong).code(), Code::kNotFound);
  // Unknown tenant.
  std::string ghost = acme.token;
  ghost.replace(3, 4, "ghost");
  auto r = Auth(auth, "Bearer " + ghost);
  EXPECT_EQ(r.code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(), Auth(auth, "Bearer " + wrong).status().message()) << "one message for all";
}

TEST_F(ControlTest, MalformedAuthorizationIsInvalidArgument) {
  NewToken t = Create("acme");
  TenantAuth auth(env, store);
  const std::string id(16, 'a'), secret(64, 'b');
  for (const std::string& bad : std::vector<std::string>{
           "", "Bearer", "Bearer ", "Basic " + t.token, t.token, "Bearer wk.acme.x.y", "Bearer " + t.token + "x",
           "Bearer " + t.token + " x",
           // Well-shaped but malformed: a bad tenant name, id or secret never reaches the bucket.
           "Bearer wk.Acme." + id + "." + secret, "Bearer wk.-acme." + id + "." + secret,
           "Bearer wk." + std::string(64, 'a') + "." + id + "." + secret, "Bearer wk.ac/me." + id + "." + secret,
           "Bearer wk.acme." + id + "." + std::string(64, 'B'), "Bearer wk.acme." + id + "." + secret + "b",
           "Bearer wk.acme." + std::string(16, 'G') + "." + secret, "Bearer wk.acme.." + secret,
           "Bearer wk.acme." + id + "." + secret + ".", "Bearer wk.." + id + "." + secret}) {
    EXPECT_EQ(Auth(auth, bad).code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_EQ(auth.reads(), 0u) << "malformed tokens cost no GET";
}

// A well-formed token of a tenant that does not exist, the name made up.
std::string MadeUp(int i) {
  return "Bearer wk.nobody" + std::to_string(i) + "." + std::string(16, 'a') + "." + std::string(64, 'b');
}

TEST_F(ControlTest, MadeUpTenantNamesCostABoundedNumberOfReads) {
  // The finding: every made-up tenant name cost one GET of the bucket, unauthenticated,
  // however many a client sent.
  TenantAuth auth(env, store);
  for (int i = 0; i < 1000; ++i) {
    const Code code = Auth(auth, MadeUp(i)).code();
    EXPECT_TRUE(code == Code::kNotFound || code == Code::kRetryable) << i;
  }
  EXPECT_EQ(auth.reads(), static_cast<std::uint64_t>(kDefaultAuthUnknownReadsBurst));
  EXPECT_EQ(auth.unknown_refused(), 1000u - static_cast<std::uint64_t>(kDefaultAuthUnknownReadsBurst));
  // A name already read is answered from the cache within the TTL, budget or not.
  EXPECT_EQ(Auth(auth, MadeUp(0)).code(), Code::kNotFound);
  EXPECT_EQ(auth.reads(), static_cast<std::uint64_t>(kDefaultAuthUnknownReadsBurst));
  // The budget refills over time: one second is kDefaultAuthUnknownReadsPerSecond reads.
  world.RunFor(seconds(1));
  const std::uint64_t before = auth.reads();
  for (int i = 1000; i < 1100; ++i) (void)Auth(auth, MadeUp(i));
  EXPECT_EQ(auth.reads() - before, static_cast<std::uint64_t>(kDefaultAuthUnknownReadsPerSecond));
}

TEST_F(ControlTest, ATenantThatExistsIsReadWhateverTheFloodOfMadeUpNames) {
  NewToken acme = Create("acme");
  TenantAuth::Options options;
  options.max_unknown_entries = 50;
  options.unknown_reads_burst = 100;
  TenantAuth auth(env, store, options);
  const std::string header = "Bearer " + acme.token;
  ASSERT_EQ(Auth(auth, header).value(), "acme");
  for (int i = 0; i < 500; ++i) (void)Auth(auth, MadeUp(i));
  EXPECT_EQ(auth.reads(), 101u);
  // Still cached: made-up names neither pushed it out nor spent a read of it.
  EXPECT_EQ(Auth(auth, header).value(), "acme");
  EXPECT_EQ(auth.reads(), 101u);
  // Past its TTL it is read again, though the unknown names' budget is spent.
  world.RunFor(kDefaultAuthCacheTtl);
  for (int i = 500; i < 1000; ++i) (void)Auth(auth, MadeUp(i));
  ASSERT_GT(auth.unknown_refused(), 0u);
  const std::uint64_t before = auth.reads();
  EXPECT_EQ(Auth(auth, header).value(), "acme");
  EXPECT_EQ(auth.reads(), before + 1);
  // A tenant created while the budget is spent: refused as retryable until it refills.
  NewToken late = Create("latecomer");
  for (int i = 1000; i < 1200; ++i) (void)Auth(auth, MadeUp(i));
  EXPECT_EQ(Auth(auth, "Bearer " + late.token).code(), Code::kRetryable);
  world.RunFor(seconds(1));
  EXPECT_EQ(Auth(auth, "Bearer " + late.token).value(), "latecomer");
  // Once found it is known: its reads no longer come from the budget.
  for (int i = 1200; i < 1400; ++i) (void)Auth(auth, MadeUp(i));
  world.RunFor(kDefaultAuthCacheTtl);
  for (int i = 1400; i < 1600; ++i) (void)Auth(auth, MadeUp(i));
  EXPECT_EQ(Auth(auth, "Bearer " + late.token).value(), "latecomer");
}

TEST_F(ControlTest, TheCacheReadsATenantOncePerTtlAndConcurrentRequestsShareOneRead) {
  NewToken t = Create("acme");
  TenantAuth auth(env, store);
  const std::string header = "Bearer " + t.token;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Auth(auth, header).value(), "acme");
  EXPECT_EQ(auth.reads(), 1u);
  world.RunFor(kDefaultAuthCacheTtl);
  // 20 requests at once on a stale entry, each GET taking 5 ms: one GET.
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(5)}; });
  std::vector<std::optional<Result<std::string>>> out(20);
  for (auto& slot : out) {
    env.Spawn([](TenantAuth* a, std::string h, std::optional<Result<std::string>>* o) -> Task<void> {
      o->emplace(co_await a->Authenticate(h));
    }(&auth, header, &slot), "auth");
  }
  world.RunUntilIdle();
  for (auto& slot : out) {
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->value(), "acme");
  }
  EXPECT_EQ(auth.reads(), 2u);
  // Unknown tenants are cached too: a flood of bad tokens for one name costs one GET a TTL.
  std::string ghost = t.token;
  ghost.replace(3, 4, "ghost");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Auth(auth, "Bearer " + ghost).code(), Code::kNotFound);
  EXPECT_EQ(auth.reads(), 3u);
  // A bucket failure is not answered from the stale entry.
  world.RunFor(kDefaultAuthCacheTtl);
  store.set_fault_hook([](const OpInfo&) { return OpFault{Duration(0), Duration(0), Retryable("503 SlowDown")}; });
  EXPECT_EQ(Auth(auth, header).code(), Code::kRetryable);
  store.set_fault_hook(nullptr);
  EXPECT_EQ(Auth(auth, header).value(), "acme");
}

}  // namespace
}  // namespace wk::control
