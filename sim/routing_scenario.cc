// The `routing` scenario: the actor API end to end on three simulated nodes. Each node runs
// its real ClusterNode (lease, listing, fence watch, ownership), the real ReplicaProvider
// (durable replicas on the simulated bucket, holds from the ownership records), the real
// Forwarder over the simulated peer network and the real Front, with native list actors in
// place of WebAssembly: the serving harness (serving.h), on the World (world.h). Clients send appends
// and reads to random nodes; the checker judges the acknowledged history of each actor
// (linearizable, see CheckActor). Faults: kill -9 and restart, a node frozen past its lease
// and then resumed with its memory (a zombie owner), partitions between nodes and between a
// node and the bucket, slow and lost bucket replies and lost peer replies: the Faults'
// serving profile (faults.h). See docs/simulation.md, "routing".
//
// The `move` scenario is the same world with operators at work: actors moved between nodes
// (HandOvers::HandOver with a target: closed, durable, released, then taken and restored by
// the target, told over the peer network) and nodes drained (HandOvers::Drain), racing the
// kills, the frozen nodes and the lost replies. Besides the linearizability checker (no
// acknowledged append lost), the Checkers (checkers.h) check after every event that no two
// nodes act for one actor (checker 8), that every acquisition writes a generation above the
// last (9), and that a drain reports drained only when no record names its process (10). See
// docs/simulation.md, "move".
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "checkers.h"
#include "cluster/hand_over.h"
#include "faults.h"
#include "scenario.h"
#include "serving.h"
#include "storage_history.h"
#include "world.h"

namespace wk::sim {
namespace {

constexpr int kActors = 3;
constexpr int kClients = 4;
constexpr std::string_view kClass = "list";
// Clients keep going into the healing period; then the final reads, then the checks.
constexpr Duration kClientsFor = seconds(95);

// One client operation as the client saw it.
struct Op {
  int actor = 0;
  bool append = false;
  std::string value;  // appends: the value sent
  MonoTime invoked{};
  MonoTime completed{};
  bool done = false;
  bool ok = false;  // 200: acknowledged (an append) or answered (a read)
  std::vector<std::string> list;  // reads: what was returned
  int status = 0;
  int slot = 0;
};

WorldOptions RoutingWorld() {
  return WorldOptions{.actors = kActors,
                      .actor_class = std::string(kClass),
                      .stream = 0x5851f42d4c957f2dULL,
                      .skew_per_process = true,
                      .chaos_for = seconds(75),
                      .heal_for = seconds(45)};
}

// The scenario's draws, in the order its recorded histories made them.
ServingOptions RoutingServing(World& w) {
  ServingOptions o;
  o.token = "Bearer routing-test-token";
  o.class_name = std::string(kClass);
  o.secret_byte = 0x5a;
  o.replica.gc_off_chain_after = w.timing().takeover_after();
  o.replica.segment_max_batches = static_cast<std::uint32_t>(w.Uniform(2, 8));
  o.replica.snapshot_every_segments = static_cast<std::uint32_t>(w.Uniform(3, 6));
  o.host.broken = w.options().broken();
  // Long enough that a node frozen past its lease usually still has its actors in memory
  // when it resumes: the zombie case.
  o.host.idle_hibernate = milliseconds(w.Uniform(20000, 40000));
  return o;
}

class RoutingSim {
 public:
  RoutingSim(const RunOptions& options, bool moves)
      : moves_(moves),
        world_(options, RoutingWorld()),
        faults_(world_, FaultOptions{.serving = true,
                                     .serving_chaos = {.kill = 20, .freeze = 45, .peer_cut = 65, .bucket_cut = 85},
                                     .chaos_min = seconds(2),
                                     .chaos_max = seconds(8)}),
        cluster_(world_, faults_, RoutingServing(world_)) {
    if (moves_) {
      checkers_.emplace(world_, CheckerOptions{.leases = false, .owners = true});
      world_.hooks.on_landed = [this](const std::string& key, const std::string& body) {
        checkers_->OnLanded(key, body);
      };
    }
  }

  RunResult Run() {
    World::Stages stages;
    stages.begin = [this] {
      for (int c = 0; c < kClients; ++c) cluster_.client_env().Spawn(Client(), "client");
      faults_.ScheduleChaos();
      if (moves_) {
        ScheduleMoves();
        ScheduleDrains();
      }
    };
    stages.heal = [this] { faults_.Heal(); };
    if (moves_) stages.every_step = [this] { checkers_->CheckEveryStep(); };
    stages.final_checks = [this] {
      FinalReads();
      for (int a = 0; a < kActors; ++a) CheckActor(a);
    };
    return world_.Run(stages);
  }

