#include "server/node.h"

#include <sys/resource.h>

#include <algorithm>

#include "base/log.h"
#include "base/version.h"
#include "cluster/cluster_metrics.h"
#include "cluster/node_endpoints.h"
#include "console/console_routes.h"
#include "control/cluster_secret.h"
#include "server/peer_trust_view.h"
#include "store/open_store.h"

namespace wk {
namespace {

// The admin listener (node.admin_listen) serves probes and scrapes: a handful of clients
// (a kubelet, a Prometheus or two, an operator's curl), so small caps, and no request
// bodies (its routes take none).
constexpr std::size_t kAdminMaxConnections = 128;
constexpr std::size_t kAdminMaxConnectionsPerClient = 32;
// File descriptors a node uses besides its listeners' connections: the bucket's (a file://
// bucket's open files, an S3 pool), the peer pools (up to 64 per peer), V8, the log. Ample.
constexpr rlim_t kFilesBesideConnections = 1024;

// address with a port of 0 replaced by port (the one the listener was given).
std::string WithBoundPort(const std::string& address, std::uint16_t port) {
  if (address.ends_with(":0")) return address.substr(0, address.size() - 1) + std::to_string(port);
  return address;
}

std::string HostOf(const std::string& address) {
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

// The URL of /metrics on a listener bound at `listen` (host:port, port as bound): a host
// naming every interface is replaced by the advertised peer address's host, which other
// machines reach (docs/cli.md, "cluster cost").
std::string MetricsUrl(const std::string& listen, std::uint16_t port, bool tls, const std::string& advertised) {
  std::string host = HostOf(listen);
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = HostOf(advertised);
  if (host == "localhost") host = "127.0.0.1";
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port) + "/metrics";
}

// Each connection is a file descriptor: a soft limit below the listeners' caps (1,024 is a
// common default) makes accept fail once it is reached, and then nobody can connect, so a
// flood would succeed after all. Raises the soft limit up to the hard one; warns if that is
// not enough.
void EnsureFileLimit(std::size_t connections) {
  const rlim_t want = static_cast<rlim_t>(connections) + kFilesBesideConnections;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= want) return;
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? want : std::min(limit.rlim_max, want);
  if (target > limit.rlim_cur) {
    limit.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur < want) {
    WK_LOG_WARN("the open-file limit is below what the listeners' connection caps need; lower "
                "server.max_connections or raise the limit (ulimit -n)",
                {{"limit", std::to_string(limit.rlim_cur)}, {"needed", std::to_string(want)}});
  }
}

ServerResponse Starting() {
  ServerResponse r = TextResponse(503, "this node is starting: actors are not served yet\n");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

// The admin listener's handler: the admin routes only.
ServerResponse AdminOnly(const AdminRoutes& admin, const ServerRequest& request) {
  if (auto r = admin.Handle(request)) return std::move(*r);
  return TextResponse(404, "not found: this listener serves /metrics, /healthz and /readyz\n");
}

std::string ReadyDetail(ClusterNode& node) {
  if (node.drain_control().drained_or_draining()) return "not ready: drained (cluster undrain puts it back)\n";
  if (node.lease().IsReady()) return "ready\n";
  if (node.lease().epoch() == 0) {
    return "not ready: starting (the bucket check, then the start check, which waits ttl + grace, and the start "
           "guard)\n";
  }
  if (node.lease().IsValid() && !node.lease().Announced()) {
    return "not ready: the node lease is valid; waiting for the peers' next listing of this node (until then they "
           "refuse what it forwards)\n";
  }
  return "not ready: node lease not valid\n";
}

// Plain functions spawn these (GCC 12 and several Spawns in one coroutine,
// docs/DEVELOPING.md, "Coroutines").
void SpawnEndpoints(RealEnv* env, ObjectStore* store, NodeEndpoints endpoints) {
  env->Spawn([](RealEnv* e, ObjectStore* s, NodeEndpoints ep) -> Task<void> {
    (void)co_await PublishNodeEndpoints(*e, *s, std::move(ep));
  }(env, store, std::move(endpoints)), "endpoints");
}

Task<void> RunCluster(ClusterNode* node, std::optional<LeaseEnd>* out, Latch<int> ended) {
  out->emplace(co_await node->Run());
  ended.Set(0);
}

}  // namespace

Node::Node(RealEnv& env, NodeOptions options) : env_(env), options_(std::move(options)) {}

Node::~Node() {
  Close();
  host_.reset();
}

Result<std::unique_ptr<Node>> Node::Start(RealEnv& env, std::unique_ptr<ObjectStore> bucket, NodeOptions options) {
  WK_CHECK(bucket != nullptr, "Node::Start needs an open bucket");
  std::unique_ptr<Node> node(new Node(env, std::move(options)));
  if (Status s = node->Assemble(std::move(bucket)); !s.ok()) return s;
  return node;
}

Status Node::Assemble(std::unique_ptr<ObjectStore> bucket) {
  const NodeOptions& o = options_;
  identity_.node_id = o.node_id;
  identity_.software_version = std::string(kVersion);
  instance_ = InstanceToken(env_.RandomHex(16));
  // Every request this node sends, counted by purpose (store/counting_store.h): outermost,
  // so that each subsystem's view of it counts what that subsystem sends.
  auto counting = std::make_unique<CountingStore>(std::move(bucket));
  counting_ = counting.get();
  store_ = std::move(counting);
  tenant_stores_ = std::make_unique<TenantStores>(*store_);

  std::shared_ptr<boost::asio::ssl::context> client_tls;
  if (o.tls_cert_file) {
    auto ctx = MakeServerContextFromFiles(*o.tls_cert_file, o.tls_key_file.value_or(""));
    if (!ctx.ok()) return ctx.status();
    client_tls = std::move(*ctx);
  }

  // TLS between nodes (docs/security.md, "Between nodes"): a fresh key and certificate,
  // whose pin the node record publishes; peers are trusted by the pins of the records the
  // listing shows live (PeerTrust, updated after every listing below).
  if (options_.peer_identity) {
    peer_identity_ = std::move(options_.peer_identity);
  } else {
    auto generated = TlsIdentity::Generate("wasmkeep node " + o.node_id.str());
    if (!generated.ok()) return generated.status();
    peer_identity_ = std::move(*generated);
  }
  identity_.cert_pin = peer_identity_->pin();
  peers_ = std::make_unique<HttpPeerTransport>(env_, *peer_identity_, trust_);
  auto peer_tls =
      MakePeerServerContext(*peer_identity_, [this](std::string_view pin) { return trust_.FindByPin(pin) != nullptr; });
  if (!peer_tls.ok()) return peer_tls.status();
  // Its own listener, so peers have connections that clients cannot take. Every peer
  // connection is pinned (the TLS handshake refuses strangers), and several nodes may share
  // one address (one host), so the per-client cap is the whole cap here.
  HttpServerLimits peer_limits;
  peer_limits.max_connections_per_client = peer_limits.max_connections;
  // A body over the actors' limit is refused (413) before it is read.
  peer_limits.max_body_bytes = o.host.runtime.limits.max_request_bytes;
  peer_limits.max_buffered_body_bytes = o.server.max_buffered_body_bytes;
  auto peer_http = HttpServer::Start(
      env_, o.peer_listen, [this](ServerRequest request) { return RoutePeer(std::move(request)); }, peer_limits, {},
      *peer_tls);
  if (!peer_http.ok()) return peer_http.status();
  peer_http_ = std::move(*peer_http);
  identity_.address = WithBoundPort(o.advertise.empty() ? o.peer_listen : o.advertise, peer_http_->bound_port());
  if (identity_.address.starts_with("0.0.0.0:") || identity_.address.starts_with("[::]:")) {
    WK_LOG_WARN("the peer address names every interface: other hosts cannot reach it; set node.advertise",
                {{"address", identity_.address}});
  }

  cluster_ = std::make_unique<ClusterNode>(env_, *store_, identity_, o.timing, instance_);
  cluster_->owners().set_tenant_stores(tenant_stores_.get());
  if (o.broken.any()) {
    WK_LOG_WARN("WASMKEEP_BROKEN_MODELS: rules of the design are switched off, for tests only",
                {{"broken_models", o.broken.ToString()}});
    cluster_->set_broken_models(o.broken);
  }
  // Moves requested through the bucket (`actor move`, `cluster balance`), at the configured rate.
  cluster_->move_control().set_per_second(static_cast<double>(o.moves_per_second));
  cluster_->move_control().set_enabled(true);
  cluster_->membership().AddListener([this, id = identity_.node_id](const Membership::View& view) {
    if (trust_.Update(TrustedPeersFromView(view, id))) {
      peers_->DropUntrusted();
      if (host_) host_->DropUntrustedPeers();
    }
  });

  PublishClusterMetrics(metrics_, *cluster_);
  PublishStoreMetrics(metrics_, counting_->wrapped());
  PublishBucketMetrics(metrics_, counting_->stats());
  replica::PublishReplicaMetrics(metrics_, replica_totals_);
  // Rates since the process started (`cluster cost`) divide by its age; a changed value
  // tells a scraper the counters restarted.
  const double started_seconds = static_cast<double>(ToUnixMs(env_.WallNow())) / 1000;
  metrics_.AddCallbackGauge("wasmkeep_process_start_time_seconds", "When this process started, in Unix seconds",
                            [started_seconds] { return started_seconds; });
  metrics_.AddCallbackGauge("wasmkeep_peer_pins_trusted",
                            "Peers whose TLS pin this node accepts (live in its last listing)",
                            [this] { return static_cast<double>(trust_.size()); });
  AdminRoutes::Handlers handlers;
  handlers.metrics_text = [this] { return metrics_.RenderText(); };
  handlers.healthy = [] { return true; };
  handlers.ready = [this] { return cluster_->lease().IsReady() && !cluster_->drain_control().drained_or_draining(); };
  handlers.ready_detail = [this] { return ReadyDetail(*cluster_); };
  admin_ = std::make_unique<AdminRoutes>(handlers);

  EnsureFileLimit(o.server.max_connections + peer_limits.max_connections +
                  (o.admin_listen.empty() ? 0 : kAdminMaxConnections));
  // With node.admin_listen the probes have a listener of their own (and only it), so no
  // flood of client connections can make a node look dead; without it they share the
  // client listener (docs/security.md).
  admin_on_api_ = o.admin_listen.empty() ? admin_.get() : nullptr;
  HttpServerLimits limits = o.server;
  // A body over the actors' limit is refused (413) before it is read.
  limits.max_body_bytes = o.host.runtime.limits.max_request_bytes;
  auto http = HttpServer::Start(
      env_, o.listen, [this](ServerRequest request) { return Route(std::move(request)); }, limits,
      [this](const ServerRequest& request) { return CheckBeforeBody(request); }, client_tls);
  if (!http.ok()) return http.status();
  http_ = std::move(*http);
  PublishHttpServerMetrics(metrics_, *http_, "api");
  PublishHttpServerMetrics(metrics_, *peer_http_, "peer");
  if (!o.admin_listen.empty()) {
    HttpServerLimits admin_limits;
    admin_limits.max_connections = kAdminMaxConnections;
    admin_limits.max_connections_per_client = kAdminMaxConnectionsPerClient;
    admin_limits.max_body_bytes = 0;
    admin_limits.max_buffered_body_bytes = 0;
    admin_limits.first_request_timeout = o.server.first_request_timeout;
    auto started = HttpServer::Start(
        env_, o.admin_listen,
        [this](ServerRequest request) { return ReadyResponse(AdminOnly(*admin_, request)); }, admin_limits);
    if (!started.ok()) return started.status();
    admin_http_ = std::move(started).value();
    PublishHttpServerMetrics(metrics_, *admin_http_, "admin");
  }
  WK_LOG_INFO("serving", {{"node", identity_.node_id.str()}, {"instance", instance_.str()},
                          {"bucket", store_->Describe()}, {"listen", o.listen},
                          {"client_tls", client_tls ? "on" : "off"},
                          {"admin_listen", o.admin_listen.empty() ? "(listen)" : o.admin_listen},
                          {"peer_listen", o.peer_listen}, {"peer_address", identity_.address},
                          {"cert_pin", identity_.cert_pin}, {"ttl", FormatDuration(o.timing.ttl)}});
  PublishEndpoints();
  return Status::Ok();
}

// Where `cluster cost` finds this process's metrics: the admin listener if any, else the
// client API (cluster/node_endpoints.h).
void Node::PublishEndpoints() {
  const bool client_tls = options_.tls_cert_file.has_value();
  NodeEndpoints endpoints{
      identity_.node_id, instance_,
      admin_http_ ? MetricsUrl(options_.admin_listen, admin_http_->bound_port(), false, identity_.address)
                  : MetricsUrl(options_.listen, http_->bound_port(), client_tls, identity_.address)};
  if (ValidateNodeEndpoints(endpoints).ok()) {
    SpawnEndpoints(&env_, store_.get(), std::move(endpoints));
  } else {
    WK_LOG_WARN("this node's metrics address cannot be published (cluster cost will not find it)",
                {{"metrics", endpoints.metrics_url}});
  }
}

// Reads (or, on a fresh bucket, creates) the cluster secret, retrying while the bucket is
// unreachable, then makes the ActorHost. Until then the actor API answers 503.
Task<void> Node::StartActors() {
  for (;;) {
    auto secret = co_await control::EnsureClusterSecret(*store_, env_, CallOptions{std::chrono::seconds(5)});
    if (secret.ok()) {
      ActorHostOptions host = std::move(options_.host);
      host.node_id = identity_.node_id;
      host.instance = instance_;
      host.timing = options_.timing;
      host.bucket_requests = &counting_->stats();
      host.tenant_stores = tenant_stores_.get();
      host_ = std::make_unique<ActorHost>(env_, *store_, *cluster_, metrics_, replica_totals_, *secret, *peers_,
                                          *peer_identity_, trust_, std::move(host));
      WK_LOG_INFO("serving actors", {{"node", identity_.node_id.str()}});
      co_return;
    }
    if (secret.code() != Code::kRetryable && secret.code() != Code::kUnknownOutcome) {
      WK_LOG_ERROR("cannot read the cluster secret; actors are not served", {{"error", secret.status().ToString()}});
      co_return;
    }
    WK_LOG_WARN("cannot read the cluster secret yet; retrying", {{"error", secret.status().ToString()}});
    if (!co_await env_.SleepFor(std::chrono::seconds(1))) co_return;
  }
}

// The client listener's handler: the admin routes (when they have no listener of their
// own), the console's files (served while the node starts too), then the actor API.
Task<ServerResponse> Node::Route(ServerRequest request) {
  if (admin_on_api_ != nullptr) {
    if (auto r = admin_on_api_->Handle(request)) co_return std::move(*r);
  }
  if (auto r = ConsoleRoutes::Handle(request)) co_return std::move(*r);
  if (!host_) co_return Starting();
  co_return co_await host_->Handle(std::move(request), Via::kClient);
}

// The peer listener's handler: forwarded actor requests and alarm hand-overs only (the
// front verifies them).
Task<ServerResponse> Node::RoutePeer(ServerRequest request) {
  if (options_.on_peer_request) options_.on_peer_request(request);
  if (!host_) co_return Starting();
  co_return co_await host_->Handle(std::move(request), Via::kPeer);
}

// The client listener's header check: an actor request's path, size and token are checked
// before its body is read (Front::CheckBeforeBody), so an unauthenticated body is never read.
Task<std::optional<ServerResponse>> Node::CheckBeforeBody(ServerRequest request) {
  if (admin_on_api_ != nullptr && AdminRoutes::Matches(request.target)) co_return std::nullopt;
  if (ConsoleRoutes::Matches(request.target)) co_return ConsoleRoutes::CheckBeforeBody(request);
  if (!host_) co_return Starting();
  co_return co_await host_->CheckBeforeBody(std::move(request));
}

// Plain (not a coroutine): GCC 12 and several Spawns in one coroutine (docs/DEVELOPING.md,
// "Coroutines").
void Node::SpawnBackground(std::optional<LeaseEnd>* end, Latch<int> ended) {
  env_.Spawn(RunCluster(cluster_.get(), end, std::move(ended)), "cluster");
  env_.Spawn(StartActors(), "start actors");
}

Task<NodeExit> Node::Run(Latch<int> stop) {
  std::optional<LeaseEnd> end;
  SpawnBackground(&end, stop);
  const int what = co_await stop.Wait();
  if (what > 0) {
    // A clean stop (docs/node-lease.md, "Clean stop"): the actors first — no new events,
    // running ones finish, each replica waits until its writes are durable and its hold is
    // released — then the node releases any hold left, makes the lease locally invalid (a
    // straggler is cut), ends the lease task after any attempt in flight, and writes
    // `released` last.
    if (host_) {
      const bool all = co_await host_->Shutdown(options_.timing.ttl);
      if (!all) WK_LOG_WARN("clean stop: actors still resident at the limit; their holds are released anyway", {});
    }
    Status s = co_await cluster_->Stop(options_.timing.ttl);
    if (!s.ok()) WK_LOG_WARN("clean stop could not write released", {{"error", s.ToString()}});
    // Last, so that it delays none of the steps above (docs/tenants.md, "Usage").
    if (host_) {
      Status flushed = co_await host_->FlushUsage();
      if (!flushed.ok()) WK_LOG_WARN("clean stop: the last usage flush failed", {{"error", flushed.ToString()}});
    }
    co_return NodeExit{NodeExit::Kind::kCleanStop, std::nullopt};
  }
  co_return NodeExit{NodeExit::Kind::kLeaseEnded, end};
}

void Node::Close() {
  if (admin_http_) admin_http_->Stop();
  if (http_) http_->Stop();
  if (peer_http_) peer_http_->Stop();
}

}  // namespace wk
