#include "server/admin_http.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "env/real_env.h"
#include "net/http_server.h"
#include "net/http_test_client.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using http_test::net::error::connection_refused;
using http_test::error_code;
using http_test::Reply;
using http_test::TestClient;

// Handlers over test-owned flags (they live in the test coroutine's frame, which
// outlives the server it creates).
struct Probe {
  bool healthy = true;
  bool ready = true;
  std::string detail = "not ready: node lease not valid\n";
  std::string metrics = "# HELP wk_up Up.\n# TYPE wk_up gauge\nwk_up 1\n";
  int metrics_calls = 0;

  AdminHttpServer::Handlers Handlers() {
    AdminHttpServer::Handlers h;
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

std::unique_ptr<AdminHttpServer> StartOrFail(RealEnv& env, Probe& probe,
                                             AdminHttpServer::Limits limits = {}) {
  auto started = AdminHttpServer::Start(env, "127.0.0.1:0", probe.Handlers(), limits);
  if (!started.ok()) {
    ADD_FAILURE() << started.status().ToString();
    return nullptr;
  }
  return std::move(started).value();
}

// ---- Routes.

TEST(AdminHttpTest, MetricsRouteServesTheRegistryText) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    MetricsRegistry registry;
    registry.AddCounter("wk_scrapes_total", "Scrapes.").Inc(3);
    AdminHttpServer::Handlers handlers;
    handlers.metrics_text = [&registry] { return registry.RenderText(); };
    handlers.healthy = [] { return true; };
    handlers.ready = [] { return true; };
    auto started = AdminHttpServer::Start(e, "127.0.0.1:0", handlers);
    CO_ASSERT_TRUE(started.ok());
    std::unique_ptr<AdminHttpServer> server = std::move(started).value();
    EXPECT_NE(server->bound_port(), 0);
    EXPECT_EQ(server->listen_address(), "127.0.0.1:0");

    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    Reply r = co_await client.Request("GET", "/metrics");
    CO_ASSERT_TRUE(!r.ec);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(r.body, registry.RenderText());
    // A query string does not change the route.
    r = co_await client.Request("GET", "/metrics?name[]=wk_scrapes_total");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, registry.RenderText());
  }(env));
}

TEST(AdminHttpTest, HealthzFollowsHealthy) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    Reply r = co_await client.Request("GET", "/healthz");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "ok\n");
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8");
    probe.healthy = false;
    r = co_await client.Request("GET", "/healthz");
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.body, "unhealthy\n");
  }(env));
}

TEST(AdminHttpTest, ReadyzFlipsBetweenTwoRequestsOnOneKeepAliveConnection) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    Reply r = co_await client.Request("GET", "/readyz");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "ready\n");
    probe.ready = false;
    r = co_await client.Request("GET", "/readyz");
    CO_ASSERT_TRUE(!r.ec);  // the same connection carried both
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.body, "not ready: node lease not valid\n");
    EXPECT_EQ(server->open_connections(), 1u);
    // A detail without a final newline gets one; an empty one gets a default.
    probe.detail = "not ready: joining";
    r = co_await client.Request("GET", "/readyz");
    EXPECT_EQ(r.body, "not ready: joining\n");
    probe.detail.clear();
    r = co_await client.Request("GET", "/readyz");
    EXPECT_EQ(r.body, "not ready\n");
  }(env));
}

TEST(AdminHttpTest, HeadSendsHeadersWithoutBody) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    for (std::string path : {"/metrics", "/healthz", "/readyz"}) {
      Reply r = co_await client.Request("HEAD", path);
      CO_ASSERT_TRUE(!r.ec);
      EXPECT_EQ(r.status, 200) << path;
      EXPECT_TRUE(r.body.empty()) << path;
    }
    Reply head = co_await client.Request("HEAD", "/metrics");
    EXPECT_EQ(head.content_length, std::to_string(probe.metrics.size()));
    EXPECT_EQ(head.content_type, kPrometheusTextContentType);
    // Had the server sent a body after the HEAD reply, this GET would read it as garbage.
    Reply get = co_await client.Request("GET", "/metrics");
    CO_ASSERT_TRUE(!get.ec);
    EXPECT_EQ(get.status, 200);
    EXPECT_EQ(get.body, probe.metrics);
    probe.ready = false;
    Reply not_ready = co_await client.Request("HEAD", "/readyz");
    EXPECT_EQ(not_ready.status, 503);
    EXPECT_TRUE(not_ready.body.empty());
  }(env));
}

