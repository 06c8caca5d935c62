// The `alarms` scenario: alarm delivery on three simulated nodes (docs/alarms.md,
// docs/simulation.md "alarms"). Each node is the serving harness's (serving.h: its real
// ClusterNode, ReplicaProvider, Forwarder and Front, native actors in place of
// WebAssembly) with the real alarm subsystem switched on: the AlarmIndex under its
// replicas, the AlarmService (owner and wake timers, deliveries, retries, hand-overs
// through the front's /v1/alarms/) and the ShardScanner (shards held through ownership
// records). The workload and checkers A1-A7 are AlarmClients (alarm_clients.h): 6 busy and
// 16 lonely actors.
//
// Faults: the Faults' serving profile (faults.h), a little harsher than the routing
// scenario's mix.
#include "alarm_clients.h"
#include "faults.h"
#include "scenario.h"
#include "serving.h"
#include "world.h"

namespace wk::sim {
namespace {

constexpr Duration kChaos = seconds(100);
constexpr Duration kEnd = seconds(220);

WorldOptions AlarmsWorld() {
  return WorldOptions{
      .stream = 0x2545f4914f6cdd1dULL, .skew_per_process = true, .chaos_for = kChaos, .heal_for = kEnd - kChaos};
}

class AlarmsSim {
 public:
  explicit AlarmsSim(const RunOptions& options)
      : world_(options, AlarmsWorld()),
        faults_(world_, FaultOptions{.serving = true,
                                     .serving_chaos = {.kill = 25, .freeze = 50, .peer_cut = 65, .bucket_cut = 85},
                                     .chaos_min = seconds(2),
                                     .chaos_max = seconds(7)}),
        alarms_(world_, cluster_, AlarmClientsOptions{}),
        cluster_(world_, faults_, Serving()) {
    world_.hooks.on_landed = [this](const std::string& key, const std::string& body) { alarms_.OnLanded(key, body); };
    world_.hooks.on_delete = [this](int number, const std::string& key) { alarms_.OnDelete(number, key); };
  }

  RunResult Run() {
    World::Stages stages;
    stages.begin = [this] {
      alarms_.Start();
      faults_.ScheduleChaos();
    };
    stages.heal = [this] { faults_.Heal(); };
    stages.final_checks = [this] {
      world_.finished = true;
      alarms_.FinalChecks();
    };
    return world_.Run(stages);
  }

 private:
  // The scenario's draws, in the order its recorded histories made them.
  ServingOptions Serving() {
    ServingOptions o;
    o.token = "Bearer alarms-test-token";
    o.class_names = {"alarm"};
    o.secret_byte = 0x3c;
    o.replica.gc_off_chain_after = world_.timing().takeover_after();
    o.replica.segment_max_batches = static_cast<std::uint32_t>(world_.Uniform(1, 6));
    o.replica.snapshot_every_segments = static_cast<std::uint32_t>(world_.Uniform(3, 8));
    o.host.broken = world_.options().broken();
    o.host.idle_hibernate = milliseconds(world_.Uniform(1500, 6000));
    alarms_.Configure(o);
    return o;
  }

  World world_;
  Faults faults_;
  AlarmClients alarms_;  // before cluster_: its options go into the cluster's
  ServingCluster cluster_;
};

}  // namespace

RunResult RunAlarmsScenario(const RunOptions& options) { return AlarmsSim(options).Run(); }

}  // namespace wk::sim
