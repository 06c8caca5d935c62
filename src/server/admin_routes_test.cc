#include "server/admin_routes.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/metrics.h"
#include "env/real_env.h"
#include "net/http_server.h"
#include "net/testing/http_test_client.h"

namespace wk {
namespace {

using std::chrono::seconds;
using http_test::Reply;
using http_test::RunServed;
using http_test::Served;

// Handlers over test-owned flags (they live in the test's frame, which outlives the
// server it creates).
struct Probe {
  bool healthy = true;
  bool ready = true;
  std::string detail = "not ready: node lease not valid\n";
  std::string metrics = "# HELP wk_up Up.\n# TYPE wk_up gauge\nwk_up 1\n";
  int metrics_calls = 0;

  AdminRoutes::Handlers Handlers() {
    AdminRoutes::Handlers h;
    h.metrics_text = [this] {
      ++metrics_calls;
      return metrics;
    };
    h.healthy = [this] { return healthy; };
    h.ready = [this] { return ready; };
    h.ready_detail = [this] { return detail; };
    return h;
  }
};

// A handler carrying only the admin routes, and 404 for every other path (the node's
// listener sends those to the actor API instead: RoutesShareAListenerWithOtherHandlers).
// The routes live as long as the handler, which the server keeps until it is destroyed.
ServerHandler AdminOnly(AdminRoutes::Handlers handlers) {
  auto routes = std::make_shared<const AdminRoutes>(std::move(handlers));
  return [routes](ServerRequest request) {
    std::optional<ServerResponse> answer = routes->Handle(request);
    return ReadyResponse(answer ? std::move(*answer) : TextResponse(404, "not found\n"));
  };
}

// ---- Routes.

TEST(AdminRoutesTest, MetricsRouteServesTheRegistryText) {
  RealEnv env;
  MetricsRegistry registry;
  registry.AddCounter("wk_scrapes_total", "Scrapes.").Inc(3);
  AdminRoutes::Handlers handlers;
  handlers.metrics_text = [&registry] { return registry.RenderText(); };
  handlers.healthy = [] { return true; };
  handlers.ready = [] { return true; };
  RunServed(env, AdminOnly(handlers), {}, [&](Served& s) -> Task<void> {
    EXPECT_NE(s.server->bound_port(), 0);
    EXPECT_EQ(s.server->listen_address(), "127.0.0.1:0");
    Reply r = co_await s.client.Request("GET", "/metrics");
    CO_ASSERT_TRUE(!r.ec);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(r.body, registry.RenderText());
    // A query string does not change the route.
    r = co_await s.client.Request("GET", "/metrics?name[]=wk_scrapes_total");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, registry.RenderText());
  });
}

// GET path answers 200 with up_body while *flag holds, then, on the same connection,
// 503 with down_body once the test clears it.
Task<void> ExpectFollows(Served& s, std::string path, bool* flag, std::string up_body, std::string down_body) {
  Reply r = co_await s.client.Request("GET", path);
  EXPECT_EQ(r.status, 200) << path;
  EXPECT_EQ(r.body, up_body) << path;
  EXPECT_EQ(r.content_type, "text/plain; charset=utf-8") << path;
  *flag = false;
  r = co_await s.client.Request("GET", path);
  CO_ASSERT_TRUE(!r.ec);  // the same connection carried both
  EXPECT_EQ(r.status, 503) << path;
  EXPECT_EQ(r.body, down_body) << path;
  EXPECT_EQ(s.server->open_connections(), 1u);
}

TEST(AdminRoutesTest, HealthzFollowsHealthy) {
  RealEnv env;
  Probe probe;
  RunServed(env, AdminOnly(probe.Handlers()), {}, [&](Served& s) -> Task<void> {
    co_await ExpectFollows(s, "/healthz", &probe.healthy, "ok\n", "unhealthy\n");
  });
}

TEST(AdminRoutesTest, ReadyzFlipsBetweenTwoRequestsOnOneKeepAliveConnection) {
  RealEnv env;
  Probe probe;
  RunServed(env, AdminOnly(probe.Handlers()), {}, [&](Served& s) -> Task<void> {
    co_await ExpectFollows(s, "/readyz", &probe.ready, "ready\n", "not ready: node lease not valid\n");
    // A detail without a final newline gets one; an empty one gets a default.
    probe.detail = "not ready: joining";
    Reply r = co_await s.client.Request("GET", "/readyz");
    EXPECT_EQ(r.body, "not ready: joining\n");
    probe.detail.clear();
    r = co_await s.client.Request("GET", "/readyz");
    EXPECT_EQ(r.body, "not ready\n");
  });
}

TEST(AdminRoutesTest, HeadSendsHeadersWithoutBody) {
  RealEnv env;
  Probe probe;
  RunServed(env, AdminOnly(probe.Handlers()), {}, [&](Served& s) -> Task<void> {
    for (std::string path : {"/metrics", "/healthz", "/readyz"}) {
      Reply r = co_await s.client.Request("HEAD", path);
      CO_ASSERT_TRUE(!r.ec);
      EXPECT_EQ(r.status, 200) << path;
      EXPECT_TRUE(r.body.empty()) << path;
    }
    Reply head = co_await s.client.Request("HEAD", "/metrics");
    EXPECT_EQ(head.content_length, std::to_string(probe.metrics.size()));
    EXPECT_EQ(head.content_type, kPrometheusTextContentType);
    // Had the server sent a body after the HEAD reply, this GET would read it as garbage.
    Reply get = co_await s.client.Request("GET", "/metrics");
    CO_ASSERT_TRUE(!get.ec);
    EXPECT_EQ(get.status, 200);
    EXPECT_EQ(get.body, probe.metrics);
    probe.ready = false;
    Reply not_ready = co_await s.client.Request("HEAD", "/readyz");
    EXPECT_EQ(not_ready.status, 503);
    EXPECT_TRUE(not_ready.body.empty());
  });
}

TEST(AdminRoutesTest, UnknownPathIs404AndOtherMethodsAre405) {
  RealEnv env;
  Probe probe;
  RunServed(env, AdminOnly(probe.Handlers()), {}, [&](Served& s) -> Task<void> {
    // (method, target, extra headers, the status expected, the Allow header expected)
    const std::vector<std::tuple<std::string, std::string, std::string, int, std::string>> cases = {
        {"GET", "/", "", 404, ""},
        {"GET", "/metrics/extra", "", 404, ""},
        {"POST", "/metrics", "", 405, "GET, HEAD"},
        {"DELETE", "/healthz", "", 405, "GET, HEAD"},
        {"PUT", "/readyz", "Content-Length: 0\r\n", 405, "GET, HEAD"},
        // Errors above kept the connection: it still answers.
        {"GET", "/healthz", "", 200, ""},
    };
    for (const auto& [method, target, headers, status, allow] : cases) {
      Reply r = co_await s.client.Request(method, target, headers);
      EXPECT_EQ(r.status, status) << method << " " << target;
      if (!allow.empty()) {
        EXPECT_EQ(r.allow, allow) << method << " " << target;
      }
    }
    EXPECT_EQ(probe.metrics_calls, 0);  // the 405 on /metrics did not render
  });
}

TEST(AdminRoutesTest, PipelinedRequestsAreAnsweredInOrder) {
  RealEnv env;
  Probe probe;
  probe.ready = false;
  RunServed(env, AdminOnly(probe.Handlers()), {}, [&](Served& s) -> Task<void> {
    std::string both =
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
    CO_ASSERT_TRUE(!(co_await s.client.Send(both)));
    Reply first = co_await s.client.Read(false);
    Reply second = co_await s.client.Read(false);
    EXPECT_EQ(first.status, 200);
    EXPECT_EQ(second.status, 503);
  });
}

TEST(AdminRoutesTest, ConnectionCloseAndHttp10AreHonoured) {
  RealEnv env;
  Probe probe;
  RunServed(env, AdminOnly(probe.Handlers()), {}, [&](Served& s) -> Task<void> {
    co_await http_test::ExpectCloseAndHttp10Honoured(s, "/healthz");
  });
}

// ---- The routes on the node's client API listener (how serve uses them).

// Admin paths to the routes, everything else to a stand-in for the actor API.
ServerHandler SharedListenerHandler(const AdminRoutes* routes, int* api_calls) {
  return [routes, api_calls](ServerRequest request) {
    std::optional<ServerResponse> admin = routes->Handle(request);
    if (admin) return ReadyResponse(std::move(*admin));
    ++*api_calls;
    return ReadyResponse(TextResponse(200, "api:" + request.target + ":" + request.body));
  };
}

TEST(AdminRoutesTest, RoutesShareAListenerWithOtherHandlers) {
  RealEnv env;
  Probe probe;
  const AdminRoutes routes(probe.Handlers());
  int api_calls = 0;
  RunServed(env, SharedListenerHandler(&routes, &api_calls), {}, [&](Served& s) -> Task<void> {
    Reply r = co_await s.client.Request("GET", "/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, probe.metrics);
    EXPECT_EQ(r.Get("Cache-Control"), "no-store");
    // On the general listener a body is read, and the admin routes ignore it.
    r = co_await s.client.Request("GET", "/healthz", "", "ignored");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "ok\n");
    r = co_await s.client.Request("POST", "/readyz", "", "x");
    EXPECT_EQ(r.status, 405);
    r = co_await s.client.Request("PUT", "/v1/actors/t/c/n/x?q=1", "", "payload");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "api:/v1/actors/t/c/n/x?q=1:payload");
    r = co_await s.client.Request("GET", "/metricsx");
    EXPECT_EQ(r.body, "api:/metricsx:");
    EXPECT_EQ(api_calls, 2);
    EXPECT_EQ(probe.metrics_calls, 1);
  });
}

TEST(AdminRoutesTest, RoutesMatchOnlyTheirPaths) {
  EXPECT_TRUE(AdminRoutes::Matches("/metrics"));
  EXPECT_TRUE(AdminRoutes::Matches("/healthz?verbose=1"));
  EXPECT_TRUE(AdminRoutes::Matches("/readyz"));
  EXPECT_FALSE(AdminRoutes::Matches("/metrics/"));
  EXPECT_FALSE(AdminRoutes::Matches("/readyzz"));
  EXPECT_FALSE(AdminRoutes::Matches("metrics"));
  EXPECT_FALSE(AdminRoutes::Matches("/v1/actors/t/c/n/metrics"));
  Probe probe;
  const AdminRoutes routes(probe.Handlers());
  ServerRequest request;
  request.method = "GET";
  request.target = "/v1/actors/t/c/n";
  EXPECT_FALSE(routes.Handle(request).has_value());
  request.target = "/readyz";
  probe.ready = false;
  std::optional<ServerResponse> answer = routes.Handle(request);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 503);
  EXPECT_EQ(answer->body, probe.detail);
}

}  // namespace
}  // namespace wk
