// The operator's side of moving actors (`wasmkeep actor move`, `wasmkeep cluster balance`;
// docs/node-lease.md, "Moving actors"): who holds what, the balancing plan, and the move
// requests written to control/move/ (move_control.h carries them out on the nodes).
//
//   ReadClusterLoad  lists nodes/ (live nodes: a live lease renewed within ttl, by the
//                    operator's clock), control/drain/ (draining nodes take no actors) and
//                    owners/, reading every record (16 at once): an actor is held by a node
//                    when its record names that node's current instance. Cost: one LIST
//                    per 1,000 keys of each prefix and one GET per actor record.
//   PlanBalance      moves that leave every live node holding floor(n/k) or ceil(n/k) of
//                    the n held actors (k nodes), taking from the most loaded first and
//                    giving to the least loaded first, so a node that just joined gets its
//                    share. Pure and deterministic.
//   RequestMove      writes the request, `requested`.
//   AwaitMove        polls the request until its node wrote an outcome (or the deadline),
//                    then deletes a finished one.
//
// Threading: Env loop thread only.
#pragma once

#include <map>
#include <vector>

#include "cluster/move_control.h"
#include "cluster/timing.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

struct ClusterLoad {
  std::vector<NodeId> nodes;                     // live and not draining, by id
  std::map<NodeId, std::vector<ActorId>> held;   // per node of `nodes`, its actors by name
  std::map<ActorId, NodeId> holder;              // every held actor, whichever node holds it
};

Task<Result<ClusterLoad>> ReadClusterLoad(Env& env, ObjectStore& store, LeaseTiming timing);

struct PlannedMove {
  ActorId actor;
  NodeId from;
  NodeId to;
  friend bool operator==(const PlannedMove&, const PlannedMove&) = default;
};
std::vector<PlannedMove> PlanBalance(const ClusterLoad& load);

// kPreconditionFailed: a move of that actor from that node is already requested.
Task<Status> RequestMove(Env& env, ObjectStore& store, PlannedMove move, CallOptions call);
// The request's last state: `requested` if the node wrote no outcome before deadline (the
// request then stays), otherwise the outcome (the request is deleted).
Task<Result<MoveRecord>> AwaitMove(Env& env, ObjectStore& store, NodeId from, ActorId actor, MonoTime deadline,
                                   CallOptions call);

}  // namespace wk
