// V8Executor: the real Executor (executor.h): actors' WebAssembly on a fixed pool of worker
// threads, each owning one V8 isolate (engine::Worker). An actor is pinned to one worker
// (its lane) for its residency, so its instance never crosses threads; its jobs run in the
// worker's FIFO. An event runs the ABI (abi.h) over one EventTxn (txn.h), with the CPU
// limit, exec-durable `sync` waits and the alarm rules of alarm_event.h. Also the workers'
// heaps as the budget counts them, and when to collect their garbage.
//
// Threading: its Executor methods on the Env loop thread; jobs on the workers, which hand
// results back with Env::PostFromAnyThread. RuntimeHooks' event start and end are called on
// the workers.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "actor/executor.h"
#include "actor/runtime.h"
#include "base/metrics.h"
#include "engine/engine.h"
#include "env/env.h"

namespace wk::actor {

class V8Executor final : public Executor {
 public:
  // `options`: its workers, spin window, limits, sync timeout, isolates and broken models.
  V8Executor(Env& env, engine::Engine& engine, ClassRegistry& classes, const RuntimeOptions& options,
             RuntimeHooks hooks);
  ~V8Executor() override;  // Stop()
  V8Executor(const V8Executor&) = delete;
  V8Executor& operator=(const V8Executor&) = delete;

  // RuntimeOptions::spin from now on.
  void SetSpin(Duration spin);
  // For each job of a tenant idle on its worker, the jobs of other tenants that ran there
  // before it (FairQueue::Popped::ahead; docs/tenants.md, "Fair shares"). Any thread.
  const Histogram& fair_share_jobs_ahead() const { return jobs_ahead_; }

  std::size_t lanes() const override { return lanes_; }
  std::shared_ptr<ExecutorActor> NewActor(const ActorId& id, const std::string& key) override;
  std::vector<std::uint32_t> VersionsMissing(const ExecutorActor& actor, const ActorStorage& storage) override;
  void Started(ExecutorActor& actor, const ActorStorage& storage) override;
  bool UseCurrentCode(ExecutorActor& actor) override;
  bool CodeMissing(const ExecutorActor& actor) const override;
  bool CodeDropped(const ActorId& id) const override;
  std::uint64_t DropUnusedCode(std::uint64_t bytes) override;
  std::uint64_t CodeFreedBy(const ExecutorActor& leaving, std::map<const void*, std::uint64_t>& tally) const override;
  std::vector<std::pair<std::string, std::uint64_t>> CompiledBytesByTenant() const override;
  void Run(std::shared_ptr<ExecutorActor> actor, ActorStorage* storage, std::shared_ptr<const ExecutorEvent> event,
           std::function<void(ExecutedEvent)> done) override;
  void DropInstance(std::shared_ptr<ExecutorActor> actor) override;
  void Close(std::shared_ptr<ExecutorActor> actor, std::function<void()> done) override;
  void Stop() override;
  ExecutorStats stats() const override;
  std::uint64_t InstanceReservation(const ExecutorActor& next) const override;
  std::uint64_t live_reservation_limit() const override { return kLiveReservationBytes; }
  void InstanceForgotten(const ExecutorActor& actor, std::uint64_t reserved) override;
  void AfterInstancesGone(std::size_t lane, std::uint64_t live, std::uint64_t live_reserved) override;
  void AfterIdleSweep(const std::vector<bool>& dropped) override;
  void ReclaimNow(std::size_t lane) override { CollectGarbageOn(lane); }

 private:
  class WorkerThread;
  struct Actor;
  struct Ran;

  // On the loop, between the actor's jobs: sets the code its class chooses for it (its
  // version, and a migration to run first); returns whether its module changed.
  bool ChooseCode(Actor& actor);
  // Where an event of the actor charges its growth (RuntimeOptions::stored_quota).
  StoredQuotaScope QuotaScope(const Actor& actor) const;
  // RuntimeHooks::tenant_weight, or 1 (loop thread).
  double TenantWeight(const std::string& tenant) const;
  // On the worker thread.
  Ran Execute(engine::Worker& worker, Actor& actor, ActorStorage& storage, const ExecutorEvent& event);
  // The actor's pending migration, in a batch of its own (docs/tenants.md); on failure
  // nothing it wrote is kept and the actor runs the version its state is at.
  void RunUpgrade(engine::Worker& worker, Actor& actor, ActorStorage& storage, const ExecutorEvent& event, Ran& ran);
  // Commits an event's batch with the version mark when the state's is another.
  void CommitWithMark(Actor& actor, ActorStorage& storage, Batch batch);
  static ActorMemory MeasureMemory(Actor& actor, ActorStorage& storage);
  // Drops the actor's instance on its worker, then measures the heap; then `done` (loop).
  void PostDrop(const std::shared_ptr<Actor>& actor, std::function<void()> done);
  void CollectGarbageOn(std::size_t worker);
  // Starts one beside its thread (engine::Worker::StartCollection): for a busy worker.
  void StartCollectionOn(std::size_t worker);

  Env& env_;
  engine::Engine& engine_;
  ClassRegistry& classes_;
  RuntimeOptions options_;
  RuntimeHooks hooks_;
  std::size_t lanes_ = 0;
  Histogram jobs_ahead_{{0, 1, 2, 3, 4, 8, 16, 32}};  // before workers_: they observe it
  std::vector<std::unique_ptr<WorkerThread>> workers_;
  struct WorkerMemory {
    std::uint64_t heap_bytes = 0;  // measured after its last job that could change it
    MonoTime last_collection{};
    MonoTime last_event{};  // when an event of it last finished (the sweep's collection)
    bool collection_wanted = false;  // instances were dropped since its last collection
    // Reservations of the memories thrown away on it since its last collection was asked for.
    std::uint64_t uncollected_reserved_bytes = 0;
    std::uint64_t uncollected_memories = 0;
  };
  std::vector<WorkerMemory> worker_memory_;
  std::uint64_t reservation_collections_ = 0;
  // Alive until Stop; hand-backs from workers check it before touching `this`.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Set by Stop; event jobs not yet started skip their event.
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace wk::actor
