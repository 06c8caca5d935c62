#include "cli/serve_cmd.h"

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
#include "cluster/cluster_node.h"
#include "control/cluster_secret.h"
#include "net/http_peer_transport.h"
#include "net/http_server.h"
#include "net/peer_trust.h"
#include "net/tls_identity.h"
#include "server/actor_host.h"
#include "server/admin_routes.h"
#include "server/peer_trust_view.h"
#include "store/open_store.h"

namespace wk::cli {
namespace {

constexpr std::string_view kDefaultListen = "127.0.0.1:8080";

struct ServeArgs {
  std::string node_id;
  std::string listen;
  std::string peer_listen;
  std::string advertise;
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

// The cluster's counters as Prometheus metrics. The cluster code keeps plain counters
// (it runs in the simulator too); they are copied into the registry at each scrape.
class ClusterMetrics {
 public:
  ClusterMetrics(MetricsRegistry& r, ClusterNode& node)
      : node_(node),
        lease_writes_(r.AddCounter("wasmkeep_node_lease_writes_total", "Node lease writes the bucket acknowledged (or adopted after a lost reply)")),
        lease_failures_(r.AddCounter("wasmkeep_node_lease_failures_total", "Node lease write attempts that did not succeed; alert on the first increment")),
        lease_adoptions_(r.AddCounter("wasmkeep_node_lease_adoptions_total", "Conflicts explained by this node's own write whose reply was lost")),
        lease_lapses_(r.AddCounter("wasmkeep_node_lease_lapses_total", "Times the node lease ran out without a conflict")),
        fences_(r.AddCounter("wasmkeep_fences_total", "Fences this node wrote over peers whose lease ran out")),
        fences_refused_(r.AddCounter("wasmkeep_fences_refused_total", "Fences refused by their condition (the peer wrote meanwhile)")),
        acquisitions_(r.AddCounter("wasmkeep_acquisitions_total", "Holds acquired (ownership record written at generation + 1)")),
        releases_ok_(r.AddCounter("wasmkeep_releases_total", "Releases", {{"outcome", "ok"}})),
        releases_parked_(r.AddCounter("wasmkeep_releases_total", "Releases", {{"outcome", "parked"}})),
        releases_landed_later_(r.AddCounter("wasmkeep_releases_total", "Releases", {{"outcome", "landed_later"}})),
        unresolved_(r.AddCounter("wasmkeep_unresolved_acquires_total", "Acquires whose outcome was unknown")),
        resolver_released_(r.AddCounter("wasmkeep_resolver_total", "Unresolved acquires decided", {{"outcome", "released"}})),
        resolver_dropped_(r.AddCounter("wasmkeep_resolver_total", "Unresolved acquires decided", {{"outcome", "dropped"}})),
        listing_(r.AddHistogram("wasmkeep_listing_seconds", "Duration of one listing of nodes/ with a read of each body",
                                {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})) {
    r.AddCallbackGauge("wasmkeep_node_lease_valid", "1 while this node's lease is valid", [&node] { return node.lease().IsValid() ? 1.0 : 0.0; });
    r.AddCallbackGauge("wasmkeep_node_lease_epoch", "Validity epochs so far (increments after each lapse)", [&node] { return static_cast<double>(node.lease().epoch()); });
    for (std::string_view state : {"live", "released", "fenced", "old_format", "corrupt"}) {
      std::string s(state);
      r.AddCallbackGauge("wasmkeep_cluster_nodes", "Node objects in the last listing, by state",
                         [&node, s] {
                           double n = 0;
                           for (const auto& [id, v] : node.membership().view()) {
                             const char* st = v.record ? (v.record->state == LeaseState::kLive ? "live" : v.record->state == LeaseState::kReleased ? "released" : "fenced")
                                              : v.old ? "old_format" : "corrupt";
                             n += s == st ? 1 : 0;
                           }
                           return n;
                         },
                         {{"state", s}});
    }
    r.AddCallbackGauge("wasmkeep_holds_resident", "Actors this node holds now", [&node] { return static_cast<double>(node.owners().holds()); });
    r.AddCallbackGauge("wasmkeep_releases_pending", "Pending releases and unresolved acquires", [&node] { return static_cast<double>(node.owners().pending()); });
    r.AddCallbackGauge("wasmkeep_draining", "1 while a drain is requested or done for this node", [&node] { return node.drain_control().drained_or_draining() ? 1.0 : 0.0; });
    node.membership().AddListener([this](const std::map<std::string, NodeView>&) {
      listing_.Observe(ToSeconds(node_.membership().stats().last_duration));
    });
  }

