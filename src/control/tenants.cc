#include "control/tenants.h"

#include <algorithm>
#include <functional>

#include "base/check.h"
#include "cluster/owner_record.h"
#include "control/common.h"

namespace wk::control {
namespace {

using detail::Backoff;
using detail::Field;
using detail::GaveUp;
using detail::IsLowerHex;
using detail::IsRetryableRead;
using detail::Lines;
using detail::ListKeys;
using detail::ParseMs;
using detail::ParseUint;
using detail::SplitSpaces;

constexpr std::string_view kTenantHeader = "wasmkeep-tenant 1";

Status CorruptTenant(std::string_view tenant, const std::string& what) {
  return Fatal("corrupt wasmkeep-tenant 1 record " + TenantKey(tenant) + ": " + what);
}

bool HasToken(const TenantRecord& r, const TokenEntry& t) {
  return std::any_of(r.tokens.begin(), r.tokens.end(),
                     [&](const TokenEntry& e) { return e.id == t.id && e.secret_sha256 == t.secret_sha256; });
}

// What a change to a tenant record decided, given the record as read.
enum class Decision : std::uint8_t { kWrite, kDone };
using Change = std::function<Result<Decision>(TenantRecord&)>;

// Read-modify-write of a tenant record with If-Match, re-reading on a conflict and after
// an unknown outcome (the change then sees whether its earlier write landed).
Task<Status> UpdateTenant(ObjectStore& store, Env& env, std::string tenant, CallOptions call, Change change) {
  const std::string key = TenantKey(tenant);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) co_return NotFound("no tenant '" + tenant + "'");
      if (!IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    auto record = DecodeTenantRecord(got->body, tenant);
    if (!record.ok()) co_return record.status();
    auto decision = change(*record);
    if (!decision.ok()) co_return decision.status();
    if (*decision == Decision::kDone) co_return Status::Ok();
    record->revision += 1;
    std::string body = EncodeTenantRecord(*record);
    Precondition cond = Precondition::IfMatch(got->version);
    auto put = co_await store.Put(key, std::move(body), cond, call);
    if (put.ok()) co_return Status::Ok();
    if (put.code() != Code::kPreconditionFailed && !IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return GaveUp("updating tenant '" + tenant + "'", last);
}

}  // namespace

Status ValidateTenantName(std::string_view tenant) {
  ActorId probe{std::string(tenant), "c", "n"};
  return ValidateActorId(probe);
}

std::string EncodeTenantRecord(const TenantRecord& r) {
  WK_CHECK(ValidateTenantName(r.tenant).ok(), "encoding a tenant record with a bad name");
  WK_CHECK(r.revision >= 1 && r.tokens.size() <= kMaxTokensPerTenant, "encoding an invalid tenant record");
  std::string out(kTenantHeader);
  out += "\ntenant " + r.tenant;
  out += "\ncreated_at " + std::to_string(ToUnixMs(r.created_at));
  out += "\nrevision " + std::to_string(r.revision);
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    const TokenEntry& t = r.tokens[i];
    WK_CHECK(IsTokenId(t.id) && IsLowerHex(t.secret_sha256, 64) && ToUnixMs(t.created_at) >= 0,
             "encoding an invalid token entry");
    for (std::size_t j = 0; j < i; ++j) WK_CHECK(r.tokens[j].id != t.id, "encoding duplicate token ids");
    out += "\ntoken " + t.id + " " + t.secret_sha256 + " " + std::to_string(ToUnixMs(t.created_at));
  }
  out += "\n";
  return out;
}

Result<TenantRecord> DecodeTenantRecord(std::string_view body, std::string_view tenant) {
  auto lines = Lines(body);
  if (!lines) return CorruptTenant(tenant, "not newline-terminated");
  if (lines->size() < 4 || (*lines)[0] != kTenantHeader) return CorruptTenant(tenant, "bad header");
  if (lines->size() > 4 + kMaxTokensPerTenant) return CorruptTenant(tenant, "too many tokens");
  TenantRecord r;
  auto name = Field((*lines)[1], "tenant");
  if (!name || *name != tenant) return CorruptTenant(tenant, "line 2 does not name this tenant");
  r.tenant = std::string(tenant);
  auto created = Field((*lines)[2], "created_at");
  if (!created || !ParseMs(*created, &r.created_at)) return CorruptTenant(tenant, "bad created_at");
  auto revision = Field((*lines)[3], "revision");
  if (!revision || !ParseUint(*revision, &r.revision) || r.revision == 0) return CorruptTenant(tenant, "bad revision");
  for (std::size_t i = 4; i < lines->size(); ++i) {
    auto token = Field((*lines)[i], "token");
    if (!token) return CorruptTenant(tenant, "line " + std::to_string(i + 1) + " is not 'token ...'");
    auto parts = SplitSpaces(*token);
    TokenEntry t;
    if (parts.size() != 3 || !IsTokenId(parts[0]) || !IsLowerHex(parts[1], 64) || !ParseMs(parts[2], &t.created_at)) {
      return CorruptTenant(tenant, "bad token line " + std::to_string(i + 1));
    }
    t.id = std::string(parts[0]);
    t.secret_sha256 = std::string(parts[1]);
    for (const auto& e : r.tokens) {
      if (e.id == t.id) return CorruptTenant(tenant, "duplicate token id " + t.id);
    }
    r.tokens.push_back(std::move(t));
  }
  return r;
}

Task<Result<NewToken>> CreateTenant(ObjectStore& store, Env& env, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  TenantRecord record;
  record.tenant = tenant;
  record.created_at = env.WallNow();
  TokenEntry entry;
  auto token = MintToken(env, tenant, &entry);
  if (!token.ok()) co_return token.status();
  record.tokens.push_back(entry);
  const std::string key = TenantKey(tenant);
  const std::string body = EncodeTenantRecord(record);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    std::string copy = body;
    Precondition cond = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(key, std::move(copy), cond, call);
    if (put.ok()) co_return std::move(token).value();
    if (put.code() != Code::kPreconditionFailed) {
      if (!IsRetryableRead(put.code())) co_return put.status();
      last = put.status();
      continue;  // a retried create meets our own landed write as a precondition failure
    }
    // It exists: ours (an earlier attempt whose reply was lost) or someone else's.
    auto got = co_await store.Get(key, call);
    if (got.ok()) {
      auto existing = DecodeTenantRecord(got->body, tenant);
      if (existing.ok() && HasToken(*existing, entry)) co_return std::move(token).value();
      co_return PreconditionFailed("tenant '" + tenant + "' already exists");
    }
    if (got.code() != Code::kNotFound && !IsRetryableRead(got.code())) co_return got.status();
    last = got.status();
  }
  co_return GaveUp("creating tenant '" + tenant + "'", last);
}

