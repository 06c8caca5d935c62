// The control plane in the bucket: tenants and their access tokens, the cluster secret,
// and deployed classes (docs/architecture.md, "Bucket layout" and "Serving and routing";
// docs/tenants.md). Operators write it with the CLI (`wasmkeep tenant ...`, `wasmkeep
// deploy`); nodes read it (TenantAuth on every request, CurrentClass + ReadModule when an
// actor starts, EnsureClusterSecret at start).
//
// Objects (every format FROZEN: a change is a new header version; decoders are strict and
// answer kFatal("corrupt ...") for anything else, never "empty" or "absent"):
//
//   control/tenants/<tenant>          wasmkeep-tenant 1
//                                     tenant <tenant>
//                                     created_at <unix ms>
//                                     revision <n>            (+1 on every write)
//                                     token <id> <sha256 hex of the secret> <created unix ms>
//                                     ...                     (0..kMaxTokensPerTenant lines)
//   control/cluster-secret            wasmkeep-secret 1
//                                     secret <64 hex: 32 random bytes>
//                                     created_at <unix ms>
//   classes/<t>/<c>/modules/<sha256>  the module's raw bytes (content-addressed)
//   classes/<t>/<c>/current           wasmkeep-class 1
//                                     class <t>/<c>
//                                     module <sha256 hex>
//                                     size <bytes>
//                                     deployed_at <unix ms>
//
// Writes. A tenant record is created with If-None-Match: * and changed with If-Match the
// version read (re-read and retried on a conflict, so two racing changes both land; an
// unknown outcome is resolved by re-reading). `revision` makes every write's bytes differ,
// so an If-Match can never match a later write of identical bytes (object_store.h). The
// cluster secret is create-only: the first node creates it, every other reads it. A
// module is written create-only under its own SHA-256 before the class's `current`
// pointer names it, so a pointer never names a module that is not stored; the pointer is
// written unconditionally (the last deploy wins).
//
// Tokens are `wk.<tenant>.<token id>.<secret>`: the tenant and the token id say which
// record and line to check, so a request costs no scan. Only the SHA-256 of the secret
// (its 64 hex characters, as ASCII) is stored. Secrets come from OpenSSL's CSPRNG, not
// from Env (env.h: Env randomness is not for secrets); token ids, which are not secret,
// come from Env.
//
// Threading: every function runs on the Env loop of the given store. No sockets, threads
// or clocks of their own: the same code runs on mem:// in unit tests and in the simulator.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "env/async_mutex.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

// ---- Limits, with their reasons.

// Bounds the tenant record that the request path reads and decodes (about 110 bytes a
// token), and the scan of it. Revoke a token to mint another past this.
inline constexpr std::size_t kMaxTokensPerTenant = 64;
// The engine's default max_module_bytes (engine/engine.h): a larger module could never run.
inline constexpr std::size_t kMaxModuleBytes = 64u << 20;
// Attempts of one read-modify-write of a tenant record (conflicts with other writers,
// retryable failures, unknown outcomes resolved by re-reading) before giving up.
inline constexpr int kMaxUpdateAttempts = 10;
// Upper bound of the random pause before a retry, per attempt so far (attempt 3 waits up
// to 3 * this): spreads racing writers apart.
inline constexpr Duration kRetryBackoffStep = std::chrono::milliseconds(20);
// Bounds a listing (1000 keys a page): 10 million keys.
inline constexpr int kMaxListPages = 10'000;
// How long TenantAuth trusts a tenant record it read: the bound on how late a revocation
// (or a new token, or a new tenant) takes effect on a node.
inline constexpr Duration kDefaultAuthCacheTtl = std::chrono::seconds(2);
// Tenants whose records TenantAuth keeps (unknown tenants included, so a flood of bad
// tokens for one name costs one GET per TTL, not one per request).
inline constexpr std::size_t kDefaultAuthCacheEntries = 10'000;

// ---- Names and keys.

