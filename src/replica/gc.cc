#include "replica/gc.h"

namespace wk::replica {

GcPlan PlanGc(const GcInput& in) {
  GcPlan plan;
  const Position own_fence{in.generation, 0};
  for (const Position& p : in.segments) {
    if (p == own_fence || p.generation > in.generation) continue;
    if (in.broken.on(BrokenModel::kGcDeletesChain) && p.generation < in.generation) {
      plan.segments.push_back(p);
      continue;
    }
    const bool covered = in.snapshot && p <= *in.snapshot;
    const bool on_chain = p.generation == in.generation || in.chain.count(p) > 0;
    if (on_chain) {
      if (covered) plan.segments.push_back(p);
    } else if (in.off_chain_ripe) {
      plan.segments.push_back(p);
    } else {
      plan.waiting_for_bound = true;
    }
  }
  for (const Position& p : in.snapshots) {
    if (in.snapshot && p < *in.snapshot) {
      plan.snapshots.push_back(p);
    } else if (p.generation < in.generation && (!in.snapshot || p != *in.snapshot)) {
      // An older hold's snapshot after ours (or with none of ours): not the chain's.
      if (in.off_chain_ripe) {
        plan.snapshots.push_back(p);
      } else {
        plan.waiting_for_bound = true;
      }
    }
  }
  return plan;
}

}  // namespace wk::replica
