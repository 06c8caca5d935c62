// The `combined` scenario: every serving feature at once on three simulated nodes
// (docs/simulation.md, "combined"; issue 34, item 2). The nodes are the serving harness's
// (serving.h) with the alarm subsystem and move requests switched on, serving two classes;
// on them run, together, the pieces the other serving scenarios run alone:
//   - the routing scenario's list clients and linearizability checker (list_clients.h),
//     on 3 list actors, with a burst of requests for every moved list actor;
//   - the alarms scenario's clients and checkers A1-A7 (alarm_clients.h), on 5 busy and 12
//     lonely alarm actors;
//   - the move scenario's operators moving held actors (HandOvers::HandOver), and
//     operators working through the bucket as `wasmkeep` does (operators.h): drains
//     requested in control/drain/ and carried out by the nodes' DrainControl, lifted later;
//     nodes killed or stopped cleanly while their drain request stands; moves and balances
//     requested in control/move/ and carried out by the nodes' MoveControl;
//   - poisoned actors (poison_clients.h), 4 of them, quarantined by their own requests and
//     alarm runs through the nodes' real quarantine, with checkers Q1-Q2;
//   - old-format objects (old_formats.h): old heartbeats, an actor whose record names one,
//     an actor under a live old per-actor lease, with checkers O1-O3;
//   - restores and forks (history_operators.h): an operator restoring 2 list actors of its
//     own (written by its own client) to points of their history and forking them, through
//     the nodes' OwnerChanges, with retention on, and checkers H1-H4;
//   - WebSocket clients (socket_clients.h) on 2 rooms, through random nodes, with checkers
//     S1-S2: nothing a client receives before its batch is durable, in commit order;
//   - class versions (version_clients.h): an operator deploying, rolling out, rolling back,
//     marking broken and pinning versions of the ledger class while clients use 6 of its
//     actors, with checkers V1-V6: each state written only by versions it was migrated
//     through, in order;
//   - tenant quotas (quota_operator.h): an operator setting and lifting the tenant's request,
//     resident-actor, message and alarm quotas until 120 s, read by every node as a real
//     node reads them, with checker T1 (list_clients.h): an append refused 429 never applied;
//   - checkers 1-7 of the node leases (off in the other serving scenarios) and 8-10
//     (checkers.h) on every actor, list and alarm ones alike.
// Faults: the serving profile (faults.h): kill -9, nodes frozen past their lease, partitions
// between nodes and from the bucket, slow, late and lost bucket replies (owner records and
// segments late as often as in the ownership and storage scenarios), lost peer replies;
// each slot's clock off by the bound (±1 s) half of the time, anywhere within it otherwise.
#include <optional>
#include <string>

#include "alarm_clients.h"
#include "checkers.h"
#include "faults.h"
#include "history_model.h"
#include "history_operators.h"
#include "list_clients.h"
#include "message_clients.h"
#include "old_formats.h"
#include "operators.h"
#include "poison_clients.h"
#include "scenario.h"
#include "serving.h"
#include "socket_clients.h"
#include "quota_operator.h"
#include "version_clients.h"
#include "world.h"

