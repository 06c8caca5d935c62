#include "operators.h"

#include "cluster/balance.h"
#include "cluster/drain_control.h"
#include "cluster/hand_over.h"
#include "cluster/node_record.h"
#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk::sim {

// The operator's machine: its own Env (true time, never frozen) and an unfaulted view of
// the bucket, as `wasmkeep` run from an operator's shell has.
struct Operators::Machine {
  explicit Machine(World& w) : env(w.sim(), FromUnixMs(kOriginMs)), store(env, w.bucket()) {}
  SimEnv env;
  MemStore store;
};

Operators::Operators(World& world, Faults& faults, Checkers& checkers, OperatorOptions options)
    : w_(world), faults_(faults), checkers_(checkers), options_(options) {
  if (options_.bucket) machine_ = std::make_unique<Machine>(world);
}

Operators::~Operators() = default;

void Operators::Start() {
  if (options_.moves) ScheduleMoves();
  if (options_.drains) ScheduleDrains();
  if (options_.bucket) {
    ScheduleDrainRequests();
    ScheduleMoveRequests();
    ScheduleHeartbeatDeletes();
  }
}

std::vector<ActorId> Operators::Held(Process& p) const {
  std::vector<ActorId> held;
  for (const ActorId& a : p.node->owners().HeldActors()) {
    for (std::int64_t i = 0; i < w_.actors(); ++i) {
      if (w_.ActorAt(i) == a) {
        held.push_back(a);
        break;
      }
    }
  }
  return held;
}

// ---- direct: the move scenario's operators
//
// Every 0.5-2 s of chaos, a node moves one of the actors it holds to another live node; every
// 8-20 s, a node is drained (10 s at most), then put back in service 1-5 s later.
void Operators::ScheduleMoves() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(500, 2000)), [this] {
    if (w_.Now() >= MonoTime(w_.chaos_for)) return;
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    const int to = static_cast<int>((slot + w_.Uniform(1, kSlots - 1)) % kSlots);
    Process* p = w_.Primary(slot);
    // As `wasmkeep actor move` does, only to a node that is live (in the source's view).
    auto target = p != nullptr ? p->node->membership().view().find(SlotNodeId(to))
                               : std::map<NodeId, NodeView>::const_iterator();
    if (p != nullptr && !p->env()->frozen() && target != p->node->membership().view().end() &&
        target->second.live()) {
      std::vector<ActorId> held = Held(*p);
      if (!held.empty()) {
        const ActorId actor = held[static_cast<std::size_t>(w_.Uniform(0, static_cast<std::int64_t>(held.size()) - 1))];
        ++w_.result().moves;
        w_.Trace("move " + actor.name + " from p" + std::to_string(p->number) + " to n" + std::to_string(to));
        p->env()->Spawn(Move(p, actor, SlotNodeId(to)), "move");
        if (on_move) on_move(actor);
      }
    }
    ScheduleMoves();
  });
}

Task<void> Operators::Move(Process* p, ActorId actor, NodeId to) {
  const int number = p->number;
  HandOverResult r = co_await p->node->hand_overs().HandOver(actor, to, kHandOverLimit);
  if (r.kind == HandOverResult::Kind::kMoved) ++w_.result().moved;
  w_.Trace("p" + std::to_string(number) + " move of " + actor.name + ": " + std::string(HandOverKindName(r.kind)) + " " +
           r.detail);
}

void Operators::ScheduleDrains() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(8000, 20000)), [this] {
    if (w_.Now() >= MonoTime(w_.chaos_for)) return;
    Process* p = w_.Primary(static_cast<int>(w_.Uniform(0, kSlots - 1)));
    if (p != nullptr && !p->env()->frozen() && !p->draining) {
      p->draining = true;
      w_.Trace("drain p" + std::to_string(p->number));
      p->env()->Spawn(Drain(p), "drain");
    }
    ScheduleDrains();
  });
}

