#include "server/admin_routes.h"

#include <utility>

#include "base/check.h"
#include "base/metrics.h"

namespace wk {
namespace {

constexpr std::string_view kAllowedMethods = "GET, HEAD";

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

ServerResponse NoStore(ServerResponse response) {
  // Probe answers change from one second to the next; no proxy may cache them.
  response.headers.emplace_back("Cache-Control", "no-store");
  return response;
}

}  // namespace

AdminRoutes::AdminRoutes(Handlers handlers) : handlers_(std::move(handlers)) {
  WK_CHECK(handlers_.metrics_text && handlers_.healthy && handlers_.ready,
           "AdminRoutes needs the metrics_text, healthy and ready handlers");
}

bool AdminRoutes::Matches(std::string_view target) {
  const std::string_view path = PathOf(target);
  return path == "/metrics" || path == "/healthz" || path == "/readyz";
}

std::optional<ServerResponse> AdminRoutes::Handle(const ServerRequest& request) const {
  if (!Matches(request.target)) return std::nullopt;
  if (request.method != "GET" && request.method != "HEAD") {
    ServerResponse refused = TextResponse(405, "method not allowed\n");
    refused.headers.emplace_back("Allow", kAllowedMethods);
    return NoStore(std::move(refused));
  }
  const std::string_view path = PathOf(request.target);
  if (path == "/metrics") {
    ServerResponse metrics;
    metrics.headers.emplace_back("Content-Type", kPrometheusTextContentType);
    metrics.body = handlers_.metrics_text();
    return NoStore(std::move(metrics));
  }
  if (path == "/healthz") {
    const bool healthy = handlers_.healthy();
    return NoStore(TextResponse(healthy ? 200 : 503, healthy ? "ok\n" : "unhealthy\n"));
  }
  if (handlers_.ready()) return NoStore(TextResponse(200, "ready\n"));
  std::string detail = handlers_.ready_detail ? handlers_.ready_detail() : std::string();
  if (detail.empty()) detail = "not ready";
  if (detail.back() != '\n') detail += '\n';
  return NoStore(TextResponse(503, std::move(detail)));
}

}  // namespace wk