Task<Result<NewToken>> AddToken(ObjectStore& store, Env& env, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  TokenEntry entry;
  auto token = MintToken(env, tenant, &entry);
  if (!token.ok()) co_return token.status();
  Change change = [&entry](TenantRecord& r) -> Result<Decision> {
    if (HasToken(r, entry)) return Decision::kDone;  // an earlier attempt landed
    for (const auto& e : r.tokens) {
      // 64 random bits colliding: refuse rather than loop; the caller runs it again.
      if (e.id == entry.id) return Retryable("token id collision; try again");
    }
    if (r.tokens.size() >= kMaxTokensPerTenant) {
      return PreconditionFailed("tenant '" + r.tenant + "' has " + std::to_string(kMaxTokensPerTenant) +
                                " tokens, the most it may have: revoke one first");
    }
    r.tokens.push_back(entry);
    return Decision::kWrite;
  };
  Status s = co_await UpdateTenant(store, env, tenant, call, change);
  if (!s.ok()) co_return s;
  co_return std::move(token).value();
}

Task<Status> RevokeToken(ObjectStore& store, Env& env, std::string tenant, std::string token_id, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  if (!IsTokenId(token_id)) {
    co_return InvalidArgument("token id '" + token_id.substr(0, 80) + "' must be 16 lowercase hex characters (see `wasmkeep tenant list`)");
  }
  bool wrote = false;
  Change change = [&token_id, &wrote](TenantRecord& r) -> Result<Decision> {
    auto it = std::find_if(r.tokens.begin(), r.tokens.end(), [&](const TokenEntry& e) { return e.id == token_id; });
    if (it == r.tokens.end()) {
      // After a write of ours (lost reply, or a conflict with another revocation) it is
      // gone either way.
      if (wrote) return Decision::kDone;
      return NotFound("tenant '" + r.tenant + "' has no token '" + token_id + "'");
    }
    r.tokens.erase(it);
    wrote = true;
    return Decision::kWrite;
  };
  co_return co_await UpdateTenant(store, env, tenant, call, change);
}

Task<Result<TenantRecord>> ReadTenant(ObjectStore& store, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  const std::string key = TenantKey(tenant);
  auto got = co_await store.Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return NotFound("no tenant '" + tenant + "'");
    co_return got.status();
  }
  co_return DecodeTenantRecord(got->body, tenant);
}

Task<Result<std::vector<TenantSummary>>> ListTenants(ObjectStore& store, CallOptions call) {
  std::string prefix(kTenantsPrefix);
  auto keys = co_await ListKeys(store, prefix, call);
  if (!keys.ok()) co_return keys.status();
  std::vector<TenantSummary> out;
  for (const std::string& key : *keys) {
    TenantSummary summary;
    summary.tenant = key.substr(kTenantsPrefix.size());
    if (!ValidateTenantName(summary.tenant).ok()) {
      summary.error = "not a tenant name (key " + key + ")";
      out.push_back(std::move(summary));
      continue;
    }
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;  // removed since the listing
      co_return got.status();
    }
    auto record = DecodeTenantRecord(got->body, summary.tenant);
    if (record.ok()) {
      summary.record = std::move(record).value();
    } else {
      summary.error = record.status().message();
    }
    out.push_back(std::move(summary));
  }
  co_return out;
}

}  // namespace wk::control
