#include "control/quota_cache.h"

#include <set>
#include <vector>

#include "base/log.h"
#include "control/common.h"

namespace wk::control {

struct QuotaCache::State {
  Env& env;
  ObjectStore& store;
  Duration period;
  bool alive = true;
  struct Entry {
    Version version;
    TenantQuotas quotas;
  };
  std::map<std::string, Entry, std::less<>> tenants;
  QuotaCacheStats stats;
  std::function<void()> on_refresh;
};

namespace {

Task<Status> RefreshOnce(std::shared_ptr<QuotaCache::State> s);

}  // namespace

QuotaCache::QuotaCache(Env& env, ObjectStore& store, Duration period)
    : state_(std::make_shared<State>(State{env, store.ForPurpose(BucketPurpose::kControl), period})) {}

QuotaCache::~QuotaCache() { Stop(); }

namespace {

Task<Status> RefreshOnce(std::shared_ptr<QuotaCache::State> s) {
  ListOptions list;
  list.prefix = std::string(kQuotasPrefix);
  std::vector<ListEntry> entries;
  for (int page = 0; page < kMaxListPages; ++page) {
    auto got = co_await s->store.List(list, CallOptions{std::chrono::seconds(10)});
    if (!s->alive) co_return Cancelled("stopped");
    if (!got.ok()) {
      ++s->stats.failed_refreshes;
      co_return got.status();
    }
    for (ListEntry& e : got->entries) entries.push_back(std::move(e));
    if (!got->next_continuation) break;
    list.continuation = *got->next_continuation;
  }
  std::set<std::string, std::less<>> listed;
  for (const ListEntry& e : entries) {
    const std::string tenant = e.key.substr(kQuotasPrefix.size());
    listed.insert(tenant);
    auto known = s->tenants.find(tenant);
    if (known != s->tenants.end() && known->second.version == e.version) continue;
    auto got = co_await s->store.Get(e.key, CallOptions{std::chrono::seconds(10)});
    if (!s->alive) co_return Cancelled("stopped");
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) {
        listed.erase(tenant);
        continue;
      }
      ++s->stats.failed_refreshes;
      co_return got.status();  // the rest at the next period
    }
    auto decoded = DecodeQuotas(got->body, tenant);
    if (!decoded.ok()) {
      // The last good quotas stay in force; nothing a node reads may stop it serving.
      ++s->stats.corrupt_records;
      WK_LOG_WARN("tenant quota record not read", {{"key", e.key}, {"error", decoded.status().ToString()}});
      continue;
    }
    s->tenants[tenant] = QuotaCache::State::Entry{got->version, std::move(decoded).value()};
  }
  std::erase_if(s->tenants, [&](const auto& t) { return !listed.contains(t.first); });
  s->stats.tenants_limited = 0;
  for (const auto& [tenant, e] : s->tenants) {
    if (!e.quotas.Unlimited()) ++s->stats.tenants_limited;
  }
  ++s->stats.refreshes;
  if (s->on_refresh) s->on_refresh();
  co_return Status::Ok();
}

Task<void> RefreshLoop(std::shared_ptr<QuotaCache::State> s) {
  while (s->alive) {
    Status done = co_await RefreshOnce(s);
    if (!s->alive) co_return;
    if (!done.ok()) WK_LOG_DEBUG("tenant quotas not refreshed", {{"error", done.ToString()}});
    if (!co_await s->env.SleepFor(s->period)) co_return;
  }
}

}  // namespace

void QuotaCache::Start() {
  if (loop_.valid()) return;
  loop_ = state_->env.Spawn(RefreshLoop(state_), "tenant quotas");
}

void QuotaCache::Stop() {
  state_->alive = false;
  if (loop_.valid()) loop_.Cancel();
}

Task<Status> QuotaCache::Refresh() { return RefreshOnce(state_); }

const TenantQuotas* QuotaCache::For(std::string_view tenant) const {
  const auto it = state_->tenants.find(tenant);
  if (it == state_->tenants.end() || it->second.quotas.Unlimited()) return nullptr;
  return &it->second.quotas;
}

std::map<std::string, std::uint64_t> QuotaCache::With(Quota q) const {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [tenant, e] : state_->tenants) {
    if (const auto limit = e.quotas.Get(q)) out.emplace(tenant, *limit);
  }
  return out;
}

void QuotaCache::set_on_refresh(std::function<void()> fn) { state_->on_refresh = std::move(fn); }

QuotaCacheStats QuotaCache::stats() const { return state_->stats; }

}  // namespace wk::control
