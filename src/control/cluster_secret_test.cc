// The cluster secret on mem:// in virtual time: its strict format, created once and shared,
// racing creators, never replaced.
#include "control/cluster_secret.h"

#include <gtest/gtest.h>

#include <random>

#include "control/testing/fixture.h"

namespace wk::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A secret as stored, written out byte by byte: it decodes to its bytes, and encoding them
// with the same created_at gives the same bytes back.
TEST(ControlFormatTest, AStoredSecretDecodesAndReencodesToTheSameBytes) {
  const std::string stored = "wasmkeep-secret 1\n"
                             "secret 00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9\n"
                             "created_at 1764000000000\n";
  auto back = DecodeClusterSecret(stored);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ClusterSecret s;
  for (std::size_t i = 0; i < s.bytes.size(); ++i) s.bytes[i] = static_cast<std::uint8_t>(i * 7);
  EXPECT_EQ(back->bytes, s.bytes);
  EXPECT_EQ(EncodeClusterSecret(*back, FromUnixMs(1'764'000'000'000)), stored);
}

TEST(ControlFormatTest, SecretFormat) {
  ClusterSecret s;
  for (std::size_t i = 0; i < s.bytes.size(); ++i) s.bytes[i] = static_cast<std::uint8_t>(i * 7);
  auto back = DecodeClusterSecret(EncodeClusterSecret(s, FromUnixMs(1)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->bytes, s.bytes);
  const std::string hex(64, 'a');
  ExpectRefused(DecodeClusterSecret,
                {
                    {"", "line 1: expected the header 'wasmkeep-secret 1'"},
                    {"wasmkeep-secrets 1\nsecret " + hex + "\ncreated_at 1\n", "line 1: expected the header"},
                    {"wasmkeep-secret 2\nsecret " + hex + "\ncreated_at 1\n", "line 1: expected the header"},
                    {"wasmkeep-secret 1\nsecret abc\ncreated_at 1\n", "line 2: 'secret' is not 64 lowercase hex"},
                    {"wasmkeep-secret 1\nsecret " + std::string(64, 'A') + "\ncreated_at 1\n", "line 2: 'secret' is not 64"},
                    {"wasmkeep-secret 1\nsecret " + hex + "\n", "line 3: missing 'created_at'"},
                    {"wasmkeep-secret 1\ncreated_at 1\n", "line 2: expected the 'secret' line, found 'created_at'"},
                    {"wasmkeep-secret 1\nsecret " + hex + "\ncreated_at 1\nextra 1\n", "line 4: unexpected 'extra 1'"},
                    {"wasmkeep-secret 1\nsecret " + hex + "\ncreated_at 01\n", "line 3: 'created_at' is not Unix milliseconds"},
                    {"wasmkeep-secret 1\nsecret " + hex + " \ncreated_at 1\n", "line 2: bad 'secret' value"},
                    {"wasmkeep-secret 1\nsecret " + hex + "\ncreated_at 1", "line 3: not newline-terminated"},
                });
}

TEST(ControlFormatTest, MutatedSecretsNeverCrashAndAcceptedOnesRoundTrip) {
  std::mt19937_64 rng(5);
  ClusterSecret secret;
  const std::string good_secret = EncodeClusterSecret(secret, FromUnixMs(9));
  for (int i = 0; i < 20'000; ++i) {
    std::string s = good_secret;
    s[rng() % s.size()] = static_cast<char>(rng() % 256);
    if (rng() % 4 == 0) s.resize(rng() % s.size());
    if (auto d = DecodeClusterSecret(s); d.ok()) {
      // Header and secret lines (90 bytes) round-trip; created_at is not part of the value.
      EXPECT_EQ(EncodeClusterSecret(*d, FromUnixMs(9)).substr(0, 90), s.substr(0, 90));
    }
  }
}

TEST_F(ControlTest, ClusterSecretIsCreatedOnceAndShared) {
  auto first = Run(EnsureClusterSecret(store, env));
  ASSERT_TRUE(first.ok());
  // A second node on the same bucket reads the same secret.
  SimEnv env2(world, FromUnixMs(1'764'000'000'000));
  MemStore store2(env2, bucket);
  auto second = RunTask(world, env2, EnsureClusterSecret(store2, env2));
  ASSERT_TRUE(second && second->ok());
  EXPECT_EQ((*second)->bytes, first->bytes);
  EXPECT_EQ(bucket->counts().put, 1u);
  const std::string mac = first->Sign("POST /v1/actors/acme/counter/x");
  EXPECT_EQ(mac.size(), 64u);
  EXPECT_TRUE((*second)->Verify("POST /v1/actors/acme/counter/x", mac));
  EXPECT_FALSE((*second)->Verify("POST /v1/actors/acme/counter/y", mac));
  EXPECT_FALSE((*second)->Verify("POST /v1/actors/acme/counter/x", mac.substr(1)));
}

TEST_F(ControlTest, TwoNodesRacingToCreateTheSecretAgree) {
  SimEnv env2(world, FromUnixMs(1'764'000'000'000));
  MemStore store2(env2, bucket);
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(3)}; });
  store2.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(3)}; });
  std::optional<Result<ClusterSecret>> a, b;
  env.Spawn([](ObjectStore* s, Env* e, std::optional<Result<ClusterSecret>>* o) -> Task<void> {
    o->emplace(co_await EnsureClusterSecret(*s, *e));
  }(&store, &env, &a), "a");
  env2.Spawn([](ObjectStore* s, Env* e, std::optional<Result<ClusterSecret>>* o) -> Task<void> {
    o->emplace(co_await EnsureClusterSecret(*s, *e));
  }(&store2, &env2, &b), "b");
  world.RunUntilIdle();
  ASSERT_TRUE(a && a->ok() && b && b->ok());
  EXPECT_EQ(a->value().bytes, b->value().bytes);
  EXPECT_EQ(bucket->counts().precondition_failed, 1u) << "both tried to create it";
}

TEST_F(ControlTest, ACorruptSecretIsRefusedNeverReplaced) {
  Corrupt("control/cluster-secret", "wasmkeep-secret 1\nsecret 00\ncreated_at 1\n");
  EXPECT_EQ(Run(EnsureClusterSecret(store, env)).code(), Code::kFatal);
  EXPECT_EQ(bucket->objects().at("control/cluster-secret").body, "wasmkeep-secret 1\nsecret 00\ncreated_at 1\n")
      << "a corrupt secret is never replaced";
}

}  // namespace
}  // namespace wk::control
