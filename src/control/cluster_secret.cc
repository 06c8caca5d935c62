#include "control/cluster_secret.h"

#include <openssl/rand.h>

#include "base/check.h"
#include "base/digest.h"
#include "base/log.h"
#include "control/common.h"

namespace wk::control {
namespace {

using detail::Backoff;
using detail::Field;
using detail::GaveUp;
using detail::Hex;
using detail::IsLowerHex;
using detail::IsRetryableRead;
using detail::Lines;
using detail::ParseMs;

constexpr std::string_view kSecretHeader = "wasmkeep-secret 1";

}  // namespace

std::string ClusterSecret::Sign(std::string_view message) const {
  return ::wk::ToHex(::wk::HmacSha256(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), message));
}

bool ClusterSecret::Verify(std::string_view message, std::string_view mac_hex) const {
  return ::wk::ConstantTimeEqual(Sign(message), mac_hex);
}

std::string EncodeClusterSecret(const ClusterSecret& secret, WallTime created_at) {
  return std::string(kSecretHeader) + "\nsecret " + Hex(secret.bytes.data(), secret.bytes.size()) +
         "\ncreated_at " + std::to_string(ToUnixMs(created_at)) + "\n";
}

Result<ClusterSecret> DecodeClusterSecret(std::string_view body) {
  auto corrupt = [](const std::string& what) {
    return Fatal("corrupt wasmkeep-secret 1 object " + std::string(kClusterSecretKey) + ": " + what);
  };
  auto lines = Lines(body);
  if (!lines || lines->size() != 3 || (*lines)[0] != kSecretHeader) return corrupt("bad header or not three lines");
  auto hex = Field((*lines)[1], "secret");
  if (!hex || !IsLowerHex(*hex, 64)) return corrupt("bad secret line");
  WallTime created;
  auto created_field = Field((*lines)[2], "created_at");
  if (!created_field || !ParseMs(*created_field, &created)) return corrupt("bad created_at");
  ClusterSecret secret;
  for (std::size_t i = 0; i < secret.bytes.size(); ++i) {
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    secret.bytes[i] = static_cast<std::uint8_t>(nibble((*hex)[2 * i]) << 4 | nibble((*hex)[2 * i + 1]));
  }
  return secret;
}

Task<Result<ClusterSecret>> EnsureClusterSecret(ObjectStore& store, Env& env, CallOptions call) {
  const std::string key(kClusterSecretKey);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    auto got = co_await store.Get(key, call);
    if (got.ok()) co_return DecodeClusterSecret(got->body);  // corrupt: kFatal, never replaced
    if (got.code() != Code::kNotFound) {
      if (!IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    ClusterSecret fresh;
    if (RAND_bytes(fresh.bytes.data(), static_cast<int>(fresh.bytes.size())) != 1) {
      co_return Fatal("OpenSSL RAND_bytes failed");
    }
    std::string body = EncodeClusterSecret(fresh, env.WallNow());
    Precondition cond = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(key, std::move(body), cond, call);
    if (put.ok()) {
      WK_LOG_INFO("created the cluster secret", {{"key", key}});
      co_return fresh;
    }
    // Another node won the race, or our write's outcome is unknown: read back next round.
    if (put.code() != Code::kPreconditionFailed && !IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return GaveUp("reading or creating " + key, last);
}

}  // namespace wk::control