 private:
  static std::string At(MonoTime t) { return std::to_string(World::Ms(t.time_since_epoch())) + "ms"; }
  void Trace(const std::string& line) { world_.Trace(line); }
  void Violation(const std::string& what) { world_.Violation(what); }

  // ---- clients
  Task<void> Client() {
    for (;;) {
      if (!co_await cluster_.client_env().SleepFor(milliseconds(world_.Uniform(50, 700)))) co_return;
      if (world_.Now() >= MonoTime(kClientsFor)) co_return;
      Op op;
      op.actor = static_cast<int>(world_.Uniform(0, kActors - 1));
      op.slot = static_cast<int>(world_.Uniform(0, kSlots - 1));
      op.append = world_.Chance(0.6);
      if (op.append) op.value = "v" + std::to_string(++next_value_);
      const std::size_t index = ops_.size();
      const bool ok = co_await Send(op, index);
      (void)ok;
    }
  }

  ServerRequest RequestFor(const Op& op) const {
    const std::string path = std::string(kServingTenant) + "/" + std::string(kClass) + "/a" + std::to_string(op.actor) +
                             (op.append ? "/append" : "");
    ServerRequest r = cluster_.Request(op.append ? "POST" : "GET", path);
    r.body = op.value;
    return r;
  }

  // Sends op (recorded at index) and records its outcome. True if answered 200.
  Task<bool> Send(Op op, std::size_t index) {
    op.invoked = world_.Now();
    ServerRequest request = RequestFor(op);
    const std::string what = std::string(op.append ? "append " + op.value : "read") + " a" + std::to_string(op.actor) +
                             " via n" + std::to_string(op.slot);
    ops_.push_back(std::move(op));
    if (ops_[index].append) ++world_.result().appends; else ++world_.result().reads;
    auto got = co_await cluster_.Send(ops_[index].slot, std::move(request));
    Op& done = ops_[index];
    done.completed = world_.Now();
    done.done = true;
    if (!got.ok()) {
      Trace("client " + what + " (sent " + At(done.invoked) + "): " + got.status().ToString());
      co_return false;
    }
    done.status = got->status;
    done.ok = got->status == 200;
    if (done.ok && !done.append) done.list = StorageHistory::SplitLog(got->body);
    if (done.ok) {
      if (done.append) ++world_.result().acked_appends; else ++world_.result().ok_reads;
    }
    std::string body = got->body;
    if (body.size() > 200) body = "..." + body.substr(body.size() - 200);
    while (!body.empty() && body.back() == '\n') body.pop_back();
    Trace("client " + what + " (sent " + At(done.invoked) + "): " + std::to_string(got->status) + " " + body);
    co_return done.ok;
  }

  // After healing: each actor read through a healthy node until one answers (every
  // acknowledged append must be in it: CheckActor judges it like any read).
  void FinalReads() {
    world_.finished = true;
    for (int a = 0; a < kActors; ++a) {
      bool answered = false;
      for (int attempt = 0; attempt < 10 && !answered; ++attempt) {
        Op op;
        op.actor = a;
        op.slot = (a + attempt) % kSlots;
        const std::size_t index = ops_.size();
        auto ran = RunTask(world_.sim(), cluster_.client_env(), Send(op, index), kClientTimeout + seconds(5));
        answered = ran.has_value() && *ran;
        if (!answered) world_.sim().RunFor(seconds(2));
      }
      if (!answered) Violation("a" + std::to_string(a) + ": no healthy node answered a read after healing");
    }
  }