  void Sync() {
    auto sync = [](Counter& c, std::uint64_t v) {
      if (static_cast<double>(v) > c.value()) c.Inc(static_cast<double>(v) - c.value());
    };
    sync(lease_writes_, node_.lease().stats().writes_ok);
    sync(lease_failures_, node_.lease().stats().write_failures);
    sync(lease_adoptions_, node_.lease().stats().adoptions);
    sync(lease_lapses_, node_.lease().stats().lapses);
    sync(fences_, node_.fence_watch().stats().fences_written);
    sync(fences_refused_, node_.fence_watch().stats().fences_refused);
    const OwnersStats& o = node_.owners().stats();
    sync(acquisitions_, o.acquisitions);
    sync(releases_ok_, o.releases_ok);
    sync(releases_parked_, o.releases_parked);
    sync(releases_landed_later_, o.pending_landed);
    sync(unresolved_, o.unresolved);
    sync(resolver_released_, o.resolver_released);
    sync(resolver_dropped_, o.resolver_dropped);
  }

 private:
  ClusterNode& node_;
  Counter& lease_writes_;
  Counter& lease_failures_;
  Counter& lease_adoptions_;
  Counter& lease_lapses_;
  Counter& fences_;
  Counter& fences_refused_;
  Counter& acquisitions_;
  Counter& releases_ok_;
  Counter& releases_parked_;
  Counter& releases_landed_later_;
  Counter& unresolved_;
  Counter& resolver_released_;
  Counter& resolver_dropped_;
  Histogram& listing_;
};

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
  replica::ReplicaMetrics* metrics = nullptr;
  ObjectStore* store = nullptr;
  std::string node_id;
};

// What serves actors, made once the cluster secret is read (the HTTP handler answers 503
// until then).
struct ActorServing {
  RealEnv* env = nullptr;
  ObjectStore* store = nullptr;
  ClusterNode* node = nullptr;
  MetricsRegistry* metrics = nullptr;
  replica::ReplicaMetrics* replica_metrics = nullptr;
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
      s->host = std::make_unique<ActorHost>(*s->env, *s->store, *s->node, *s->metrics, *s->replica_metrics, *secret,
                                            *s->peers, s->options);
      WK_LOG_INFO("serving actors", {{"node", s->options.node_id}});
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

ServerResponse Starting() {
  ServerResponse r = TextResponse(503, "this node is starting: actors are not served yet\n");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

// The client API's handler: the admin routes, then the actor API.
Task<ServerResponse> Route(const AdminRoutes* admin, ActorServing* serving, ServerRequest request) {
  if (auto r = admin->Handle(request)) co_return std::move(*r);
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
Result<std::unique_ptr<TlsIdentity>> MakePeerIdentity(const std::string& node_id) {
  const std::string name = "wasmkeep node " + node_id;
  auto key_file = ProcessGetEnv("WASMKEEP_DEBUG_PEER_KEY_FILE");
  if (!key_file || key_file->empty()) return TlsIdentity::Generate(name);
  std::ifstream in(*key_file, std::ios::binary);
  if (!in) return Fatal("WASMKEEP_DEBUG_PEER_KEY_FILE: cannot read " + *key_file);
  std::stringstream pem;
  pem << in.rdbuf();
  WK_LOG_WARN("WASMKEEP_DEBUG_PEER_KEY_FILE: the peer TLS key comes from a file, for tests only", {{"file", *key_file}});
  return TlsIdentity::FromPrivateKeyPem(pem.str(), name);
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
  if (writer->options) StartDebugWriters(env, node, writer->store, writer->metrics, writer->node_id, writer->options);
  SpawnActorStart(env, serving);
  const int what = co_await event.Wait();
  signals.cancel();
  if (what > 0) {
    WK_LOG_INFO("clean stop", {{"signal", what == SIGTERM ? "SIGTERM" : "SIGINT"}});
    // ADR §4: the actors first — no new events, running ones finish, each replica waits
    // until its writes are durable and its hold is released — then the node releases any
    // hold left, makes the lease locally invalid (a straggler is cut), ends the lease task
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
  // already frees what this process held).
  std::fprintf(stderr, "wasmkeep: node lease %s: %s\n", std::string(LeaseEndReasonName(end->reason)).c_str(),
               end->message.c_str());
  co_return end->reason == LeaseEndReason::kTwin ? kExitTwin : kExitLeaseLost;
}

int RunServe(const GlobalOptions& g, const ServeArgs& a) {
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  NodeIdentity identity;
  identity.node_id = !a.node_id.empty() ? a.node_id : config->node_id ? *config->node_id : DefaultNodeId();
  if (Status s = ValidateNodeId(identity.node_id); !s.ok()) return Fail(InvalidArgument("--node-id: " + s.message()));
  const std::string listen = !a.listen.empty() ? a.listen : config->listen ? *config->listen : std::string(kDefaultListen);
  const std::string peer_listen = !a.peer_listen.empty() ? a.peer_listen
                                  : config->peer_listen   ? *config->peer_listen
                                                          : AnyPortOn(listen);
  const std::string advertise = !a.advertise.empty() ? a.advertise : config->advertise ? *config->advertise : peer_listen;
  identity.software_version = std::string(kVersion);
  const LeaseTiming timing = config->lease;
  if (Status s = timing.Validate(); !s.ok()) return Fail(s);

  RealEnv env;
  auto store = OpenBucket(env, g, *config);
  if (!store.ok()) return Fail(store.status());
  const std::string instance = env.RandomHex(16);
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
  HttpServerLimits limits;
  // A body over the actors' limit is refused (413) before it is read.
  limits.max_body_bytes = config->actors.limits.max_request_bytes;
  // Its own listener, so peers have connections that clients cannot take.
  auto peer_http = HttpServer::Start(
      env, peer_listen,
      [&serving, &capture](ServerRequest request) { return RoutePeer(&serving, &capture, std::move(request)); }, limits,
      *peer_tls);
  if (!peer_http.ok()) return Fail(peer_http.status());
  identity.address = WithBoundPort(advertise, (*peer_http)->bound_port());
  if (identity.address.starts_with("0.0.0.0:") || identity.address.starts_with("[::]:")) {
    WK_LOG_WARN("the peer address names every interface: other hosts cannot reach it; set node.advertise",
                {{"address", identity.address}});
  }

  ClusterNode node(env, **store, identity, timing, instance);
  node.membership().AddListener([&trust, &peers, id = identity.node_id](const std::map<std::string, NodeView>& view) {
    if (trust.Update(TrustedPeersFromView(view, id))) peers.DropUntrusted();
  });

  MetricsRegistry metrics;
  ClusterMetrics cluster_metrics(metrics, node);
  replica::ReplicaMetrics replica_metrics(metrics);
  DebugWriterHook writer;
  if (auto actors = ProcessGetEnv("WASMKEEP_DEBUG_WRITER"); actors && !actors->empty()) {
    auto parsed = ParseDebugWriter(*actors, ProcessGetEnv("WASMKEEP_DEBUG_WRITER_OPTIONS").value_or(""),
                                   config->storage);
    if (!parsed.ok()) return Fail(parsed.status());
    WK_LOG_WARN("WASMKEEP_DEBUG_WRITER: writing to actors through the replica, for tests only", {{"actors", *actors}});
    writer.options = std::make_shared<const DebugWriterOptions>(std::move(parsed).value());
    writer.metrics = &replica_metrics;
    writer.store = store->get();
    writer.node_id = identity.node_id;
  }
  AdminRoutes::Handlers handlers;
  metrics.AddCallbackGauge("wasmkeep_peer_pins_trusted", "Peers whose TLS pin this node accepts (live in its last listing)",
                           [&trust] { return static_cast<double>(trust.size()); });
  Counter& replays_refused = metrics.AddCounter("wasmkeep_peer_requests_refused_total",
                                                "Forwarded requests this node refused", {{"reason", "replayed"}});
  Counter& others_refused = metrics.AddCounter("wasmkeep_peer_requests_refused_total",
                                               "Forwarded requests this node refused", {{"reason", "other"}});
  handlers.metrics_text = [&] {
    cluster_metrics.Sync();
    if (serving.host) {
      const ForwarderStats& f = serving.host->forwarder_stats();
      auto sync = [](Counter& c, std::uint64_t v) {
        if (static_cast<double>(v) > c.value()) c.Inc(static_cast<double>(v) - c.value());
      };
      sync(replays_refused, f.replays);
      sync(others_refused, f.refused - f.replays);
    }
    return metrics.RenderText();
  };
  handlers.healthy = [] { return true; };
  handlers.ready = [&node] { return node.lease().IsReady() && !node.drain_control().drained_or_draining(); };
  handlers.ready_detail = [&node] {
    if (node.drain_control().drained_or_draining()) return std::string("not ready: drained (cluster undrain puts it back)\n");
    if (node.lease().IsReady()) return std::string("ready\n");
    if (node.lease().epoch() == 0) return std::string("not ready: start check in progress (waits ttl + grace)\n");
    return std::string("not ready: node lease not valid\n");
  };
  serving.env = &env;
  serving.store = store->get();
  serving.node = &node;
  serving.metrics = &metrics;
  serving.replica_metrics = &replica_metrics;
  serving.peers = &peers;
  serving.options.node_id = identity.node_id;
  serving.options.instance = instance;
  serving.options.runtime = config->actors;
  serving.options.storage = config->storage;
  AdminRoutes admin(handlers);
  auto http = HttpServer::Start(
      env, listen,
      [&admin, &serving](ServerRequest request) { return Route(&admin, &serving, std::move(request)); }, limits,
      client_tls);
  if (!http.ok()) return Fail(http.status());

  WK_LOG_INFO("serving", {{"node", identity.node_id}, {"instance", instance}, {"bucket", (*store)->Describe()},
                          {"listen", listen}, {"client_tls", client_tls ? "on" : "off"},
                          {"peer_listen", peer_listen}, {"peer_address", identity.address},
                          {"cert_pin", identity.cert_pin}, {"ttl", FormatDuration(timing.ttl)}});
  int code = env.RunMain(ServeMain(&env, &node, timing, &writer, &serving));
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
  serve->callback([&globals, args, result] { *result = RunServe(globals, *args); });
}

}  // namespace wk::cli