// Tenant and class names follow ActorId's rules (cluster/owner_record.h): 1..63 of
// [a-z0-9_-], starting with a letter or digit. kInvalidArgument names the field.
Status ValidateTenantName(std::string_view tenant);
Status ValidateClassName(std::string_view class_name);

inline constexpr std::string_view kTenantsPrefix = "control/tenants/";
inline constexpr std::string_view kClusterSecretKey = "control/cluster-secret";
inline constexpr std::string_view kClassesPrefix = "classes/";
inline std::string TenantKey(std::string_view tenant) { return std::string(kTenantsPrefix) + std::string(tenant); }

// The SHA-256 of a module's bytes, which names it (a distinct type, never a bare string).
struct ModuleDigest {
  std::string hex;  // 64 lowercase hex characters
  static ModuleDigest Of(std::string_view bytes);
  friend bool operator==(const ModuleDigest&, const ModuleDigest&) = default;
};
// kInvalidArgument unless 64 lowercase hex characters.
Status ValidateModuleDigest(const ModuleDigest& digest);

std::string ModuleKey(std::string_view tenant, std::string_view class_name, const ModuleDigest& digest);
std::string ClassPointerKey(std::string_view tenant, std::string_view class_name);

// ---- Tenants and tokens.

struct TokenEntry {
  std::string id;           // 16 lowercase hex characters
  std::string secret_sha256;  // 64 lowercase hex characters
  WallTime created_at{};
  friend bool operator==(const TokenEntry&, const TokenEntry&) = default;
};

struct TenantRecord {
  std::string tenant;
  WallTime created_at{};
  std::uint64_t revision = 1;
  std::vector<TokenEntry> tokens;  // in the order they were added
  friend bool operator==(const TenantRecord&, const TenantRecord&) = default;
};

// REQUIRES: a valid record (checked): valid name, ids and hashes, no duplicate ids, at
// most kMaxTokensPerTenant tokens.
std::string EncodeTenantRecord(const TenantRecord& record);
// The record stored under TenantKey(tenant), or kFatal("corrupt ...") for anything else
// (a record naming another tenant included).
Result<TenantRecord> DecodeTenantRecord(std::string_view body, std::string_view tenant);

// A token as handed to its user. Shown once: the bucket keeps only the secret's hash.
struct NewToken {
  std::string tenant;
  std::string token_id;
  std::string token;  // wk.<tenant>.<token id>.<secret>
};

// A parsed `wk.<tenant>.<id>.<secret>`, or kInvalidArgument.
struct ParsedToken {
  std::string tenant;
  std::string token_id;
  std::string secret;  // 64 lowercase hex characters
};
Result<ParsedToken> ParseToken(std::string_view token);

// Creates the tenant with one token. kPreconditionFailed if it exists; kInvalidArgument
// for a bad name. A retry after kUnknownOutcome is safe: it answers kPreconditionFailed if
// the first attempt landed (and that token then works).
Task<Result<NewToken>> CreateTenant(ObjectStore& store, Env& env, std::string tenant, CallOptions call = {});
// Mints another token. kNotFound for an unknown tenant; kPreconditionFailed at
// kMaxTokensPerTenant.
Task<Result<NewToken>> AddToken(ObjectStore& store, Env& env, std::string tenant, CallOptions call = {});
// Removes a token: nodes refuse it within their cache TTL (kDefaultAuthCacheTtl). kNotFound
// for an unknown tenant or token id.
Task<Status> RevokeToken(ObjectStore& store, Env& env, std::string tenant, std::string token_id,
                         CallOptions call = {});

struct TenantSummary {
  std::string tenant;
  std::optional<TenantRecord> record;  // absent when error is set
  std::string error;                   // a corrupt record: listed, never skipped
};
// Every tenant, by name.
Task<Result<std::vector<TenantSummary>>> ListTenants(ObjectStore& store, CallOptions call = {});
// One tenant's record; kNotFound if it does not exist.
Task<Result<TenantRecord>> ReadTenant(ObjectStore& store, std::string tenant, CallOptions call = {});

