// Tenant access tokens: their format, minting, and TenantAuth, which checks the token a
// request carries (docs/architecture.md, "How a request flows"; docs/tenants.md). The tokens
// themselves are lines of their tenant's record (tenants.h).
//
// Tokens are `wk.<tenant>.<token id>.<secret>`: the tenant and the token id say which
// record and line to check, so a request costs no scan. Only the SHA-256 of the secret
// (its 64 hex characters, as ASCII) is stored. Secrets come from OpenSSL's CSPRNG, not
// from Env (env.h: Env randomness is not for secrets); token ids, which are not secret,
// come from Env.
//
// Threading: the functions are pure or run on the given Env's loop; TenantAuth lives on
// the Env loop thread. No sockets, threads or clocks of their own: the same code runs on
// mem:// in unit tests and in the simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"
#include "base/time.h"
#include "env/async_mutex.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

// How long TenantAuth trusts a tenant record it read: the bound on how late a revocation
// (or a new token, or a new tenant) takes effect on a node.
inline constexpr Duration kDefaultAuthCacheTtl = std::chrono::seconds(2);
// Tenants whose records TenantAuth keeps, of tenants that exist.
inline constexpr std::size_t kDefaultAuthCacheEntries = 10'000;
// Names TenantAuth remembers as absent (a flood of bad tokens for one name costs one GET
// per TTL, not one per request). Kept apart from the tenants that exist, so a flood of
// made-up names never pushes a real tenant out; the oldest goes first when it is full.
inline constexpr std::size_t kDefaultAuthUnknownEntries = 10'000;
// GETs of names not known to exist (never seen, or absent at the last read): at most this
// many at once in a burst, refilled at kDefaultAuthUnknownReadsPerSecond. A read that
// finds the tenant gives its share back, so only absent names use the budget up; past it,
// such a name is refused as retryable (503) without a GET. A client without a valid
// token then costs the bucket at most these GETs, however many names it makes up.
inline constexpr double kDefaultAuthUnknownReadsBurst = 200;
inline constexpr double kDefaultAuthUnknownReadsPerSecond = 20;

// A token as its tenant's record stores it (one `token` line, tenants.h).
struct TokenEntry {
  std::string id;           // 16 lowercase hex characters
  std::string secret_sha256;  // 64 lowercase hex characters
  WallTime created_at{};
  friend bool operator==(const TokenEntry&, const TokenEntry&) = default;
};

// A token as handed to its user. Shown once: the bucket keeps only the secret's hash.
struct NewToken {
  std::string tenant;
  std::string token_id;
  std::string token;  // wk.<tenant>.<token id>.<secret>
};

// Whether s is a token id: 16 lowercase hex characters.
bool IsTokenId(std::string_view s);

// A new token of tenant: a fresh secret (OpenSSL's CSPRNG) and token id (env), the entry
// to store in *entry (id, the secret's hash, env's wall time). kFatal if the CSPRNG fails.
Result<NewToken> MintToken(Env& env, const std::string& tenant, TokenEntry* entry);

// A parsed `wk.<tenant>.<id>.<secret>`, or kInvalidArgument.
struct ParsedToken {
  std::string tenant;
  std::string token_id;
  std::string secret;  // 64 lowercase hex characters
};
Result<ParsedToken> ParseToken(std::string_view token);

// Checks the Authorization header of a request (docs/architecture.md, "How a request flows":
// bearer tokens per tenant). One per node; Env loop thread only.
//
// Answers, and what the HTTP front makes of them (docs/tenants.md):
//   the tenant                 authenticated; the front still compares it with the tenant
//                              in the URL and answers 403 if they differ (a token gives
//                              access to its own tenant only)
//   kInvalidArgument           no header, not `Bearer <token>`, or a malformed token: 401
//   kNotFound                  a well-formed token that does not open its tenant (unknown
//                              tenant, unknown or revoked token id, wrong secret): 401.
//                              One message for all, so a caller learns nothing about which
//   kRetryable/kUnknownOutcome the tenant record could not be read: 503, retry
//   kFatal                     the tenant record is corrupt: 500 (an operator must look)
//   kCancelled                 the calling task was cancelled
//
// A tenant's record is read at most once per cache TTL (concurrent requests for a tenant
// whose entry is stale share one GET). An entry is trusted for the TTL counted from when
// its GET was sent, so a revocation acknowledged at time T is refused by every node from
// T + TTL on. A failed read is never answered from a stale entry. A malformed token costs
// no GET. Names not known to exist are remembered apart and their GETs budgeted (see
// kDefaultAuthUnknownReadsBurst): past the budget they are kRetryable without a GET.
//
// REQUIRES: env and store outlive this object, and this object outlives every
// Authenticate call in flight.
class TenantAuth {
 public:
  struct Options {
    Duration cache_ttl = kDefaultAuthCacheTtl;
    std::size_t max_cache_entries = kDefaultAuthCacheEntries;
    std::size_t max_unknown_entries = kDefaultAuthUnknownEntries;
    double unknown_reads_burst = kDefaultAuthUnknownReadsBurst;
    double unknown_reads_per_second = kDefaultAuthUnknownReadsPerSecond;
    // Deadline of one GET of a tenant record.
    Duration read_timeout = std::chrono::seconds(2);
  };
  TenantAuth(Env& env, ObjectStore& store, Options options);
  TenantAuth(Env& env, ObjectStore& store) : TenantAuth(env, store, Options{}) {}

  // authorization_header_value: the header's value as received ("Bearer wk.acme...."),
  // or empty when the request had none. Parsed before this returns (not a coroutine), so
  // the caller's string need not outlive the call. A fresh cache entry answers without
  // suspending.
  Task<Result<std::string>> Authenticate(std::string_view authorization_header_value);

  // GETs of tenant records so far (tests, metrics).
  std::uint64_t reads() const { return reads_; }
  // Authentications refused without a GET because the budget for unknown names was spent.
  std::uint64_t unknown_refused() const { return unknown_refused_; }

 private:
  struct Entry {
    explicit Entry(Env& env) : mutex(env) {}
    AsyncMutex mutex;                        // one GET at a time per tenant
    std::optional<MonoTime> fetched_at;      // when the GET that filled it was sent
    bool exists = false;
    std::string corrupt;                        // set: the record is unreadable (kFatal)
    std::map<std::string, std::string> hashes;  // token id -> secret sha256 hex
  };
  std::shared_ptr<Entry> EntryFor(const std::string& tenant);
  // Files the entry under known_ (the record exists, or is corrupt) or unknown_ (absent).
  void File(const std::string& tenant, const std::shared_ptr<Entry>& entry);
  bool Fresh(const Entry& e) const;
  // Takes one GET from the unknown names' budget; false if it is spent.
  bool TakeUnknownRead();
  void GiveBackUnknownRead();
  Task<Result<std::string>> Check(ParsedToken token);

  Env& env_;
  ObjectStore& store_;
  const Options options_;
  // Tenants whose record existed at their last read (corrupt ones included).
  std::unordered_map<std::string, std::shared_ptr<Entry>> known_;
  // Names absent at their last read, or not read yet; unknown_order_ oldest first.
  struct Unknown {
    std::shared_ptr<Entry> entry;
    std::list<std::string>::iterator order;
  };
  std::unordered_map<std::string, Unknown> unknown_;
  std::list<std::string> unknown_order_;
  double unknown_reads_left_ = 0;
  MonoTime unknown_reads_refilled_at_{};
  std::uint64_t reads_ = 0;
  std::uint64_t unknown_refused_ = 0;
};

}  // namespace wk::control
