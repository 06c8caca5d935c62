// The `messages` scenario: messages between actors on three simulated nodes
// (docs/messages.md; docs/simulation.md, "messages"). Each node is the serving harness's
// (serving.h: the real ClusterNode, ReplicaProvider, Forwarder and Front, the real runtime
// core over native actors) with the real MessageDelivery: outboxes read through the gates,
// messages routed by the front as requests are (run here, forwarded over the signed peer
// network, or the receiver acquired), outcomes committed in the sender's state. The workload
// and checkers M1-M5 are MessageClients (message_clients.h): six "mail" actors sending round
// a ring and in fan-outs. Operators move them between nodes and drain nodes (operators.h),
// and checkers 8-10 (checkers.h) watch ownership meanwhile.
//
// Faults: the Faults' serving profile (faults.h): kills, frozen nodes, cut peers and a cut
// bucket, lost and late replies.
#include "checkers.h"
#include "faults.h"
#include "message_clients.h"
#include "operators.h"
#include "scenario.h"
#include "serving.h"
#include "world.h"

namespace wk::sim {
namespace {

constexpr Duration kChaos = seconds(100);
constexpr Duration kEnd = seconds(220);
constexpr int kMailActors = 6;

WorldOptions MessagesWorld() {
  WorldOptions o{.stream = 0x7c3a9e1f20b54d61ULL, .skew_per_process = true, .chaos_for = kChaos, .heal_for = kEnd - kChaos};
  for (int i = 0; i < kMailActors; ++i) o.named_actors.push_back(ActorId{"t", "mail", "m" + std::to_string(i)});
  return o;
}

class MessagesSim {
 public:
  explicit MessagesSim(const RunOptions& options)
      : world_(options, MessagesWorld()),
        faults_(world_, FaultOptions{.serving = true,
                                     .serving_chaos = {.kill = 25, .freeze = 50, .peer_cut = 65, .bucket_cut = 85},
                                     .chaos_min = seconds(2),
                                     .chaos_max = seconds(7)}),
        messages_(world_, cluster_, MessageClientsOptions{.actors = kMailActors}),
        cluster_(world_, faults_, Serving()),
        checkers_(world_, CheckerOptions{.leases = false, .owners = true}),
        operators_(world_, faults_, checkers_, OperatorOptions{.moves = true, .drains = true}) {
    world_.hooks.on_landed = [this](const std::string& key, const std::string& body) { checkers_.OnLanded(key, body); };
  }

  RunResult Run() {
    World::Stages stages;
    stages.begin = [this] {
      messages_.Start();
      faults_.ScheduleChaos();
      operators_.Start();
    };
    stages.heal = [this] { faults_.Heal(); };
    stages.every_step = [this] { checkers_.CheckEveryStep(); };
    stages.final_checks = [this] {
      world_.finished = true;
      messages_.FinalChecks();
    };
    return world_.Run(stages);
  }

 private:
  ServingOptions Serving() {
    ServingOptions o;
    o.token = "Bearer messages-test-token";
    o.class_names = {"mail"};
    o.secret_byte = 0x6d;
    o.replica.gc_off_chain_after = world_.timing().takeover_after();
    o.replica.segment_max_batches = static_cast<std::uint32_t>(world_.Uniform(1, 6));
    o.replica.snapshot_every_segments = static_cast<std::uint32_t>(world_.Uniform(3, 8));
    o.host.broken = world_.options().broken();
    o.host.idle_hibernate = milliseconds(world_.Uniform(1500, 6000));
    o.host.mail_failure_percent = static_cast<int>(world_.Uniform(5, 20));
    messages_.Configure(o);
    return o;
  }

  World world_;
  Faults faults_;
  MessageClients messages_;  // before cluster_: its options go into the cluster's
  ServingCluster cluster_;
  Checkers checkers_;
  Operators operators_;
};

}  // namespace

RunResult RunMessagesScenario(const RunOptions& options) { return MessagesSim(options).Run(); }

}  // namespace wk::sim
