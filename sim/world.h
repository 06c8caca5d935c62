// The simulated world of a scenario run: one virtual timeline (SimWorld), one bucket, and
// the processes of three node slots, each a real ClusterNode on its own skewed clock with
// its own faulty view of the bucket (docs/simulation.md, "One world, one harness").
//
// A process may carry more than its ClusterNode: the serving scenarios (serving.h) hang
// their front, forwarder, replicas and actor host on it as ProcessParts, torn down with it.
//
// The world owns the run's one random source, its trace (whose hash is the history digest)
// and its RunResult. The faults (faults.h), the checkers (checkers.h) and the scenario's
// workloads plug in through World::Hooks; every random draw goes through Uniform/Chance in
// one order, so a run is a pure function of (scenario, seed, mutant).
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_node.h"
#include "cluster/testing/harness.h"
#include "env/sim_env.h"
#include "scenario.h"
#include "store/mem/mem_store.h"
#include "store/store_wrapper.h"

namespace wk {
class OwnerChanges;  // routing/owner_changes.h
}  // namespace wk

namespace wk::sim {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The node slots of a world, unless WorldOptions::slots says otherwise (the scale mode of
// the lease and ownership scenarios: sim/scale.h). The serving scenarios always run three.
inline constexpr int kSlots = 3;
inline constexpr std::int64_t kOriginMs = cluster_testing::kSimOriginMs;
inline constexpr Duration kChaosFor = seconds(200);
inline constexpr Duration kHealFor = seconds(60);
// After the run, requests still in transit (a late segment takes up to 20 s) land before
// the final audit reads the bucket.
inline constexpr Duration kTransitDrain = seconds(30);
// A checker's slack for millisecond truncation of wall clocks.
inline constexpr Duration kTolerance = milliseconds(2);

// Forwards to a store and reports every put and delete as it is sent.
class RecordingStore final : public StoreWrapper {
 public:
  using OnSend = std::function<void(const std::string& key, const std::string& body)>;
  using OnDelete = std::function<void(const std::string& key)>;
  RecordingStore(ObjectStore& inner, OnSend on_send, OnDelete on_delete = nullptr)
      : StoreWrapper(inner), on_send_(std::move(on_send)), on_delete_(std::move(on_delete)) {}
  Task<Result<Version>> Put(std::string key, std::string body, Precondition c, CallOptions o) override {
    on_send_(key, body);
    return StoreWrapper::Put(std::move(key), std::move(body), std::move(c), o);
  }
  Task<Status> Delete(std::string key, Precondition c, CallOptions o) override {
    if (on_delete_) on_delete_(key);
    return StoreWrapper::Delete(std::move(key), std::move(c), o);
  }
  std::string Describe() const override { return "recording:" + inner().Describe(); }

 private:
  OnSend on_send_;
  OnDelete on_delete_;
};

// What a scenario adds to a process (serving.h). Teardown calls BeforeEnvGoes while the
// process's Env still runs (what must answer or close into it), then destroys the parts
// once the Env and its frames are gone (frames may point into them), before the node.
struct ProcessParts {
  virtual ~ProcessParts() = default;
  virtual void BeforeEnvGoes() {}
};

// How a scenario's world is set up. The defaults are the lease, ownership and storage
// scenarios'; the serving scenarios keep their own (their recorded histories, and the
// seeds their mutants are caught at, depend on them).
struct WorldOptions {
  int actors = 0;                  // actors named t/<actor_class>/a0..
  std::string actor_class = "c";
  // More actors, after those: the checkers judge them too (checker 8 asks for every one).
  std::vector<ActorId> named_actors;
  // Salt of the world's random source: each scenario family keeps its own stream.
  std::uint64_t stream = 0x9e3779b97f4a7c15ULL;
  // false: each slot's skew is drawn once, at the bound two thirds of the time; true: each
  // process draws its own, anywhere within the bound.
  bool skew_per_process = false;
  Duration chaos_for = kChaosFor;
  Duration heal_for = kHealFor;
  // Node slots n0..n<slots-1> (the scale mode: sim/scale.h).
  int slots = kSlots;
  // 0: every slot's first process starts at once, in slot order; otherwise slot s starts
  // at s * start_spread / slots (a fleet brought up over a while: the scale mode).
  Duration start_spread{0};
};

struct Process {
  int number = 0;
  int slot = 0;
  bool twin = false;
  NodeId node_id;
  InstanceToken instance;
  Duration skew{0};
  // Its Env and its MemStore view of the bucket (the shared harness, cluster/testing/harness.h).
  std::unique_ptr<cluster_testing::SimHost> host;
  std::unique_ptr<RecordingStore> store;
  // The replicas' own view of the bucket (storage scenario): what they write and delete.
  std::unique_ptr<RecordingStore> replica_store;
  // The stores a scenario puts between the node and `store` (World::Hooks::node_store),
  // outermost last; torn down after the node.
  std::vector<std::unique_ptr<ObjectStore>> store_layers;
  std::unique_ptr<ClusterNode> node;
  // Its TLS pin (serving scenarios: derived from the instance, as a fresh key gives one).
  std::string cert_pin;
  std::unique_ptr<ProcessParts> parts;
  // Actors a workload of this process is using: one replica per resident actor, as in the
  // actor runtime (a second Open under the same hold would write its fence twice).
  std::set<ActorId> in_use;
  // Generations that already served a replica here, per actor: a hold that went invalid
  // (the replica was cut) can become valid again in the same lease epoch, and its log keys
  // are taken. As ReplicaProvider::Open does, such a hold is released, not reused.
  std::map<ActorId, std::set<Generation>> used_generations;
  // Its owner's changes (restores and forks: routing/owner_changes.h), where the scenario
  // gives it one (its parts own it).
  OwnerChanges* changes = nullptr;
  // Actors an owner's change asked to leave memory (storage scenario: their worker stops).
  std::set<ActorId> unloading;
  bool running = false;
  bool stopping = false;
  bool draining = false;
  MonoTime started{};
  std::optional<LeaseEnd> end;

  SimEnv* env() const { return host ? &host->env() : nullptr; }
};

// A key of an actor's log: a segment or a snapshot (replica/format.h).
bool IsLogKey(std::string_view key);

class World {
 public:
  // What the faults, checkers and workloads plug in. Unset hooks do nothing.
  struct Hooks {
    // The fault plan of one request from a slot's process (faults.h).
    std::function<OpFault(int slot, const OpInfo& op)> fault;
    // A node sent a put (checkers.h).
    std::function<void(int number, const std::string& key, const std::string& body)> on_send;
    // A node sent a delete.
    std::function<void(int number, const std::string& key)> on_delete;
    // A put landed in the bucket (checkers.h).
    std::function<void(const std::string& key, const std::string& body)> on_landed;
    // Set: every process gets a replica store reporting to these (storage scenario).
    std::function<void(int number, const std::string& key, const std::string& body)> on_replica_send;
    std::function<void(int number, const std::string& key)> on_replica_delete;
    // The identity a process's node record names; unset: "sim" addresses, no pin.
    std::function<NodeIdentity(Process& p)> identity;
    // The store a process's node uses, given its recording store; set: the hook may add
    // layers to p.store_layers and return the outermost (the scale mode's bucket model).
    std::function<ObjectStore&(Process& p, ObjectStore& recording)> node_store;
    // A process's node is built, not yet running: the scenario adds its parts.
    std::function<void(Process& p)> on_built;
    // A process started: the scenario spawns its workloads.
    std::function<void(Process& p)> on_started;
  };

  // What a run does at each stage (World::Run).
  struct Stages {
    std::function<void()> begin;          // after every slot's first process started
    std::function<void()> heal;           // once, when the chaos ends
    std::function<void()> every_step;     // after every event
    std::function<void()> final_checks;   // after healing, before the teardown
    std::function<void()> after_teardown; // every process gone
  };

  // Draws each slot's skew (unless per process).
  World(const RunOptions& options, WorldOptions world);
  // `actors` actors named t/c/a0.. (none in the lease scenario), the default world.
  World(const RunOptions& options, int actors) : World(options, WorldOptions{.actors = actors}) {}

  RunResult Run(const Stages& stages);

  // ---- randomness and tracing
  std::int64_t Uniform(std::int64_t lo, std::int64_t hi) {  // inclusive
    return lo + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool Chance(double p) { return static_cast<double>(rng_() % 1'000'000) < p * 1'000'000; }
  static std::int64_t Ms(Duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }
  std::string NowString() const { return std::to_string(Ms(sim_.Now().time_since_epoch())) + "ms"; }
  MonoTime Now() const { return sim_.Now(); }
  void Trace(const std::string& line);
  void Violation(const std::string& what);

  // ---- processes
  void StartProcess(int slot, bool twin);
  void Teardown(Process& p);
  void Reap(int number);
  // The running process of a slot (a twin that took over counts: the supervisor cannot
  // tell them apart either).
  Process* Primary(int slot);
  int Running(int slot) const;
  void ScheduleRestart(int slot, Duration after);
  // Hibernation or a move: releases p's hold of actor (a failed release stays parked).
  Task<void> ReleaseHold(Process* p, ActorId actor);

  // Built once: the two-owner check asks for every actor after every event.
  const ActorId& ActorAt(std::int64_t i) const { return actor_ids_.at(static_cast<std::size_t>(i)); }
  int actors() const { return static_cast<int>(actor_ids_.size()); }

  const RunOptions& options() const { return options_; }
  int slots() const { return slots_; }
  SimWorld& sim() { return sim_; }
  SimEnv& bucket_env() { return bucket_env_; }
  const std::shared_ptr<MemBucket>& bucket() { return bucket_; }
  const LeaseTiming& timing() const { return timing_; }
  RunResult& result() { return result_; }
  std::map<int, std::unique_ptr<Process>>& processes() { return processes_; }

  Hooks hooks;
  Duration chaos_for = kChaosFor;
  Duration heal_for = kHealFor;
  bool healed = false;    // the faults are over
  bool finished = false;  // the run is over: no more restarts
  // Slots a clean stop is restarting: no other restart until it is done.
  std::set<int> pending_start;
  std::vector<Duration> slot_skew;  // one per slot
  // Per instance, what the checkers need to place its wall clock in true time.
  std::map<InstanceToken, Duration> instance_skew;
  std::map<InstanceToken, int> instance_process;

 private:
  Task<void> RunProcess(Process* p);

  RunOptions options_;
  int slots_ = kSlots;
  Duration start_spread_{0};
  bool skew_per_process_ = false;
  SimWorld sim_;
  std::mt19937_64 rng_;
  SimEnv bucket_env_;
  std::shared_ptr<MemBucket> bucket_;
  LeaseTiming timing_;
  std::vector<ActorId> actor_ids_;
  int next_process_ = 0;
  std::map<int, std::unique_ptr<Process>> processes_;
  std::deque<std::string> trace_;
  std::uint64_t digest_ = 1469598103934665603ULL;
  RunResult result_;
};

}  // namespace wk::sim