// Checks the Authorization header of a request (docs/architecture.md "Serving and routing":
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
// T + TTL on. A failed read is never answered from a stale entry.
//
// REQUIRES: env and store outlive this object, and this object outlives every
// Authenticate call in flight.
class TenantAuth {
 public:
  struct Options {
    Duration cache_ttl = kDefaultAuthCacheTtl;
    std::size_t max_cache_entries = kDefaultAuthCacheEntries;
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
  bool Fresh(const Entry& e) const;
  Task<Result<std::string>> Check(ParsedToken token);

  Env& env_;
  ObjectStore& store_;
  const Options options_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> cache_;
  std::uint64_t reads_ = 0;
};

// ---- The cluster secret.

// 32 random bytes shared by the nodes of a cluster: node-to-node requests carry an
// HMAC-SHA256 made with it.
struct ClusterSecret {
  std::array<std::uint8_t, 32> bytes{};

  // HMAC-SHA256 of message, 64 lowercase hex characters.
  std::string Sign(std::string_view message) const;
  // Whether mac_hex is Sign(message), compared in constant time.
  bool Verify(std::string_view message, std::string_view mac_hex) const;
};

std::string EncodeClusterSecret(const ClusterSecret& secret, WallTime created_at);
Result<ClusterSecret> DecodeClusterSecret(std::string_view body);

// Reads control/cluster-secret, creating it (If-None-Match: *) if it is absent: the first
// node to start creates it, every other node reads the same one. Unknown outcomes and
// lost races are resolved by reading back. kFatal for a corrupt object (never replaced).
Task<Result<ClusterSecret>> EnsureClusterSecret(ObjectStore& store, Env& env, CallOptions call = {});

// ---- Classes.

// The module a class currently runs.
struct ClassVersion {
  ModuleDigest module;
  std::uint64_t size_bytes = 0;
  WallTime deployed_at{};
  friend bool operator==(const ClassVersion&, const ClassVersion&) = default;
};

// REQUIRES: valid names and digest (checked).
std::string EncodeClassPointer(std::string_view tenant, std::string_view class_name, const ClassVersion& v);
// kFatal("corrupt ...") unless a valid pointer naming this tenant and class.
Result<ClassVersion> DecodeClassPointer(std::string_view body, std::string_view tenant, std::string_view class_name);

// Stores the module under its SHA-256 (create-only; an identical module already there is
// fine) and then points the class at it. The caller validates the module first
// (actor::CompileActorModule with the node's limits). kNotFound for an unknown tenant;
// kInvalidArgument for bad names or an empty or oversized module. kUnknownOutcome if the
// pointer's write may not have landed: running the same deploy again is safe.
Task<Result<ClassVersion>> DeployClass(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                       std::string wasm_bytes, CallOptions call = {});
// The class's current version, or nullopt when it was never deployed.
Task<Result<std::optional<ClassVersion>>> CurrentClass(ObjectStore& store, std::string tenant,
                                                       std::string class_name, CallOptions call = {});
// The module's bytes. kNotFound if absent; kFatal if their SHA-256 is not digest (or they
// exceed kMaxModuleBytes).
Task<Result<std::string>> ReadModule(ObjectStore& store, std::string tenant, std::string class_name,
                                     ModuleDigest digest, CallOptions call = {});

struct ClassSummary {
  std::string tenant;
  std::string class_name;
  std::optional<ClassVersion> current;  // absent when error is set
  std::string error;                    // a corrupt pointer: listed, never skipped
};
// Every deployed class (one with a `current` pointer), of one tenant or all, by name.
Task<Result<std::vector<ClassSummary>>> ListClasses(ObjectStore& store, std::optional<std::string> tenant,
                                                    CallOptions call = {});

}  // namespace wk::control
