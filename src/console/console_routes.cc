#include "console/console_routes.h"

#include <string>

namespace wk {
namespace {

constexpr std::string_view kRoot = "/console";

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

ServerResponse Headers(ServerResponse r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
                         "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace

bool ConsoleRoutes::Matches(std::string_view target) {
  const std::string_view path = PathOf(target);
  return path == kRoot || path.starts_with("/console/");
}

std::optional<ServerResponse> ConsoleRoutes::Handle(const ServerRequest& request) {
  if (!Matches(request.target)) return std::nullopt;
  if (request.method != "GET" && request.method != "HEAD") {
    ServerResponse r = TextResponse(405, "method not allowed\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return Headers(std::move(r));
  }
  std::string_view path = PathOf(request.target);
  if (path == kRoot) {
    ServerResponse r = TextResponse(301, "see /console/\n");
    r.headers.emplace_back("Location", "/console/");
    return Headers(std::move(r));
  }
  std::string_view name = path.substr(kRoot.size() + 1);
  if (name.empty()) name = "index.html";
  for (std::size_t i = 0; i < console_assets::kAssetCount; ++i) {
    const console_assets::Asset& a = console_assets::kAssets[i];
    if (name != a.name) continue;
    ServerResponse r;
    r.headers.emplace_back("Content-Type", a.content_type);
    r.body.assign(reinterpret_cast<const char*>(a.data), a.size);
    return Headers(std::move(r));
  }
  return Headers(TextResponse(404, "not found: no such console file\n"));
}

std::optional<ServerResponse> ConsoleRoutes::CheckBeforeBody(const ServerRequest& request) {
  auto length = request.Header("Content-Length");
  if ((length && *length != "0") || request.Header("Transfer-Encoding")) {
    return Headers(TextResponse(413, "the console takes no request body\n"));
  }
  return std::nullopt;
}

}  // namespace wk
