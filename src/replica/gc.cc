#include "replica/gc.h"

namespace wk::replica {

GcPlan PlanGc(const GcInput& in) {
  GcPlan plan;
  const Position own_fence{in.generation, 0};
  // What the collection leans on: the newest acknowledged snapshot, or with retention the
  // oldest base the window needs (never after that snapshot: the caller clamps it).
  const std::optional<Position> lean =
      in.keep_from && !in.broken.on(BrokenModel::kGcIgnoresRetention) ? in.keep_from : in.snapshot;
  for (const Position& p : in.segments) {
    if (p == own_fence || p.generation > in.generation) continue;
    if (in.broken.on(BrokenModel::kGcDeletesChain) && p.generation < in.generation) {
      plan.segments.push_back(p);
      continue;
    }
    const bool covered = lean && p <= *lean;
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
    if (lean && p < *lean) {
      plan.snapshots.push_back(p);
    } else if (p.generation < in.generation && (!lean || p != *lean) && !(in.keep_from && in.chain.count(p))) {
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