TEST(AdminHttpTest, UnknownPathIs404AndOtherMethodsAre405) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    Reply r = co_await client.Request("GET", "/");
    EXPECT_EQ(r.status, 404);
    r = co_await client.Request("GET", "/metrics/extra");
    EXPECT_EQ(r.status, 404);
    r = co_await client.Request("POST", "/metrics");
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.allow, "GET, HEAD");
    r = co_await client.Request("DELETE", "/healthz");
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.allow, "GET, HEAD");
    r = co_await client.Request("PUT", "/readyz", "Content-Length: 0\r\n");
    EXPECT_EQ(r.status, 405);
    // Errors above kept the connection: it still answers.
    r = co_await client.Request("GET", "/healthz");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(probe.metrics_calls, 0);  // the 405 on /metrics did not render
  }(env));
}

TEST(AdminHttpTest, PipelinedRequestsAreAnsweredInOrder) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    probe.ready = false;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    std::string both =
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
    CO_ASSERT_TRUE(!(co_await client.Send(both)));
    Reply first = co_await client.Read(false);
    Reply second = co_await client.Read(false);
    EXPECT_EQ(first.status, 200);
    EXPECT_EQ(second.status, 503);
  }(env));
}

TEST(AdminHttpTest, ConnectionCloseAndHttp10AreHonoured) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    Reply r = co_await client.Request("GET", "/healthz", "Connection: close\r\n");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.connection, "close");
    EXPECT_TRUE(co_await client.SeesClose(seconds(5)));

    TestClient old(e);
    CO_ASSERT_TRUE(!(co_await old.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await old.Send("GET /healthz HTTP/1.0\r\n\r\n")));
    r = co_await old.Read(false);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(co_await old.SeesClose(seconds(5)));
  }(env));
}

// ---- The routes on the node's one listener (how serve uses them).

// Admin paths to the routes, everything else to a stand-in for the actor API.
ServerHandler SharedListenerHandler(const AdminRoutes* routes, int* api_calls) {
  return [routes, api_calls](ServerRequest request) {
    std::optional<ServerResponse> admin = routes->Handle(request);
    if (admin) return ReadyResponse(std::move(*admin));
    ++*api_calls;
    return ReadyResponse(TextResponse(200, "api:" + request.target + ":" + request.body));
  };
}

TEST(AdminHttpTest, RoutesShareAListenerWithOtherHandlers) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    const AdminRoutes routes(probe.Handlers());
    int api_calls = 0;
    auto started = HttpServer::Start(e, "127.0.0.1:0", SharedListenerHandler(&routes, &api_calls));
    CO_ASSERT_TRUE(started.ok());
    std::unique_ptr<HttpServer> server = std::move(started).value();
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    Reply r = co_await client.Request("GET", "/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, probe.metrics);
    EXPECT_EQ(r.Get("Cache-Control"), "no-store");
    // On the general listener a body is read, and the admin routes ignore it.
    r = co_await client.Request("GET", "/healthz", "", "ignored");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "ok\n");
    r = co_await client.Request("POST", "/readyz", "", "x");
    EXPECT_EQ(r.status, 405);
    r = co_await client.Request("PUT", "/v1/actors/t/c/n/x?q=1", "", "payload");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "api:/v1/actors/t/c/n/x?q=1:payload");
    r = co_await client.Request("GET", "/metricsx");
    EXPECT_EQ(r.body, "api:/metricsx:");
    EXPECT_EQ(api_calls, 2);
    EXPECT_EQ(probe.metrics_calls, 1);
  }(env));
}

