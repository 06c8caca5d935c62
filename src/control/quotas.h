// Tenant quotas (docs/tenants.md, "Quotas"): one record per tenant with limits,
// control/quotas/<tenant> (`wasmkeep-quotas 1`, strict decoder), changed with If-Match by
// `wasmkeep tenant set T --quota NAME=VALUE`; no record, or no line for a quota, means
// unlimited. It sits beside the tenant's record (control/tenants.h), whose format is frozen
// and read by every node on the request path: a node that predates quotas never reads this
// one and keeps serving the tenant, unlimited.
//
// Nodes read every record with one listing per period (QuotaCache), so a change reaches every
// node within that period; a record that does not decode leaves that tenant's last good
// quotas in force (and is reported), never a node unable to serve.
//
// Threading: the given store's Env loop; simulator-clean (no clock, thread or socket).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

enum class Quota : std::uint8_t {
  kRequestsPerSecond,  // client API requests admitted per second, cluster-wide
  kCpuMsPerSecond,     // milliseconds of actor code run per second, cluster-wide
  kResidentActors,     // the tenant's actors in memory, cluster-wide (each node: its share)
  kModuleBytes,        // the bytes of the modules its classes' rollouts name (checked at deploy)
  kCpuWeight,          // not a limit: its share of a busy worker against other tenants' (1 if unset)
  kStoredBytes,        // keys plus values of all its actors' state together, cluster-wide
  kMessagesPerSecond,  // actor-to-actor messages delivered per second, cluster-wide
  kAlarmsPerSecond,    // alarm events run per second, cluster-wide
  kCount  // new names go last: a record lists its quotas in this order
};
inline constexpr std::size_t kQuotas = static_cast<std::size_t>(Quota::kCount);
// "requests_per_second", ... (the names `--quota` and the record use).
std::string_view QuotaName(Quota q);
std::optional<Quota> QuotaByName(std::string_view name);
// Every name, comma-separated (for messages).
std::string QuotaNames();
// Quotas past this are refused (a typo, not a limit).
inline constexpr std::uint64_t kMaxQuotaValue = 1'000'000'000'000'000ull;

inline constexpr std::string_view kQuotasPrefix = "control/quotas/";
inline std::string QuotasKey(std::string_view tenant) { return std::string(kQuotasPrefix) + std::string(tenant); }

struct TenantQuotas {
  std::string tenant;
  std::uint64_t revision = 0;  // one more on every write; 0: never written
  WallTime updated_at{};
  std::array<std::optional<std::uint64_t>, kQuotas> limit{};  // nullopt: unlimited
  std::optional<std::uint64_t> Get(Quota q) const { return limit[static_cast<std::size_t>(q)]; }
  bool Unlimited() const;
  friend bool operator==(const TenantQuotas&, const TenantQuotas&) = default;
};

std::string EncodeQuotas(const TenantQuotas& q);
// The record stored under QuotasKey(tenant), or kFatal("corrupt ...: line N: ...").
Result<TenantQuotas> DecodeQuotas(std::string_view body, std::string_view tenant);

// One `--quota` argument: NAME=VALUE, VALUE a positive integer (byte quotas also with a
// KiB, MiB, GiB or TiB suffix), or NAME=unlimited. kInvalidArgument names the name or the
// value and what is accepted.
struct QuotaSetting {
  Quota quota = Quota::kCount;
  std::optional<std::uint64_t> value;  // nullopt: unlimited
};
Result<QuotaSetting> ParseQuotaSetting(std::string_view text);

// The tenant's quotas (revision 0, unlimited, if it has no record).
Task<Result<TenantQuotas>> ReadQuotas(ObjectStore& store, std::string tenant, CallOptions call = {});
// Applies the settings to the tenant's record (created if absent) with If-Match, re-reading
// on a conflict. kNotFound if the tenant does not exist.
Task<Result<TenantQuotas>> SetQuotas(ObjectStore& store, Env& env, std::string tenant,
                                     std::vector<QuotaSetting> settings, CallOptions call = {});

}  // namespace wk::control
