#include "cli/serve_cmd.h"

#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "base/metrics.h"
#include "base/version.h"
#include "cli/debug_writer.h"
#include "cluster/cluster_metrics.h"
#include "cluster/cluster_node.h"
#include "cluster/node_endpoints.h"
#include "control/cluster_secret.h"
#include "net/http_peer_transport.h"
#include "net/http_server.h"
#include "net/peer_trust.h"
#include "net/tls_identity.h"
#include "server/actor_host.h"
#include "server/admin_routes.h"
#include "server/console_routes.h"
#include "server/running_events.h"
#include "server/peer_trust_view.h"
#include "store/counting_store.h"
#include "store/open_store.h"

namespace wk::cli {
namespace {

constexpr std::string_view kDefaultListen = "127.0.0.1:8080";
// The admin listener (node.admin_listen) serves probes and scrapes: a handful of clients
// (a kubelet, a Prometheus or two, an operator's curl), so small caps, and no request
// bodies (its routes take none).
constexpr std::size_t kAdminMaxConnections = 128;
constexpr std::size_t kAdminMaxConnectionsPerClient = 32;
// File descriptors a node uses besides its listeners' connections: the bucket's (a file://
// bucket's open files, an S3 pool), the peer pools (up to 64 per peer), V8, the log. Ample.
constexpr rlim_t kFilesBesideConnections = 1024;

struct ServeArgs {
  std::string node_id;
  std::string listen;
  std::string peer_listen;
  std::string advertise;
  std::string data_dir;
  std::string admin_listen;
};

// "host:port" → "host:0": the peer listener's default, on the client API's host, on any
// free port (its address reaches the other nodes through the node record).
std::string AnyPortOn(const std::string& listen) {
  const auto colon = listen.rfind(':');
  return (colon == std::string::npos ? listen : listen.substr(0, colon)) + ":0";
}

// address with a port of 0 replaced by port (the one the listener was given).
std::string WithBoundPort(const std::string& address, std::uint16_t port) {
  if (address.ends_with(":0")) return address.substr(0, address.size() - 1) + std::to_string(port);
  return address;
}

// The URL of /metrics on a listener bound at `listen` (host:port, port as bound): a host
// naming every interface is replaced by the advertised peer address's host, which other
// machines reach (docs/cli.md, "cluster cost").
std::string MetricsUrl(const std::string& listen, std::uint16_t port, bool tls, const std::string& advertised) {
  auto host_of = [](const std::string& address) {
    const auto colon = address.rfind(':');
    return colon == std::string::npos ? address : address.substr(0, colon);
  };
  std::string host = host_of(listen);
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = host_of(advertised);
  if (host == "localhost") host = "127.0.0.1";
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port) + "/metrics";
}

// Writes control/endpoints/<node> once (cluster/node_endpoints.h). A plain function spawns
// it (GCC 12 and several Spawns in one coroutine).
void SpawnEndpoints(RealEnv* env, ObjectStore* store, NodeEndpoints endpoints) {
  env->Spawn([](RealEnv* e, ObjectStore* s, NodeEndpoints ep) -> Task<void> {
    (void)co_await PublishNodeEndpoints(*e, *s, std::move(ep));
  }(env, store, std::move(endpoints)), "endpoints");
}

// Tests only (WASMKEEP_DEBUG_ACQUIRE=t/c/a,t/c/b): the multi-process ownership tests need
// a node that holds actors without running them (record races the HTTP API cannot stage). This task acquires each
// listed actor once the lease is valid, and again after it lost it, every second.
Task<void> DebugAcquire(RealEnv* env, ClusterNode* node, std::vector<ActorId> actors) {
  while (co_await env->SleepFor(std::chrono::seconds(1))) {
    for (const ActorId& a : actors) {
      if (!node->lease().IsValid() || node->owners().Find(a).IsValid()) continue;
      AcquireResult r = co_await node->owners().Acquire(a);
      if (r.kind == AcquireResult::Kind::kAcquired) {
        WK_LOG_INFO("debug hold acquired", {{"actor", a.ToString()}, {"generation", std::to_string(r.hold.generation().value)}});
      }
    }
  }
}

// Tests only (WASMKEEP_DEBUG_WRITER, cli/debug_writer.h): actors this node writes to
// through the replica directly, without the actor API.
struct DebugWriterHook {
  std::shared_ptr<const DebugWriterOptions> options;
  replica::ReplicaTotals* totals = nullptr;
  ObjectStore* store = nullptr;
  NodeId node_id;
};

// What serves actors, made once the cluster secret is read (the HTTP handler answers 503
// until then).
struct ActorServing {
  RealEnv* env = nullptr;
  ObjectStore* store = nullptr;
  ClusterNode* node = nullptr;
  MetricsRegistry* metrics = nullptr;
  replica::ReplicaTotals* replica_totals = nullptr;
  PeerTransport* peers = nullptr;
  ActorHostOptions options;
  std::unique_ptr<ActorHost> host;
};

// Reads (or, on a fresh bucket, creates) the cluster secret, retrying while the bucket is
// unreachable, then makes the ActorHost.
Task<void> StartActors(ActorServing* s) {
  for (;;) {
    auto secret = co_await control::EnsureClusterSecret(*s->store, *s->env, CallOptions{std::chrono::seconds(5)});
    if (secret.ok()) {
      s->host = std::make_unique<ActorHost>(*s->env, *s->store, *s->node, *s->metrics, *s->replica_totals, *secret,
                                            *s->peers, s->options);
      WK_LOG_INFO("serving actors", {{"node", s->options.node_id.str()}});
      co_return;
    }
    if (secret.code() != Code::kRetryable && secret.code() != Code::kUnknownOutcome) {
      WK_LOG_ERROR("cannot read the cluster secret; actors are not served", {{"error", secret.status().ToString()}});
      co_return;
    }
    WK_LOG_WARN("cannot read the cluster secret yet; retrying", {{"error", secret.status().ToString()}});
    if (!co_await s->env->SleepFor(std::chrono::seconds(1))) co_return;
  }
}

// A plain function spawns it (GCC 12 and several Spawns in one coroutine).
void SpawnActorStart(RealEnv* env, ActorServing* serving) { env->Spawn(StartActors(serving), "start actors"); }

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

// The client listener's handler: the admin routes (admin is null when they have their own
// listener), then the actor API.
Task<ServerResponse> Route(const AdminRoutes* admin, ActorServing* serving, ServerRequest request) {
  if (admin != nullptr) {
    if (auto r = admin->Handle(request)) co_return std::move(*r);
  }
  // The console's files (docs/console.md): served while the node starts too.
  if (auto r = ConsoleRoutes::Handle(request)) co_return std::move(*r);
  if (!serving->host) co_return Starting();
  co_return co_await serving->host->Handle(std::move(request), Via::kClient);
}

// Tests only (WASMKEEP_DEBUG_CAPTURE_FORWARDED=DIR): each request the peer listener gets is
// written to DIR/<n>.http as it arrived ("METHOD TARGET", one "Name: value" line per
// header, an empty line, the body), so a cluster test can check what crossed between
// nodes and replay it.
struct ForwardCapture {
  std::string dir;
  std::uint64_t count = 0;
  void Write(const ServerRequest& r) {
    std::ofstream out(dir + "/" + std::to_string(++count) + ".http", std::ios::binary);
    out << r.method << ' ' << r.target << '\n';
    for (const auto& [n, v] : r.headers) out << n << ": " << v << '\n';
    out << '\n' << r.body;
  }
};

// The peer listener's handler: forwarded actor requests only (Front checks them).
Task<ServerResponse> RoutePeer(ActorServing* serving, ForwardCapture* capture, ServerRequest request) {
  if (!capture->dir.empty()) capture->Write(request);
  if (!serving->host) co_return Starting();
  co_return co_await serving->host->Handle(std::move(request), Via::kPeer);
}

// This process's TLS identity for the peer listener: fresh, in memory only. (Tests only,
// WASMKEEP_DEBUG_PEER_KEY_FILE: around a key the test made, so the test can present it.)
Result<std::unique_ptr<TlsIdentity>> MakePeerIdentity(const NodeId& node_id) {
  const std::string name = "wasmkeep node " + node_id.str();
  auto key_file = ProcessGetEnv("WASMKEEP_DEBUG_PEER_KEY_FILE");
  if (!key_file || key_file->empty()) return TlsIdentity::Generate(name);
  std::ifstream in(*key_file, std::ios::binary);
  if (!in) return Fatal("WASMKEEP_DEBUG_PEER_KEY_FILE: cannot read " + *key_file);
  std::stringstream pem;
  pem << in.rdbuf();
  WK_LOG_WARN("WASMKEEP_DEBUG_PEER_KEY_FILE: the peer TLS key comes from a file, for tests only", {{"file", *key_file}});
  return TlsIdentity::FromPrivateKeyPem(pem.str(), name);
}

// The client listener's header check: an actor request's path, size and token are checked
// before its body is read (Front::CheckBeforeBody), so an unauthenticated body is never read.
Task<std::optional<ServerResponse>> CheckBeforeBody(const AdminRoutes* admin, ActorServing* serving,
                                                    ServerRequest request) {
  if (admin != nullptr && AdminRoutes::Matches(request.target)) co_return std::nullopt;
  if (ConsoleRoutes::Matches(request.target)) co_return ConsoleRoutes::CheckBeforeBody(request);
  if (!serving->host) co_return Starting();
  co_return co_await serving->host->CheckBeforeBody(std::move(request));
}

// The admin listener's handler: the admin routes only.
ServerResponse AdminOnly(const AdminRoutes* admin, const ServerRequest& request) {
  if (auto r = admin->Handle(request)) return std::move(*r);
  return TextResponse(404, "not found: this listener serves /metrics, /healthz and /readyz\n");
}

Task<int> ServeMain(RealEnv* env, ClusterNode* node, LeaseTiming timing, DebugWriterHook* writer,
                    ActorServing* serving) {
  // One event ends the serving: a signal (clean stop) or the lease's end.
  Latch<int> event(*env, [] { return -1; });
  boost::asio::signal_set signals(env->context(), SIGTERM, SIGINT);
  signals.async_wait([event](const boost::system::error_code& ec, int sig) {
    if (!ec) event.Set(sig);
  });
  std::optional<LeaseEnd> end;
  env->Spawn([](ClusterNode* n, std::optional<LeaseEnd>* out, Latch<int> ev) -> Task<void> {
    out->emplace(co_await n->Run());
    ev.Set(0);
  }(node, &end, event), "cluster");

  if (auto flags = ProcessGetEnv("WASMKEEP_V8_FLAGS"); flags && !flags->empty()) {
    // Read by the engine when V8 starts (src/engine/engine.cc); said here so that a node
    // running with them shows it.
    WK_LOG_WARN("V8 runs with extra flags (WASMKEEP_V8_FLAGS); for diagnostics only", {{"flags", *flags}});
  }
  if (auto debug = ProcessGetEnv("WASMKEEP_DEBUG_ACQUIRE"); debug && !debug->empty()) {
    std::vector<ActorId> actors;
    std::size_t pos = 0;
    while (pos <= debug->size()) {
      std::size_t comma = debug->find(',', pos);
      if (comma == std::string::npos) comma = debug->size();
      auto id = ParseActorId(std::string_view(*debug).substr(pos, comma - pos));
      if (id.ok()) actors.push_back(*id);
      pos = comma + 1;
    }
    WK_LOG_WARN("WASMKEEP_DEBUG_ACQUIRE: holding actors for tests", {{"actors", *debug}});
    env->Spawn(DebugAcquire(env, node, std::move(actors)), "debug acquire");
  }
  // A plain function spawns the writers (GCC 12 and several Spawns in one coroutine).
  if (writer->options) StartDebugWriters(env, node, writer->store, writer->totals, writer->node_id, writer->options);
  SpawnActorStart(env, serving);
  const int what = co_await event.Wait();
  signals.cancel();
  if (what > 0) {
    WK_LOG_INFO("clean stop", {{"signal", what == SIGTERM ? "SIGTERM" : "SIGINT"}});
    // docs/node-lease.md, "Clean stop": the actors first — no new events, running ones finish, each
    // replica waits until its writes are durable and its hold is released — then the node releases
    // any hold left, makes the lease locally invalid (a straggler is cut), ends the lease task
    // after any attempt in flight, and writes `released` last.
    if (serving->host) {
      const bool all = co_await serving->host->Shutdown(timing.ttl);
      if (!all) WK_LOG_WARN("clean stop: actors still resident at the limit; their holds are released anyway", {});
    }
    Status s = co_await node->Stop(timing.ttl);
    if (!s.ok()) WK_LOG_WARN("clean stop could not write released", {{"error", s.ToString()}});
    co_return kExitOk;
  }
  if (!end) co_return kExitError;
  if (end->reason == LeaseEndReason::kStopped) co_return kExitOk;
  // Lost or a twin: exit at once, releasing nothing (the fence or the other instance
  // already frees what this process held). A refused start (the bucket check, the start
  // guard) wrote nothing.
  switch (end->reason) {
    case LeaseEndReason::kBucketUnfit:
      std::fprintf(stderr, "wasmkeep: bucket check: %s\n", end->message.c_str());
      co_return kExitUsage;
    case LeaseEndReason::kOldVersionRunning:
      std::fprintf(stderr, "wasmkeep: start guard: %s\n", end->message.c_str());
      co_return kExitOldVersionRunning;
    default:
      break;
  }
  std::fprintf(stderr, "wasmkeep: node lease %s: %s\n", std::string(LeaseEndReasonName(end->reason)).c_str(),
               end->message.c_str());
  co_return end->reason == LeaseEndReason::kTwin ? kExitTwin : kExitLeaseLost;
}

int RunServe(const GlobalOptions& g, const ServeArgs& a) {
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  NodeIdentity identity;
  identity.node_id = NodeId(!a.node_id.empty() ? a.node_id : config->node_id ? *config->node_id : DefaultNodeId());
  if (Status s = ValidateNodeId(identity.node_id); !s.ok()) return Fail(InvalidArgument("--node-id: " + s.message()));
  const std::string listen = !a.listen.empty() ? a.listen : config->listen ? *config->listen : std::string(kDefaultListen);
  const std::string admin_listen =
      !a.admin_listen.empty() ? a.admin_listen : config->admin_listen ? *config->admin_listen : std::string();
  const std::string peer_listen = !a.peer_listen.empty() ? a.peer_listen
                                  : config->peer_listen   ? *config->peer_listen
                                                          : AnyPortOn(listen);
  const std::string advertise = !a.advertise.empty() ? a.advertise : config->advertise ? *config->advertise : peer_listen;
  identity.software_version = std::string(kVersion);
  const LeaseTiming timing = config->lease;
  if (Status s = timing.Validate(); !s.ok()) return Fail(s);
  // Tests only (WASMKEEP_BROKEN_MODELS, base/broken_models.h): rules of the design switched
  // off, so a cluster test can show it catches their absence. Refused (exit 2) by a build
  // without broken models (the release preset).
  auto broken = BrokenModels::FromEnvironment();
  if (!broken.ok()) return Fail(broken.status());

  // The running-events journal (docs/security.md, "Poisoned actors"): read what a crashed
  // previous process left (one quarantine strike each, once actors are served), then kept
  // for this one.
  std::unique_ptr<RunningEvents> journal;
  std::vector<ActorId> crashed_during_events;
  const std::optional<std::string> data_dir = !a.data_dir.empty() ? std::optional<std::string>(a.data_dir) : config->data_dir;
  if (data_dir) {
    auto opened = RunningEvents::Open(*data_dir + "/running-events-" + identity.node_id.str());
    if (!opened.ok()) return Fail(opened.status());
    journal = std::move(opened->journal);
    crashed_during_events = std::move(opened->left_behind);
    if (opened->unreadable > 0) {
      WK_LOG_WARN("the running-events journal held unreadable entries; ignored",
                  {{"path", journal->path()}, {"entries", std::to_string(opened->unreadable)}});
    }
  } else if (config->quarantine.enabled()) {
    WK_LOG_INFO("node.data_dir is not set: a crash during an event is not counted as a quarantine strike", {});
  }

  RealEnv env;
  // The loop polls as long as the workers do after work (env/spin.h): a worker's result
  // then reaches it without an eventfd wake-up.
  env.set_idle_spin(config->actors.spin);
  auto store = OpenBucket(env, g, *config, BucketOpen::kCreateIfMissing);
  if (!store.ok()) return FailOpen(store.status());
  // Every request this node sends, counted by purpose (store/counting_store.h): outermost,
  // so that each subsystem's view of it counts what that subsystem sends.
  auto counting_store = std::make_unique<CountingStore>(std::move(*store));
  CountingStore& counting = *counting_store;
  *store = std::move(counting_store);
  const InstanceToken instance(env.RandomHex(16));
  std::shared_ptr<boost::asio::ssl::context> client_tls;
  if (config->tls_cert_file) {
    auto ctx = MakeServerContextFromFiles(*config->tls_cert_file, *config->tls_key_file);
    if (!ctx.ok()) return Fail(ctx.status());
    client_tls = std::move(*ctx);
  }

  // TLS between nodes (docs/security.md, "Between nodes"): a fresh key and certificate,
  // whose pin the node record publishes; peers are trusted by the pins of the records the
  // listing shows live (PeerTrust, updated after every listing below).
  auto peer_identity = MakePeerIdentity(identity.node_id);
  if (!peer_identity.ok()) return Fail(peer_identity.status());
  identity.cert_pin = (*peer_identity)->pin();
  PeerTrust trust;
  HttpPeerTransport peers(env, **peer_identity, trust);
  auto peer_tls = MakePeerServerContext(**peer_identity, [&trust](std::string_view pin) {
    return trust.FindByPin(pin) != nullptr;
  });
  if (!peer_tls.ok()) return Fail(peer_tls.status());
  ActorServing serving;
  ForwardCapture capture;
  if (auto dir = ProcessGetEnv("WASMKEEP_DEBUG_CAPTURE_FORWARDED"); dir && !dir->empty()) {
    WK_LOG_WARN("WASMKEEP_DEBUG_CAPTURE_FORWARDED: writing every peer request to files, for tests only", {{"dir", *dir}});
    capture.dir = *dir;
  }
  // Its own listener, so peers have connections that clients cannot take. Every peer
  // connection is pinned (the TLS handshake refuses strangers), and several nodes may share
  // one address (one host), so the per-client cap is the whole cap here.
  HttpServerLimits peer_limits;
  peer_limits.max_connections_per_client = peer_limits.max_connections;
  // A body over the actors' limit is refused (413) before it is read.
  peer_limits.max_body_bytes = config->actors.limits.max_request_bytes;
  peer_limits.max_buffered_body_bytes = config->server.max_buffered_body_bytes;
  auto peer_http = HttpServer::Start(
      env, peer_listen,
      [&serving, &capture](ServerRequest request) { return RoutePeer(&serving, &capture, std::move(request)); },
      peer_limits, {}, *peer_tls);
  if (!peer_http.ok()) return Fail(peer_http.status());
  identity.address = WithBoundPort(advertise, (*peer_http)->bound_port());
  if (identity.address.starts_with("0.0.0.0:") || identity.address.starts_with("[::]:")) {
    WK_LOG_WARN("the peer address names every interface: other hosts cannot reach it; set node.advertise",
                {{"address", identity.address}});
  }

  ClusterNode node(env, **store, identity, timing, instance);
  if (broken->any()) {
    WK_LOG_WARN("WASMKEEP_BROKEN_MODELS: rules of the design are switched off, for tests only",
                {{"broken_models", broken->ToString()}});
    node.set_broken_models(*broken);
  }
  // Moves requested through the bucket (`actor move`, `cluster balance`), at the configured rate.
  node.move_control().set_per_second(static_cast<double>(config->moves_per_second));
  node.move_control().set_enabled(true);
  node.membership().AddListener([&trust, &peers, id = identity.node_id](const Membership::View& view) {
    if (trust.Update(TrustedPeersFromView(view, id))) peers.DropUntrusted();
  });

  MetricsRegistry metrics;
  PublishClusterMetrics(metrics, node);
  PublishStoreMetrics(metrics, counting.wrapped());
  PublishBucketMetrics(metrics, counting.stats());
  replica::ReplicaTotals replica_totals;
  replica::PublishReplicaMetrics(metrics, replica_totals);
  DebugWriterHook writer;
  if (auto actors = ProcessGetEnv("WASMKEEP_DEBUG_WRITER"); actors && !actors->empty()) {
    auto parsed = ParseDebugWriter(*actors, ProcessGetEnv("WASMKEEP_DEBUG_WRITER_OPTIONS").value_or(""),
                                   config->storage);
    if (!parsed.ok()) return Fail(parsed.status());
    WK_LOG_WARN("WASMKEEP_DEBUG_WRITER: writing to actors through the replica, for tests only", {{"actors", *actors}});
    writer.options = std::make_shared<const DebugWriterOptions>(std::move(parsed).value());
    writer.totals = &replica_totals;
    writer.store = store->get();
    writer.node_id = identity.node_id;
  }
  AdminRoutes::Handlers handlers;
  // Rates since the process started (`cluster cost`) divide by its age; a changed value
  // tells a scraper the counters restarted.
  const double started_seconds = static_cast<double>(ToUnixMs(env.WallNow())) / 1000;
  metrics.AddCallbackGauge("wasmkeep_process_start_time_seconds", "When this process started, in Unix seconds",
                           [started_seconds] { return started_seconds; });
  metrics.AddCallbackGauge("wasmkeep_peer_pins_trusted", "Peers whose TLS pin this node accepts (live in its last listing)",
                           [&trust] { return static_cast<double>(trust.size()); });
  handlers.metrics_text = [&metrics] { return metrics.RenderText(); };
  handlers.healthy = [] { return true; };
  handlers.ready = [&node] { return node.lease().IsReady() && !node.drain_control().drained_or_draining(); };
  handlers.ready_detail = [&node] {
    if (node.drain_control().drained_or_draining()) return std::string("not ready: drained (cluster undrain puts it back)\n");
    if (node.lease().IsReady()) return std::string("ready\n");
    if (node.lease().epoch() == 0) {
      return std::string("not ready: starting (the bucket check, then the start check, which waits ttl + grace, and "
                         "the start guard)\n");
    }
    if (node.lease().IsValid() && !node.lease().Announced()) {
      return std::string("not ready: the node lease is valid; waiting for the peers' next listing of this node "
                         "(until then they refuse what it forwards)\n");
    }
    return std::string("not ready: node lease not valid\n");
  };
  serving.env = &env;
  serving.store = store->get();
  serving.node = &node;
  serving.metrics = &metrics;
  serving.replica_totals = &replica_totals;
  serving.peers = &peers;
  serving.options.node_id = identity.node_id;
  serving.options.instance = instance;
  serving.options.runtime = config->actors;
  serving.options.storage = config->storage;
  serving.options.quarantine = config->quarantine;
  serving.options.alarms = config->alarms;
  serving.options.timing = config->lease;
  serving.options.journal = journal.get();
  serving.options.crashed_during_events = std::move(crashed_during_events);
  serving.options.bucket_requests = &counting.stats();
  AdminRoutes admin(handlers);
  EnsureFileLimit(config->server.max_connections + peer_limits.max_connections +
                  (admin_listen.empty() ? 0 : kAdminMaxConnections));
  // With node.admin_listen the probes have a listener of their own (and only it), so no
  // flood of client connections can make a node look dead; without it they share the
  // client listener, as before that setting existed (docs/security.md).
  const AdminRoutes* admin_on_api = admin_listen.empty() ? &admin : nullptr;
  HttpServerLimits limits = config->server;
  // A body over the actors' limit is refused (413) before it is read.
  limits.max_body_bytes = config->actors.limits.max_request_bytes;
  auto http = HttpServer::Start(
      env, listen,
      [admin_on_api, &serving](ServerRequest request) { return Route(admin_on_api, &serving, std::move(request)); },
      limits, [admin_on_api, &serving](const ServerRequest& request) {
        return CheckBeforeBody(admin_on_api, &serving, request);
      },
      client_tls);
  if (!http.ok()) return Fail(http.status());
  PublishHttpServerMetrics(metrics, **http, "api");
  PublishHttpServerMetrics(metrics, **peer_http, "peer");
  std::unique_ptr<HttpServer> admin_http;
  if (!admin_listen.empty()) {
    HttpServerLimits admin_limits;
    admin_limits.max_connections = kAdminMaxConnections;
    admin_limits.max_connections_per_client = kAdminMaxConnectionsPerClient;
    admin_limits.max_body_bytes = 0;
    admin_limits.max_buffered_body_bytes = 0;
    admin_limits.first_request_timeout = config->server.first_request_timeout;
    auto started = HttpServer::Start(
        env, admin_listen,
        [&admin](ServerRequest request) { return ReadyResponse(AdminOnly(&admin, request)); }, admin_limits);
    if (!started.ok()) return Fail(started.status());
    admin_http = std::move(started).value();
    PublishHttpServerMetrics(metrics, *admin_http, "admin");
  }

  WK_LOG_INFO("serving", {{"node", identity.node_id.str()}, {"instance", instance.str()}, {"bucket", (*store)->Describe()},
                          {"listen", listen}, {"client_tls", client_tls ? "on" : "off"},
                          {"admin_listen", admin_listen.empty() ? "(listen)" : admin_listen},
                          {"peer_listen", peer_listen}, {"peer_address", identity.address},
                          {"cert_pin", identity.cert_pin}, {"ttl", FormatDuration(timing.ttl)}});
  // Where `cluster cost` finds this process's metrics: the admin listener if any, else the
  // client API.
  NodeEndpoints endpoints{identity.node_id, instance,
                          admin_http ? MetricsUrl(admin_listen, admin_http->bound_port(), false, identity.address)
                                     : MetricsUrl(listen, (*http)->bound_port(), client_tls != nullptr, identity.address)};
  if (ValidateNodeEndpoints(endpoints).ok()) {
    SpawnEndpoints(&env, store->get(), std::move(endpoints));
  } else {
    WK_LOG_WARN("this node's metrics address cannot be published (cluster cost will not find it)",
                {{"metrics", endpoints.metrics_url}});
  }
  int code = env.RunMain(ServeMain(&env, &node, timing, &writer, &serving));
  if (admin_http) admin_http->Stop();
  (*http)->Stop();
  (*peer_http)->Stop();
  serving.host.reset();
  return code;
}

}  // namespace

