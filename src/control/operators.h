// Operator tokens: what opens the console and the admin JSON routes of every node
// (docs/security.md, "Operators"; docs/console.md). They are kept like tenant tokens
// (tokens.h): only the SHA-256 of each secret is stored, in one record under control/,
// and a node checks a token with one cached GET of that record.
//
// A token is `wko.<token id>.<secret>` (16 and 64 lowercase hex characters): the prefix
// tells it apart from a tenant token (`wk.<tenant>.<id>.<secret>`) without a read. An
// operator token opens every tenant's actors (listing, inspecting, deleting) and the
// cluster's admin routes; a tenant token opens its own tenant's actors only.
//
// Object (the format is FROZEN: a change is a new header version; the decoder is strict
// and answers kFatal("corrupt ...") for anything else, never "no tokens"):
//
//   control/operators                 wasmkeep-operators 1
//                                     revision <n>            (+1 on every write)
//                                     token <id> <sha256 hex of the secret> <created unix ms> <label>
//                                     ...                     (0..kMaxOperatorTokens lines)
//
// The label (1..63 of [A-Za-z0-9._-]) says whose token it is (`alice`, `ci`); it is shown
// by `wasmkeep admin token list`, never used to authenticate.
//
// Writes: created with If-None-Match: * by the first `admin token add`, then changed with
// If-Match the version read (re-read and retried on a conflict; an unknown outcome is
// resolved by re-reading), as tenant records are (tenants.h).
//
// Threading: every function and OperatorAuth run on the Env loop of the given store. No
// sockets, threads or clocks of their own: the same code runs on mem:// in unit tests and
// in the simulator. Secrets come from OpenSSL's CSPRNG, never from Env.
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
