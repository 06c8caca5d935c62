#include "control/quotas.h"

#include <charconv>

#include "base/check.h"
#include "base/line_format.h"
#include "control/common.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

constexpr std::array<std::string_view, kQuotas> kNames = {
    "requests_per_second",
    "cpu_ms_per_second",
    "resident_actors",
    "module_bytes",
    "cpu_weight",
    "stored_bytes",
    "messages_per_second",
    "alarms_per_second",
};

bool IsByteQuota(Quota q) { return q == Quota::kModuleBytes || q == Quota::kStoredBytes; }

}  // namespace

std::string_view QuotaName(Quota q) { return kNames.at(static_cast<std::size_t>(q)); }

std::optional<Quota> QuotaByName(std::string_view name) {
  for (std::size_t i = 0; i < kQuotas; ++i) {
    if (kNames[i] == name) return static_cast<Quota>(i);
  }
  return std::nullopt;
}

std::string QuotaNames() {
  std::string out;
  for (std::string_view n : kNames) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool TenantQuotas::Unlimited() const {
  for (const auto& l : limit) {
    if (l) return false;
  }
  return true;
}

std::string EncodeQuotas(const TenantQuotas& q) {
  WK_CHECK(ValidateTenantName(q.tenant).ok() && q.revision >= 1, "encoding an invalid quota record");
  line_format::LineWriter w("quotas", 1);
  w.Field("tenant", q.tenant).Field("revision", q.revision).UnixMsField("updated_at", q.updated_at);
  for (std::size_t i = 0; i < kQuotas; ++i) {
    if (!q.limit[i]) continue;
    WK_CHECK(*q.limit[i] >= 1 && *q.limit[i] <= kMaxQuotaValue, "encoding a quota out of bounds");
    w.FieldParts("quota", {kNames[i], std::to_string(*q.limit[i])});
  }
  return std::move(w).Take();
}

Result<TenantQuotas> DecodeQuotas(std::string_view body, std::string_view tenant) {
  auto reader = line_format::LineReader::Open(body, "quotas", 1, "wasmkeep-quotas 1 record " + QuotasKey(tenant));
  if (!reader.ok()) return reader.status();
  TenantQuotas q;
  auto name = reader->Field("tenant");
  if (!name.ok()) return name.status();
  if (*name != tenant) return reader->Corrupt("'tenant' names another tenant");
  q.tenant = std::string(tenant);
  auto revision = reader->UintField("revision");
  if (!revision.ok()) return revision.status();
  if (*revision == 0) return reader->Corrupt("'revision' is 0 (the first write is revision 1)");
  q.revision = *revision;
  auto updated = reader->UnixMsField("updated_at");
  if (!updated.ok()) return updated.status();
  q.updated_at = *updated;
  // Canonical: each quota once, in the order of their names' list.
  std::size_t next = 0;
  while (!reader->AtEnd()) {
    auto parts = reader->FieldParts("quota", 2);
    if (!parts.ok()) return parts.status();
    const std::optional<Quota> which = QuotaByName((*parts)[0]);
    if (!which) return reader->Corrupt("unknown quota '" + std::string((*parts)[0]) + "'");
    const auto index = static_cast<std::size_t>(*which);
    if (index < next) return reader->Corrupt("quota '" + std::string((*parts)[0]) + "' repeated or out of order");
    next = index + 1;
    std::uint64_t value = 0;
    const std::string_view text = (*parts)[1];
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > kMaxQuotaValue ||
        (text.size() > 1 && text[0] == '0')) {
      return reader->Corrupt("quota '" + std::string((*parts)[0]) + "' is not an integer in 1.." +
                             std::to_string(kMaxQuotaValue));
    }
    q.limit[index] = value;
  }
  return q;
}

Result<QuotaSetting> ParseQuotaSetting(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgument("--quota '" + std::string(text.substr(0, 80)) + "' is not NAME=VALUE (names: " +
                           QuotaNames() + ")");
  }
  const std::string_view name = text.substr(0, eq);
  std::string_view value = text.substr(eq + 1);
  const std::optional<Quota> which = QuotaByName(name);
  if (!which) {
    return InvalidArgument("--quota: unknown quota '" + std::string(name.substr(0, 80)) + "' (names: " + QuotaNames() +
                           ")");
  }
  QuotaSetting s{*which, std::nullopt};
  if (value == "unlimited") return s;
  std::uint64_t unit = 1;
  if (IsByteQuota(*which)) {
    for (const auto& [suffix, factor] : {std::pair<std::string_view, std::uint64_t>{"KiB", 1ull << 10},
                                         {"MiB", 1ull << 20},
                                         {"GiB", 1ull << 30},
                                         {"TiB", 1ull << 40}}) {
      if (value.ends_with(suffix)) {
        value.remove_suffix(suffix.size());
        unit = factor;
        break;
      }
    }
  }
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  const std::string accepted = IsByteQuota(*which) ? "a positive integer, optionally with KiB, MiB, GiB or TiB, or 'unlimited'"
                                                    : "a positive integer, or 'unlimited'";
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n == 0) {
    return InvalidArgument("--quota " + std::string(name) + ": '" + std::string(text.substr(eq + 1, 80)) + "' is not " +
                           accepted);
  }
  if (n > kMaxQuotaValue / unit) {
    return InvalidArgument("--quota " + std::string(name) + ": " + std::string(text.substr(eq + 1, 80)) +
                           " is over the largest quota, " + std::to_string(kMaxQuotaValue));
  }
  s.value = n * unit;
  return s;
}

Task<Result<TenantQuotas>> ReadQuotas(ObjectStore& store, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  auto got = co_await store.ForPurpose(BucketPurpose::kControl).Get(QuotasKey(tenant), call);
  if (!got.ok()) {
    if (got.code() != Code::kNotFound) co_return got.status();
    TenantQuotas none;
    none.tenant = tenant;
    co_return none;
  }
  co_return DecodeQuotas(got->body, tenant);
}

Task<Result<TenantQuotas>> SetQuotas(ObjectStore& store, Env& env, std::string tenant,
                                     std::vector<QuotaSetting> settings, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  // Quotas of a tenant that does not exist would outlive it unseen: refused.
  auto exists = co_await ReadTenant(store, tenant, call);
  if (!exists.ok()) co_return exists.status();
  ObjectStore& control = store.ForPurpose(BucketPurpose::kControl);
  const std::string key = QuotasKey(tenant);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    auto got = co_await control.Get(key, call);
    TenantQuotas q;
    q.tenant = tenant;
    Precondition cond = Precondition::IfNoneMatchAny();
    if (got.ok()) {
      auto decoded = DecodeQuotas(got->body, tenant);
      if (!decoded.ok()) co_return decoded.status();
      q = std::move(decoded).value();
      cond = Precondition::IfMatch(got->version);
    } else if (got.code() != Code::kNotFound) {
      if (!detail::IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    TenantQuotas changed = q;
    for (const QuotaSetting& s : settings) changed.limit[static_cast<std::size_t>(s.quota)] = s.value;
    if (changed.limit == q.limit) co_return q;  // nothing to change (or a retry that landed)
    changed.revision = q.revision + 1;
    changed.updated_at = env.WallNow();
    auto put = co_await control.Put(key, EncodeQuotas(changed), cond, call);
    if (put.ok()) co_return changed;
    if (put.code() != Code::kPreconditionFailed && !detail::IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return detail::GaveUp("setting the quotas of tenant '" + tenant + "'", last);
}

}  // namespace wk::control
