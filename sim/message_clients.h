// MessageClients: the `messages` scenario's workload and its checkers M1-M5, as a piece any
// serving scenario adds to its ServingCluster (serving.h); `messages` and `combined` run it.
// Actors m0..m<n-1> of the native "mail" class (native_actor_host.h). Clients ask an actor
// to send: round the ring (to the next actor, with 1-4 hops left, each hop a message sent by
// a handler) or as a fan-out (to 3 others at once). Nothing calls an actor after the
// clients stop: a sender whose node died meanwhile is started by the alarm index's scanners,
// for its outbox's wake entry (actor/messages.h, KeepOutboxWake), so M4 proves that too.
// What the checkers assert, from every actor's durable state (durable_state.h) once healed
// (docs/simulation.md, "messages"):
//   M1 no receiver applied one (sender, seq) twice, nor one message's content twice;
//   M2 one sender's messages took effect at a receiver in the order they were sent;
//   M3 every applied message comes from a durable event: a send in its sender's durable
//      "sent", or a handler's run in its sender's durable "got";
//   M4 every message of a durable event took effect (nothing lost), every acknowledged
//      send is durable, and no outbox holds a message at the end;
//   M5 no message is parked as dead (handlers fail at random, never max_attempts times).
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "routing/message_delivery.h"
#include "serving.h"
#include "world.h"

namespace wk::sim {

struct MessageClientsOptions {
  int actors = 6;   // m0 .. m<actors-1>, also the ring
  int clients = 3;  // one request at a time each, 0.3-1.5 s apart
  Duration clients_for = std::chrono::seconds(110);  // 10 s past the chaos: senders killed late are not called again
};

class MessageClients {
 public:
  // REQUIRES: world and cluster outlive this.
  MessageClients(World& world, ServingCluster& cluster, MessageClientsOptions options = {});

  // Switches message delivery on in every node (retries from 200 ms up to 3 s, parked after
  // 40 handler failures), and the alarm subsystem if the scenario has not (SimAlarmOptions:
  // its scanners start senders nobody calls), and loads the mail class.
  void Configure(ServingOptions& serving) { ConfigureServing(serving, options_.actors, w_.timing()); }
  // The same, for a scenario that builds its cluster before this (no draws).
  static void ConfigureServing(ServingOptions& serving, int actors, const LeaseTiming& timing);
  void Start();
  // After healing (world.finished set): M1-M5.
  void FinalChecks();

 private:
  Task<void> Client(int number);
  std::string Name(int i) const { return "m" + std::to_string(i); }

  World& w_;
  ServingCluster& cluster_;
  const MessageClientsOptions options_;
  int next_id_ = 0;
  // Per send id (unique): its sender, receivers and hops.
  struct SendInfo {
    int sender = 0;
    std::vector<int> to;
    int hops = 0;
    bool acked = false;
  };
  std::map<std::string, SendInfo> sends_;
};

}  // namespace wk::sim
