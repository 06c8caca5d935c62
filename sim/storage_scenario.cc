// The `storage` scenario (docs/simulation.md, "The `storage` scenario"; docs/architecture.md,
// "Durable storage"): the ownership scenario's world, faults and checkers, with a durable
// replica writing on every hold, the storage faults (slow segment uploads, moves, kills
// mid-upload) and checkers 11-16.
//
// Each worker acquires an actor, opens its replica (restore, then the fence), and writes:
// rounds of 1-4 batches committed back to back (group commit), each reading "log",
// appending a fresh id and putting "e/<id>" (storage_history.h says why). Every write
// asks WhenReleasable; an Ok is an acknowledgement the checkers hold the design to. Then the
// worker hibernates the actor (Close, then release, or keep the hold asleep: a later use
// wakes it and continues its log, docs/node-lease.md "Sleeping holds"), or it keeps writing
// until the hold ends (the lost-lease cut), or the replica fails (release if still valid,
// else drop), or the process dies under it.
//
// With retention on, an operator (history_operators.h) restores the actors to points of
// their history and forks them to fresh names during the chaos, through each process's own
// OwnerChanges (StorageParts: as a node has them), which takes the actor from its worker
// (StorageResidents) and holds it through the deletion guard the workers honour; checkers
// H1-H4 (history_model.h, storage_history.h, checkers.h) judge them.
#include "checkers.h"
#include "faults.h"
#include "history_model.h"
#include "history_operators.h"
#include "replica/provider.h"
#include "replica/replica.h"
#include "routing/owner_changes.h"
#include "scenario.h"
#include "storage_history.h"
#include "world.h"

namespace wk::sim {
namespace {

// Few actors, so that holds move between nodes often.
constexpr int kStorageActors = 3;
constexpr int kWorkers = 2;  // concurrent workers per process

// The storage scenario's state of a log: "log" and an "e/<id>" per id (storage_history.h).
ModelState LogState(const std::string& log) {
  ModelState s;
  if (log.empty()) return s;
  s["log"] = log;
  for (const std::string& id : StorageHistory::SplitLog(log)) s["e/" + id] = "";
  return s;
}

// What the owner's changes see of a process's actors in memory: those a worker of its uses
// (in_use: from the choice of the actor to the end of its use). Unload asks that worker to
// stop: it closes the replica and releases (or drops) the hold, as the runtime's hibernation.
class StorageResidents final : public actor::EventHost {
 public:
  explicit StorageResidents(Process& p) : p_(p) {}
  Task<actor::EventResult> HandleRequest(ActorId id, actor::Request request) override {
    (void)id, (void)request;
    actor::EventResult r;
    r.outcome = actor::EventOutcome::kNotFound;
    co_return r;
  }
  void Unload(const ActorId& id) override {
    if (p_.in_use.count(id)) p_.unloading.insert(id);
  }
  bool IsResident(const ActorId& id) const override { return p_.in_use.count(id) > 0; }

 private:
  Process& p_;
};

// The owner's changes of a storage process (routing/owner_changes.h), as a node has them: its
// replicas' provider (used only for the changes' own replicas: the workers open theirs
// directly) over the deletion guard the workers honour too.
struct StorageParts final : ProcessParts {
  StorageParts(Process& p, const replica::ReplicaOptions& options, BrokenModels broken)
      : residents(p),
        holds(p.node->owners()),
        guard(holds),
        provider(replica::Replica::Deps{*p.env(), *p.replica_store,
                                        [env = p.env()](std::function<void()> fn) { env->Post(std::move(fn)); },
                                        nullptr, broken},
                 guard, options, seconds(10)),
        changes(OwnerChangesDeps{*p.env(), *p.replica_store, p.node->owners(), residents, provider, guard, p.node_id,
                                 options.retention, broken}) {}
  StorageResidents residents;
  replica::OwnersHoldSource holds;
  DeletionGuard guard;
  replica::ReplicaProvider provider;
  OwnerChanges changes;
};

class StorageWorkload {
 public:
  StorageWorkload(World& world, Checkers& checkers) : w_(world), checkers_(checkers) {
    // Small bounds, so that snapshots and garbage collection happen a lot.
    replica_options_.snapshot_every_segments = static_cast<std::uint32_t>(w_.Uniform(3, 5));
    replica_options_.segment_max_batches = static_cast<std::uint32_t>(w_.Uniform(2, 6));
    replica_options_.gc_max_deletes_per_pass = 8;
    // The fencing bound: an older hold's upload may still be in flight until then.
    replica_options_.gc_off_chain_after = w_.timing().takeover_after();
    // History on (the window the operator's restores and forks reach: history_operators.h).
    DrawRetention(w_, replica_options_);
    WK_CHECK(replica::ValidateReplicaOptions(replica_options_).ok(), "bad simulator replica options");
    broken_ = w_.options().broken();
  }

