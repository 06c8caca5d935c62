// ListClients: the `routing` scenario's clients and their linearizability checker, as a
// piece any serving scenario adds to its ServingCluster (serving.h): `routing`, `move` and
// `combined` run it (docs/simulation.md, "routing").
//
// Clients append to and read native list actors (native_actor_host.h) t/<class>/a<i>
// through random nodes, from the clients' Env (never frozen or cut). After healing, each
// actor is read through a healthy node until one answers; then Check judges each actor's
// history as the clients saw it: every answered read a prefix of the longest, holding no
// value twice or from the future, every append acknowledged before it was sent, in
// acknowledgement order, and reads never shrinking in real time (see CheckActor).
//
// Every draw goes through the world's random source, in the order the routing scenario's
// recorded histories made them.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "serving.h"
#include "world.h"

namespace wk::sim {

struct ListClientsOptions {
  int actors = 3;          // t/<class_name>/a0 .. a<actors-1>
  int clients = 4;         // clients sending one request at a time, 50-700 ms apart
  std::string class_name = "list";
  Duration clients_for = std::chrono::seconds(95);  // no new request after this
  // Idempotent appends (docs/http-api.md, "Idempotent requests"): this share of appends
  // carries an Idempotency-Key; one that is not answered 200 is sent again with the same key
  // and value (up to 4 times, to random nodes), and one answered is sometimes sent again
  // anyway. A value applied twice then shows as a value held twice (check 1). 0: none (the
  // routing and move scenarios, whose recorded histories predate it).
  double keyed_share = 0;
};

class ListClients {
 public:
  // REQUIRES: cluster's nodes load class_name; world and cluster outlive this.
  ListClients(World& world, ServingCluster& cluster, ListClientsOptions options);

  // Spawns the clients.
  void Start();
  // A busy actor (a move's): 6 more requests for actor a<actor>, to random nodes, within
  // the next 300 ms, so they race every step of its hand-over from every node.
  void Burst(int actor);
  // After healing: the final reads (world.finished set first: no more restarts), then the
  // checker over every actor.
  void FinalReadsAndCheck();

 private:
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
    std::string key;  // an Idempotency-Key, or empty
  };

  Task<void> Client();
  ServerRequest RequestFor(const Op& op) const;
  // Sends op (recorded at index) and records its outcome. True if answered 200.
  Task<bool> Send(Op op, std::size_t index);
  Task<void> BurstSend(Op op);
  // A keyed append not answered 200 (or, now and then, one that was): sent again with its
  // key to random nodes, until answered or 4 more times.
  Task<void> Retry(Op op);
  void FinalReads();
  void CheckActor(int a);

  World& w_;
  ServingCluster& cluster_;
  ListClientsOptions options_;
  std::uint64_t next_value_ = 0;
  std::uint64_t next_key_ = 0;
  std::deque<Op> ops_;
};

}  // namespace wk::sim
