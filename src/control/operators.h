// Operator tokens: what opens the console and every node's admin JSON routes
// (docs/security.md, "Operators"; docs/console.md). A token is `wko.<id>.<secret>`; only the
// SHA-256 of each secret is stored, in the record control/operators (`wasmkeep-operators 1`,
// FROZEN, strict decoder), written If-None-Match: * then If-Match as tenant records are.
// Threading: functions and OperatorAuth run on the given store's Env loop; simulator-clean;
// secrets come from OpenSSL's CSPRNG. Details: docs/internals.md, "Operator tokens".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "control/common.h"
#include "control/tokens.h"
#include "env/async_mutex.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

inline constexpr std::string_view kOperatorsKey = "control/operators";
// Bounds the record every admin request's check reads (about 120 bytes a token).
inline constexpr std::size_t kMaxOperatorTokens = 64;

struct OperatorToken {
  TokenEntry entry;
  std::string label;
  friend bool operator==(const OperatorToken&, const OperatorToken&) = default;
};

struct OperatorsRecord {
  std::uint64_t revision = 1;
  std::vector<OperatorToken> tokens;  // in the order they were added
  friend bool operator==(const OperatorsRecord&, const OperatorsRecord&) = default;
};

// kInvalidArgument naming the rule.
Status ValidateOperatorLabel(std::string_view label);

// REQUIRES: a valid record (checked).
std::string EncodeOperatorsRecord(const OperatorsRecord& record);
Result<OperatorsRecord> DecodeOperatorsRecord(std::string_view body);

// Whether a bearer token has the operator form (`wko.` prefix); says nothing of validity.
bool LooksLikeOperatorToken(std::string_view token);

struct NewOperatorToken {
  std::string token_id;
  std::string token;  // wko.<id>.<secret>: shown once
};

// Mints an operator token labelled `label` and stores its hash. kPreconditionFailed past
// kMaxOperatorTokens; kInvalidArgument for a bad label.
Task<Result<NewOperatorToken>> AddOperatorToken(ObjectStore& store, Env& env, std::string label, CallOptions call = {});
// Removes one: every node refuses it within OperatorAuth's cache TTL. kNotFound if there is
// no such token id.
Task<Status> RevokeOperatorToken(ObjectStore& store, Env& env, std::string token_id, CallOptions call = {});
// The record (an empty one, revision 0, when none was ever written).
Task<Result<OperatorsRecord>> ReadOperators(ObjectStore& store, CallOptions call = {});

// Checks operator tokens. One per node; Env loop thread only.
//
// Authenticate(token) answers:
//   OK                the token opens the admin routes
//   kInvalidArgument  not an operator token (malformed)
//   kNotFound         well formed, but unknown or revoked (one message for both)
//   kRetryable        the record could not be read (never answered from a stale entry)
//   kFatal            the record is corrupt (an operator must look)
// The record is read at most once per cache_ttl (concurrent checks share the GET), and is
// trusted for cache_ttl from when its GET was sent: a revocation acknowledged at T is
// refused everywhere from T + ttl on. A malformed token costs no GET, and however many
// made-up tokens arrive, the bucket sees one GET per ttl.
class OperatorAuth {
 public:
  struct Options {
    Duration cache_ttl = kDefaultAuthCacheTtl;
    Duration read_timeout = std::chrono::seconds(2);
  };
  OperatorAuth(Env& env, ObjectStore& store, Options options);
  OperatorAuth(Env& env, ObjectStore& store) : OperatorAuth(env, store, Options{}) {}

  // token: the bearer token itself (without "Bearer "). Parsed before the first suspension.
  Task<Status> Authenticate(std::string_view token);
  std::uint64_t reads() const { return reads_; }

 private:
  Task<Status> Check(std::string token_id, std::string secret_sha256);

  Env& env_;
  ObjectStore& store_;
  const Options options_;
  AsyncMutex mutex_;  // one GET at a time
  std::optional<MonoTime> fetched_at_;
  std::string corrupt_;
  std::vector<std::pair<std::string, std::string>> hashes_;  // token id -> secret sha256
  std::uint64_t reads_ = 0;
};

}  // namespace wk::control