TEST(AdminHttpTest, RoutesMatchOnlyTheirPaths) {
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

// ---- Bounds.

TEST(AdminHttpTest, RequestBodyIsRefusedWith413AndTheConnectionCloses) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await client.Send("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")));
    Reply r = co_await client.Read(false);
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(probe.metrics_calls, 0);
    EXPECT_TRUE(co_await client.SeesClose(seconds(5)));

    TestClient chunked(e);
    CO_ASSERT_TRUE(!(co_await chunked.Connect(server->bound_port())));
    r = co_await chunked.Request("GET", "/healthz", "Transfer-Encoding: chunked\r\n");
    EXPECT_EQ(r.status, 413);
    EXPECT_TRUE(co_await chunked.SeesClose(seconds(5)));
  }(env));
}

TEST(AdminHttpTest, OversizedHeaderGets431AndTheConnectionCloses) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    // Just under the limit is fine.
    // (Owning arguments are built before the co_await, per the GCC 12 rule.)
    std::string just_under = "X-Pad: " + std::string(7 * 1024, 'a') + "\r\n";
    std::string too_big = "X-Pad: " + std::string(10 * 1024, 'a') + "\r\n";
    Reply r = co_await client.Request("GET", "/healthz", just_under);
    EXPECT_EQ(r.status, 200);
    r = co_await client.Request("GET", "/healthz", too_big);
    EXPECT_EQ(r.status, 431);
    EXPECT_TRUE(co_await client.SeesClose(seconds(5)));
  }(env));
}

TEST(AdminHttpTest, MalformedRequestGets400) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await client.Send("this is not http\r\n\r\n")));
    Reply r = co_await client.Read(false);
    EXPECT_EQ(r.status, 400);
    EXPECT_TRUE(co_await client.SeesClose(seconds(5)));
  }(env));
}

TEST(AdminHttpTest, ConnectionsBeyondTheLimitAreClosedAtOnce) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    AdminHttpServer::Limits limits;
    limits.max_connections = 2;
    auto server = StartOrFail(e, probe, limits);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient a(e), b(e), c(e);
    CO_ASSERT_TRUE(!(co_await a.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await b.Connect(server->bound_port())));
    // A request each proves both were accepted before the third connects.
    EXPECT_EQ((co_await a.Request("GET", "/healthz")).status, 200);
    EXPECT_EQ((co_await b.Request("GET", "/healthz")).status, 200);
    EXPECT_EQ(server->open_connections(), 2u);
    // The kernel completes the TCP handshake; the server then closes without reading.
    CO_ASSERT_TRUE(!(co_await c.Connect(server->bound_port())));
    EXPECT_TRUE(co_await c.SeesClose(seconds(5)));
    EXPECT_EQ(server->rejected_connections(), 1u);
    // The first two still work.
    EXPECT_EQ((co_await a.Request("GET", "/readyz")).status, 200);
    EXPECT_EQ((co_await b.Request("GET", "/readyz")).status, 200);
  }(env));
}

TEST(AdminHttpTest, IdleConnectionsAreClosedAfterTheTimeout) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    AdminHttpServer::Limits limits;
    limits.idle_timeout = milliseconds(200);
    auto server = StartOrFail(e, probe, limits);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient idle(e), slow(e);
    CO_ASSERT_TRUE(!(co_await idle.Connect(server->bound_port())));
    EXPECT_EQ((co_await idle.Request("GET", "/healthz")).status, 200);
    // A client that never finishes its header is cut off as well.
    CO_ASSERT_TRUE(!(co_await slow.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await slow.Send("GET /healthz HTTP/1.1\r\nHost:")));
    const MonoTime start = e.MonoNow();
    EXPECT_TRUE(co_await idle.SeesClose(seconds(5)));
    EXPECT_TRUE(co_await slow.SeesClose(seconds(5)));
    EXPECT_GE(e.MonoNow() - start, milliseconds(150));
    co_await e.SleepFor(milliseconds(20));  // let the sessions' last handlers run
    EXPECT_EQ(server->open_connections(), 0u);
  }(env));
}

// ---- Start and stop.