  // ---- the checker
  //
  // Per actor, over the operations the clients saw: the list is append-only, so in a
  // linearizable history every answered read is a prefix of the longest one (M), and:
  //   1. a read holds no value twice, and none that was not sent before the read ended;
  //   2. a read holds every append acknowledged before the read was sent;
  //   3. an append acknowledged before another was sent precedes it (if the later one is
  //      anywhere in M, the earlier one is, before it);
  //   4. a read that ended before another was sent is not longer than it (with 0, reads
  //      are prefix-ordered in real time).
  // The final reads are reads like any other, sent after everything was acknowledged.
  // Broken models that make it fail: --mutant answer-without-gate (2, at seed 1: an append
  // answered before durable is lost with its node; a zombie's read is stale once the front's
  // own validity checks are gone) and --mutant release-without-validity (2: a zombie's read
  // released by the gate without the hold's validity; it takes effect with the hold gate,
  // replica/hold_gate.h).
  void CheckActor(int a) {
    const std::string name = "a" + std::to_string(a);
    std::vector<const Op*> reads, acked, sent;
    for (const Op& op : ops_) {
      if (op.actor != a) continue;
      if (op.append) {
        sent.push_back(&op);
        if (op.ok) acked.push_back(&op);
      } else if (op.ok) {
        reads.push_back(&op);
      }
    }
    std::map<std::string, const Op*> by_value;
    for (const Op* op : sent) by_value[op->value] = op;
    const Op* longest = nullptr;
    for (const Op* r : reads)
      if (!longest || r->list.size() > longest->list.size()) longest = r;
    std::vector<std::string> m = longest ? longest->list : std::vector<std::string>{};
    std::map<std::string, std::size_t> pos;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!pos.emplace(m[i], i).second) {
        Violation(name + ": the read sent at " + At(longest->invoked) + " holds " + m[i] + " twice");
        return;
      }
      if (!by_value.count(m[i])) {
        Violation(name + ": the read sent at " + At(longest->invoked) + " holds " + m[i] + ", never sent");
        return;
      }
    }
    // The latest send time among M's first i values, so a read of length n ended after
    // every value it holds was sent.
    std::vector<MonoTime> sent_by(m.size() + 1, MonoTime{});
    for (std::size_t i = 0; i < m.size(); ++i) sent_by[i + 1] = std::max(sent_by[i], by_value[m[i]]->invoked);
    for (const Op* r : reads) {
      // 0. prefix of M.
      for (std::size_t i = 0; i < r->list.size(); ++i) {
        if (r->list[i] != m[i]) {
          Violation(name + ": the reads sent at " + At(r->invoked) + " and " + At(longest->invoked) +
                    " disagree at position " + std::to_string(i) + " (" + r->list[i] + " vs " + m[i] + ")");
          return;
        }
      }
      // 1. nothing from the future.
      if (sent_by[r->list.size()] > r->completed) {
        Violation(name + ": the read sent at " + At(r->invoked) + " holds a value sent after it ended");
        return;
      }
    }
    // 2. every append acknowledged before a read was sent is in it.
    std::vector<const Op*> by_ack = acked;
    std::sort(by_ack.begin(), by_ack.end(), [](const Op* x, const Op* y) { return x->completed < y->completed; });
    for (const Op* r : reads) {
      for (const Op* w : by_ack) {
        if (w->completed >= r->invoked) break;
        auto it = pos.find(w->value);
        if (it == pos.end() || it->second >= r->list.size()) {
          Violation(name + ": the read sent at " + At(r->invoked) + " via n" + std::to_string(r->slot) + " (" +
                    std::to_string(r->list.size()) + " values) misses " + w->value + ", acknowledged at " +
                    At(w->completed) + " via n" + std::to_string(w->slot));
          return;
        }
      }
    }
    // 3. acknowledgement order.
    for (const Op* b : sent) {
      auto pb = pos.find(b->value);
      if (pb == pos.end()) continue;
      for (const Op* w : by_ack) {
        if (w->completed >= b->invoked) break;
        auto pw = pos.find(w->value);
        if (pw == pos.end() || pw->second > pb->second) {
          Violation(name + ": " + w->value + " was acknowledged at " + At(w->completed) + ", before " + b->value +
                    " was sent, but " + (pw == pos.end() ? std::string("is missing") : std::string("comes after it")));
          return;
        }
      }
    }
    // 4. reads in real time never shrink.
    for (const Op* r1 : reads) {
      for (const Op* r2 : reads) {
        if (r1->completed < r2->invoked && r1->list.size() > r2->list.size()) {
          Violation(name + ": the read sent at " + At(r2->invoked) + " (" + std::to_string(r2->list.size()) +
                    " values) is older than the one answered at " + At(r1->completed) + " (" +
                    std::to_string(r1->list.size()) + ")");
          return;
        }
      }
    }
  }

