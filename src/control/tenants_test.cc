// Tenant records on mem:// in virtual time: the strict format, create, add and revoke
// tokens, races and lost replies, listing.
#include "control/tenants.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "control/testing/fixture.h"
#include "control/tokens.h"

namespace wk::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ControlFormatTest, TenantRecordRoundTripAndExactEncoding) {
  TenantRecord r{"acme", FromUnixMs(1000), 3,
                 {{"0123456789abcdef", std::string(64, 'a'), FromUnixMs(2000)},
                  {"fedcba9876543210", std::string(64, 'b'), FromUnixMs(3000)}}};
  const std::string body = EncodeTenantRecord(r);
  EXPECT_EQ(body, "wasmkeep-tenant 1\ntenant acme\ncreated_at 1000\nrevision 3\ntoken 0123456789abcdef " +
                      std::string(64, 'a') + " 2000\ntoken fedcba9876543210 " + std::string(64, 'b') + " 3000\n");
  EXPECT_EQ(DecodeTenantRecord(body, "acme").value(), r);
  TenantRecord empty{"acme", FromUnixMs(1), 1, {}};
  EXPECT_EQ(DecodeTenantRecord(EncodeTenantRecord(empty), "acme").value(), empty);
}

// A record as stored, written out byte by byte: decoding it and encoding the result gives
// the same bytes, so records written before the line codec read and re-encode unchanged.
TEST(ControlFormatTest, AStoredTenantRecordDecodesAndReencodesToTheSameBytes) {
  const std::string hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  const std::string stored = "wasmkeep-tenant 1\n"
                             "tenant acme\n"
                             "created_at 1764000000000\n"
                             "revision 12\n"
                             "token 3f9a0c1d5e6b7a88 " + hash + " 1764000000500\n"
                             "token 0000000000000000 " + hash + " 0\n";
  auto r = DecodeTenantRecord(stored, "acme");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (TenantRecord{"acme", FromUnixMs(1'764'000'000'000), 12,
                              {{"3f9a0c1d5e6b7a88", hash, FromUnixMs(1'764'000'000'500)},
                               {"0000000000000000", hash, FromUnixMs(0)}}}));
  EXPECT_EQ(EncodeTenantRecord(*r), stored);
}

TEST(ControlFormatTest, StrictTenantDecoder) {
  const std::string head = "wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1\n";
  const std::string hash(64, 'a');
  const std::string tok = "token 0123456789abcdef " + hash + " 2000\n";
  std::string too_many = head;
  for (int i = 0; i <= static_cast<int>(kMaxTokensPerTenant); ++i) {
    char id[17];
    std::snprintf(id, sizeof id, "%016x", i);
    too_many += "token " + std::string(id) + " " + hash + " 1\n";
  }
  ExpectRefused([](const std::string& body) { return DecodeTenantRecord(body, "acme"); },
                {
                    // The header: magic and version.
                    {"", "line 1: expected the header 'wasmkeep-tenant 1'"},
                    {"wasmkeep-tenants 1\ntenant acme\ncreated_at 1\nrevision 1\n", "line 1: expected the header"},
                    {"wasmkeep-tenant 2\ntenant acme\ncreated_at 1\nrevision 1\n", "line 1: expected the header"},
                    {"wasmkeep-tenant 01\ntenant acme\ncreated_at 1\nrevision 1\n", "line 1: expected the header"},
                    // Missing, extra, repeated and misplaced fields.
                    {"wasmkeep-tenant 1\n", "line 2: missing 'tenant'"},
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 1\n", "line 4: missing 'revision'"},
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 1\n" + tok, "line 4: expected the 'revision' line, found 'token'"},
                    {"wasmkeep-tenant 1\ntenant acme\ncolour red\ncreated_at 1\nrevision 1\n",
                     "line 3: expected the 'created_at' line, found 'colour'"},
                    {"wasmkeep-tenant 1\ncreated_at 1\ntenant acme\nrevision 1\n", "line 2: expected the 'tenant' line"},
                    {head + "extra\n", "line 5: expected the 'token' line, found 'extra'"},
                    {head + tok + "revision 2\n", "line 6: repeated 'revision'"},
                    // Numbers: leading zeros, signs, zero revision.
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 01\nrevision 1\n", "line 3: 'created_at' is not Unix milliseconds"},
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at -1\nrevision 1\n", "line 3: 'created_at' is not Unix milliseconds"},
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 03\n", "line 4: 'revision' is not a number"},
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision -1\n", "line 4: 'revision' is not a number"},
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 0\n", "line 4: 'revision' is 0"},
                    // Spaces and line endings.
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1 \n", "line 4: bad 'revision' value"},
                    {"wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1", "line 4: not newline-terminated"},
                    {"wasmkeep-tenant 1\ntenant acme\r\ncreated_at 1\nrevision 1\n", "line 2: ends in CR LF"},
                    {head + tok + "\n", "line 6: empty line"},
                    // The record names another tenant.
                    {"wasmkeep-tenant 1\ntenant other\ncreated_at 1\nrevision 1\n", "line 2: 'tenant' names another tenant"},
                    // Token lines.
                    {head + tok + tok, "line 6: token id 0123456789abcdef is repeated"},
                    {head + "token 0123456789ABCDEF " + hash + " 1\n", "line 5: the token id is not 16 lowercase hex"},
                    {head + "token 0123456789abcdef " + std::string(63, 'a') + " 1\n", "line 5: the token's hash"},
                    {head + "token 0123456789abcdef " + hash + " 01\n", "line 5: the token's created time"},
                    {head + "token 0123456789abcdef " + hash + "\n", "line 5: 'token' needs exactly 3 parts"},
                    {head + "token 0123456789abcdef " + hash + " 1 1\n", "line 5: 'token' needs exactly 3 parts"},
                    {head + "token 0123456789abcdef  " + hash + " 1\n", "line 5: 'token' needs exactly 3 parts"},
                    {too_many, "line 69: more than 64 'token' lines"},
                });
}

