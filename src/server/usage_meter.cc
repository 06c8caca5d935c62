#include "server/usage_meter.h"

#include <time.h>

#include <algorithm>

#include "base/log.h"
#include "control/tenants.h"

namespace wk {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr Duration kSamplePeriod = std::chrono::seconds(1);

// The calling thread's CPU time in nanoseconds (0 if the clock is unavailable).
std::uint64_t ThreadCpuNs() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The CPU clock when the current worker's event began (a worker runs one event at a time,
// and its start and end hooks run on its thread).
thread_local std::uint64_t event_cpu_start_ns = 0;

// The integrator is shared with its pass, which may outlive the meter (a cancelled pass ends
// at its next await).
Task<void> IntegratePass(std::shared_ptr<control::StoredUsageIntegrator> integrator, WallTime now) {
  Status integrated = co_await integrator->Integrate(now);
  if (!integrated.ok() && integrated.code() != Code::kCancelled) {
    WK_LOG_WARN("stored usage not integrated; the next pass covers the time", {{"error", integrated.ToString()}});
  }
}

}  // namespace

UsageMeter::UsageMeter(Env& env, ObjectStore& store, std::string node_id, Duration flush,
                       std::function<std::vector<TenantResidency>()> residency)
    : env_(env),
      store_(store.ForPurpose(BucketPurpose::kControl)),
      flush_(flush),
      residency_(std::move(residency)),
      book_(std::move(node_id)) {}

UsageMeter::~UsageMeter() {
  *alive_ = false;
  if (loop_.valid()) loop_.Cancel();
  if (integrating_.valid()) integrating_.Cancel();
}

void UsageMeter::IntegrateStoredUsage(std::function<bool()> integrates, BrokenModels broken) {
  integrates_ = std::move(integrates);
  // An unchanged sum is written every ten flushes (control/stored_usage.h: its cost).
  integrator_ = std::make_shared<control::StoredUsageIntegrator>(store_, 10 * flush_, broken);
}

void UsageMeter::Start() {
  last_sample_ = last_flush_ = env_.MonoNow();
  loop_ = env_.Spawn(Loop(), "usage meter");
}

control::UsageCounters& UsageMeter::Now(const std::string& tenant) {
  return book_.At(tenant, control::HourOf(env_.WallNow()));
}

std::string UsageMeter::SeriesName(const std::string& tenant) const {
  if (series_.contains(tenant)) return tenant;
  return series_.size() - (series_.contains("other") ? 1 : 0) < kTenantSeries ? tenant : std::string("other");
}

UsageMeter::SeriesTotals& UsageMeter::SeriesOf(const std::string& tenant) { return series_[SeriesName(tenant)]; }

UsageMeter::Breakdown UsageMeter::Series(std::uint64_t SeriesTotals::*field, double scale) const {
  Breakdown out;
  for (const auto& [name, totals] : series_) out.emplace_back(name, static_cast<double>(totals.*field) * scale);
  return out;
}

void UsageMeter::CountRequest(const std::string& tenant, int status, std::uint64_t ingress, std::uint64_t egress) {
  if (stopped_) return;
  control::UsageCounters& c = Now(tenant);
  const control::UsageOutcome outcome = control::UsageOutcomeOfStatus(status);
  c.requests[static_cast<std::size_t>(outcome)] += 1;
  c.ingress_bytes += ingress;
  c.egress_bytes += egress;
  SeriesTotals& series = SeriesOf(tenant);
  series.requests += 1;
  if (outcome == control::UsageOutcome::kThrottled) series.throttled += 1;
  series.egress += egress;
}

void UsageMeter::CountBucketRequest(std::string_view tenant, BucketPurpose purpose) {
  const auto p = static_cast<std::size_t>(purpose);
  if (stopped_ || p >= kBucketPurposes || !control::ValidateTenantName(tenant).ok()) return;
  Now(std::string(tenant)).bucket_requests[p] += 1;
}

actor::RuntimeHooks UsageMeter::Wrap(actor::RuntimeHooks hooks) {
  auto start = std::move(hooks.on_event_start);
  auto end = std::move(hooks.on_event_end);
  hooks.on_event_start = [start](const ActorId& id, std::size_t worker) {
    event_cpu_start_ns = ThreadCpuNs();
    if (start) start(id, worker);
  };
  hooks.on_event_end = [this, end](const ActorId& id, std::size_t worker, const actor::EventEnd& e) {
    const std::uint64_t now = ThreadCpuNs();
    const std::uint64_t used = now > event_cpu_start_ns ? now - event_cpu_start_ns : 0;
    {
      std::lock_guard<std::mutex> lock(cpu_mu_);
      cpu_ns_[id.tenant] += used;
    }
    if (end) end(id, worker, e);
  };
  return hooks;
}

void UsageMeter::Sample() {
  const MonoTime now = env_.MonoNow();
  const auto elapsed_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(
      0, duration_cast<milliseconds>(now - last_sample_).count()));
  last_sample_ = now;
  std::unordered_map<std::string, std::uint64_t> cpu;
  {
    std::lock_guard<std::mutex> lock(cpu_mu_);
    cpu.swap(cpu_ns_);
  }
  for (const auto& [tenant, ns] : cpu) {
    SeriesOf(tenant).cpu_ns += ns;
    Carry& carry = carry_[tenant];
    carry.cpu_ns += ns;
    Now(tenant).cpu_ms += carry.cpu_ns / 1'000'000;
    carry.cpu_ns %= 1'000'000;
  }
  if (elapsed_ms == 0 || !residency_) return;
  for (const TenantResidency& r : residency_()) {
    if (r.tenant.empty()) continue;
    Carry& carry = carry_[r.tenant];
    carry.actor_ms += r.actors * elapsed_ms;
    control::UsageCounters& c = Now(r.tenant);
    c.resident_actor_seconds += carry.actor_ms / 1000;
    carry.actor_ms %= 1000;
  }
}

