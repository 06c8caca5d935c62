#include "routing/tenant_limits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/check.h"

namespace wk {
namespace {

// "tenant T is over its quota NAME=LIMIT (this node's share: S UNIT of N live nodes); ..."
std::string OverQuota(const std::string& tenant, control::Quota quota, std::uint64_t limit, double share,
                      const char* unit, double nodes, int wait) {
  char text[160];
  std::snprintf(text, sizeof text, " (this node's share: %.1f %s of %.0f live nodes); retry after %d s", share, unit,
                nodes, wait);
  return "tenant " + tenant + " is over its quota " + std::string(control::QuotaName(quota)) + "=" +
         std::to_string(limit) + text;
}

}  // namespace

TenantLimits::TenantLimits(Env& env, const control::QuotaCache& quotas, const Membership& membership)
    : env_(env), quotas_(quotas), membership_(membership) {}

double TenantLimits::LiveNodes() {
  // Counted again at most once a second: the view changes at listings, seconds apart.
  const MonoTime now = env_.MonoNow();
  if (live_counted_ == MonoTime{} || now - live_counted_ >= std::chrono::seconds(1)) {
    std::size_t live = 0;
    for (const auto& [id, node] : membership_.view()) {
      if (node.live()) ++live;
    }
    live_nodes_ = static_cast<double>(std::max<std::size_t>(live, 1));  // this node, at least
    live_counted_ = now;
  }
  return live_nodes_;
}

void TenantLimits::Fill(Bucket& b, double rate) {
  const MonoTime now = env_.MonoNow();
  const double capacity = std::max(rate, 1.0);
  if (!b.started) {
    b.tokens = capacity;  // a tenant starts with a full second
    b.started = true;
  } else {
    b.tokens = std::min(capacity, b.tokens + ToSeconds(now - b.filled) * rate);
  }
  b.filled = now;
  b.rate = rate;
}

std::optional<QuotaRefusal> TenantLimits::AdmitRequest(const std::string& tenant) {
  const control::TenantQuotas* q = quotas_.For(tenant);
  if (q == nullptr) return std::nullopt;
  const double nodes = LiveNodes();
  // CPU first: a tenant over its CPU is refused before it spends a request token.
  if (const auto cpu = q->Get(control::Quota::kCpuMsPerSecond)) {
    auto it = cpu_.find(tenant);
    if (it != cpu_.end()) {
      Bucket& b = it->second;
      Fill(b, static_cast<double>(*cpu) / nodes);
      if (b.tokens < 0) {
        ++stats_.throttled_cpu;
        const int wait = static_cast<int>(std::ceil(-b.tokens / b.rate));
        return QuotaRefusal{control::Quota::kCpuMsPerSecond, std::max(wait, 1),
                            OverQuota(tenant, control::Quota::kCpuMsPerSecond, *cpu, b.rate, "ms/s", nodes,
                                      std::max(wait, 1))};
      }
    }
  }
  const auto rps = q->Get(control::Quota::kRequestsPerSecond);
  if (!rps) return std::nullopt;
  Bucket& b = requests_[tenant];
  Fill(b, static_cast<double>(*rps) / nodes);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::nullopt;
  }
  ++stats_.throttled_requests;
  const int wait = std::max(1, static_cast<int>(std::ceil((1 - b.tokens) / b.rate)));
  return QuotaRefusal{control::Quota::kRequestsPerSecond, wait,
                      OverQuota(tenant, control::Quota::kRequestsPerSecond, *rps, b.rate, "requests/s", nodes, wait)};
}

void TenantLimits::ChargeCpu(const std::string& tenant, Duration worker_time) {
  const control::TenantQuotas* q = quotas_.For(tenant);
  if (q == nullptr) return;
  const auto cpu = q->Get(control::Quota::kCpuMsPerSecond);
  if (!cpu) return;
  Bucket& b = cpu_[tenant];
  Fill(b, static_cast<double>(*cpu) / LiveNodes());
  b.tokens -= ToSeconds(worker_time) * 1000.0;  // may go below zero: the next requests wait
}

std::optional<Duration> TenantLimits::AdmitWork(control::Quota quota, const std::string& tenant) {
  WK_CHECK(quota == control::Quota::kMessagesPerSecond || quota == control::Quota::kAlarmsPerSecond,
           "AdmitWork of a quota that is not a work rate");
  const control::TenantQuotas* q = quotas_.For(tenant);
  if (q == nullptr) return std::nullopt;
  const auto limit = q->Get(quota);
  if (!limit) return std::nullopt;
  const bool messages = quota == control::Quota::kMessagesPerSecond;
  Bucket& b = (messages ? messages_ : alarms_)[tenant];
  Fill(b, static_cast<double>(*limit) / LiveNodes());
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::nullopt;
  }
  ++(messages ? stats_.delayed_messages : stats_.delayed_alarms);
  // Until the next token, at least a millisecond.
  const double seconds = std::max((1 - b.tokens) / b.rate, 0.001);
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

std::optional<std::size_t> TenantLimits::ResidentShare(const std::string& tenant) {
  const control::TenantQuotas* q = quotas_.For(tenant);
  if (q == nullptr) return std::nullopt;
  const auto limit = q->Get(control::Quota::kResidentActors);
  if (!limit) return std::nullopt;
  return static_cast<std::size_t>(std::max(1.0, std::ceil(static_cast<double>(*limit) / LiveNodes())));
}

void PublishTenantLimitMetrics(MetricsRegistry& registry, const control::QuotaCache& quotas,
                               const TenantLimits& limits) {
  const std::string help = "Client requests refused 429 for a tenant's rate quota, by quota (docs/tenants.md).";
  registry.AddCallbackCounter("wasmkeep_quota_throttled_total", help,
                              [&limits] { return static_cast<double>(limits.stats().throttled_requests); },
                              {{"quota", std::string(control::QuotaName(control::Quota::kRequestsPerSecond))}});
  registry.AddCallbackCounter("wasmkeep_quota_throttled_total", help,
                              [&limits] { return static_cast<double>(limits.stats().throttled_cpu); },
                              {{"quota", std::string(control::QuotaName(control::Quota::kCpuMsPerSecond))}});
  const std::string delayed =
      "Messages delivered and alarm events run late because their tenant was over its messages_per_second or "
      "alarms_per_second (counted at each wait; docs/tenants.md).";
  registry.AddCallbackCounter("wasmkeep_quota_delayed_total", delayed,
                              [&limits] { return static_cast<double>(limits.stats().delayed_messages); },
                              {{"quota", std::string(control::QuotaName(control::Quota::kMessagesPerSecond))}});
  registry.AddCallbackCounter("wasmkeep_quota_delayed_total", delayed,
                              [&limits] { return static_cast<double>(limits.stats().delayed_alarms); },
                              {{"quota", std::string(control::QuotaName(control::Quota::kAlarmsPerSecond))}});
  registry.AddCallbackGauge("wasmkeep_tenants_with_quotas", "Tenants with at least one quota, as this node last read them",
                            [&quotas] { return static_cast<double>(quotas.stats().tenants_limited); });
  registry.AddCallbackCounter("wasmkeep_quota_records_corrupt_total",
                              "Reads of a quota record that did not decode (the tenant's last good quotas stay)",
                              [&quotas] { return static_cast<double>(quotas.stats().corrupt_records); });
}

}  // namespace wk
