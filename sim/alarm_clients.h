// AlarmClients: the `alarms` scenario's workload and its checkers A1-A7, as a piece any
// serving scenario with alarms adds to its ServingCluster (serving.h); `alarms` and
// `combined` run it. The workload (busy actors with sets, deletes and reads; lonely actors
// with one set each, so an alarm the index loses is lost for good) and what each checker
// asserts are told in docs/simulation.md, "alarms". Violations name the actor, the alarm
// and the node.
//
// Every draw goes through the world's random source, in the order the alarms scenario's
// recorded histories made them, so its digests stay unchanged.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actor/state_map.h"
#include "serving.h"
#include "world.h"

namespace wk::sim {

struct AlarmClientsOptions {
  int busy = 6;     // actors b0.. with clients all run long
  int lonely = 16;  // actors l0.. with one set each
  int clients = 3;  // the busy actors' clients, one request at a time, 0.3-1.5 s apart
  std::string class_name = "alarm";
  Duration busy_clients_for = std::chrono::seconds(150);
  Duration lonely_until = std::chrono::seconds(85);  // the lonely sets are sent from 3 s to this
  // From here the cluster is healthy (every node restarted, every handed alarm rechecked): A6.
  Duration healthy_from = std::chrono::seconds(140);
  // Alarms due later than this before the end need not have fired yet (A4).
  Duration not_yet_due = std::chrono::seconds(40);
};

// The simulator's alarm settings (scan every 3 s, 1 s lag, 3 retries from 1 s, the shortest
// hand-over recheck the timing allows): every scenario whose nodes run the alarm subsystem.
alarms::AlarmOptions SimAlarmOptions(const LeaseTiming& timing);

class AlarmClients {
 public:
  // cluster may be not yet built (Configure fills its options); it must be before Start.
  // REQUIRES: world and cluster outlive this.
  AlarmClients(World& world, ServingCluster& cluster, AlarmClientsOptions options);

  // The actors, busy ones first.
  static std::vector<ActorId> Actors(const AlarmClientsOptions& options);
  // Switches the nodes' alarm subsystem on (scan every 3 s, 1 s lag, 3 retries from 1 s)
  // and reports every handler run here (A1); draws the handlers' failure rate (5-20 %).
  void Configure(ServingOptions& serving);
  const alarms::AlarmOptions& alarm_options() const { return alarm_options_; }
  const AlarmClientsOptions& options() const { return options_; }

  // Spawns the busy clients and, at random times, the lonely ones.
  void Start();
  // World::Hooks::on_landed: A3 for segments.
  void OnLanded(const std::string& key, const std::string& body);
  // World::Hooks::on_delete: A2 for index entries.
  void OnDelete(int number, const std::string& key);
  // After healing (world.finished set): A4-A7.
  void FinalChecks();

 private:
  std::int64_t TrueMs() { return kOriginMs + World::Ms(w_.Now().time_since_epoch()); }
  // Index entries of (actor, due) in the bucket, but `except`.
  std::size_t EntriesFor(const ActorId& actor, std::int64_t due, const std::string& except = "");
  void OnAlarmRun(const ActorId& actor, std::int64_t due, std::int64_t now, int retry, bool failed, bool last);
  void OnEntryDelete(int number, const std::string& key);
  void OnSegmentLanded(const std::string& key, const std::string& body);
  // Sends one request to a random node; true if answered 200.
  Task<bool> Send(int actor, std::string method, std::string path, std::string query);
  Task<bool> SetAlarm(int actor, std::int64_t due);
  Task<void> BusyClient();
  // One set, retried until answered 200 (at most 5 tries), then nothing more.
  Task<void> LonelyClient(int actor, Duration at);

  World& w_;
  ServingCluster& cluster_;
  const AlarmClientsOptions options_;
  alarms::AlarmOptions alarm_options_;
  std::vector<ActorId> actors_;
  std::map<int, std::int64_t> last_due_;
  std::map<ActorId, std::set<std::int64_t>> acked_sets_;
  std::set<std::pair<ActorId, std::int64_t>> gave_up_;
};

}  // namespace wk::sim
