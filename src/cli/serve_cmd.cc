#include "cli/serve_cmd.h"

#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>

#include "base/log.h"
#include "cli/test_hooks.h"
#include "server/node.h"
#include "server/running_events.h"

namespace wk::cli {
namespace {

constexpr std::string_view kDefaultListen = "127.0.0.1:8080";

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

// The first of the flag, the config file's value and the default.
std::string Pick(const std::string& flag, const std::optional<std::string>& config, std::string fallback) {
  if (!flag.empty()) return flag;
  if (config) return *config;
  return fallback;
}

// The process's exit code for how the node's run ended.
int ExitCodeOf(const NodeExit& exit) {
  if (exit.kind == NodeExit::Kind::kCleanStop) return kExitOk;
  if (!exit.lease_end) return kExitError;
  const LeaseEnd& end = *exit.lease_end;
  if (end.reason == LeaseEndReason::kStopped) return kExitOk;
  // Lost or a twin: exit at once, releasing nothing (the fence or the other instance
  // already frees what this process held). A refused start (the bucket check, the start
  // guard) wrote nothing.
  switch (end.reason) {
    case LeaseEndReason::kBucketUnfit:
      std::fprintf(stderr, "wasmkeep: bucket check: %s\n", end.message.c_str());
      return kExitUsage;
    case LeaseEndReason::kOldVersionRunning:
      std::fprintf(stderr, "wasmkeep: start guard: %s\n", end.message.c_str());
      return kExitOldVersionRunning;
    default:
      break;
  }
  std::fprintf(stderr, "wasmkeep: node lease %s: %s\n", std::string(LeaseEndReasonName(end.reason)).c_str(),
               end.message.c_str());
  return end.reason == LeaseEndReason::kTwin ? kExitTwin : kExitLeaseLost;
}

// Runs the node until SIGTERM or SIGINT (a clean stop) or the end of its lease.
Task<int> ServeMain(RealEnv* env, Node* node) {
  Latch<int> stop(*env, [] { return -1; });
  boost::asio::signal_set signals(env->context(), SIGTERM, SIGINT);
  signals.async_wait([stop](const boost::system::error_code& ec, int sig) {
    if (!ec) {
      WK_LOG_INFO("clean stop", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      stop.Set(sig);
    }
  });
  NodeExit exit = co_await node->Run(stop);
  signals.cancel();
  co_return ExitCodeOf(exit);
}

int RunServe(const GlobalOptions& g, const ServeArgs& a) {
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  if (Status s = CheckTestHooksAvailable(); !s.ok()) return Fail(s);
  NodeOptions options;
  options.node_id = NodeId(Pick(a.node_id, config->node_id, DefaultNodeId()));
  if (Status s = ValidateNodeId(options.node_id); !s.ok()) return Fail(InvalidArgument("--node-id: " + s.message()));
  options.listen = Pick(a.listen, config->listen, std::string(kDefaultListen));
  options.admin_listen = Pick(a.admin_listen, config->admin_listen, "");
  options.peer_listen = Pick(a.peer_listen, config->peer_listen, AnyPortOn(options.listen));
  options.advertise = Pick(a.advertise, config->advertise, options.peer_listen);
  options.timing = config->lease;
  if (Status s = options.timing.Validate(); !s.ok()) return Fail(s);
  // WASMKEEP_BROKEN_MODELS (base/broken_models.h): rules of the design switched off, so a
  // cluster test can show it catches their absence. Refused (exit 2) by a build without
  // broken models (the release preset).
  auto broken = BrokenModels::FromEnvironment();
  if (!broken.ok()) return Fail(broken.status());
  options.broken = *broken;
  options.server = config->server;
  options.tls_cert_file = config->tls_cert_file;
  options.tls_key_file = config->tls_key_file;
  options.host.runtime = config->actors;
  options.host.storage = config->storage;
  options.host.quarantine = config->quarantine;
  options.host.quarantine_list_after = config->quarantine_list_after;
  options.host.alarms = config->alarms;
  options.host.messages = config->messages;
  options.host.sockets = config->websockets;
  options.host.usage_flush = config->usage_flush;
  options.moves_per_second = config->moves_per_second;

  // The running-events journal (docs/security.md, "Poisoned actors"): read what a crashed
  // previous process left (one quarantine strike each, once actors are served), then kept
  // for this one.
  std::unique_ptr<RunningEvents> journal;
  const std::optional<std::string> data_dir = !a.data_dir.empty() ? std::optional<std::string>(a.data_dir) : config->data_dir;
  if (data_dir) {
    auto opened = RunningEvents::Open(*data_dir + "/running-events-" + options.node_id.str());
    if (!opened.ok()) return Fail(opened.status());
    journal = std::move(opened->journal);
    options.host.crashed_during_events = std::move(opened->left_behind);
    if (opened->unreadable > 0) {
      WK_LOG_WARN("the running-events journal held unreadable entries; ignored",
                  {{"path", journal->path()}, {"entries", std::to_string(opened->unreadable)}});
    }
  } else if (config->quarantine.enabled()) {
    WK_LOG_INFO("node.data_dir is not set: a crash during an event is not counted as a quarantine strike", {});
  }
  options.host.journal = journal.get();
  if (auto flags = ProcessGetEnv("WASMKEEP_V8_FLAGS"); flags && !flags->empty()) {
    // Read by the engine when V8 starts (src/engine/engine.cc); said here so that a node
    // running with them shows it.
    WK_LOG_WARN("V8 runs with extra flags (WASMKEEP_V8_FLAGS); for diagnostics only", {{"flags", *flags}});
  }
  if (Status s = ApplyTestHooks(options); !s.ok()) return Fail(s);

  RealEnv env;
  // The loop polls as long as the workers do after work (env/spin.h): a worker's result
  // then reaches it without an eventfd wake-up.
  env.set_idle_spin(config->actors.spin);
  auto store = OpenBucket(env, g, *config, BucketOpen::kCreateIfMissing);
  if (!store.ok()) return FailOpen(store.status());
  auto node = Node::Start(env, std::move(*store), std::move(options));
  if (!node.ok()) return Fail(node.status());
  if (Status s = StartTestHooks(**node, config->storage); !s.ok()) return Fail(s);
  const int code = env.RunMain(ServeMain(&env, node->get()));
  (*node)->Close();
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
