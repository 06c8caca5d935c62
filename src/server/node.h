// Node: one WasmKeep node assembled — its ClusterNode (lease, listing, ownership), TLS
// between nodes (a fresh identity whose pin the node record publishes; peers trusted by the
// pins of live records), the three listeners (client API, peer, optional admin), the
// metrics, and, once the cluster secret is read, the ActorHost that serves actors. How a
// request and a durable write pass through it: docs/architecture.md, "How a request flows".
//
// `wasmkeep serve` turns its flags and config into NodeOptions, opens the bucket, and calls
// Start then Run; tests do the same in-process (node_test.cc). The caller owns the process:
// signals, exit codes, and the test hooks (which reach the node through its accessors).
//
// Threading: Start and Run on the RealEnv's loop thread; the node outlives Run.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/broken_models.h"
#include "base/metrics.h"
#include "cluster/cluster_node.h"
#include "env/real_env.h"
#include "net/http_peer_transport.h"
#include "net/http_server.h"
#include "net/peer_trust.h"
#include "net/tls_identity.h"
#include "replica/provider.h"
#include "server/actor_host.h"
#include "server/admin_routes.h"
#include "store/counting_store.h"
#include "store/tenant_store.h"

namespace wk {

struct NodeOptions {
  NodeId node_id;
  std::string listen = "127.0.0.1:8080";
  std::string admin_listen;  // empty: the admin routes are served on `listen`
  std::string peer_listen;   // "host:0" is any free port
  std::string advertise;     // the peer address other nodes dial; empty: peer_listen's
  LeaseTiming timing;
  HttpServerLimits server;  // the client listener's caps (max_body_bytes comes from actors)
  std::optional<std::string> tls_cert_file;  // with tls_key_file: TLS on the client API
  std::optional<std::string> tls_key_file;
  std::int64_t moves_per_second = 10;
  // What serves actors: the runtime, storage, quarantine and alarm settings, the
  // running-events journal and its leftovers. The node fills in its id, instance, lease
  // timing and bucket request counts.
  ActorHostOptions host;
  BrokenModels broken;
  // The peer listener's TLS identity; null: a fresh one (the normal case).
  std::unique_ptr<TlsIdentity> peer_identity;
  // Called with every request the peer listener gets, before it is handled (test capture).
  std::function<void(const ServerRequest&)> on_peer_request;
};

// How Run ended.
struct NodeExit {
  enum class Kind : std::uint8_t { kCleanStop, kLeaseEnded };
  Kind kind = Kind::kCleanStop;
  // kLeaseEnded: why (kStopped, kLost, kTwin, kBucketUnfit, ...); unset if Run was cancelled.
  std::optional<LeaseEnd> lease_end;
};

class Node {
 public:
  // Binds the listeners and makes the ClusterNode. REQUIRES: options validated (timing,
  // node id), bucket open. The bucket is wrapped in a CountingStore (requests by purpose).
  static Result<std::unique_ptr<Node>> Start(RealEnv& env, std::unique_ptr<ObjectStore> bucket, NodeOptions options);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Runs the node until `stop` is set to a positive value (a clean stop: actors first, then
  // the holds, then `released`; docs/node-lease.md) or its lease ends (Run sets `stop` to 0).
  Task<NodeExit> Run(Latch<int> stop);
  // Stops the listeners (after Run).
  void Close();

  RealEnv& env() { return env_; }
  ObjectStore& store() { return *store_; }
  ClusterNode& cluster() { return *cluster_; }
  MetricsRegistry& metrics() { return metrics_; }
  replica::ReplicaTotals& replica_totals() { return replica_totals_; }
  ActorHost* actor_host() { return host_.get(); }  // null until the cluster secret is read
  const NodeIdentity& identity() const { return identity_; }
  const InstanceToken& instance() const { return instance_; }
  std::uint16_t api_port() const { return http_->bound_port(); }
  std::uint16_t peer_port() const { return peer_http_->bound_port(); }
  std::uint16_t admin_port() const { return admin_http_ ? admin_http_->bound_port() : 0; }

 private:
  Node(RealEnv& env, NodeOptions options);
  Status Assemble(std::unique_ptr<ObjectStore> bucket);
  void SpawnBackground(std::optional<LeaseEnd>* end, Latch<int> ended);
  Task<void> StartActors();
  Task<ServerResponse> Route(ServerRequest request);
  Task<ServerResponse> RoutePeer(ServerRequest request);
  Task<std::optional<ServerResponse>> CheckBeforeBody(ServerRequest request);
  void PublishEndpoints();

  RealEnv& env_;
  NodeOptions options_;
  NodeIdentity identity_;
  InstanceToken instance_;
  CountingStore* counting_ = nullptr;  // store_, as its counting wrapper
  std::unique_ptr<ObjectStore> store_;
  // The requests made for tenants' actors, through store_ (store/tenant_store.h): the
  // owners' and the host's, reported to the host's usage meter. After store_: it goes first.
  std::unique_ptr<TenantStores> tenant_stores_;
  std::unique_ptr<TlsIdentity> peer_identity_;
  PeerTrust trust_;
  std::unique_ptr<HttpPeerTransport> peers_;
  std::unique_ptr<ClusterNode> cluster_;
  MetricsRegistry metrics_;
  replica::ReplicaTotals replica_totals_;
  std::unique_ptr<AdminRoutes> admin_;
  const AdminRoutes* admin_on_api_ = nullptr;  // admin_ when it has no listener of its own
  std::unique_ptr<ActorHost> host_;
  std::unique_ptr<HttpServer> peer_http_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpServer> admin_http_;
};

}  // namespace wk