TEST(ControlFormatTest, MutatedTenantRecordsNeverCrashAndAcceptedOnesRoundTrip) {
  std::mt19937_64 rng(5);
  TenantRecord r{"acme", FromUnixMs(1000), 3, {{"0123456789abcdef", std::string(64, 'a'), FromUnixMs(2000)}}};
  const std::string good_tenant = EncodeTenantRecord(r);
  for (int i = 0; i < 20'000; ++i) {
    std::string t = good_tenant;
    t[rng() % t.size()] = static_cast<char>(rng() % 256);
    if (rng() % 4 == 0) t.resize(rng() % t.size());
    if (auto d = DecodeTenantRecord(t, "acme"); d.ok()) { EXPECT_EQ(EncodeTenantRecord(*d), t); }
  }
}

TEST(ControlFormatTest, TenantNames) {
  EXPECT_TRUE(ValidateTenantName("acme-1_x").ok());
  for (const std::string& bad : std::vector<std::string>{"", "Acme", "-acme", "a.b", "a/b", "..", std::string(64, 'a')}) {
    Status s = ValidateTenantName(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("tenant"), std::string::npos) << s.message();
  }
}

TEST_F(ControlTest, CreateTenantStoresOnlyTheHashAndTheTokenOpensIt) {
  NewToken t = Create("acme");
  EXPECT_EQ(t.tenant, "acme");
  EXPECT_TRUE(t.token.starts_with("wk.acme." + t.token_id + "."));
  const std::string body = bucket->objects().at("control/tenants/acme").body;
  const std::string secret = t.token.substr(t.token.rfind('.') + 1);
  EXPECT_EQ(body.find(secret), std::string::npos) << "the secret itself is never stored";
  auto record = DecodeTenantRecord(body, "acme");
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->tokens.size(), 1u);
  EXPECT_EQ(record->tokens[0].id, t.token_id);
  EXPECT_EQ(record->tokens[0].created_at, env.WallNow());

  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + t.token).value(), "acme");
  EXPECT_EQ(Auth(auth, "bearer  " + t.token + " ").value(), "acme") << "scheme is case-insensitive";
}