  const replica::ReplicaOptions& replica_options() const { return replica_options_; }
  // Told of every acknowledged write by its actor and id (the history model).
  std::function<void(const ActorId& actor, const std::string& id)> on_acknowledged;

  Task<void> Run(Process* p) {
    RunResult& result = w_.result();
    // Sleeping holds kept briefly and few of them, so that the policy's releases (idle and
    // count) meet lapses, fences, drains and kills.
    p->node->owners().set_sleep_policy(SleepPolicy{milliseconds(w_.Uniform(500, 20000)),
                                                   static_cast<std::size_t>(w_.Uniform(1, kStorageActors))});
    for (;;) {
      if (!co_await p->env()->SleepFor(milliseconds(w_.Uniform(50, 1500)))) co_return;
      // No new uses once the faults stop: the healing minute is for liveness, and the
      // final audit judges what the chaos left.
      if (w_.healed) co_return;
      if (p->stopping || p->draining || !p->node->lease().IsValid()) continue;
      const ActorId actor = w_.ActorAt(w_.Uniform(0, kStorageActors - 1));
      if (p->in_use.count(actor)) continue;
      // An owner's change (a restore) holds the actor here: it does not start (DeletionGuard).
      if (Guard(p).blocked(actor)) continue;
      p->in_use.insert(actor);
      if (auto woken = p->node->owners().Wake(actor)) {
        // The hold it slept in: no acquisition, the same generation, its log continued.
        ++result.holds;
        w_.Trace("p" + std::to_string(p->number) + " " + actor.name + "@g" +
                 std::to_string(woken->first.generation().value) + " woken");
        co_await UseActor(p, actor, woken->first, woken->second);
        p->in_use.erase(actor);
        p->unloading.erase(actor);
        continue;
      }
      AcquireResult r = co_await p->node->owners().Acquire(actor);
      ++result.acquire_attempts;
      for (int retry = 0; retry < 3 && r.kind == AcquireResult::Kind::kUnknown; ++retry) {
        r = co_await p->node->owners().Acquire(actor);
        ++result.acquire_attempts;
      }
      if (r.kind == AcquireResult::Kind::kAcquired && p->used_generations[actor].count(r.hold.generation())) {
        w_.Trace("p" + std::to_string(p->number) + " " + actor.name + "@g" +
                 std::to_string(r.hold.generation().value) + " served a replica already: released");
        co_await w_.ReleaseHold(p, actor);
        r = co_await p->node->owners().Acquire(actor);
        ++result.acquire_attempts;
        w_.Trace("p" + std::to_string(p->number) + " " + actor.name + " acquired again: kind " +
                 std::to_string(static_cast<int>(r.kind)) + " g" + std::to_string(r.hold.generation().value) + " " +
                 r.why);
      }
      if (r.kind == AcquireResult::Kind::kAcquired && !p->used_generations[actor].count(r.hold.generation())) {
        ++result.holds;
        p->used_generations[actor].insert(r.hold.generation());
        co_await UseActor(p, actor, r.hold, std::nullopt);
      }
      p->in_use.erase(actor);
      p->unloading.erase(actor);
    }
  }

 private:
  // What a replica's failure callback leaves for its worker.
  struct ReplicaFailure {
    bool failed = false;
    Status why;
  };

