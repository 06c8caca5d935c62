// Operators: people at work on a running serving cluster (serving.h), as a piece the
// `move` and `combined` scenarios add (docs/simulation.md, "move" and "combined").
//
// Direct (the `move` scenario's): every 0.5-2 s of chaos a node hands one of the actors it
// holds to another node live in its view (HandOvers::HandOver), and every 8-20 s a node is
// drained (HandOvers::Drain, 10 s at most) and put back in service 1-5 s later.
//
// Through the bucket (the `combined` scenario's), as `wasmkeep` commands do, from an
// operator's machine of its own (no faults of its own):
//   - drains: control/drain/<node> written `requested` (the node's real DrainControl drains
//     and writes `drained`), lifted (deleted) 5-20 s later; all lifted when the chaos ends;
//   - restarts of drained nodes: half of the drains also see their node killed (kill -9)
//     while the request stands, or stopped cleanly once its record says `drained`; the
//     restarted process reads its record at its first drain check;
//   - moves and balances: control/move/<node>/<actor> requests (`wasmkeep actor move`,
//     `wasmkeep cluster balance`: ReadClusterLoad, PlanBalance, RequestMove, AwaitMove),
//     carried out by the nodes' real MoveControl (ServingOptions::move_requests);
//   - a mistake, as in the ownership scenario: every 15-40 s a node's heartbeat object
//     nodes/<id> deleted (it must free nothing), never while a process of that id is in
//     its first ttl + grace + 5 s (see Faults: a deletion during a start check is outside
//     the lease's promise).
//
// Checker 10 (checkers.h) judges every drain reported drained: direct drains when
// HandOvers::Drain returns OK, requested ones when the node sends its `drained` record
// (OnSend).
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
