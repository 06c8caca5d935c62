#include "quota_operator.h"

#include <string>
#include <vector>

#include "control/quotas.h"
#include "control/tenants.h"
#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk::sim {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct QuotaOperator::Machine {
  explicit Machine(World& w) : env(w.sim(), FromUnixMs(kOriginMs)), store(env, w.bucket()) {}
  SimEnv env;
  MemStore store;
};

QuotaOperator::QuotaOperator(World& world, QuotaOperatorOptions options)
    : w_(world), options_(options), machine_(std::make_unique<Machine>(world)) {}

QuotaOperator::~QuotaOperator() = default;

void QuotaOperator::Start() {
  Schedule();
  w_.bucket_env().StartTimer(MonoTime(options_.operators_for), [this] {
    machine_->env.Spawn(Change(true), "quota operator");
  });
}

void QuotaOperator::Schedule() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(8000, 20000)), [this] {
    if (w_.Now() >= MonoTime(options_.operators_for)) return;
    machine_->env.Spawn(Change(false), "quota operator");
    Schedule();
  });
}

Task<void> QuotaOperator::Change(bool lift_all) {
  struct Choice {
    control::Quota quota;
    std::int64_t lo, hi;
  };
  const std::vector<Choice> choices = {{control::Quota::kRequestsPerSecond, 3, 30},
                                       {control::Quota::kResidentActors, 3, 12},
                                       {control::Quota::kMessagesPerSecond, 1, 10},
                                       {control::Quota::kAlarmsPerSecond, 1, 10}};
  std::vector<control::QuotaSetting> settings;
  std::string what;
  for (const Choice& c : choices) {
    control::QuotaSetting s{c.quota, std::nullopt};
    if (!lift_all && w_.Chance(0.5)) s.value = static_cast<std::uint64_t>(w_.Uniform(c.lo, c.hi));
    what += " " + std::string(control::QuotaName(c.quota)) + "=" + (s.value ? std::to_string(*s.value) : "unlimited");
    settings.push_back(s);
  }
  // The tenant's record first (another piece may have made it already).
  auto made = co_await control::CreateTenant(machine_->store, machine_->env, std::string(kServingTenant),
                                             CallOptions{seconds(5)});
  if (!made.ok() && made.code() != Code::kPreconditionFailed) {
    w_.Trace("quota operator creates tenant t: " + made.status().ToString());
  }
  auto set = co_await control::SetQuotas(machine_->store, machine_->env, std::string(kServingTenant), settings,
                                         CallOptions{seconds(5)});
  // The last change must land: the healthy end runs unthrottled.
  for (int attempt = 0; lift_all && !set.ok() && attempt < 20; ++attempt) {
    co_await machine_->env.SleepFor(seconds(1));
    set = co_await control::SetQuotas(machine_->store, machine_->env, std::string(kServingTenant), settings,
                                      CallOptions{seconds(5)});
  }
  ++changes_;
  w_.Trace("quota operator sets" + what + (set.ok() ? "" : ": " + set.status().ToString()));
}

}  // namespace wk::sim