  Task<void> UseActor(Process* p, ActorId actor, HoldView hold, std::optional<HoldResume> resume) {
    RunResult& result = w_.result();
    const Generation generation = hold.generation();
    const std::string who = "p" + std::to_string(p->number) + " " + actor.name + "@g" + std::to_string(generation.value);
    w_.Trace(who + " acquired: restoring");
    Env* env = p->env();
    std::function<void(std::function<void()>)> post = [env](std::function<void()> fn) { env->Post(std::move(fn)); };
    replica::Replica::Deps deps{*p->env(), *p->replica_store, std::move(post), nullptr, broken_};
    replica::Replica::Hold replica_hold{hold.generation(), [hold] { return hold.IsValid(); }};
    auto opened =
        co_await replica::Replica::Open(std::move(deps), actor, std::move(replica_hold), replica_options_, resume);
    if (!opened.ok()) {
      ++result.restore_failures;
      w_.Trace(who + " restore failed: " + opened.status().ToString());
      checkers_.OnRestoreFailed(who, opened.status());
      if (hold.IsValid()) co_await w_.ReleaseHold(p, actor);
      co_return;
    }
    std::unique_ptr<replica::Replica> replica = std::move(*opened);
    ++result.restores;
    checkers_.OnRestored(actor, generation);
    {
      const replica::Restored& r = replica->restored();
      const std::string log = replica->Get("log").value_or("");
      w_.Trace(who + " restored " + std::to_string(StorageHistory::SplitLog(log).size()) + " writes from base " +
               (r.chain.base ? r.chain.base->ToString() : "none") + " + " + std::to_string(r.chain.run.size()) +
               " segments (" + std::to_string(r.listed_segments.size()) + " listed)");
    }
    // Open checked the hold right before returning; a restore that finished after its hold
    // ended was refused there and is never judged.
    if (hold.IsValid()) checkers_.CheckRestore(who, actor, *replica);

    auto failure = std::make_shared<ReplicaFailure>();
    replica->set_on_failed([failure](Status s) {
      failure->failed = true;
      failure->why = std::move(s);
    });
    // Mostly short uses (hibernation); some long ones that see lapses, fences and drains.
    const MonoTime until = w_.Now() + (w_.Chance(0.25) ? milliseconds(w_.Uniform(8000, 30000))
                                                       : milliseconds(w_.Uniform(300, 6000)));
    // Half of the uses watch the hold and cut the replica as soon as it ends; the others
    // leave it to the replica's own checks (the output gate must be right without the cut):
    // an upload then completes after the hold ended, Late.
    const bool watch_hold = w_.Chance(0.5);
    // An owner's change asks the actor to leave memory (StorageResidents::Unload): as at the
    // use's end.
    while (!failure->failed && w_.Now() < until && !p->unloading.count(actor)) {
      if (watch_hold && !hold.IsValid()) {
        // The lost-lease cut: nothing unacknowledged will be; the replica fails.
        w_.Trace(who + " hold ended: cut");
        ++result.cuts;
        replica->Cut("the hold ended");
        co_return;
      }
      const auto writes = w_.Uniform(1, 3);
      for (std::int64_t i = 0; i < writes; ++i) Write(*replica, actor, who);
      Read(*replica, hold, who);
      if (!co_await p->env()->SleepFor(milliseconds(w_.Uniform(50, 600)))) co_return;
    }
    if (failure->failed) {
      ++result.replica_failures;
      if (replica->stats().late) ++result.late_uploads;
      w_.Trace(who + " replica failed: " + failure->why.ToString());
      if (hold.IsValid()) co_await w_.ReleaseHold(p, actor);
      co_return;
    }
    // Hibernate: everything committed durable, then the hold is released or kept asleep.
    // A Close that fails or runs out of time abandons the hold all the same.
    Status closed = co_await replica->Close(seconds(5));
    w_.Trace(who + " closed: " + closed.ToString());
    const HoldResume at = replica->resume_point();
    const bool clean = closed.ok() && replica->failure().ok();
    replica.reset();
    if (clean && w_.Chance(0.6) && !Guard(p).blocked(actor) && p->node->owners().Sleep(actor, generation, at)) {
      w_.Trace(who + " sleeps at segment " + std::to_string(at.segment) + ", batch " + std::to_string(at.batch));
      co_return;
    }
    if (hold.IsValid()) co_await w_.ReleaseHold(p, actor);
  }

