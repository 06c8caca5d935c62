// UsageMeter: a node's per-tenant usage (docs/tenants.md, "Usage"), counted on the request
// and event paths and flushed to the bucket as this node's usage/<tenant>/<node>/<hour>
// records (control/usage.h) every usage.flush_ms and at a clean stop.
//
// What it counts, per tenant: the actor API's requests that arrived at this node's client
// listener (a forwarded request counts once, where it arrived) by outcome, their body bytes
// in and out; CPU of the tenant's events (the worker thread's CPU clock around each event,
// its instantiation included); resident actor-seconds (sampled every second and integrated).
// Stored byte-seconds are not counted per node: every actor's state counts, resident or not,
// so at each flush the node that integrates (the lowest live node id in its membership view)
// integrates every tenant's stored-bytes ledger sum (control/stored_usage.h; its conditional
// writes count every instant once when two nodes both think they are lowest). Only tenants whose
// classes are known deployed are counted (as routing/class_traffic.h bounds its rows), so
// requests naming made-up tenants grow nothing. Bucket requests by purpose: each request
// sent for one of the tenant's actors (its ownership records, segments, snapshots, restores,
// garbage collection, alarm index entries), reported as it completes by the node's
// TenantStores (store/tenant_store.h: where they are attributed, and why there); the node's
// own requests (lease, listing, fence, control, classes, admin, alarm shards) are nobody's.
//
// Restarts: one record per node and hour, continued by the next process (UsageBook reads the
// stored record at its first flush of an hour) rather than a record per process: the
// listing a sum reads stays one key per node and hour. A kill -9 loses what was counted
// since the last flush (at most usage.flush_ms).
//
// Metrics: wasmkeep_usage_flushes_total{outcome}, wasmkeep_stored_usage_passes_total{outcome},
// wasmkeep_stored_usage_conflicts_total and wasmkeep_stored_usage_corrupt_total, and per tenant (since this process
// started) wasmkeep_tenant_requests_total, wasmkeep_tenant_requests_throttled_total,
// wasmkeep_tenant_cpu_seconds_total, wasmkeep_tenant_egress_bytes_total and the gauge
// wasmkeep_tenant_resident_actors. Cardinality is bounded: the first kTenantSeries tenants
// this process counts get a series of their own for its lifetime; every later one is summed
// under tenant="other" (a counter's label set must not change while it counts, so a
// "current top N" would make series jump; a restart chooses again).
//
// Threading: the loop thread, except the hooks Wrap installs (the runtime's workers: they
// take a mutex per event end).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actor/runtime.h"
#include "base/metrics.h"
#include "control/stored_usage.h"
#include "control/usage.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

// usage.flush_ms's default.
inline constexpr Duration kDefaultUsageFlush = std::chrono::seconds(60);
// Tenants with Prometheus series of their own (the rest: tenant="other").
inline constexpr std::size_t kTenantSeries = 20;

struct TenantResidency {
  std::string tenant;
  std::size_t actors = 0;
};

class UsageMeter {
 public:
  // residency: the tenants' resident actors now (the runtime's MemoryByTenant).
  UsageMeter(Env& env, ObjectStore& store, std::string node_id, Duration flush,
             std::function<std::vector<TenantResidency>()> residency);
  ~UsageMeter();
  UsageMeter(const UsageMeter&) = delete;
  UsageMeter& operator=(const UsageMeter&) = delete;

  // Before Start: at each flush, if integrates() says so, this node integrates every
  // tenant's stored byte-seconds (control/stored_usage.h).
  void IntegrateStoredUsage(std::function<bool()> integrates, BrokenModels broken = {});
  // Starts sampling (every second) and flushing (every flush).
  void Start();
  // The clean stop: samples and flushes once more; further counts are not written.
  Task<Status> Stop();

  // One actor API request answered with status; ingress and egress: its body bytes.
  void CountRequest(const std::string& tenant, int status, std::uint64_t ingress, std::uint64_t egress);
  // One bucket request sent for one of tenant's actors, completed now (loop thread). A name
  // that is not a tenant's (a system actor's) counts nothing.
  void CountBucketRequest(std::string_view tenant, BucketPurpose purpose);
  // hooks with on_event_start/on_event_end that also measure each event's CPU (calling the
  // given ones too).
  actor::RuntimeHooks Wrap(actor::RuntimeHooks hooks);
  // wasmkeep_usage_flushes_total{outcome} and the per-tenant series (above).
  void PublishMetrics(MetricsRegistry& metrics);

  const control::UsageBook& book() const { return book_; }
  // nullptr until IntegrateStoredUsage.
  const control::StoredUsageIntegrator* stored_usage() const { return integrator_.get(); }

 private:
  // CPU measured by the workers, moved into the book; residency integrated since last time.
  void Sample();
  Task<void> Loop();
  control::UsageCounters& Now(const std::string& tenant);
  // The Prometheus series tenant counts under: itself, or "other" past kTenantSeries.
  struct SeriesTotals {
    std::uint64_t requests = 0;
    std::uint64_t throttled = 0;
    std::uint64_t cpu_ns = 0;
    std::uint64_t egress = 0;
  };
  SeriesTotals& SeriesOf(const std::string& tenant);
  std::string SeriesName(const std::string& tenant) const;
  using Breakdown = std::vector<std::pair<std::string, double>>;
  Breakdown Series(std::uint64_t SeriesTotals::*field, double scale) const;

  Env& env_;
  ObjectStore& store_;
  Duration flush_;
  std::function<std::vector<TenantResidency>()> residency_;
  control::UsageBook book_;
  std::function<bool()> integrates_;
  std::shared_ptr<control::StoredUsageIntegrator> integrator_;  // shared with its pass
  TaskHandle integrating_;  // the pass in flight (one at a time)
  MonoTime last_sample_{};
  MonoTime last_flush_{};
  // Fractions carried between samples so integration loses nothing: byte-ms, actor-ms, ns.
  struct Carry {
    std::uint64_t actor_ms = 0;
    std::uint64_t cpu_ns = 0;
  };
  std::unordered_map<std::string, Carry> carry_;
  std::mutex cpu_mu_;
  std::unordered_map<std::string, std::uint64_t> cpu_ns_;  // guarded by cpu_mu_
  std::map<std::string, SeriesTotals> series_;  // by series name ("other" included)
  TaskHandle loop_;
  bool stopped_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