namespace wk::sim {
namespace {

constexpr int kListActors = 3;
constexpr std::string_view kListClass = "list";
constexpr int kMailActors = 4;  // the message clients' ring (message_clients.h)
constexpr Duration kChaos = seconds(100);
constexpr Duration kEnd = seconds(220);

AlarmClientsOptions CombinedAlarms() {
  return AlarmClientsOptions{.busy = 5, .lonely = 12, .clients = 3};
}

std::vector<ActorId> NamedActors() {
  std::vector<ActorId> actors = AlarmClients::Actors(CombinedAlarms());
  for (ActorId& a : PoisonClients::Actors(PoisonClientsOptions{})) actors.push_back(std::move(a));
  for (ActorId& a : OldFormats::Actors()) actors.push_back(std::move(a));
  for (int i = 0; i < kMailActors; ++i) actors.push_back(ActorId{"t", "mail", "m" + std::to_string(i)});
  for (ActorId& a : HistoryActors(std::string(kListClass))) actors.push_back(std::move(a));
  for (ActorId& a : SocketClients::Actors(SocketClientsOptions{})) actors.push_back(std::move(a));
  for (ActorId& a : VersionClients::Actors(VersionClientsOptions{})) actors.push_back(std::move(a));
  return actors;
}

WorldOptions CombinedWorld() {
  return WorldOptions{.actors = kListActors,
                      .actor_class = std::string(kListClass),
                      .named_actors = NamedActors(),
                      .stream = 0x9fb21c651e98df25ULL,
                      // Each slot's skew at the bound half of the time (World's default).
                      .skew_per_process = false,
                      .chaos_for = kChaos,
                      .heal_for = kEnd - kChaos};
}

class CombinedSim {
 public:
  explicit CombinedSim(const RunOptions& options)
      : world_(options, CombinedWorld()),
        faults_(world_, FaultOptions{.serving = true,
                                     .serving_late_records = true,
                                     .serving_chaos = {.kill = 20, .freeze = 42, .peer_cut = 60, .bucket_cut = 80},
                                     .chaos_min = seconds(2),
                                     .chaos_max = seconds(7)}),
        alarms_(world_, cluster_, CombinedAlarms()),
        poison_(world_, cluster_, PoisonClientsOptions{}),
        cluster_(world_, faults_, Serving()),
        lists_(world_, cluster_,
               ListClientsOptions{.actors = kListActors, .clients = 3, .class_name = std::string(kListClass),
                                  .clients_for = seconds(150), .keyed_share = 0.5}),
        old_formats_(world_, cluster_),
        messages_(world_, cluster_, MessageClientsOptions{.actors = kMailActors, .clients = 2}),
        sockets_(world_, cluster_, SocketClientsOptions{}),
        versions_(world_, cluster_),
        quotas_(world_),
        checkers_(world_, CheckerOptions{.leases = true, .owners = true, .holders = true}),
        operators_(world_, faults_, checkers_, OperatorOptions{.moves = true, .drains = false, .bucket = true}),
        model_(world_, "list", &ListState),
        history_(world_, model_,
                 HistoryOperatorsOptions{.actors = RestoreActors(std::string(kListClass)),
                                         .fork_targets = ForkTargets(std::string(kListClass)),
                                         .retention = cluster_.options().replica.retention.all,
                                         .cluster = &cluster_,
                                         .clients_for = seconds(150)}) {
    for (const ActorId& a : HistoryActors(std::string(kListClass))) model_.Watch(a);
    world_.hooks.on_landed = [this](const std::string& key, const std::string& body) {
      checkers_.OnLanded(key, body);
      alarms_.OnLanded(key, body);
      poison_.OnLanded(key, body);
      old_formats_.OnLanded(key, body);
      model_.OnLanded(key, body);
    };
    world_.hooks.on_delete = [this](int number, const std::string& key) { alarms_.OnDelete(number, key); };
    world_.hooks.on_send = [this](int number, const std::string& key, const std::string& body) {
      checkers_.OnSend(number, key, body);
      operators_.OnSend(number, key, body);
    };
    operators_.on_move = [this](const ActorId& actor) {
      // The list clients' actors a<i> (not the old-format pieces' actors of the same class).
      if (actor.class_name == kListClass && actor.name.starts_with("a")) lists_.Burst(std::stoi(actor.name.substr(1)));
    };
  }

  RunResult Run() {
    World::Stages stages;
    stages.begin = [this] {
      lists_.Start();
      alarms_.Start();
      poison_.Start();
      old_formats_.Start();
      messages_.Start();
      sockets_.Start();
      versions_.Start();
      quotas_.Start();
      faults_.ScheduleChaos();
      operators_.Start();
      history_.Start();
    };
    stages.heal = [this] {
      faults_.Heal();
      operators_.Heal();
    };
    stages.every_step = [this] { checkers_.CheckEveryStep(); };
    stages.final_checks = [this] {
      checkers_.FinalChecks();  // 7: after healing, before the final reads run the world on
      world_.finished = true;
      lists_.FinalReadsAndCheck();
      alarms_.FinalChecks();
      old_formats_.FinalChecks();
      messages_.FinalChecks();
      sockets_.FinalChecks();
      versions_.FinalReadsAndCheck();
      history_.FinalChecks();
    };
    return world_.Run(stages);
  }

 private:
  ServingOptions Serving() {
    ServingOptions o;
    o.token = "Bearer combined-test-token";
    o.class_names = {std::string(kListClass), alarms_.options().class_name};
    o.secret_byte = 0x77;
    o.replica.gc_off_chain_after = world_.timing().takeover_after();
    o.replica.segment_max_batches = static_cast<std::uint32_t>(world_.Uniform(1, 8));
    o.replica.snapshot_every_segments = static_cast<std::uint32_t>(world_.Uniform(3, 8));
    o.host.broken = world_.options().broken();
    // Short: alarms of hibernated actors come through the shards; long: a node frozen past
    // its lease still has its actors in memory when it resumes (the zombie case).
    o.host.idle_hibernate = milliseconds(world_.Uniform(1500, 30000));
    o.move_requests = true;
    alarms_.Configure(o);
    poison_.Configure(o);
    MessageClients::ConfigureServing(o, kMailActors, world_.timing());
    SocketClients::Configure(o);
    VersionClients::Configure(o);
    QuotaOperator::Configure(o);
    // Sleeping holds kept for seconds and a handful at most, so that their releases (idle,
    // count) meet drains, moves, alarms, outboxes and kills (docs/node-lease.md, "Sleeping
    // holds").
    o.sleep = SleepPolicy{milliseconds(world_.Uniform(2000, 40000)), static_cast<std::size_t>(world_.Uniform(2, 12))};
    DrawRetention(world_, o.replica);
    return o;
  }

  World world_;
  Faults faults_;
  AlarmClients alarms_;  // before cluster_: its options go into the cluster's
  PoisonClients poison_;  // the same
  ServingCluster cluster_;
  ListClients lists_;
  OldFormats old_formats_;
  MessageClients messages_;
  SocketClients sockets_;
  VersionClients versions_;
  QuotaOperator quotas_;
  Checkers checkers_;
  Operators operators_;
  HistoryModel model_;
  HistoryOperators history_;
};

}  // namespace

RunResult RunCombinedScenario(const RunOptions& options) { return CombinedSim(options).Run(); }

}  // namespace wk::sim
