#include "control/tenants.h"

#include <algorithm>
#include <functional>

#include "base/check.h"
#include "base/line_format.h"
#include "cluster/owner_record.h"
#include "control/common.h"

namespace wk::control {
namespace {


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
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) co_return NotFound("no tenant '" + tenant + "'");
      if (!detail::IsRetryableRead(got.code())) co_return got.status();
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
    if (put.code() != Code::kPreconditionFailed && !detail::IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return detail::GaveUp("updating tenant '" + tenant + "'", last);
}

}  // namespace

Status ValidateTenantName(std::string_view tenant) {
  ActorId probe{std::string(tenant), "c", "n"};
  return ValidateActorId(probe);
}

std::string EncodeTenantRecord(const TenantRecord& r) {
  WK_CHECK(ValidateTenantName(r.tenant).ok(), "encoding a tenant record with a bad name");
  WK_CHECK(r.revision >= 1 && r.tokens.size() <= kMaxTokensPerTenant, "encoding an invalid tenant record");
  line_format::LineWriter w("tenant", 1);
  w.Field("tenant", r.tenant).UnixMsField("created_at", r.created_at).Field("revision", r.revision);
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    const TokenEntry& t = r.tokens[i];
    WK_CHECK(IsTokenId(t.id) && detail::IsLowerHex(t.secret_sha256, 64) && ToUnixMs(t.created_at) >= 0,
             "encoding an invalid token entry");
    for (std::size_t j = 0; j < i; ++j) WK_CHECK(r.tokens[j].id != t.id, "encoding duplicate token ids");
    w.FieldParts("token", {t.id, t.secret_sha256, std::to_string(ToUnixMs(t.created_at))});
  }
  return std::move(w).Take();
}

Result<TenantRecord> DecodeTenantRecord(std::string_view body, std::string_view tenant) {
  auto reader = line_format::LineReader::Open(body, "tenant", 1, "wasmkeep-tenant 1 record " + TenantKey(tenant));
  if (!reader.ok()) return reader.status();
  TenantRecord r;
  auto name = reader->Field("tenant");
  if (!name.ok()) return name.status();
  if (*name != tenant) return reader->Corrupt("'tenant' names another tenant");
  r.tenant = std::string(tenant);
  auto created = reader->UnixMsField("created_at");
  if (!created.ok()) return created.status();
  r.created_at = *created;
  auto revision = reader->UintField("revision");
  if (!revision.ok()) return revision.status();
  if (*revision == 0) return reader->Corrupt("'revision' is 0 (the first write is revision 1)");
  r.revision = *revision;
  while (!reader->AtEnd()) {
    auto parts = reader->FieldParts("token", 3);
    if (!parts.ok()) return parts.status();
    if (r.tokens.size() == kMaxTokensPerTenant) {
      return reader->Corrupt("more than " + std::to_string(kMaxTokensPerTenant) + " 'token' lines");
    }
    const std::string_view id = (*parts)[0], hash = (*parts)[1];
    if (!IsTokenId(id)) return reader->Corrupt("the token id is not 16 lowercase hex characters");
    if (!detail::IsLowerHex(hash, 64)) return reader->Corrupt("the token's hash is not 64 lowercase hex characters");
    auto created_at = line_format::ParseUnixMs((*parts)[2]);
    if (!created_at) return reader->Corrupt("the token's created time is not Unix milliseconds");
    for (const auto& e : r.tokens) {
      if (e.id == id) return reader->Corrupt("token id " + std::string(id) + " is repeated");
    }
    r.tokens.push_back(TokenEntry{std::string(id), std::string(hash), *created_at});
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
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    std::string copy = body;
    Precondition cond = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(key, std::move(copy), cond, call);
    if (put.ok()) co_return std::move(token).value();
    if (put.code() != Code::kPreconditionFailed) {
      if (!detail::IsRetryableRead(put.code())) co_return put.status();
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
    if (got.code() != Code::kNotFound && !detail::IsRetryableRead(got.code())) co_return got.status();
    last = got.status();
  }
  co_return detail::GaveUp("creating tenant '" + tenant + "'", last);
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
  auto parse = [](const std::string& key) -> std::optional<TenantSummary> {
    TenantSummary summary;
    summary.tenant = key.substr(kTenantsPrefix.size());
    if (!ValidateTenantName(summary.tenant).ok()) summary.error = "not a tenant name (key " + key + ")";
    return summary;
  };
  auto decode = [](std::string_view body, TenantSummary& summary) {
    auto record = DecodeTenantRecord(body, summary.tenant);
    if (record.ok()) {
      summary.record = std::move(record).value();
    } else {
      summary.error = record.status().message();
    }
  };
  co_return co_await detail::ListAndDecode<TenantSummary>(store, std::move(prefix), call, parse, decode);
}

}  // namespace wk::control