  void Write(replica::Replica& replica, const ActorId& actor, const std::string& who) {
    const std::string id = "w" + std::to_string(++writes_issued_);
    const std::string before = replica.Get("log").value_or("");
    std::string log = before.empty() ? id : before + "," + id;
    actor::Batch batch;
    batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", log});
    batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "e/" + id, ""});
    const std::uint64_t seq = replica.Commit(std::move(batch));
    ++w_.result().writes;
    replica.WhenReleasable(seq, [this, actor, id, log = std::move(log), who](Status s) {
      if (!s.ok()) return;  // not acknowledged: its outcome is unknown, either way is fine
      ++w_.result().acked_writes;
      w_.Trace(who + " acknowledged " + id);
      checkers_.OnAcknowledged(who, actor, id, log);
      if (on_acknowledged) on_acknowledged(actor, id);
    });
  }

  // A read-only event's answer: nothing written (seq 0), so only the hold's validity decides.
  // An Ok while the hold is not valid is a read answered by a node that no longer holds the
  // actor (checker 17; broken model release-without-validity).
  void Read(replica::Replica& replica, HoldView hold, const std::string& who) {
    replica.WhenReleasable(0, [this, hold, who](Status s) {
      if (s.ok() && !hold.IsValid()) w_.Violation(who + " released a read after its hold ended");
    });
  }

  static DeletionGuard& Guard(Process* p) { return static_cast<StorageParts*>(p->parts.get())->guard; }

  World& w_;
  Checkers& checkers_;
  replica::ReplicaOptions replica_options_;
  BrokenModels broken_;
  std::uint64_t writes_issued_ = 0;
};

}  // namespace

RunResult RunStorageScenario(const RunOptions& options) {
  World world(options, WorldOptions{.actors = kStorageActors, .named_actors = ForkTargets("c")});
  Faults faults(world, FaultOptions{.operator_faults = true, .storage_faults = true});
  Checkers checkers(world, CheckerOptions{.owners = true, .logs = true, .holders = true});
  StorageWorkload workload(world, checkers);
  World::Stages stages = Connect(world, faults, checkers);
  // Restores and forks (H1-H4): the history model watches every actor, the operator asks the
  // nodes' own OwnerChanges during the chaos.
  HistoryModel model(world, "log", &LogState);
  std::vector<ActorId> restored;
  for (int i = 0; i < kStorageActors; ++i) restored.push_back(world.ActorAt(i));
  for (const ActorId& a : restored) model.Watch(a);
  for (const ActorId& a : ForkTargets("c")) model.Watch(a);
  model.on_replacement = [&checkers](const ActorId& actor, const std::string& log) {
    checkers.OnReplacementLanded(actor, log);
  };
  workload.on_acknowledged = [&model](const ActorId& actor, const std::string& id) { model.OnAcknowledged(actor, id); };
  HistoryOperators history(world, model,
                           HistoryOperatorsOptions{.actors = restored,
                                                   .fork_targets = ForkTargets("c"),
                                                   .retention = workload.replica_options().retention.all});
  history.on_issue = [&checkers] { return checkers.acks(); };
  history.on_changed = [&checkers](const ActorId& actor, const std::string& log, std::uint64_t mark) {
    checkers.OnReplacementAcknowledged(actor, log, mark);
  };
  world.hooks.on_landed = [&checkers, &model](const std::string& key, const std::string& body) {
    checkers.OnLanded(key, body);
    model.OnLanded(key, body);
  };
  world.hooks.on_built = [&workload](Process& p) {
    p.parts = std::make_unique<StorageParts>(p, workload.replica_options(), p.node->broken_models());
    p.changes = &static_cast<StorageParts*>(p.parts.get())->changes;
  };
  // A replica's puts face the "lost means gone" check like the node's own; a segment put
  // sometimes gets its process killed before the reply.
  world.hooks.on_replica_send = [&](int number, const std::string& key, const std::string& body) {
    checkers.OnSend(number, key, body);
    faults.MaybeKillMidUpload(number, key);
  };
  world.hooks.on_replica_delete = [&checkers](int number, const std::string& key) {
    checkers.OnReplicaDelete(number, key);
  };
  world.hooks.on_started = [&workload](Process& p) {
    for (int i = 0; i < kWorkers; ++i) p.env()->Spawn(workload.Run(&p), "storage workload");
  };
  stages.begin = [&faults, &history] {
    faults.ScheduleChaos();
    faults.ScheduleMoves();
    history.Start();
  };
  stages.after_teardown = [&checkers] { checkers.FinalAudit(); };
  return world.Run(stages);
}

}  // namespace wk::sim
