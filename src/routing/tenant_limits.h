// TenantLimits: a node's admission of its tenants' work against their rate quotas
// (control/quotas.h; docs/tenants.md, "Quotas"). Each rate quota is a token bucket per tenant
// on each node, filled at the quota divided by the nodes live in this node's view and
// holding one second of it: with requests spread over the nodes (a load balancer, or
// clients picking any node) the cluster admits about the quota, and no node needs to talk
// to another or to the bucket to decide. A client that sends everything through one node
// gets that node's share only; say so to tenants (docs/tenants.md).
//   requests_per_second: one token per client API request, taken where it arrives (a
//     forwarded request was admitted by the node it reached first);
//   cpu_ms_per_second: the time the node's workers spent on the tenant's events, charged
//     after each event; while the bucket is empty the tenant's requests are refused.
//   messages_per_second, alarms_per_second: a token per message this node delivers for the
//     tenant's senders, per alarm event it runs; over the rate the work waits (a message or
//     alarm is durable: it is late, never refused).
// A refused request is 429 with Retry-After (the whole seconds until a token), naming the
// quota. resident_actors is a size, shared the same way: each node keeps at most its share,
// rounded up, of the tenant's actors in memory (ResidentShare; the runtime enforces it).
//
// Threading: the Env loop; simulator-clean (the Env's monotonic clock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/metrics.h"
#include "base/time.h"
#include "cluster/membership.h"
#include "control/quota_cache.h"
#include "env/env.h"

namespace wk {

struct QuotaRefusal {
  control::Quota quota = control::Quota::kCount;
  int retry_after_seconds = 1;
  std::string message;  // names the tenant, the quota and this node's share of it
};

struct TenantLimitStats {
  std::uint64_t throttled_requests = 0;  // refused for requests_per_second
  std::uint64_t throttled_cpu = 0;       // refused for cpu_ms_per_second
  std::uint64_t delayed_messages = 0;    // made to wait for messages_per_second
  std::uint64_t delayed_alarms = 0;      // made to wait for alarms_per_second
};

class TenantLimits {
 public:
  // REQUIRES: quotas and membership outlive this.
  TenantLimits(Env& env, const control::QuotaCache& quotas, const Membership& membership);

  // A client API request of `tenant` arrived: admitted (a token taken), or the refusal.
  std::optional<QuotaRefusal> AdmitRequest(const std::string& tenant);
  // The tenant's events ran `worker_time` on this node's workers.
  void ChargeCpu(const std::string& tenant, Duration worker_time);
  // One message of the tenant's (kMessagesPerSecond) or alarm (kAlarmsPerSecond) is about to
  // be delivered or run: admitted (nullopt, a token taken), or how long to wait before asking
  // again. REQUIRES: quota is one of those two.
  std::optional<Duration> AdmitWork(control::Quota quota, const std::string& tenant);
  // The tenant's actors this node may keep in memory (its share of resident_actors, rounded
  // up, at least 1); nullopt: unlimited.
  std::optional<std::size_t> ResidentShare(const std::string& tenant);
  TenantLimitStats stats() const { return stats_; }

 private:
  struct Bucket {
    double tokens = 0;
    double rate = 0;  // per second
    MonoTime filled{};
    bool started = false;
  };
  // Fills the bucket to now at `rate` (one second's worth at most).
  void Fill(Bucket& b, double rate);
  // The nodes live in this node's view (1 at least), counted at most once a second.
  double LiveNodes();

  Env& env_;
  const control::QuotaCache& quotas_;
  const Membership& membership_;
  std::map<std::string, Bucket> requests_;
  std::map<std::string, Bucket> cpu_;
  std::map<std::string, Bucket> messages_;
  std::map<std::string, Bucket> alarms_;
  double live_nodes_ = 1;
  MonoTime live_counted_{};
  TenantLimitStats stats_;
};

// wasmkeep_quota_throttled_total{quota}, wasmkeep_tenants_with_quotas and
// wasmkeep_quota_records_corrupt_total (docs/operations.md, "What to alert on"). REQUIRES: both outlive registry's use.
void PublishTenantLimitMetrics(MetricsRegistry& registry, const control::QuotaCache& quotas,
                               const TenantLimits& limits);

}  // namespace wk
