#include "actor/stored_quota.h"

#include <fmt/format.h>

namespace wk::actor {

void TenantStoredBytes::SetLimit(const std::string& tenant, std::optional<std::uint64_t> limit) {
  std::lock_guard lock(mu_);
  if (!limit) {
    auto it = tenants_.find(tenant);
    if (it != tenants_.end()) it->second.limit.reset();
    return;
  }
  tenants_[tenant].limit = limit;
}

void TenantStoredBytes::SetOthers(const std::string& tenant, std::int64_t bytes) {
  std::lock_guard lock(mu_);
  tenants_[tenant].others = bytes;
}

void TenantStoredBytes::LoadBase(const std::string& tenant, std::int64_t bytes) {
  std::lock_guard lock(mu_);
  Figures& f = tenants_[tenant];
  if (f.base_loaded) return;
  f.own += bytes;
  f.base_loaded = true;
}

Status TenantStoredBytes::Reserve(const std::string& tenant, std::uint64_t growth, const char* what) {
  std::lock_guard lock(mu_);
  Figures& f = tenants_[tenant];
  if (f.limit) {
    // Other events' reservations count: their growth is theirs before it is committed.
    const std::uint64_t reserved = broken_.on(BrokenModel::kStoredQuotaUnreserved) ? 0 : f.reserved;
    const std::int64_t after = f.total() + static_cast<std::int64_t>(reserved + growth);
    if (after > static_cast<std::int64_t>(*f.limit)) {
      ++refusals_;
      return InvalidArgument(fmt::format(
          "{}: tenant {} would store {} bytes in all, over its quota stored_bytes = {} ({} counted on other nodes, "
          "as last read)",
          what, tenant, after, *f.limit, f.others));
    }
  }
  f.reserved += growth;
  return Status::Ok();
}

void TenantStoredBytes::Settle(const std::string& tenant, std::uint64_t reserved, std::int64_t change) {
  if (reserved == 0 && change == 0) return;
  std::lock_guard lock(mu_);
  Figures& f = tenants_[tenant];
  f.reserved -= std::min(f.reserved, reserved);
  f.own += change;
}

std::optional<TenantStoredBytes::Figures> TenantStoredBytes::Get(const std::string& tenant) const {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, TenantStoredBytes::Figures> TenantStoredBytes::All() const {
  std::lock_guard lock(mu_);
  return tenants_;
}

std::uint64_t TenantStoredBytes::refusals() const {
  std::lock_guard lock(mu_);
  return refusals_;
}

}  // namespace wk::actor
