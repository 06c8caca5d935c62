// The node's operator endpoint: Prometheus metrics and health probes.
//
// AdminRoutes answers these paths (any query string is ignored); HttpServer carries them
// on the node's client API listener, next to the actor API (net/http_server.h):
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
// `wasmkeep serve` routes every request through Handle first and sends what it does not
// claim to the actor API (server/node.cc).
//
// Threading: AdminRoutes is called on the loop thread; its handlers run synchronously
// inside Handle and must be quick and must not block. It opens no socket itself; the
// HttpServer carrying it does.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

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

}  // namespace wk