TEST(AdminHttpTest, BadAddressesAreInvalidArgumentsNamingTheAddress) {
  RealEnv env;
  Probe probe;
  for (std::string address : {"nope", "127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:-1",
                              "127.0.0.1:80x", "example.com:80", ":9100", "::1:80", "[::1]80",
                              "[::1", "300.1.1.1:80"}) {
    auto started = AdminHttpServer::Start(env, address, probe.Handlers());
    ASSERT_FALSE(started.ok()) << address;
    EXPECT_EQ(started.code(), Code::kInvalidArgument) << address;
    EXPECT_NE(started.status().message().find("'" + address + "'"), std::string::npos)
        << started.status().message();
    EXPECT_EQ(started.status().message().find('\n'), std::string::npos);
  }
}

TEST(AdminHttpTest, AddressInUseIsFatalAndNamesTheAddress) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto first = StartOrFail(e, probe);
    CO_ASSERT_TRUE(first != nullptr);
    const std::string address = "127.0.0.1:" + std::to_string(first->bound_port());
    auto second = AdminHttpServer::Start(e, address, probe.Handlers());
    CO_ASSERT_TRUE(!second.ok());
    EXPECT_EQ(second.code(), Code::kFatal);
    EXPECT_NE(second.status().message().find(address), std::string::npos) << second.status().message();
    EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status().message();
  }(env));
}

TEST(AdminHttpTest, LocalhostAndIpv6LoopbackWork) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto started = AdminHttpServer::Start(e, "localhost:0", probe.Handlers());
    CO_ASSERT_TRUE(started.ok());
    std::unique_ptr<AdminHttpServer> server = std::move(started).value();
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    EXPECT_EQ((co_await client.Request("GET", "/healthz")).status, 200);
    // [::1] may be missing in a container without IPv6; then binding fails kFatal.
    auto v6 = AdminHttpServer::Start(e, "[::1]:0", probe.Handlers());
    if (!v6.ok()) {
      EXPECT_EQ(v6.code(), Code::kFatal) << v6.status().ToString();
    }
  }(env));
}

TEST(AdminHttpTest, StopClosesConnectionsAndThenConnectFails) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Probe probe;
    auto server = StartOrFail(e, probe);
    CO_ASSERT_TRUE(server != nullptr);
    const std::uint16_t port = server->bound_port();
    TestClient open(e);
    CO_ASSERT_TRUE(!(co_await open.Connect(port)));
    EXPECT_EQ((co_await open.Request("GET", "/healthz")).status, 200);
    server->Stop();
    server->Stop();  // idempotent
    EXPECT_TRUE(co_await open.SeesClose(seconds(5)));
    TestClient late(e);
    const error_code ec = co_await late.Connect(port);
    EXPECT_EQ(ec, connection_refused) << ec.message();
    server.reset();
  }(env));
}

TEST(AdminHttpTest, DestroyingTheServerWithOpenConnectionsIsSafe) {
  // AddressSanitizer / LeakSanitizer (debug preset) check this one.
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    auto probe = std::make_unique<Probe>();
    auto server = StartOrFail(e, *probe);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient idle(e), partial(e), pending(e);
    CO_ASSERT_TRUE(!(co_await idle.Connect(server->bound_port())));
    EXPECT_EQ((co_await idle.Request("GET", "/metrics")).status, 200);
    CO_ASSERT_TRUE(!(co_await partial.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await partial.Send("GET /metrics HTTP/1.1\r\n")));
    // Connected, perhaps not yet accepted: its accept handler finds the server gone.
    CO_ASSERT_TRUE(!(co_await pending.Connect(server->bound_port())));
    server.reset();
    probe.reset();  // the handlers' captures die too: nothing may call them now
    EXPECT_TRUE(co_await idle.SeesClose(seconds(5)));
    EXPECT_TRUE(co_await partial.SeesClose(seconds(5)));
    EXPECT_TRUE(co_await pending.SeesClose(seconds(5)));
    co_await e.SleepFor(milliseconds(20));  // let the aborted handlers run
  }(env));
}

}  // namespace
}  // namespace wk