  // ---- the move scenario: operators moving actors and draining nodes
  //
  // Every 0.5-2 s of chaos, a node moves one of the actors it holds to another live node; every
  // 8-20 s, a node is drained (10 s at most), then put back in service 1-5 s later.
  void ScheduleMoves() {
    world_.bucket_env().StartTimer(world_.Now() + milliseconds(world_.Uniform(500, 2000)), [this] {
      if (world_.Now() >= MonoTime(world_.chaos_for)) return;
      const int slot = static_cast<int>(world_.Uniform(0, kSlots - 1));
      const int to = static_cast<int>((slot + world_.Uniform(1, kSlots - 1)) % kSlots);
      Process* p = world_.Primary(slot);
      // As `wasmkeep actor move` does, only to a node that is live (in the source's view).
      auto target = p != nullptr ? p->node->membership().view().find(SlotNodeId(to))
                                 : std::map<NodeId, NodeView>::const_iterator();
      if (p != nullptr && !p->env()->frozen() && target != p->node->membership().view().end() &&
          target->second.live()) {
        std::vector<ActorId> held = p->node->owners().HeldActors();
        if (!held.empty()) {
          const ActorId actor =
              held[static_cast<std::size_t>(world_.Uniform(0, static_cast<std::int64_t>(held.size()) - 1))];
          ++world_.result().moves;
          Trace("move " + actor.name + " from p" + std::to_string(p->number) + " to n" + std::to_string(to));
          p->env()->Spawn(Move(p, actor, SlotNodeId(to)), "move");
          Burst(std::stoi(actor.name.substr(1)));
        }
      }
      ScheduleMoves();
    });
  }

  // A moved actor is often a busy one: 6 more requests for it, to random nodes, within the
  // next 300 ms, so requests race every step of the hand-over (the source's close, its
  // release, the target's take) from every node.
  void Burst(int actor) {
    for (int k = 0; k < 6; ++k) {
      Op op;
      op.actor = actor;
      op.slot = static_cast<int>(world_.Uniform(0, kSlots - 1));
      op.append = world_.Chance(0.6);
      if (op.append) op.value = "v" + std::to_string(++next_value_);
      cluster_.client_env().StartTimer(world_.Now() + milliseconds(world_.Uniform(0, 300)),
                             [this, op] { cluster_.client_env().Spawn(BurstSend(op), "burst"); });
    }
  }
  Task<void> BurstSend(Op op) {
    const std::size_t index = ops_.size();
    (void)co_await Send(std::move(op), index);
  }

  Task<void> Move(Process* p, ActorId actor, NodeId to) {
    const int number = p->number;
    HandOverResult r = co_await p->node->hand_overs().HandOver(actor, to, kHandOverLimit);
    if (r.kind == HandOverResult::Kind::kMoved) ++world_.result().moved;
    Trace("p" + std::to_string(number) + " move of " + actor.name + ": " + std::string(HandOverKindName(r.kind)) + " " +
          r.detail);
  }

  void ScheduleDrains() {
    world_.bucket_env().StartTimer(world_.Now() + milliseconds(world_.Uniform(8000, 20000)), [this] {
      if (world_.Now() >= MonoTime(world_.chaos_for)) return;
      Process* p = world_.Primary(static_cast<int>(world_.Uniform(0, kSlots - 1)));
      if (p != nullptr && !p->env()->frozen() && !p->draining) {
        p->draining = true;
        Trace("drain p" + std::to_string(p->number));
        p->env()->Spawn(Drain(p), "drain");
      }
      ScheduleDrains();
    });
  }

  Task<void> Drain(Process* p) {
    const int number = p->number;
    Status s = co_await p->node->hand_overs().Drain(seconds(10));
    Trace("p" + std::to_string(number) + " drain: " + s.ToString());
    if (s.ok()) {
      ++world_.result().drains;
      checkers_->OnDrained(*p);  // 10
    }
    // The operator puts it back in service a little later.
    world_.bucket_env().StartTimer(world_.Now() + milliseconds(world_.Uniform(1000, 5000)), [this, number] {
      auto it = world_.processes().find(number);
      if (it == world_.processes().end() || !it->second->node) return;
      it->second->node->owners().SetAccepting(true);
      it->second->draining = false;
      Trace("undrain p" + std::to_string(number));
    });
  }

  const bool moves_;  // the `move` scenario: moves, drains and checkers 8-10
  World world_;
  Faults faults_;
  ServingCluster cluster_;
  std::optional<Checkers> checkers_;
  std::uint64_t next_value_ = 0;
  std::deque<Op> ops_;
};

}  // namespace

RunResult RunRoutingScenario(const RunOptions& options) { return RoutingSim(options, /*moves=*/false).Run(); }

RunResult RunMoveScenario(const RunOptions& options) { return RoutingSim(options, /*moves=*/true).Run(); }

}  // namespace wk::sim
