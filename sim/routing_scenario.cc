// The `routing` scenario: the actor API end to end on three simulated nodes. Each node runs
// its real ClusterNode (lease, listing, fence watch, ownership), the real ReplicaProvider
// (durable replicas on the simulated bucket, holds from the ownership records), the real
// Forwarder over the simulated peer network and the real Front, with native list actors in
// place of WebAssembly: the serving harness (serving.h), on the World (world.h). Clients
// send appends and reads to random nodes; the checker judges the acknowledged history of
// each actor (linearizable): both are ListClients (list_clients.h). Faults: kill -9 and
// restart, a node frozen past its lease and then resumed with its memory (a zombie owner),
// partitions between nodes and between a node and the bucket, slow and lost bucket replies
// and lost peer replies: the Faults' serving profile (faults.h). See docs/simulation.md,
// "routing".
//
// The `move` scenario is the same world with operators at work (operators.h): actors moved
// between nodes (HandOvers::HandOver with a target: closed, durable, released, then taken
// and restored by the target, told over the peer network) and nodes drained
// (HandOvers::Drain), racing the kills, the frozen nodes and the lost replies. Besides the
// linearizability checker (no acknowledged append lost), the Checkers (checkers.h) check
// after every event that no two nodes act for one actor (checker 8), that every
// acquisition writes a generation above the last (9), and that a drain reports drained
// only when no record names its process (10). See docs/simulation.md, "move".
//
// With restores (the `routing` scenario only: the move scenario's history is unchanged),
// retention is on and an operator restores two list actors of its own and forks them
// through the nodes' OwnerChanges (history_operators.h), with checkers 8-9 and H1-H4
// (docs/simulation.md, "History: restores and forks").
#include <optional>
#include <string>

#include "checkers.h"
#include "faults.h"
#include "history_model.h"
#include "history_operators.h"
#include "list_clients.h"
#include "operators.h"
#include "scenario.h"
#include "serving.h"
#include "world.h"

namespace wk::sim {
namespace {

constexpr int kActors = 3;
constexpr std::string_view kClass = "list";

WorldOptions RoutingWorld(bool restores) {
  return WorldOptions{.actors = kActors,
                      .actor_class = std::string(kClass),
                      .named_actors = restores ? HistoryActors(std::string(kClass)) : std::vector<ActorId>{},
                      .stream = 0x5851f42d4c957f2dULL,
                      .skew_per_process = true,
                      .chaos_for = seconds(75),
                      .heal_for = seconds(45)};
}

// The scenario's draws, in the order its recorded histories made them (the move scenario's
// unchanged: the retention is drawn last, and only with restores).
ServingOptions RoutingServing(World& w, bool restores) {
  ServingOptions o;
  o.token = "Bearer routing-test-token";
  o.class_names = {std::string(kClass)};
  o.secret_byte = 0x5a;
  o.replica.gc_off_chain_after = w.timing().takeover_after();
  o.replica.segment_max_batches = static_cast<std::uint32_t>(w.Uniform(2, 8));
  o.replica.snapshot_every_segments = static_cast<std::uint32_t>(w.Uniform(3, 6));
  o.host.broken = w.options().broken();
  // Long enough that a node frozen past its lease usually still has its actors in memory
  // when it resumes: the zombie case.
  o.host.idle_hibernate = milliseconds(w.Uniform(20000, 40000));
  if (restores) DrawRetention(w, o.replica);
  return o;
}

class RoutingSim {
 public:
  RoutingSim(const RunOptions& options, bool moves)
      : moves_(moves),
        restores_(!moves),
        world_(options, RoutingWorld(restores_)),
        faults_(world_, FaultOptions{.serving = true,
                                     .serving_chaos = {.kill = 20, .freeze = 45, .peer_cut = 65, .bucket_cut = 85},
                                     .chaos_min = seconds(2),
                                     .chaos_max = seconds(8)}),
        cluster_(world_, faults_, RoutingServing(world_, restores_)),
        clients_(world_, cluster_,
                 ListClientsOptions{.actors = kActors, .clients = 4, .class_name = std::string(kClass),
                                    .clients_for = seconds(95)}) {
    if (moves_) {
      checkers_.emplace(world_, CheckerOptions{.leases = false, .owners = true});
      world_.hooks.on_landed = [this](const std::string& key, const std::string& body) {
        checkers_->OnLanded(key, body);
      };
      operators_.emplace(world_, faults_, *checkers_, OperatorOptions{.moves = true, .drains = true});
      // A moved actor is often a busy one (ListClients::Burst).
      operators_->on_move = [this](const ActorId& actor) { clients_.Burst(std::stoi(actor.name.substr(1))); };
    }
    if (restores_) {
      // Restores and forks of actors of their own (history_operators.h: the list clients'
      // checker would call a restore's removed appends lost), with checkers 8-9 and H1-H4.
      checkers_.emplace(world_, CheckerOptions{.leases = false, .owners = true, .holders = true});
      model_.emplace(world_, "list", &ListState);
      for (const ActorId& a : HistoryActors(std::string(kClass))) model_->Watch(a);
      history_.emplace(world_, *model_,
                       HistoryOperatorsOptions{.actors = RestoreActors(std::string(kClass)),
                                               .fork_targets = ForkTargets(std::string(kClass)),
                                               .retention = cluster_.options().replica.retention.all,
                                               .cluster = &cluster_,
                                               .clients_for = seconds(95)});
      world_.hooks.on_landed = [this](const std::string& key, const std::string& body) {
        checkers_->OnLanded(key, body);
        model_->OnLanded(key, body);
      };
      world_.hooks.on_send = [this](int number, const std::string& key, const std::string& body) {
        checkers_->OnSend(number, key, body);
      };
    }
  }

  RunResult Run() {
    World::Stages stages;
    stages.begin = [this] {
      clients_.Start();
      faults_.ScheduleChaos();
      if (moves_) operators_->Start();
      if (restores_) history_->Start();
    };
    stages.heal = [this] { faults_.Heal(); };
    if (checkers_) stages.every_step = [this] { checkers_->CheckEveryStep(); };
    stages.final_checks = [this] {
      clients_.FinalReadsAndCheck();
      if (restores_) history_->FinalChecks();
    };
    return world_.Run(stages);
  }

 private:
  const bool moves_;  // the `move` scenario: moves, drains and checkers 8-10
  const bool restores_;  // the `routing` scenario: restores and forks (history_operators.h)
  World world_;
  Faults faults_;
  ServingCluster cluster_;
  ListClients clients_;
  std::optional<Checkers> checkers_;
  std::optional<Operators> operators_;
  std::optional<HistoryModel> model_;
  std::optional<HistoryOperators> history_;
};

}  // namespace

RunResult RunRoutingScenario(const RunOptions& options) { return RoutingSim(options, /*moves=*/false).Run(); }

RunResult RunMoveScenario(const RunOptions& options) { return RoutingSim(options, /*moves=*/true).Run(); }

}  // namespace wk::sim