std::string DefaultNodeId() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "node";
  std::string id;
  for (const char* p = host; *p && id.size() < 64; ++p) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    id += ok ? c : '-';
  }
  if (id == "." || id == "..") id = "node";
  return id;
}

void AddServeCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* serve = app.add_subcommand("serve", "Run a node: the actor API (/v1/actors/...), /metrics, /healthz, /readyz");
  serve->add_option("--node-id", args->node_id, "This node's id (default: config node.id, else the host name)");
  serve->add_option("--listen", args->listen, "The client API's address (default: config node.listen, else 127.0.0.1:8080)");
  serve->add_option("--peer-listen", args->peer_listen,
                    "The peer listener's address, TLS between nodes (default: config node.peer_listen, else the "
                    "listen host on any free port)");
  serve->add_option("--advertise", args->advertise,
                    "The peer listener's address as other nodes reach it (default: config node.advertise, else "
                    "the peer listen address; a port of 0 means the bound port)");
  serve->add_option("--data-dir", args->data_dir,
                    "Directory of the node's local files: the running-events journal (default: config node.data_dir, else none)");
  serve->add_option("--admin-listen", args->admin_listen,
                    "HTTP address for /metrics, /healthz and /readyz alone (default: config node.admin_listen, else "
                    "they are served on the listen address)");
  serve->callback([&globals, args, result] { *result = RunServe(globals, *args); });
}

}  // namespace wk::cli
