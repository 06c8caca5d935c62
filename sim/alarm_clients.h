// AlarmClients: the `alarms` scenario's workload and its checkers A1-A7, as a piece any
// serving scenario with alarms adds to its ServingCluster (serving.h): `alarms` and
// `combined` run it (docs/simulation.md, "alarms").
//
// The actors are the native host's "alarm" class (native_actor_host.h): a log of what
// happened to the alarm (s<ms> set, d deleted, f<due>:<retry>:<now> fired), kept in the
// actor's durable state. Busy actors b<i> get sets, deletes and reads from clients all run
// long; lonely actors l<i> get exactly one set each during the chaos and nothing more, so
// an alarm lost by the index is lost for good (no later request restores them). Handlers
// fail at random (retries), always for poisoned times (given up), and sometimes re-arm.
//
// Checkers (violations name the actor, the alarm and the node):
//   A1 (online) no handler runs before its time on its node's clock;
//   A2 (online) no index entry is removed while the actor's durable state (what a restore
//      sees at that instant) holds its alarm with no other entry for it: the handler's
//      writes, or the change that replaced the alarm, are durable before the entry goes;
//   A3 (online) no segment that sets an alarm lands on the newest chain without an index
//      entry for it (the invariant, rule 1);
//   at the end, from each actor's durable log (restored from the bucket):
//   A4 every alarm set, not replaced or deleted, fired at least once (or was given up after
//      its last retry failed, observed), unless it is not yet due;
//   A5 none fired after a delete or replacement: each f<due> follows its own s<due>;
//   A6 while the cluster is healthy every alarm fires within scan_period + scan_lag + 3 s
//      of its time (plus its retries' back-off);
//   A7 an alarm the durable state still holds has an index entry; and every acknowledged
//      set is in the log.
//
// Every draw goes through the world's random source, in the order the alarms scenario's
// recorded histories made them.
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
  // The durable state, as a restore at this instant would see it.
  std::optional<actor::StateMap> DurableState(const ActorId& actor);
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
