// Operators: people at work on a running serving cluster (serving.h), as a piece the
// `move` and `combined` scenarios add (docs/simulation.md, "move" and "combined"): direct
// moves and drains through HandOvers (the `move` scenario's), and drains, restarts of
// drained nodes, moves, balances and deleted heartbeats requested through the bucket as
// the `wasmkeep` commands do, from an operator's machine without faults of its own (the
// `combined` scenario's). Checker 10 (checkers.h) judges every drain reported drained.
//
// Every draw goes through the world's random source; the direct operators draw in the
// order the move scenario's recorded histories made them.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "checkers.h"
#include "faults.h"
#include "world.h"

namespace wk::sim {

struct OperatorOptions {
  bool moves = false;   // HandOvers::HandOver (the move scenario's)
  bool drains = false;  // HandOvers::Drain (the move scenario's)
  bool bucket = false;  // drain and move requests in the bucket, restarts of drained nodes
};

class Operators {
 public:
  // REQUIRES: world, faults and checkers outlive this; with `bucket`, the nodes carry out
  // move requests (ServingOptions::move_requests).
  Operators(World& world, Faults& faults, Checkers& checkers, OperatorOptions options);
  ~Operators();

  // Called when a move of actor starts (the clients' burst for it).
  std::function<void(const ActorId& actor)> on_move;

  // Schedules the operators' work over the chaos.
  void Start();
  // The chaos is over: every drain request is lifted.
  void Heal();
  // World::Hooks::on_send: a node's `drained` record (checker 10).
  void OnSend(int number, const std::string& key, const std::string& body);

 private:
  struct Machine;
  // ---- direct
  void ScheduleMoves();
  Task<void> Move(Process* p, ActorId actor, NodeId to);
  void ScheduleDrains();
  Task<void> Drain(Process* p);
  // ---- through the bucket
  void ScheduleDrainRequests();
  Task<void> RequestDrain(int slot, Duration lift_after, Duration restart_after);
  Task<void> LiftDrain(int slot);
  void RestartDrained(int slot);
  void ScheduleMoveRequests();
  Task<void> RequestMoves(bool balance);
  void ScheduleHeartbeatDeletes();
  // Actors of the world's workload (never an alarm shard) that p holds.
  std::vector<ActorId> Held(Process& p) const;

  World& w_;
  Faults& faults_;
  Checkers& checkers_;
  const OperatorOptions options_;
  std::unique_ptr<Machine> machine_;  // the operator's Env and store (bucket only)
  std::set<int> drain_requested_;     // slots whose drain request stands
};

}  // namespace wk::sim
