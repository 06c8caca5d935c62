// PoisonClients: poisoned actors being quarantined while everything else runs, as a piece
// the `combined` scenario adds to its ServingCluster (docs/simulation.md, "combined").
//
// The actors are the native host's "poison" class (native_actor_host.h): every event that
// reaches its code is a strike, as an event that exhausts a worker's heap is on a real node,
// and its alarm handler is one too. Clients arm their alarms and hit them through random
// nodes, so each is quarantined (three strikes) while its alarm is pending in the index.
// The nodes run the real quarantine: the front's and the alarm delivery's reads, the
// strikes, QuarantineHoldSource (ServingOptions::quarantine).
//
// Checkers (violations name the actor and the process):
//   Q1 (online) no start on a stale answer: once an actor's quarantine landed in the bucket,
//      a process that acquires a replica of it (past QuarantineHoldSource: a request's, a
//      move's, an alarm's start, or the runtime's restart of an actor whose storage failed)
//      must have sent a read of its record, or a listing of quarantine/, less than the
//      quarantine cache's ttl before, or have just had one answered;
//   Q2 (online) only a poison actor is ever quarantined (no strike for a healthy event).
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "serving.h"
#include "world.h"

namespace wk::sim {

struct PoisonClientsOptions {
  int actors = 4;  // t/poison/p0 ..
  std::string class_name = "poison";
  // One client, a request every 0.3-2 s until then; actor p<i> is asked for from
  // i * stagger on, so quarantines land all through the chaos.
  Duration clients_for = std::chrono::seconds(150);
  Duration stagger = std::chrono::seconds(20);
};

class PoisonClients {
 public:
  // REQUIRES: world and cluster outlive this; Configure before the cluster is built.
  PoisonClients(World& world, ServingCluster& cluster, PoisonClientsOptions options);

  static std::vector<ActorId> Actors(const PoisonClientsOptions& options);
  // Switches quarantine on in every node (3 strikes in 10 minutes, quarantined for 10
  // minutes: longer than a run) and wires the observers Q1 needs.
  void Configure(ServingOptions& serving);
  const PoisonClientsOptions& options() const { return options_; }

  void Start();
  // World::Hooks::on_landed: the quarantines (Q1's times, Q2).
  void OnLanded(const std::string& key, const std::string& body);

 private:
  void OnStart(int number, const ActorId& actor);
  void OnRead(int number, const std::string& key, bool done);
  Task<void> Client();

  World& w_;
  ServingCluster& cluster_;
  const PoisonClientsOptions options_;
  std::vector<ActorId> actors_;
  // Record key -> when its quarantine landed (the first time).
  std::map<std::string, MonoTime> quarantined_at_;
  // (process, record key) -> when it last sent a read of the record, and last had one end.
  std::map<std::pair<int, std::string>, MonoTime> last_read_;
  std::map<std::pair<int, std::string>, MonoTime> last_answer_;
};

}  // namespace wk::sim