Task<void> Operators::Drain(Process* p) {
  const int number = p->number;
  Status s = co_await p->node->hand_overs().Drain(seconds(10));
  w_.Trace("p" + std::to_string(number) + " drain: " + s.ToString());
  if (s.ok()) {
    ++w_.result().drains;
    checkers_.OnDrained(*p);  // 10
  }
  // The operator puts it back in service a little later.
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(1000, 5000)), [this, number] {
    auto it = w_.processes().find(number);
    if (it == w_.processes().end() || !it->second->node) return;
    it->second->node->owners().SetAccepting(true);
    it->second->draining = false;
    w_.Trace("undrain p" + std::to_string(number));
  });
}

// ---- through the bucket
//
// Every 10-25 s of chaos, a node not already asked is asked to drain; its request is lifted
// 5-20 s later. Half of the requests also restart their node while the request stands.
void Operators::ScheduleDrainRequests() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(10000, 25000)), [this] {
    if (w_.Now() >= MonoTime(w_.chaos_for)) return;
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    const Duration lift_after = milliseconds(w_.Uniform(5000, 20000));
    const Duration restart_after = w_.Chance(0.5) ? milliseconds(w_.Uniform(1000, World::Ms(lift_after)))
                                                  : Duration::zero();
    if (!drain_requested_.count(slot)) {
      drain_requested_.insert(slot);
      machine_->env.Spawn(RequestDrain(slot, lift_after, restart_after), "request drain");
    }
    ScheduleDrainRequests();
  });
}

Task<void> Operators::RequestDrain(int slot, Duration lift_after, Duration restart_after) {
  const NodeId node = SlotNodeId(slot);
  ++w_.result().drain_requests;
  auto put = co_await machine_->store.Put(DrainKey(node), EncodeDrainRecord(DrainRecord{DrainState::kRequested,
                                                                                        machine_->env.WallNow()}),
                                          Precondition::IfNoneMatchAny(), CallOptions{seconds(5)});
  w_.Trace("operator requests a drain of " + node.str() + ": " + put.status().ToString());
  if (restart_after > Duration::zero()) {
    w_.bucket_env().StartTimer(w_.Now() + restart_after, [this, slot] { RestartDrained(slot); });
  }
  w_.bucket_env().StartTimer(w_.Now() + lift_after,
                             [this, slot] { machine_->env.Spawn(LiftDrain(slot), "lift drain"); });
}

Task<void> Operators::LiftDrain(int slot) {
  if (!drain_requested_.count(slot)) co_return;  // lifted already (the chaos ended)
  const NodeId node = SlotNodeId(slot);
  Status s = co_await machine_->store.Delete(DrainKey(node), Precondition::None(), CallOptions{seconds(5)});
  drain_requested_.erase(slot);
  w_.Trace("operator lifts the drain of " + node.str() + ": " + s.ToString());
}

// The node restarted while its drain request stands: killed at any point of the drain, or
// stopped cleanly once its record says `drained` (a drained node holds nothing, so the
// real node's first step of a clean stop, the actors' shutdown, has nothing to do).
void Operators::RestartDrained(int slot) {
  if (!drain_requested_.count(slot) || w_.healed) return;
  Process* p = w_.Primary(slot);
  if (p == nullptr || p->env()->frozen()) return;
  auto obj = w_.bucket()->objects().find(DrainKey(SlotNodeId(slot)));
  if (obj == w_.bucket()->objects().end()) return;
  auto rec = DecodeDrainRecord(obj->second.body);
  ++w_.result().drained_restarts;
  if (rec.ok() && rec->state == DrainState::kDrained && w_.Chance(0.5)) {
    p->stopping = true;
    ++w_.result().clean_stops;
    w_.Trace("clean stop of drained p" + std::to_string(p->number));
    p->env()->Spawn(faults_.StopProcess(p, slot), "stop");
    return;
  }
  w_.Trace("kill of " + std::string(rec.ok() && rec->state == DrainState::kDrained ? "drained" : "draining") + " p" +
           std::to_string(p->number));
  faults_.Kill(slot, 10000);
}

void Operators::Heal() {
  if (!options_.bucket) return;
  for (int slot : std::set<int>(drain_requested_)) machine_->env.Spawn(LiftDrain(slot), "lift drain");
}

