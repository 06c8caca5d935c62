// Tenants: their records in the bucket (control/tenants/<tenant>, `wasmkeep-tenant 1`,
// FROZEN, strict decoder) and the operations on them: create, add and revoke tokens, list,
// read (docs/tenants.md); nodes read them through TenantAuth (tokens.h). Guarantees: racing
// changes both land (If-None-Match: * to create, If-Match the version read, re-read and
// retry; an unknown outcome resolved by re-reading). Threading: the given store's Env loop;
// simulator-clean. Details: docs/internals.md, "Tenant records".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "control/common.h"
#include "control/tokens.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

// Bounds the tenant record that the request path reads and decodes (about 110 bytes a
// token), and the scan of it. Revoke a token to mint another past this.
inline constexpr std::size_t kMaxTokensPerTenant = 64;

// Tenant names follow ActorId's rules (cluster/owner_record.h): 1..63 of [a-z0-9_-],
// starting with a letter or digit. kInvalidArgument names the field.
Status ValidateTenantName(std::string_view tenant);

inline constexpr std::string_view kTenantsPrefix = "control/tenants/";
inline std::string TenantKey(std::string_view tenant) { return std::string(kTenantsPrefix) + std::string(tenant); }

struct TenantRecord {
  std::string tenant;
  WallTime created_at{};
  std::uint64_t revision = 1;
  std::vector<TokenEntry> tokens;  // in the order they were added
  friend bool operator==(const TenantRecord&, const TenantRecord&) = default;
};

// REQUIRES: a valid record (checked): valid name, ids and hashes, no duplicate ids, at
// most kMaxTokensPerTenant tokens, no time before 1970.
std::string EncodeTenantRecord(const TenantRecord& record);
// The record stored under TenantKey(tenant), or kFatal("corrupt ...: line N: ...") for
// anything else (a record naming another tenant included).
Result<TenantRecord> DecodeTenantRecord(std::string_view body, std::string_view tenant);

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

}  // namespace wk::control
