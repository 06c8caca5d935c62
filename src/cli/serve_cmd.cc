#include "cli/serve_cmd.h"

#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>

#include "base/log.h"
#include "base/metrics.h"
#include "base/version.h"
#include "cli/debug_writer.h"
#include "cluster/cluster_metrics.h"
#include "cluster/cluster_node.h"
#include "control/cluster_secret.h"
#include "net/http_server.h"
#include "server/actor_host.h"
#include "server/admin_routes.h"
#include "server/running_events.h"
#include "store/open_store.h"

namespace wk::cli {
namespace {

constexpr std::string_view kDefaultListen = "127.0.0.1:8080";

struct ServeArgs {
  std::string node_id;
  std::string listen;
  std::string advertise;
  std::string data_dir;
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
  replica::ReplicaTotals* totals = nullptr;
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
  replica::ReplicaTotals* replica_totals = nullptr;
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
                                            s->options);
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

// The HTTP handler: the admin routes, then the actor API.
Task<ServerResponse> Route(const AdminRoutes* admin, ActorServing* serving, ServerRequest request) {
  if (auto r = admin->Handle(request)) co_return std::move(*r);
  if (!serving->host) {
    ServerResponse r = TextResponse(503, "this node is starting: actors are not served yet\n");
    r.headers.emplace_back("Retry-After", "1");
    co_return r;
  }
  co_return co_await serving->host->Handle(std::move(request));
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
  if (writer->options) StartDebugWriters(env, node, writer->store, writer->totals, writer->node_id, writer->options);
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
  identity.address = !a.advertise.empty() ? a.advertise : config->advertise ? *config->advertise : listen;
  identity.software_version = std::string(kVersion);
  const LeaseTiming timing = config->lease;
  if (Status s = timing.Validate(); !s.ok()) return Fail(s);

  // The running-events journal (docs/security.md, "Poisoned actors"): read what a crashed
  // previous process left (one quarantine strike each, once actors are served), then kept
  // for this one.
  std::unique_ptr<RunningEvents> journal;
  std::vector<ActorId> crashed_during_events;
  const std::optional<std::string> data_dir = !a.data_dir.empty() ? std::optional<std::string>(a.data_dir) : config->data_dir;
  if (data_dir) {
    auto opened = RunningEvents::Open(*data_dir + "/running-events-" + identity.node_id);
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
  auto store = OpenBucket(env, g, *config);
  if (!store.ok()) return Fail(store.status());
  const std::string instance = env.RandomHex(16);
  ClusterNode node(env, **store, identity, timing, instance);

  MetricsRegistry metrics;
  PublishClusterMetrics(metrics, node);
  PublishStoreMetrics(metrics, **store);
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
  handlers.metrics_text = [&metrics] { return metrics.RenderText(); };
  handlers.healthy = [] { return true; };
  handlers.ready = [&node] { return node.lease().IsReady() && !node.drain_control().drained_or_draining(); };
  handlers.ready_detail = [&node] {
    if (node.drain_control().drained_or_draining()) return std::string("not ready: drained (cluster undrain puts it back)\n");
    if (node.lease().IsReady()) return std::string("ready\n");
    if (node.lease().epoch() == 0) return std::string("not ready: start check in progress (waits ttl + grace)\n");
    return std::string("not ready: node lease not valid\n");
  };
  ActorServing serving;
  serving.env = &env;
  serving.store = store->get();
  serving.node = &node;
  serving.metrics = &metrics;
  serving.replica_totals = &replica_totals;
  serving.options.node_id = identity.node_id;
  serving.options.runtime = config->actors;
  serving.options.storage = config->storage;
  serving.options.quarantine = config->quarantine;
  serving.options.journal = journal.get();
  serving.options.crashed_during_events = std::move(crashed_during_events);
  AdminRoutes admin(handlers);
  HttpServerLimits limits;
  // A body over the actors' limit is refused (413) before it is read.
  limits.max_body_bytes = config->actors.limits.max_request_bytes;
  auto http = HttpServer::Start(
      env, listen,
      [&admin, &serving](ServerRequest request) { return Route(&admin, &serving, std::move(request)); }, limits);
  if (!http.ok()) return Fail(http.status());

  WK_LOG_INFO("serving", {{"node", identity.node_id}, {"instance", instance}, {"bucket", (*store)->Describe()},
                          {"listen", listen}, {"ttl", FormatDuration(timing.ttl)}});
  int code = env.RunMain(ServeMain(&env, &node, timing, &writer, &serving));
  (*http)->Stop();
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
  serve->add_option("--listen", args->listen, "HTTP address to listen on (default: config node.listen, else 127.0.0.1:8080)");
  serve->add_option("--advertise", args->advertise, "Address peers use to reach this node (default: the listen address)");
  serve->add_option("--data-dir", args->data_dir,
                    "Directory of the node's local files: the running-events journal (default: config node.data_dir, else none)");
  serve->callback([&globals, args, result] { *result = RunServe(globals, *args); });
}

}  // namespace wk::cli
