// The `ownership` scenario (docs/simulation.md, "The `ownership` scenario"; ADR 0020 §3,
// §4): the lease scenario's world and faults, plus drains and deleted heartbeats, with six
// actors acquired, used, hibernated and released on every node; checkers 1-10. With
// --nodes, the scale mode (scale.h).
#include "checkers.h"
#include "faults.h"
#include "scale.h"
#include "scenario.h"
#include "world.h"

namespace wk::sim {
namespace {

constexpr int kActors = 6;
constexpr int kWorkers = 2;  // concurrent workers per process

// Wakes a random actor's sleeping hold or acquires it, "uses" it (checking validity) for a
// while, then hibernates it (releases it, or keeps the hold asleep: docs/node-lease.md,
// "Sleeping holds") or keeps it until its lease ends. Stops while the process drains.
Task<void> Workload(World* w, Process* p) {
  RunResult& result = w->result();
  // Kept briefly and few, so the policy's releases meet the faults.
  p->node->owners().set_sleep_policy(
      SleepPolicy{milliseconds(w->Uniform(500, 20000)), static_cast<std::size_t>(w->Uniform(1, kActors))});
  for (;;) {
    if (!co_await p->env()->SleepFor(milliseconds(w->Uniform(50, 1500)))) co_return;
    if (p->stopping || p->draining || !p->node->lease().IsValid()) continue;
    const ActorId actor = w->ActorAt(w->Uniform(0, w->actors() - 1));
    AcquireResult r;
    if (auto woken = p->node->owners().Wake(actor)) {
      r.kind = AcquireResult::Kind::kAcquired;
      r.hold = woken->first;
      w->Trace("p" + std::to_string(p->number) + " " + actor.name + "@g" + std::to_string(r.hold.generation().value) +
               " woken");
    } else {
      r = co_await p->node->owners().Acquire(actor);
    }
    ++result.acquire_attempts;
    // A request whose acquire had an unknown outcome is retried at once, as a client
    // would: the second acquisition races the first one's write and the resolver.
    for (int retry = 0; retry < 3 && r.kind == AcquireResult::Kind::kUnknown; ++retry) {
      r = co_await p->node->owners().Acquire(actor);
      ++result.acquire_attempts;
    }
    if (r.kind != AcquireResult::Kind::kAcquired) continue;
    ++result.holds;
    const MonoTime until = w->Now() + milliseconds(w->Uniform(100, 6000));
    while (w->Now() < until && r.hold.IsValid()) {
      if (!co_await p->env()->SleepFor(milliseconds(w->Uniform(20, 400)))) co_return;
    }
    if (r.hold.IsValid() && w->Chance(0.4) && p->node->owners().Sleep(actor, r.hold.generation(), HoldResume{})) {
      w->Trace("p" + std::to_string(p->number) + " " + actor.name + " sleeps");
    } else if (r.hold.IsValid() && w->Chance(0.7)) {
      Status s = co_await p->node->owners().Release(actor);
      if (!s.ok()) ++result.pending_releases;
    }
  }
}

}  // namespace

RunResult RunOwnershipScenario(const RunOptions& options) {
  // --nodes N or --s3-limits: N nodes and 2N actors on the S3 bucket model, and the
  // scaling report (scale.h); the same workload on every process.
  if (options.scaled()) {
    return RunScaled(options, /*owners=*/true, [](World& w, Process& p) {
      for (int i = 0; i < kWorkers; ++i) p.env()->Spawn(Workload(&w, &p), "workload");
    });
  }
  World world(options, kActors);
  Faults faults(world, FaultOptions{.operator_faults = true});
  Checkers checkers(world, CheckerOptions{.owners = true});
  World* w = &world;
  world.hooks.on_started = [w](Process& p) {
    for (int i = 0; i < kWorkers; ++i) p.env()->Spawn(Workload(w, &p), "workload");
  };
  return world.Run(Connect(world, faults, checkers));
}

}  // namespace wk::sim
