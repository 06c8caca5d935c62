// The console's files as the node serves them: the embedded bytes, their types, the
// security headers, and refusals.
#include "console/console_routes.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

ServerRequest Get(std::string target, std::string method = "GET") {
  ServerRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

std::string HeaderOf(const ServerResponse& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "";
}

TEST(ConsoleRoutesTest, ServesTheEmbeddedFilesWithTheirTypes) {
  auto index = ConsoleRoutes::Handle(Get("/console/"));
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(HeaderOf(*index, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(index->body.find("<title>WasmKeep console</title>"), std::string::npos);
  EXPECT_NE(HeaderOf(*index, "Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(HeaderOf(*index, "X-Frame-Options"), "DENY");
  auto js = ConsoleRoutes::Handle(Get("/console/app.js?v=1"));
  ASSERT_TRUE(js.has_value());
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(HeaderOf(*js, "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js->body.find("/v1/admin/cluster"), std::string::npos);
  EXPECT_EQ(ConsoleRoutes::Handle(Get("/console/style.css"))->status, 200);
}

TEST(ConsoleRoutesTest, RedirectsRefusesAndLeavesOtherPathsAlone) {
  auto root = ConsoleRoutes::Handle(Get("/console"));
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->status, 301);
  EXPECT_EQ(HeaderOf(*root, "Location"), "/console/");
  EXPECT_EQ(ConsoleRoutes::Handle(Get("/console/../secret"))->status, 404);
  EXPECT_EQ(ConsoleRoutes::Handle(Get("/console/nope.js"))->status, 404);
  EXPECT_EQ(ConsoleRoutes::Handle(Get("/console/", "POST"))->status, 405);
  EXPECT_FALSE(ConsoleRoutes::Handle(Get("/consoles")).has_value());
  EXPECT_FALSE(ConsoleRoutes::Handle(Get("/v1/actors/a/b/c")).has_value());
  ServerRequest with_body = Get("/console/");
  with_body.headers.emplace_back("Content-Length", "10");
  EXPECT_EQ(ConsoleRoutes::CheckBeforeBody(with_body)->status, 413);
  EXPECT_FALSE(ConsoleRoutes::CheckBeforeBody(Get("/console/")).has_value());
}

}  // namespace
}  // namespace wk
