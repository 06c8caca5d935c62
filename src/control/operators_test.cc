// Operator tokens on mem:// in virtual time: the record's format, add and revoke,
// revocation within the cache TTL, one GET per TTL however many bad tokens arrive.
#include "control/operators.h"

#include <gtest/gtest.h>

#include "control/testing/fixture.h"

namespace wk::control {
namespace {

TEST(ControlFormatTest, OperatorsRecordRoundTripsAndRefusesWhatItDoesNotKnow) {
  OperatorsRecord r;
  r.revision = 3;
  r.tokens.push_back(OperatorToken{TokenEntry{"0123456789abcdef", std::string(64, 'a'), FromUnixMs(1'764'000'000'000)}, "alice"});
  r.tokens.push_back(OperatorToken{TokenEntry{"fedcba9876543210", std::string(64, 'b'), FromUnixMs(1'764'000'000'001)}, "ci.bot-1"});
  const std::string body = EncodeOperatorsRecord(r);
  EXPECT_EQ(body,
            "wasmkeep-operators 1\nrevision 3\n"
            "token 0123456789abcdef " + std::string(64, 'a') + " 1764000000000 alice\n"
            "token fedcba9876543210 " + std::string(64, 'b') + " 1764000000001 ci.bot-1\n");
  auto back = DecodeOperatorsRecord(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  const std::string hash(64, 'a');
  ExpectRefused([](const std::string& b) { return DecodeOperatorsRecord(b); },
                {{"wasmkeep-operators 2\nrevision 1\n", "wasmkeep-operators"},
                 {"wasmkeep-operators 1\nrevision 0\n", "'revision' is 0"},
                 {"wasmkeep-operators 1\nrevision 1\ntoken 0123456789abcdef " + hash + " 1 \n", "line 3"},
                 {"wasmkeep-operators 1\nrevision 1\ntoken 0123456789abcdef " + hash + " 1\n", "line 3"},
                 {"wasmkeep-operators 1\nrevision 1\ntoken 0123456789ABCDEF " + hash + " 1 a\n", "token id"},
                 {"wasmkeep-operators 1\nrevision 1\ntoken 0123456789abcdef " + hash + " 1 a/b\n", "label"},
                 {"wasmkeep-operators 1\nrevision 1\ntoken 0123456789abcdef " + hash + " 1 a\ntoken 0123456789abcdef " +
                      hash + " 2 b\n",
                  "repeated"}});
  EXPECT_FALSE(ValidateOperatorLabel("").ok());
  EXPECT_FALSE(ValidateOperatorLabel(std::string(64, 'a')).ok());
  EXPECT_FALSE(ValidateOperatorLabel("has space").ok());
  EXPECT_TRUE(ValidateOperatorLabel("Alice_2.ops-x").ok());
}

TEST(ControlFormatTest, BearerTokenIsSplitOffItsScheme) {
  EXPECT_EQ(BearerToken("Bearer abc").value(), "abc");
  EXPECT_EQ(BearerToken("bEaReR   abc \t").value(), "abc");
  EXPECT_EQ(BearerToken("").code(), Code::kInvalidArgument);
  EXPECT_EQ(BearerToken("Basic abc").code(), Code::kInvalidArgument);
  EXPECT_EQ(BearerToken("Bearer  ").code(), Code::kInvalidArgument);
  EXPECT_TRUE(LooksLikeOperatorToken("wko.x"));
  EXPECT_FALSE(LooksLikeOperatorToken("wk.acme.x.y"));
}

TEST_F(ControlTest, OperatorTokensAddRevokeAndRevocationTakesEffectWithinTheCacheTtl) {
  OperatorAuth auth(env, store);
  // No record yet: nothing opens, and that costs one GET per TTL.
  const std::string made_up = "wko.0123456789abcdef." + std::string(64, '7');
  EXPECT_EQ(Run(auth.Authenticate(made_up)).code(), Code::kNotFound);
  auto record = Run(ReadOperators(store));
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->revision, 0u);
  EXPECT_TRUE(record->tokens.empty());

  auto alice = Run(AddOperatorToken(store, env, "alice"));
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  auto ci = Run(AddOperatorToken(store, env, "ci"));
  ASSERT_TRUE(ci.ok()) << ci.status().ToString();
  EXPECT_TRUE(alice->token.starts_with("wko." + alice->token_id + "."));
  world.RunFor(kDefaultAuthCacheTtl);
  EXPECT_TRUE(Run(auth.Authenticate(alice->token)).ok());
  EXPECT_TRUE(Run(auth.Authenticate(ci->token)).ok());
  // A right id with a wrong secret, and a tenant token: refused.
  std::string wrong = alice->token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(Run(auth.Authenticate(wrong)).code(), Code::kNotFound);
  EXPECT_EQ(Run(auth.Authenticate("wk.acme.0123456789abcdef." + std::string(64, '1'))).code(), Code::kInvalidArgument);
  EXPECT_EQ(Run(auth.Authenticate("wko.nothex." + std::string(64, '1'))).code(), Code::kInvalidArgument);

  ASSERT_TRUE(Run(RevokeOperatorToken(store, env, alice->token_id)).ok());
  world.RunFor(kDefaultAuthCacheTtl);
  EXPECT_EQ(Run(auth.Authenticate(alice->token)).code(), Code::kNotFound);
  EXPECT_TRUE(Run(auth.Authenticate(ci->token)).ok());
  EXPECT_EQ(Run(RevokeOperatorToken(store, env, alice->token_id)).code(), Code::kNotFound);
  EXPECT_EQ(Run(RevokeOperatorToken(store, env, "nothex")).code(), Code::kInvalidArgument);
  EXPECT_EQ(Run(AddOperatorToken(store, env, "bad label")).code(), Code::kInvalidArgument);
  record = Run(ReadOperators(store));
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->tokens.size(), 1u);
  EXPECT_EQ(record->tokens[0].label, "ci");
  EXPECT_EQ(record->revision, 3u) << "created, added, revoked";
}

TEST_F(ControlTest, ManyBadOperatorTokensCostOneReadPerTtl) {
  ASSERT_TRUE(Run(AddOperatorToken(store, env, "alice")).ok());
  OperatorAuth auth(env, store);
  for (int i = 0; i < 100; ++i) {
    std::string id = env.RandomHex(8);
    EXPECT_EQ(Run(auth.Authenticate("wko." + id + "." + std::string(64, 'a'))).code(), Code::kNotFound);
  }
  EXPECT_EQ(auth.reads(), 1u);
  world.RunFor(kDefaultAuthCacheTtl);
  EXPECT_EQ(Run(auth.Authenticate("wko.0123456789abcdef." + std::string(64, 'a'))).code(), Code::kNotFound);
  EXPECT_EQ(auth.reads(), 2u);
}

TEST_F(ControlTest, ACorruptOperatorsRecordIsFatalNeverEmpty) {
  Corrupt(std::string(kOperatorsKey), "wasmkeep-operators 1\nrevision x\n");
  OperatorAuth auth(env, store);
  EXPECT_EQ(Run(auth.Authenticate("wko.0123456789abcdef." + std::string(64, 'a'))).code(), Code::kFatal);
  EXPECT_EQ(Run(AddOperatorToken(store, env, "alice")).code(), Code::kFatal) << "never overwritten as if empty";
}

}  // namespace
}  // namespace wk::control
