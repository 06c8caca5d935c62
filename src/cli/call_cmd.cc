#include "cli/call_cmd.h"

#include <cstdio>
#include <fstream>
#include <iterator>

#include "net/http_client.h"
#include "store/open_store.h"

namespace wk::cli {
namespace {

struct CallOptions_ {
  std::string actor;
  std::string method;
  std::string data;
  bool has_data = false;
  std::vector<std::string> headers;
  std::string token;
  std::string node;
  bool include = false;
};

Task<int> Call(RealEnv* env, HttpClient* client, HttpRequest request, Duration timeout, bool include) {
  const auto deadline = env->MonoNow() + timeout;
  HttpOutcome got = co_await client->Send(std::move(request), deadline);
  if (!got.ok()) {
    std::fprintf(stderr, "wasmkeep: no answer from %s: %s %s\n", client->endpoint().host_header.c_str(),
                 std::string(HttpFailureName(got.failure)).c_str(), got.detail.c_str());
    co_return kExitError;
  }
  const HttpResponse& r = got.response;
  if (include) {
    std::printf("HTTP/1.1 %d\n", r.status);
    for (const auto& [n, v] : r.headers) std::printf("%s: %s\n", n.c_str(), v.c_str());
    std::printf("\n");
  }
  std::fwrite(r.body.data(), 1, r.body.size(), stdout);
  std::fflush(stdout);
  if (r.status >= 200 && r.status < 300) co_return kExitOk;
  std::fprintf(stderr, "wasmkeep: HTTP %d\n", r.status);
  if (r.status == 404) co_return kExitNotFound;
  if (r.status >= 400 && r.status < 500) co_return kExitUsage;
  co_return kExitError;
}

int RunCall(const GlobalOptions& globals, CallOptions_ opts) {
  auto config = LoadConfigFromOptions(globals);
  if (!config.ok()) {
    std::fprintf(stderr, "wasmkeep: %s\n", config.status().ToString().c_str());
    return kExitUsage;
  }
  auto call = CallOptionsFrom(globals);
  if (!call.ok()) {
    std::fprintf(stderr, "wasmkeep: %s\n", call.status().message().c_str());
    return kExitUsage;
  }
  if (opts.token.empty()) {
    if (auto t = ProcessGetEnv("WASMKEEP_TOKEN")) opts.token = *t;
  }
  if (opts.token.empty()) {
    std::fprintf(stderr, "wasmkeep: no token: pass --token or set WASMKEEP_TOKEN (wasmkeep tenant add prints one)\n");
    return kExitUsage;
  }
  // A bare HOST:PORT is http://, or https:// when the config gives the client API a
  // certificate (node.tls_cert_file, also trusted as a CA here: it may be self-signed).
  if (opts.node.empty()) opts.node = config->listen.value_or("127.0.0.1:8080");
  if (!opts.node.starts_with("http://") && !opts.node.starts_with("https://")) {
    opts.node = (config->tls_cert_file ? "https://" : "http://") + opts.node;
  }
  HttpClientOptions client_options;
  if (config->tls_cert_file) {
    std::ifstream cert(*config->tls_cert_file, std::ios::binary);
    if (!cert) {
      std::fprintf(stderr, "wasmkeep: cannot read node.tls_cert_file %s\n", config->tls_cert_file->c_str());
      return kExitUsage;
    }
    client_options.extra_ca_pem.assign(std::istreambuf_iterator<char>(cert), {});
  }
  if (opts.actor.empty() || opts.actor.front() == '/') {
    std::fprintf(stderr, "wasmkeep: the actor is TENANT/CLASS/NAME[/PATH]\n");
    return kExitUsage;
  }
  if (opts.has_data && !opts.data.empty() && opts.data.front() == '@') {
    std::ifstream in(opts.data.substr(1), std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "wasmkeep: cannot read %s\n", opts.data.substr(1).c_str());
      return kExitUsage;
    }
    opts.data.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (opts.method.empty()) opts.method = opts.has_data ? "POST" : "GET";
  HttpRequest request;
  request.method = boost::beast::http::string_to_verb(opts.method);
  if (request.method == boost::beast::http::verb::unknown) {
    std::fprintf(stderr, "wasmkeep: unknown method %s\n", opts.method.c_str());
    return kExitUsage;
  }
  request.target = "/v1/actors/" + opts.actor;
  request.headers.emplace_back("Authorization", "Bearer " + opts.token);
  for (const std::string& h : opts.headers) {
    const auto colon = h.find(':');
    if (colon == std::string::npos || colon == 0) {
      std::fprintf(stderr, "wasmkeep: bad header '%s' (Name: value)\n", h.c_str());
      return kExitUsage;
    }
    std::string value = h.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    request.headers.emplace_back(h.substr(0, colon), value);
  }
  request.body = std::move(opts.data);
  RealEnv env;
  auto endpoint = ParseHttpEndpoint(opts.node);
  if (!endpoint.ok()) {
    std::fprintf(stderr, "wasmkeep: bad --node %s: %s\n", opts.node.c_str(), endpoint.status().message().c_str());
    return kExitUsage;
  }
  auto client = HttpClient::Create(env, *endpoint, client_options);
  if (!client.ok()) {
    std::fprintf(stderr, "wasmkeep: %s\n", client.status().ToString().c_str());
    return kExitUsage;
  }
  const int code = env.RunMain(Call(&env, client->get(), std::move(request), call->timeout, opts.include));
  (*client)->Shutdown();
  return code;
}

}  // namespace

void AddCallCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto opts = std::make_shared<CallOptions_>();
  CLI::App* c = app.add_subcommand("call", "Call an actor through a node's HTTP API");
  c->add_option("actor", opts->actor, "TENANT/CLASS/NAME[/PATH][?QUERY]")->required();
  c->add_option("-X,--request", opts->method, "HTTP method (default GET, or POST with -d)");
  c->add_option("-d,--data", opts->data, "Request body (@FILE reads a file)")->each([opts](const std::string&) {
    opts->has_data = true;
  });
  c->add_option("-H,--header", opts->headers, "Extra header 'Name: value' (repeatable)");
  c->add_option("--token", opts->token, "Access token (default: WASMKEEP_TOKEN)");
  c->add_option("--node", opts->node,
                "Node address HOST:PORT or http(s)://HOST:PORT (default: the config's node.listen, else "
                "127.0.0.1:8080; https when the config sets node.tls_cert_file)");
  c->add_flag("-i,--include", opts->include, "Print the status line and headers before the body");
  c->callback([&globals, opts, result] { *result = RunCall(globals, *opts); });
}

}  // namespace wk::cli