TEST_F(ControlTest, DuplicateTenantAndBadNamesAreRefused) {
  Create("acme");
  auto again = Run(CreateTenant(store, env, "acme"));
  EXPECT_EQ(again.code(), Code::kPreconditionFailed);
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos);
  auto bad = Run(CreateTenant(store, env, "Bad.Name"));
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("tenant 'Bad.Name'"), std::string::npos);
  EXPECT_EQ(Run(AddToken(store, env, "nobody")).code(), Code::kNotFound);
}

TEST_F(ControlTest, CorruptTenantRecordsAreRefusedNeverTreatedAsEmpty) {
  NewToken t = Create("acme");
  Corrupt("control/tenants/acme", "wasmkeep-tenant 1\ngarbage\n");
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + t.token).code(), Code::kFatal);
  EXPECT_EQ(Run(AddToken(store, env, "acme")).code(), Code::kFatal);
  EXPECT_EQ(Run(RevokeToken(store, env, "acme", t.token_id)).code(), Code::kFatal);
  EXPECT_EQ(Run(CreateTenant(store, env, "acme")).code(), Code::kPreconditionFailed) << "never overwritten";
  EXPECT_EQ(bucket->objects().at("control/tenants/acme").body, "wasmkeep-tenant 1\ngarbage\n");
  auto list = Run(ListTenants(store));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_FALSE((*list)[0].record.has_value());
  EXPECT_NE((*list)[0].error.find("corrupt"), std::string::npos);
}

TEST_F(ControlTest, RacingAddTokensBothLand) {
  Create("acme");
  // Every request takes 5 ms, so both read the same version and one write conflicts.
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(5)}; });
  std::optional<Result<NewToken>> a, b;
  for (auto* slot : {&a, &b}) {
    env.Spawn([](ObjectStore* s, Env* e, std::optional<Result<NewToken>>* o) -> Task<void> {
      std::string tenant = "acme";
      o->emplace(co_await AddToken(*s, *e, tenant));
    }(&store, &env, slot), "add");
  }
  world.RunUntilIdle();
  ASSERT_TRUE(a && a->ok() && b && b->ok());
  EXPECT_GE(bucket->counts().precondition_failed, 1u) << "the race happened";
  auto record = Run(ReadTenant(store, "acme"));
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->tokens.size(), 3u);
  store.set_fault_hook(nullptr);
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + a->value().token).value(), "acme");
  EXPECT_EQ(Auth(auth, "Bearer " + b->value().token).value(), "acme");
}

TEST_F(ControlTest, LostRepliesAreResolvedByReadingBack) {
  // The first put of each call lands but its reply is lost (kUnknownOutcome after the
  // deadline); the call reads back and sees its own write. Puts: 0 create (lost), 1 create
  // again (precondition failed: it is ours), 2 add (lost), 3 revoke (lost).
  int puts = 0;
  store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut) f.lose_reply = puts++ != 1;
    return f;
  });
  CallOptions call{seconds(1)};
  auto created = Run(CreateTenant(store, env, "acme", call));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto added = Run(AddToken(store, env, "acme", call));
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  ASSERT_TRUE(Run(RevokeToken(store, env, "acme", created->token_id, call)).ok());
  store.set_fault_hook(nullptr);
  auto record = Run(ReadTenant(store, "acme"));
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->tokens.size(), 1u) << "no token added twice, the revoked one gone";
  EXPECT_EQ(record->tokens[0].id, added->token_id);
}

TEST_F(ControlTest, ListTenants) {
  Create("beta");
  Create("alpha");
  ASSERT_TRUE(Run(AddToken(store, env, "alpha")).ok());
  auto list = Run(ListTenants(store));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].tenant, "alpha");
  EXPECT_EQ((*list)[0].record->tokens.size(), 2u);
  EXPECT_EQ((*list)[1].tenant, "beta");
}

TEST_F(ControlTest, TokenLimitPerTenant) {
  Create("acme");
  for (std::size_t i = 1; i < kMaxTokensPerTenant; ++i) ASSERT_TRUE(Run(AddToken(store, env, "acme")).ok()) << i;
  auto over = Run(AddToken(store, env, "acme"));
  EXPECT_EQ(over.code(), Code::kPreconditionFailed);
  EXPECT_NE(over.status().message().find("revoke one first"), std::string::npos);
}

}  // namespace
}  // namespace wk::control