Task<void> UsageMeter::Loop() {
  std::shared_ptr<bool> alive = alive_;
  while (true) {
    if (!co_await env_.SleepFor(kSamplePeriod)) co_return;
    if (!*alive || stopped_) co_return;
    Sample();
    if (env_.MonoNow() - last_flush_ < flush_) continue;
    last_flush_ = env_.MonoNow();
    Status s = co_await book_.Flush(store_, control::HourOf(env_.WallNow()));
    if (!*alive) co_return;
    if (!s.ok()) WK_LOG_WARN("usage flush failed; the next one writes it", {{"error", s.ToString()}});
    // A pass of its own, one at a time: a long one (many tenants) never delays the flushes.
    if (integrator_ && integrates_ && !stopped_ && (!integrating_.valid() || integrating_.done()) && integrates_()) {
      integrating_ = env_.Spawn(IntegratePass(integrator_, env_.WallNow()), "stored usage");
    }
  }
}


Task<Status> UsageMeter::Stop() {
  std::shared_ptr<bool> alive = alive_;
  if (stopped_) co_return Status::Ok();
  stopped_ = true;
  if (loop_.valid()) {
    loop_.Cancel();
    co_await loop_.Join();  // a flush in flight ends first: one Flush at a time
  }
  if (integrating_.valid()) integrating_.Cancel();  // the next process's pass covers the time
  if (!*alive) co_return Status::Ok();
  Sample();
  co_return co_await book_.Flush(store_, control::HourOf(env_.WallNow()));
}

void UsageMeter::PublishMetrics(MetricsRegistry& metrics) {
  const std::string help = "Flushes of this node's usage records to the bucket, by outcome.";
  metrics.AddCallbackCounter("wasmkeep_usage_flushes_total", help,
                             [this] { return static_cast<double>(book_.flushes()); }, {{"outcome", "ok"}});
  metrics.AddCallbackCounter("wasmkeep_usage_flushes_total", help,
                             [this] { return static_cast<double>(book_.flush_failures()); }, {{"outcome", "failed"}});
  const std::string stored_help =
      "Passes of this node integrating every tenant's stored byte-seconds (when it is the lowest live node), by "
      "outcome.";
  metrics.AddCallbackCounter("wasmkeep_stored_usage_passes_total", stored_help, [this] {
    return integrator_ ? static_cast<double>(integrator_->stats().passes - integrator_->stats().failed) : 0.0;
  }, {{"outcome", "ok"}});
  metrics.AddCallbackCounter("wasmkeep_stored_usage_passes_total", stored_help, [this] {
    return integrator_ ? static_cast<double>(integrator_->stats().failed) : 0.0;
  }, {{"outcome", "failed"}});
  metrics.AddCallbackCounter(
      "wasmkeep_stored_usage_corrupt_total",
      "Stored-usage and stored-bytes ledger records this node's integration found corrupt (each once; left alone).",
      [this] { return integrator_ ? static_cast<double>(integrator_->stats().corrupt) : 0.0; });
  metrics.AddCallbackCounter(
      "wasmkeep_stored_usage_conflicts_total",
      "Stored byte-seconds writes another node's integration won (it counted that time; nothing is counted twice).",
      [this] { return integrator_ ? static_cast<double>(integrator_->stats().conflicts) : 0.0; });
  // Per tenant, since this process started (the bounded label set: the header).
  metrics.AddCallbackCounterBreakdown("wasmkeep_tenant_requests_total",
                                      "Actor API requests that arrived at this node, by tenant (the first 20, then other)",
                                      "tenant", [this] { return Series(&SeriesTotals::requests, 1); });
  metrics.AddCallbackCounterBreakdown("wasmkeep_tenant_requests_throttled_total",
                                      "Requests refused 429 for a tenant's rate quota, by tenant (the first 20, then other)",
                                      "tenant", [this] { return Series(&SeriesTotals::throttled, 1); });
  metrics.AddCallbackCounterBreakdown("wasmkeep_tenant_cpu_seconds_total",
                                      "CPU of the tenant's events on this node's workers (the first 20, then other)",
                                      "tenant", [this] { return Series(&SeriesTotals::cpu_ns, 1e-9); });
  metrics.AddCallbackCounterBreakdown("wasmkeep_tenant_egress_bytes_total",
                                      "Response body bytes sent to the tenant's clients (the first 20, then other)",
                                      "tenant", [this] { return Series(&SeriesTotals::egress, 1); });
  metrics.AddCallbackGaugeBreakdown(
      "wasmkeep_tenant_resident_actors", "The tenant's actors in memory on this node (the first 20, then other)",
      "tenant", [this] {
        std::map<std::string, double> by;
        for (const auto& [name, totals] : series_) by[name] = 0;  // every series named, 0 when none are in
        if (residency_) {
          for (const TenantResidency& r : residency_()) by[SeriesName(r.tenant)] += static_cast<double>(r.actors);
        }
        return Breakdown(by.begin(), by.end());
      });
}

}  // namespace wk