void Operators::OnSend(int number, const std::string& key, const std::string& body) {
  if (!key.starts_with(kDrainPrefix)) return;
  auto rec = DecodeDrainRecord(body);
  if (!rec.ok() || rec->state != DrainState::kDrained) return;
  auto it = w_.processes().find(number);
  if (it == w_.processes().end()) return;
  ++w_.result().drains;
  w_.Trace("p" + std::to_string(number) + " reports drained");
  checkers_.OnDrained(*it->second);  // 10
}

// Every 3-8 s of chaos, the operator moves one held actor to another live node, or (one
// time in four) balances the cluster, and waits for the outcomes (20 s at most).
void Operators::ScheduleMoveRequests() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(3000, 8000)), [this] {
    if (w_.Now() >= MonoTime(w_.chaos_for)) return;
    machine_->env.Spawn(RequestMoves(w_.Chance(0.25)), "request moves");
    ScheduleMoveRequests();
  });
}

Task<void> Operators::RequestMoves(bool balance) {
  Env& env = machine_->env;
  ObjectStore& store = machine_->store;
  auto load = co_await ReadClusterLoad(env, store, w_.timing());
  if (!load.ok()) {
    w_.Trace("operator reads the cluster's load: " + load.status().ToString());
    co_return;
  }
  std::vector<PlannedMove> moves;
  if (balance) {
    ++w_.result().balances;
    moves = PlanBalance(*load);
    w_.Trace("operator balances: " + std::to_string(moves.size()) + " moves planned");
  } else if (load->nodes.size() >= 2 && !load->holder.empty()) {
    auto it = load->holder.begin();
    std::advance(it, w_.Uniform(0, static_cast<std::int64_t>(load->holder.size()) - 1));
    // To a random node but the holder (the next one in the list when the draw names it).
    std::size_t to = static_cast<std::size_t>(w_.Uniform(0, static_cast<std::int64_t>(load->nodes.size()) - 1));
    if (load->nodes[to] == it->second) to = (to + 1) % load->nodes.size();
    moves.push_back(PlannedMove{it->first, it->second, load->nodes[to]});
  }
  for (const PlannedMove& m : moves) {
    ++w_.result().move_requests;
    Status s = co_await RequestMove(env, store, m, CallOptions{seconds(5)});
    w_.Trace("operator requests a move of " + m.actor.name + " from " + m.from.str() + " to " + m.to.str() + ": " +
             s.ToString());
    if (s.ok() && on_move) on_move(m.actor);
  }
  const MonoTime deadline = env.MonoNow() + seconds(20);
  for (const PlannedMove& m : moves) {
    auto r = co_await AwaitMove(env, store, m.from, m.actor, deadline, CallOptions{seconds(5)});
    w_.Trace("the move of " + m.actor.name + " from " + m.from.str() + ": " +
             (r.ok() ? std::string(MoveStateName(r->state)) + " " + r->detail : r.status().ToString()));
  }
}

// An operator's mistake: a heartbeat object deleted. Not while a process of that id is
// starting (as in Faults::ChaosStep, docs/simulation.md: a deletion during a start check
// can leave two valid leases for one id, outside the lease's promise).
void Operators::ScheduleHeartbeatDeletes() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(15000, 40000)), [this] {
    if (w_.Now() >= MonoTime(w_.chaos_for)) return;
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    bool recent_start = false;
    for (auto& [n, q] : w_.processes()) {
      if (q->slot == slot && q->running && w_.Now() - q->started < w_.timing().takeover_after() + seconds(5)) {
        recent_start = true;
      }
    }
    if (!recent_start && w_.Running(slot) <= 1) {
      ++w_.result().deleted_heartbeats;
      w_.Trace("operator deletes nodes/n" + std::to_string(slot));
      (void)w_.bucket()->ApplyDelete(NodeKey(SlotNodeId(slot)), Precondition::None());
    }
    ScheduleHeartbeatDeletes();
  });
}

}  // namespace wk::sim
