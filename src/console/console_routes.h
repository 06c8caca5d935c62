// The console's static files (docs/console.md), served by every node at /console/ on its
// client listener. They are compiled into the binary (src/console/embed.cmake turns
// src/console/* into a generated source at build time), so a node needs no files, no CDN
// and no internet to serve them. The files hold no secret: the data comes from the JSON
// routes (server/actor_admin.h), each with its own token check.
//
//   GET /console       301 to /console/
//   GET /console/      index.html
//   GET /console/<f>   one of the files; 404 for any other
//   HEAD               the same without the body; other methods 405
// Every answer carries a Content-Security-Policy that allows this origin's scripts and
// styles only, X-Content-Type-Options: nosniff, X-Frame-Options: DENY and
// Cache-Control: no-cache (a node's upgrade changes them).
//
// Threading: pure functions over constant data.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "net/http_types.h"

namespace wk {

namespace console_assets {
struct Asset {
  const char* name;  // "app.js"
  const char* content_type;
  const unsigned char* data;
  std::size_t size;
};
// Defined in the generated source.
extern const Asset kAssets[];
extern const std::size_t kAssetCount;
}  // namespace console_assets

class ConsoleRoutes {
 public:
  // Whether target's path is /console or under /console/.
  static bool Matches(std::string_view target);
  // The answer for a console path; nullopt for any other.
  static std::optional<ServerResponse> Handle(const ServerRequest& request);
  // Before the body is read: the console takes none (413), or nullopt.
  static std::optional<ServerResponse> CheckBeforeBody(const ServerRequest& request);
};

}  // namespace wk
