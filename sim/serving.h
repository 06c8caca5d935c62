// The serving node harness of the `routing`, `move` and `alarms` scenarios (docs/simulation.md,
// "The serving harness"): each World process (world.h) made a whole serving node minus
// WebAssembly. On top of its ClusterNode, ServingCluster hangs its parts on the process:
// the real ReplicaProvider over OwnersHoldSource, the actor host (native actors,
// MakeActorHost), the real Forwarder over the simulated peer network (sim_peer_network.h),
// the real Front on two listeners (the client API and the peer listener its node record
// names), the hand-over host, with alarms the real AlarmIndex, AlarmService and
// ShardScanner, with messages the real MessageDelivery, and with quarantine the real QuarantineCache, QuarantineStrikes and
// QuarantineHoldSource; and the owner's changes a node makes for an operator (restores and
// forks: routing/owner_changes.h, over the DeletionGuard every start passes, as on a real
// node; Process::changes). Clients send from an Env of their own, never frozen or cut.
//
// The faults are the Faults' serving profile (faults.h); the scenario adds its workload
// and checkers. Nothing here draws from the world's random source.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alarms/alarm_service.h"
#include "control/cluster_secret.h"
#include "control/quarantine.h"
#include "faults.h"
#include "native_actor_host.h"
#include "net/peer_transport.h"
#include "replica/replica.h"
#include "routing/message_delivery.h"
#include "routing/socket_hub.h"
#include "sim_peer_network.h"
#include "world.h"

namespace wk::sim {

struct ServingOptions {
  std::string token;  // the one test token ("Bearer ..."), tenant "t"
  // The classes the nodes load (the native host's "list" and "alarm", native_actor_host.h).
  std::vector<std::string> class_names;
  // Versioned classes (the native host's "ledger"): each node reads their rollouts from the
  // bucket as ActorHost does (at most every class_check; an event of a resident actor asks
  // for a refresh; a version a state needs read on demand). Deployed by the scenario's
  // operators (control/class_versions.h); unknown until a rollout exists.
  std::vector<std::string> versioned_classes;
  Duration class_check = std::chrono::seconds(1);
  std::uint8_t secret_byte = 0;  // the cluster secret, every byte
  replica::ReplicaOptions replica;
  NativeActorHostOptions host;
  // Set: every node runs the alarm subsystem with these options.
  std::optional<alarms::AlarmOptions> alarms;
  // Every node carries out the move requests of control/move/ (MoveControl, as `wasmkeep
  // serve` does); off, the nodes send no request for them.
  bool move_requests = false;
  // Set: every node runs quarantine with this policy as `wasmkeep serve` does (a
  // QuarantineCache read by its front and its alarm delivery, control::QuarantineStrikes fed
  // by the native host's poison class, replicas acquired through QuarantineHoldSource). The
  // nodes of an even process number list quarantine/ at every check memory cannot answer
  // (QuarantineCacheOptions::list_after 1), the others keep the default.
  std::optional<control::QuarantinePolicy> quarantine;
  // Quarantine's observers (the combined scenario's checker), on process `number`: a replica
  // acquired past QuarantineHoldSource (a start), and a read of a quarantine record sent to
  // the bucket (`done` false) and answered or failed (`done` true); a listing of quarantine/
  // is reported as a read of that prefix.
  std::function<void(int number, const ActorId&)> on_actor_start;
  std::function<void(int number, const std::string& key, bool done)> on_quarantine_read;
  // Set: every node delivers its actors' outboxes with these options (a MessageDelivery
  // through its front, as ActorHost wires `wasmkeep serve`).
  std::optional<MessageDeliveryOptions> messages;
  // Every node's sleeping holds (docs/node-lease.md, "Sleeping holds"): unset, the nodes'
  // default (an hour, 100,000), which no run reaches, so hibernated actors always sleep.
  std::optional<SleepPolicy> sleep;
  // Every node holds WebSockets for its actors (routing/socket_hub.h, wired as ActorHost
  // wires `wasmkeep serve`: the runtime's directory, the front's handshakes, the holds that
  // end closing their actors' connections with 1012, sleeping holds kept for them).
  bool sockets = false;
  // Every node reads the tenants' quotas (control/quota_cache.h, every 5 s) and applies them
  // as ActorHost does (routing/tenant_limits.h): the front's request rates, the core's
  // resident_actors share, the message deliveries' and alarms' rates (quota_clients.h).
  bool quotas = false;
};

// The simulated world's tenant.
inline constexpr std::string_view kServingTenant = "t";
// The client's timeout: a client waits this long for an answer.
inline constexpr Duration kClientTimeout = std::chrono::seconds(30);

// The actor host of one node, made in this one place (the native host in place of the
// V8 runtime).
std::unique_ptr<NativeActorHost> MakeActorHost(Env& env, actor::StorageProvider& storage,
                                               const NativeActorHostOptions& options);

class ServingCluster {
 public:
  // Wires world's hooks (faults, identities, parts); the scenario's own hooks are set after.
  // REQUIRES: faults has the serving profile; world and faults outlive this.
  ServingCluster(World& world, Faults& faults, ServingOptions options);
  ~ServingCluster();
  ServingCluster(const ServingCluster&) = delete;
  ServingCluster& operator=(const ServingCluster&) = delete;

  // A request as a client sends it: target /v1/actors/<path>, the test token.
  ServerRequest Request(std::string method, std::string path) const;
  // Sends request to slot's client API from the clients' Env (kClientTimeout).
  Task<Result<ServerResponse>> Send(int slot, ServerRequest request);

  SimEnv& client_env() { return client_env_; }
  // The hub of process `number` (ServingOptions::sockets), or null if it has none or is gone.
  SocketHub* Hub(int number) const;
  const ServingOptions& options() const { return options_; }

 private:
  struct Parts;
  void Build(Process& p);

  World& w_;
  ServingOptions options_;
  SimEnv client_env_;
  SimPeerNetwork network_;
  std::unique_ptr<PeerTransport> client_transport_;
  control::ClusterSecret secret_;
};

}  // namespace wk::sim
