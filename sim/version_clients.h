// VersionClients: class versions deployed mid-run (docs/tenants.md, "Class versions"), as a
// piece any serving scenario adds to its ServingCluster (serving.h); `combined` runs it
// (docs/simulation.md, "combined"). An operator, from its own machine as `wasmkeep` does
// (control/class_versions.h), deploys the ledger class (native_actor_host.h) and then,
// every 6-15 s until operators_for, deploys a new version at a share or at once, raises a
// share, rolls back, marks a version broken (its state to a replacement) or clears the mark,
// pauses, or pins an actor; 30 s later it clears every broken mark. Clients append to and
// read ledger actors t/ledger/g<i> through random nodes.
// What the checkers assert, after the final reads (every actor read through a healthy node):
//   V1 each state was written only by versions it was migrated through, in order: a write
//      by the version the state is at; a migration "u<a>><b>" only from the version it is
//      at (a state is never migrated twice), to a newer one; a write by an older version
//      only after the state's version was marked broken (its replacement);
//   V2 the state's version mark is the version of its last write or migration (the mark
//      commits with the migration's batch);
//   V3 every acknowledged append is in the final state once, written by the version that
//      answered it; an unacknowledged one at most once;
//   V4 every answered read is a prefix of the final state;
//   V5 every answer came from a version the actor could run under a rollout written before
//      it (its place in a share, its pin, the stable version, a broken mark's replacement):
//      an actor never runs a candidate outside its share;
//   V6 no append is acknowledged from a version that had been marked broken for 20 s (every
//      node has read the mark by then) and not cleared: a broken version's state whose
//      migration failed runs nowhere.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/class_versions.h"
#include "serving.h"
#include "world.h"

namespace wk::sim {

struct VersionClientsOptions {
  int actors = 6;   // t/ledger/g0 .. g<actors-1>
  int clients = 3;  // clients sending one request at a time, 80-600 ms apart
  Duration clients_for = std::chrono::seconds(150);
  Duration operators_for = std::chrono::seconds(150);  // no rollout change after this
  // How long after a broken mark landed every node has surely read it (V6).
  Duration mark_read_within = std::chrono::seconds(20);
};

class VersionClients {
 public:
  // REQUIRES: world and cluster outlive this; Configure ran on the cluster's options.
  VersionClients(World& world, ServingCluster& cluster, VersionClientsOptions options = {});
  ~VersionClients();

  // The nodes load the ledger class as a versioned class.
  static void Configure(ServingOptions& serving);
  static std::vector<ActorId> Actors(const VersionClientsOptions& options);
  // Deploys version 1, then spawns the clients and schedules the operator.
  void Start();
  // After healing (world.finished set): the final reads, then V1-V6.
  void FinalReadsAndCheck();

 private:
  struct Machine;
  // One client operation as the client saw it.
  struct Op {
    int actor = 0;
    bool append = false;
    std::string value;
    MonoTime invoked{};
    MonoTime completed{};
    bool ok = false;
    std::uint32_t version = 0;  // the version that answered
    std::string log;            // reads: the log returned
  };
  // One rollout the operator wrote, with when its write was sent and when it landed.
  struct Written {
    MonoTime sent{};
    MonoTime landed{};
    control::Rollout rollout;
  };

  Task<void> Client();
  Task<bool> Send(Op op, std::size_t index);
  void ScheduleOperator();
  void ScheduleClear();
  Task<void> Operate();
  Task<void> Deploy(std::optional<std::uint32_t> percent);
  Task<void> Change(std::string what, control::RolloutChange change);
  void CheckActor(int a, const Op& final_read);

  World& w_;
  ServingCluster& cluster_;
  const VersionClientsOptions options_;
  std::unique_ptr<Machine> machine_;
  std::vector<Op> ops_;
  std::vector<Written> rollouts_;
  std::uint32_t deployed_ = 0;  // the newest version
  int next_value_ = 0;
};

}  // namespace wk::sim
