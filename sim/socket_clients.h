// SocketClients: WebSocket clients of the room class (native_actor_host.h), as a piece any
// serving scenario adds to its ServingCluster (serving.h); `combined` runs it
// (docs/simulation.md, "The `combined` scenario"). Each client opens a WebSocket to a room through a
// random node's client API (a node that does not hold the room refuses with 503, this
// simulator's nodes relaying nothing), sends text messages one after another, and records
// every message each connection receives; a connection that ends (closed by its node: 1012
// when the room's hold there ended, 1013 after a failed event; or its node killed: nothing
// more arrives) is opened again, anywhere. The connection itself is simulated here: what the
// node sends reaches the client 1-20 ms later, in order; what the client sends runs on the
// node one message at a time, as HttpServer delivers it.
// What the checkers assert once healed, from every room's durable state (durable_state.h):
//   S1 every message a client received, "<n>:<text>", is the room's durable message n
//      (nothing leaves before its batch is durable, and nothing a client saw is lost);
//   S2 on one connection, the numbers received only grow (released in commit order).
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "serving.h"
#include "world.h"

namespace wk::sim {

struct SocketClientsOptions {
  int rooms = 2;    // t/room/r0 .. r<rooms-1>
  int clients = 3;  // each on one connection at a time
  Duration clients_for = std::chrono::seconds(150);
};

class SocketClients {
 public:
  // REQUIRES: world and cluster outlive this.
  SocketClients(World& world, ServingCluster& cluster, SocketClientsOptions options = {});
  ~SocketClients();

  // Switches the nodes' WebSockets on and loads the room class.
  static void Configure(ServingOptions& serving);
  static std::vector<ActorId> Actors(const SocketClientsOptions& options);
  void Start();
  // After healing (world.finished set): S1 and S2.
  void FinalChecks();

  struct Conn;  // one connection (the .cc)

 private:
  Task<void> Client(int number);

  World& w_;
  ServingCluster& cluster_;
  const SocketClientsOptions options_;
  int next_text_ = 0;
  // Every connection opened, with what it received.
  std::vector<std::shared_ptr<Conn>> conns_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk::sim
