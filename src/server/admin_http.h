// The node's operator endpoint: Prometheus metrics and health probes.
//
// AdminRoutes answers these paths (any query string is ignored); HttpServer carries them
// on the node's one listener, next to the actor API (http_server.h):
//   GET /metrics  200, Content-Type kPrometheusTextContentType, body metrics_text()
//   GET /healthz  200 "ok\n" while healthy(), else 503 "unhealthy\n"   (liveness: restart
//                 the process if this fails)
//   GET /readyz   200 "ready\n" while ready(), else 503 with ready_detail() (readiness:
//                 send no traffic, e.g. "not ready: node lease not valid\n")
//   HEAD on each  the same status and headers; HttpServer sends no body
//   other methods 405 with "Allow: GET, HEAD"
// Every answer carries "Cache-Control: no-store": probe answers change from one second
// to the next. A request body is ignored.
//
// AdminHttpServer is HttpServer with only these routes (404 for every other path) and
// bounds for a listener no route of which takes a body: max_body_bytes is 0, so a
// request announcing a body (Content-Length > 0, or chunked) gets 413 and the connection
// closes ("Content-Length: 0" is accepted). It serves until `wasmkeep serve` carries the
// routes on its one HttpServer.
//
// Threading: AdminRoutes is called on the loop thread; its handlers run synchronously
// inside Handle and must be quick and must not block. AdminHttpServer is an HttpServer:
// its threading and lifetime are that class's; the handlers are never called after
// Stop() returns, and their captures need only outlive the server (or the Stop() call).
//
// This is a real-runtime component (sockets): it never runs in the simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/time.h"
#include "env/real_env.h"
#include "net/http_server.h"
#include "net/http_types.h"

namespace wk {

class AdminRoutes {
 public:
  // What the routes answer from. REQUIRES: metrics_text, healthy and ready are set;
  // ready_detail may be empty (then a not-ready reply says "not ready\n").
  struct Handlers {
    std::function<std::string()> metrics_text;
    std::function<bool()> healthy;
    std::function<bool()> ready;
    // Why the node is not ready, for the 503 body. A missing final newline is added.
    std::function<std::string()> ready_detail;
  };

  explicit AdminRoutes(Handlers handlers);

  // Whether target's path (before any '?') is /metrics, /healthz or /readyz.
  static bool Matches(std::string_view target);

  // The answer for an admin path; nullopt for any other (the caller routes it).
  std::optional<ServerResponse> Handle(const ServerRequest& request) const;

 private:
  Handlers handlers_;
};

// The bounds of one AdminHttpServer (see the header comment); HttpServerLimits's reasons
// apply, these are the admin-only values.
struct AdminHttpLimits {
  // Probes and scrapers send a few hundred bytes of headers.
  std::size_t max_header_bytes = 8 * 1024;
  // A handful of scrapers and probes connect at once.
  std::size_t max_connections = 256;
  // Waiting for, reading, and writing one request each. Longer than any scrape interval
  // Prometheus is configured with in practice (15 s to 30 s keeps keep-alive connections
  // reused), short enough to free slots held by stalled clients.
  Duration idle_timeout = std::chrono::seconds(30);
};

class AdminHttpServer {
 public:
  using Handlers = AdminRoutes::Handlers;
  // Declared outside the class only so that `Limits limits = {}` can be a default
  // argument (a nested class's member initializers are not usable there).
  using Limits = AdminHttpLimits;

  // As HttpServer::Start (the same address forms and errors). REQUIRES: as
  // AdminRoutes::Handlers.
  static Result<std::unique_ptr<AdminHttpServer>> Start(RealEnv& env, std::string listen_address,
                                                        Handlers handlers, Limits limits = {});

  // The port actually listened on (the chosen one when the address said port 0).
  std::uint16_t bound_port() const { return server_->bound_port(); }
  // The address as given to Start.
  const std::string& listen_address() const { return server_->listen_address(); }
  // See HttpServer::Stop. The destructor calls it.
  void Stop() { server_->Stop(); }
  std::size_t open_connections() const { return server_->open_connections(); }
  std::uint64_t rejected_connections() const { return server_->rejected_connections(); }

 private:
  explicit AdminHttpServer(std::unique_ptr<HttpServer> server) : server_(std::move(server)) {}
  std::unique_ptr<HttpServer> server_;
};

}  // namespace wk
