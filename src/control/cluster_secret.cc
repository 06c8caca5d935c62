#include "control/cluster_secret.h"

#include <openssl/rand.h>

#include <cstring>
#include <optional>

#include "base/check.h"
#include "base/digest.h"
#include "base/line_format.h"
#include "base/log.h"
#include "control/common.h"

namespace wk::control {
std::string ClusterSecret::Sign(std::string_view message) const {
  return ::wk::ToHex(::wk::HmacSha256(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), message));
}

bool ClusterSecret::Verify(std::string_view message, std::string_view mac_hex) const {
  return ::wk::ConstantTimeEqual(Sign(message), mac_hex);
}

std::string EncodeClusterSecret(const ClusterSecret& secret, WallTime created_at) {
  line_format::LineWriter w("secret", 1);
  w.Field("secret", detail::Hex(secret.bytes.data(), secret.bytes.size())).UnixMsField("created_at", created_at);
  return std::move(w).Take();
}

Result<ClusterSecret> DecodeClusterSecret(std::string_view body) {
  auto reader = line_format::LineReader::Open(body, "secret", 1, "wasmkeep-secret 1 object " + std::string(kClusterSecretKey));
  if (!reader.ok()) return reader.status();
  auto hex = reader->Field("secret");
  if (!hex.ok()) return hex.status();
  ClusterSecret secret;
  std::optional<std::string> bytes;
  if (detail::IsLowerHex(*hex, 2 * secret.bytes.size())) bytes = FromHex(*hex);
  if (!bytes) return reader->Corrupt("'secret' is not 64 lowercase hex characters");
  std::memcpy(secret.bytes.data(), bytes->data(), secret.bytes.size());
  // created_at is not part of the value, but the object is read whole and strictly.
  auto created = reader->UnixMsField("created_at");
  if (!created.ok()) return created.status();
  if (Status s = reader->Finish(); !s.ok()) return s;
  return secret;
}

Task<Result<ClusterSecret>> EnsureClusterSecret(ObjectStore& bucket, Env& env, CallOptions call) {
  ObjectStore& store = bucket.ForPurpose(BucketPurpose::kControl);
  const std::string key(kClusterSecretKey);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    auto got = co_await store.Get(key, call);
    if (got.ok()) co_return DecodeClusterSecret(got->body);  // corrupt: kFatal, never replaced
    if (got.code() != Code::kNotFound) {
      if (!detail::IsRetryableRead(got.code())) co_return got.status();
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
    if (put.code() != Code::kPreconditionFailed && !detail::IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return detail::GaveUp("reading or creating " + key, last);
}

}  // namespace wk::control
