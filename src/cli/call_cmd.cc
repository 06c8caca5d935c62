#include "cli/call_cmd.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>

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
  std::string idempotency_key;
  bool retry = false;
  double retry_for_s = 60;
};

// What makes a call worth retrying with its key: no answer (the request may or may not have
// taken effect) or a 503, the node's "not acknowledged" (docs/http-api.md).
bool Retryable(const HttpOutcome& got) { return !got.ok() || got.response.status == 503; }

// The wait before the next attempt: the node's Retry-After when it gives one (capped), else
// a doubling backoff from 200 ms to 5 s.
Duration RetryDelay(const HttpOutcome& got, int attempt) {
  if (got.ok()) {
    for (const auto& [n, v] : got.response.headers) {
      if (n.size() == 11 && (n == "Retry-After" || n == "retry-after")) {
        try {
          const int s = std::stoi(v);
          if (s >= 0) return std::chrono::seconds(std::min(s, 10));
        } catch (...) {
        }
      }
    }
  }
  return std::chrono::milliseconds(std::min(200 << std::min(attempt, 5), 5000));
}

// A made-up key: 128 random bits in hex, as a structured-field string.
std::string NewIdempotencyKey() {
  std::random_device rd;
  std::string key;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof part, "%08x", rd());
    key += part;
  }
  return key;
}

// The key as the header's structured-field string: quoted, with " and \ escaped.
std::string QuotedKey(const std::string& key) {
  std::string out = "\"";
  for (char c : key) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

Task<int> Call(RealEnv* env, HttpClient* client, HttpRequest request, Duration timeout, bool include,
               Duration retry_for) {
  const auto give_up = env->MonoNow() + retry_for;
  HttpOutcome got;
  for (int attempt = 0;; ++attempt) {
    const auto deadline = env->MonoNow() + timeout;
    HttpRequest copy = request;
    got = co_await client->Send(std::move(copy), deadline);
    if (!Retryable(got) || retry_for <= Duration::zero()) break;
    const Duration delay = RetryDelay(got, attempt);
    if (env->MonoNow() + delay >= give_up) break;
    std::fprintf(stderr, "wasmkeep: %s; retrying with the same Idempotency-Key (attempt %d)\n",
                 got.ok() ? ("HTTP " + std::to_string(got.response.status)).c_str()
                          : ("no answer: " + std::string(HttpFailureName(got.failure))).c_str(),
                 attempt + 2);
    (void)co_await env->SleepFor(delay);
  }
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
  if (opts.retry && opts.idempotency_key.empty()) opts.idempotency_key = NewIdempotencyKey();
  if (!opts.idempotency_key.empty()) {
    request.headers.emplace_back("Idempotency-Key", QuotedKey(opts.idempotency_key));
    if (opts.retry) std::fprintf(stderr, "wasmkeep: Idempotency-Key %s\n", opts.idempotency_key.c_str());
  }
  if (opts.retry && !(opts.retry_for_s > 0 && opts.retry_for_s <= 86400)) {
    std::fprintf(stderr, "wasmkeep: --retry-for must be between 0 and 86400 seconds\n");
    return kExitUsage;
  }
  const Duration retry_for =
      opts.retry ? std::chrono::duration_cast<Duration>(std::chrono::duration<double>(opts.retry_for_s)) : Duration::zero();
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
  const int code =
      env.RunMain(Call(&env, client->get(), std::move(request), call->timeout, opts.include, retry_for));
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
  c->add_option("--idempotency-key", opts->idempotency_key,
                "Send this Idempotency-Key: the request runs at most once on the actor, and a retry gets the "
                "first answer (docs/http-api.md)");
  c->add_flag("--retry", opts->retry,
              "Retry on no answer or 503 until answered, with the same Idempotency-Key (made up, and printed on "
              "stderr, unless --idempotency-key gives one)");
  c->add_option("--retry-for", opts->retry_for_s, "With --retry: give up after this many seconds (default 60)");
  c->callback([&globals, opts, result] { *result = RunCall(globals, *opts); });
}

}  // namespace wk::cli
