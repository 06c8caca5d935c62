// QuotaOperator: tenant quotas changed mid-run (docs/tenants.md, "Quotas"), as a piece any
// serving scenario whose nodes read quotas (ServingOptions::quotas) adds; `combined` runs it
// (docs/simulation.md, "combined"). An operator, from its own machine as `wasmkeep tenant set`
// does (control/quotas.h), every 8-20 s until operators_for sets or lifts, for the world's
// tenant, requests_per_second (3-30), resident_actors (3-12), messages_per_second and
// alarms_per_second (1-10); at operators_for it lifts them all, so the healthy end (the alarms'
// A6, the final reads) runs unthrottled. What it asks of the others: the list clients' T1 (an
// append refused 429 was never applied); the other checkers hold while starts are refused,
// idle actors hibernated to make room, and deliveries and alarms wait for tokens.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <memory>

#include "serving.h"
#include "world.h"

namespace wk::sim {

struct QuotaOperatorOptions {
  Duration operators_for = std::chrono::seconds(120);  // every quota lifted then
};

class QuotaOperator {
 public:
  // REQUIRES: world outlives this.
  QuotaOperator(World& world, QuotaOperatorOptions options = {});
  ~QuotaOperator();

  // The nodes read quotas.
  static void Configure(ServingOptions& serving) { serving.quotas = true; }
  // Schedules the operator's first change.
  void Start();
  int changes() const { return changes_; }

 private:
  struct Machine;
  void Schedule();
  Task<void> Change(bool lift_all);

  World& w_;
  QuotaOperatorOptions options_;
  std::unique_ptr<Machine> machine_;
  int changes_ = 0;
};

}  // namespace wk::sim
