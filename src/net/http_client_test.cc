#include "net/http_client.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>

#include "env/real_env.h"
#include "net/testing/scripted_http_server.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace http = boost::beast::http;

std::unique_ptr<HttpClient> MakeClient(RealEnv& env, const std::string& url,
                                       HttpClientOptions options = {}) {
  auto ep = ParseHttpEndpoint(url);
  WK_CHECK(ep.ok(), ep.status().ToString());
  auto client = HttpClient::Create(env, *ep, std::move(options));
  WK_CHECK(client.ok(), client.status().ToString());
  return std::move(client).value();
}

HttpRequest Get(std::string target) {
  HttpRequest r;
  r.method = http::verb::get;
  r.target = std::move(target);
  r.idempotent = true;
  return r;
}

HttpRequest Put(std::string target, std::string body) {
  HttpRequest r;
  r.method = http::verb::put;
  r.target = std::move(target);
  r.body = std::move(body);
  return r;
}

// Sends one request from inside the loop and returns the outcome.
HttpOutcome SendOne(RealEnv& env, HttpClient& client, HttpRequest req,
                    Duration timeout = seconds(5)) {
  auto main = [](RealEnv& e, HttpClient& c, HttpRequest r, Duration t) -> Task<HttpOutcome> {
    co_return co_await c.Send(std::move(r), e.MonoNow() + t);
  };
  return env.RunMain(main(env, client, std::move(req), timeout));
}

// A GET of `target` (/hang by default, which the script leaves unanswered) running as its
// own task, already received by the server; its outcome is set when the task ends.
struct Hanging {
  TaskHandle task;
  std::shared_ptr<HttpOutcome> outcome;
};
Task<Hanging> StartHangingGet(RealEnv& env, HttpClient& client, ScriptedHttpServer& server,
                              std::string target = "/hang", bool urgent = false) {
  Hanging h{{}, std::make_shared<HttpOutcome>()};
  const std::size_t received = server.received().size();
  HttpRequest req = Get(std::move(target));
  req.urgent = urgent;
  h.task = env.Spawn(
      [](RealEnv& e, HttpClient& c, HttpRequest r, std::shared_ptr<HttpOutcome> out) -> Task<void> {
        *out = co_await c.Send(std::move(r), e.MonoNow() + seconds(30));
      }(env, client, std::move(req), h.outcome),
      "hang");
  std::function<bool()> sent = [&server, received] { return server.received().size() == received + 1; };
  EXPECT_TRUE(co_await WaitUntil(env, sent));
  co_return h;
}

// A port on 127.0.0.1 where nothing listens (bound, then closed).
std::uint16_t DeadPort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

TEST(HttpClientTest, GetReturnsStatusHeadersAndBody) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/b/k").Respond(200, {{"ETag", "\"v1\""}}, "hello").Check([](auto& r) {
    EXPECT_EQ(r.query, "a=1");
    EXPECT_EQ(r.Header("user-agent"), "wasmkeep/0.1");
    EXPECT_FALSE(r.Header("host").empty());
    EXPECT_EQ(r.Header("x-custom"), "yes");
  });
  auto client = MakeClient(env, server.url());
  HttpRequest req = Get("/b/k?a=1");
  req.headers.emplace_back("X-Custom", "yes");
  HttpOutcome out = SendOne(env, *client, std::move(req));
  ASSERT_TRUE(out.ok()) << out.detail;
  EXPECT_EQ(out.response.status, 200);
  EXPECT_EQ(out.response.body, "hello");
  EXPECT_EQ(out.response.Header("etag"), "\"v1\"");
  EXPECT_EQ(out.response.Header("ETAG"), "\"v1\"");
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, SequentialRequestsReuseOneConnection) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("PUT", "/b/1").Respond(200);
  server.Expect("GET", "/b/2").Respond(200, {}, "x");
  server.Expect("HEAD", "/b/3").Respond(200, {{"Content-Length", "42"}});
  server.Expect("GET", "/b/4").Respond(404, {}, "missing");
  auto client = MakeClient(env, server.url());
  EXPECT_TRUE(SendOne(env, *client, Put("/b/1", "body")).ok());
  EXPECT_TRUE(SendOne(env, *client, Get("/b/2")).ok());
  HttpRequest head = Get("/b/3");
  head.method = http::verb::head;
  HttpOutcome h = SendOne(env, *client, head);
  ASSERT_TRUE(h.ok()) << h.detail;
  EXPECT_EQ(h.response.Header("content-length"), "42");
  EXPECT_EQ(h.response.body, "");
  HttpOutcome nf = SendOne(env, *client, Get("/b/4"));
  ASSERT_TRUE(nf.ok());
  EXPECT_EQ(nf.response.status, 404);
  EXPECT_EQ(server.connections_accepted(), 1);
  EXPECT_EQ(client->stats().connections_opened, 1u);
  EXPECT_EQ(client->stats().reused, 3u);
  EXPECT_EQ(client->stats().idle, 1);
  EXPECT_EQ(client->stats().in_use, 0);
  ASSERT_EQ(server.received().size(), 4u);
  EXPECT_EQ(server.received()[0].body, "body");
  EXPECT_EQ(server.received()[0].Header("content-length"), "4");
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, IdleConnectionsExpire) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/a").Respond(200).Times(2);
  HttpClientOptions options;
  options.max_idle = milliseconds(100);
  auto client = MakeClient(env, server.url(), options);
  EXPECT_TRUE(SendOne(env, *client, Get("/a")).ok());
  EXPECT_EQ(client->stats().idle, 1);
  // Past max_idle the reaper closes it (the server sees the close), and the next request
  // opens a new one.
  const MonoTime start = env.MonoNow();
  EXPECT_TRUE(env.RunMain(WaitUntil(env, [&] { return server.open_connections() == 0; })));
  EXPECT_GE(env.MonoNow() - start, milliseconds(90));
  EXPECT_EQ(client->stats().idle, 0);
  EXPECT_EQ(client->stats().stale_dropped, 1u);
  EXPECT_TRUE(SendOne(env, *client, Get("/a")).ok());
  EXPECT_EQ(server.connections_accepted(), 2);
  EXPECT_EQ(client->stats().reused, 0u);
}

TEST(HttpClientTest, PoolIsBoundedAndWaitersProceed) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/slow").Delay(milliseconds(30)).Respond(200, {}, "ok").Times(6);
  HttpClientOptions options;
  options.max_connections = 2;
  auto client = MakeClient(env, server.url(), options);
  auto main = [](RealEnv& e, HttpClient& c) -> Task<int> {
    std::vector<TaskHandle> tasks;
    auto oks = std::make_shared<int>(0);
    for (int i = 0; i < 6; ++i) {
      tasks.push_back(e.Spawn(
          [](RealEnv& en, HttpClient& cl, std::shared_ptr<int> n) -> Task<void> {
            HttpOutcome out = co_await cl.Send(Get("/slow"), en.MonoNow() + seconds(5));
            if (out.ok() && out.response.body == "ok") ++*n;
          }(e, c, oks),
          "get"));
    }
    for (auto& t : tasks) co_await t.Join();
    co_return *oks;
  };
  EXPECT_EQ(env.RunMain(main(env, *client)), 6);
  EXPECT_EQ(server.connections_accepted(), 2);
  EXPECT_EQ(client->stats().in_use, 0);
  EXPECT_EQ(client->stats().idle, 2);
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, WaitingForASlotTimesOutBeforeSending) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/hang").Hang();
  HttpClientOptions options;
  options.max_connections = 1;
  auto client = MakeClient(env, server.url(), options);
  auto main = [](RealEnv& e, HttpClient& c,
                 ScriptedHttpServer& s) -> Task<std::pair<HttpOutcome, HttpOutcome>> {
    Hanging first = co_await StartHangingGet(e, c, s);
    HttpOutcome second = co_await c.Send(Get("/never"), e.MonoNow() + milliseconds(50));
    first.task.Cancel();
    co_await first.task.Join();
    co_return std::make_pair(*first.outcome, second);
  };
  auto [first, second] = env.RunMain(main(env, *client, server));
  EXPECT_EQ(second.failure, HttpFailure::kTimeout) << second.detail;
  EXPECT_FALSE(second.request_sent);
  EXPECT_NE(second.detail.find("free connection"), std::string::npos) << second.detail;
  EXPECT_EQ(first.failure, HttpFailure::kCancelled) << first.detail;
  EXPECT_TRUE(first.request_sent);
  EXPECT_EQ(server.received().size(), 1u);
  EXPECT_EQ(client->stats().in_use, 0);
  EXPECT_EQ(client->stats().idle, 0);  // the timed-out connection was not pooled
}

HttpRequest UrgentGet(std::string target) {
  HttpRequest r = Get(std::move(target));
  r.urgent = true;
  return r;
}

// The reserved share ("Lanes", http_client.h): with every connection other requests may
// take in use (hanging), another such request waits and times out before sending, while an
// urgent one gets a connection at once. Without the reservation both would wait.
TEST(HttpClientTest, AnUrgentRequestGetsAReservedConnectionWhileBulkRequestsFillTheRest) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/hang1").Hang();
  server.Expect("GET", "/hang2").Hang();
  server.Expect("GET", "/lease").Respond(200, {}, "ok");
  HttpClientOptions options;
  options.max_connections = 3;
  options.reserved_urgent_connections = 1;
  auto client = MakeClient(env, server.url(), options);
  auto main = [](RealEnv& e, HttpClient& c,
                 ScriptedHttpServer& s) -> Task<std::pair<HttpOutcome, HttpOutcome>> {
    Hanging h1 = co_await StartHangingGet(e, c, s, "/hang1");
    Hanging h2 = co_await StartHangingGet(e, c, s, "/hang2");
    HttpOutcome bulk = co_await c.Send(Get("/segment"), e.MonoNow() + milliseconds(100));
    HttpOutcome urgent = co_await c.Send(UrgentGet("/lease"), e.MonoNow() + seconds(5));
    EXPECT_EQ(c.stats().other_waits, 1u);
    EXPECT_EQ(c.stats().other_wait_timeouts, 1u);
    EXPECT_EQ(c.stats().urgent_waits, 0u);
    h1.task.Cancel();
    h2.task.Cancel();
    co_await h1.task.Join();
    co_await h2.task.Join();
    co_return std::make_pair(bulk, urgent);
  };
  auto [bulk, urgent] = env.RunMain(main(env, *client, server));
  EXPECT_EQ(bulk.failure, HttpFailure::kTimeout) << bulk.detail;
  EXPECT_FALSE(bulk.request_sent);
  EXPECT_NE(bulk.detail.find("free connection"), std::string::npos) << bulk.detail;
  ASSERT_TRUE(urgent.ok()) << urgent.detail;
  EXPECT_EQ(urgent.response.body, "ok");
  EXPECT_EQ(server.connections_accepted(), 3);
  server.VerifyAllConsumed();
}

// A released connection goes to the oldest urgent waiter before an older bulk waiter, and a
// bulk waiter gets one only once bulk requests hold fewer than their share.
TEST(HttpClientTest, AReleasedConnectionGoesToTheUrgentWaiterFirstAndBulkKeepsToItsShare) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/hang1").Hang();
  server.Expect("GET", "/hang2").Hang();
  server.Expect("GET", "/hang-urgent").Hang();
  server.Expect("GET", "/urgent").Respond(200, {}, "u");
  server.Expect("GET", "/bulk").Respond(200, {}, "b");
  HttpClientOptions options;
  options.max_connections = 3;
  options.reserved_urgent_connections = 1;
  auto client = MakeClient(env, server.url(), options);
  auto main = [](RealEnv& e, HttpClient& c, ScriptedHttpServer& s) -> Task<std::vector<std::string>> {
    Hanging h1 = co_await StartHangingGet(e, c, s, "/hang1");
    Hanging h2 = co_await StartHangingGet(e, c, s, "/hang2");
    Hanging hu = co_await StartHangingGet(e, c, s, "/hang-urgent", /*urgent=*/true);
    auto order = std::make_shared<std::vector<std::string>>();
    auto send = [](RealEnv& en, HttpClient& cl, HttpRequest r, std::shared_ptr<std::vector<std::string>> o) -> Task<void> {
      HttpOutcome out = co_await cl.Send(std::move(r), en.MonoNow() + seconds(10));
      o->push_back(out.ok() ? out.response.body : "failed: " + out.detail);
    };
    // The bulk request queues first, the urgent one second.
    TaskHandle bulk = e.Spawn(send(e, c, Get("/bulk"), order), "bulk");
    std::function<bool()> bulk_waits = [&c] { return c.stats().other_waits == 1; };
    EXPECT_TRUE(co_await WaitUntil(e, bulk_waits));
    TaskHandle urgent = e.Spawn(send(e, c, UrgentGet("/urgent"), order), "urgent");
    std::function<bool()> urgent_waits = [&c] { return c.stats().urgent_waits == 1; };
    EXPECT_TRUE(co_await WaitUntil(e, urgent_waits));
    // The urgent hanging request ends: its slot goes to the urgent waiter, though the bulk
    // one waited longer.
    hu.task.Cancel();
    co_await urgent.Join();
    EXPECT_EQ(*order, std::vector<std::string>{"u"});
    // The urgent request is done, but the two hanging bulk requests still hold the bulk
    // share: the bulk waiter keeps waiting.
    co_await e.SleepFor(milliseconds(50));
    EXPECT_EQ(order->size(), 1u);
    h1.task.Cancel();
    co_await bulk.Join();
    h2.task.Cancel();
    co_await h1.task.Join();
    co_await h2.task.Join();
    co_await hu.task.Join();
    co_return *order;
  };
  EXPECT_EQ(env.RunMain(main(env, *client, server)), (std::vector<std::string>{"u", "b"}));
  EXPECT_EQ(client->stats().in_use, 0);
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, LostReplyIsConnectionLostAfterSending) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("PUT", "/b/k").DropAfterRequest();
  auto client = MakeClient(env, server.url());
  HttpOutcome out = SendOne(env, *client, Put("/b/k", "v"));
  EXPECT_EQ(out.failure, HttpFailure::kConnectionLost) << out.detail;
  EXPECT_TRUE(out.request_sent);
  EXPECT_EQ(server.received().size(), 1u);
  EXPECT_EQ(client->stats().idle, 0);
}

TEST(HttpClientTest, ConnectionRefusedIsNotSent) {
  RealEnv env;
  auto client = MakeClient(env, "http://127.0.0.1:" + std::to_string(DeadPort()));
  HttpOutcome out = SendOne(env, *client, Put("/b/k", "v"));
  EXPECT_EQ(out.failure, HttpFailure::kConnectFailed) << out.detail;
  EXPECT_FALSE(out.request_sent);
  EXPECT_NE(out.detail.find("refused"), std::string::npos) << out.detail;
  EXPECT_EQ(client->stats().in_use, 0);
}

TEST(HttpClientTest, UnknownHostIsNotSent) {
  RealEnv env;
  auto client = MakeClient(env, "http://no-such-host.invalid:9");
  HttpOutcome out = SendOne(env, *client, Get("/"));
  // NXDOMAIN gives kResolveNotFound; a machine with no resolver at all answers "try
  // again" (kResolveFailed). Both must be "not sent".
  EXPECT_TRUE(out.failure == HttpFailure::kResolveNotFound ||
              out.failure == HttpFailure::kResolveFailed)
      << HttpFailureName(out.failure) << ": " << out.detail;
  EXPECT_FALSE(out.request_sent);
  EXPECT_NE(out.detail.find("no-such-host.invalid"), std::string::npos);
}

TEST(HttpClientTest, CancellationAbortsAndDoesNotPoolTheConnection) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/hang").Hang();
  server.Expect("GET", "/after").Respond(200);
  auto client = MakeClient(env, server.url());
  auto main = [](RealEnv& e, HttpClient& c,
                 ScriptedHttpServer& s) -> Task<std::pair<HttpOutcome, HttpOutcome>> {
    Hanging first = co_await StartHangingGet(e, c, s);
    const MonoTime cancelled_at = e.MonoNow();
    first.task.Cancel();
    co_await first.task.Join();
    EXPECT_LT(e.MonoNow() - cancelled_at, seconds(1));  // not the 30 s deadline
    EXPECT_EQ(c.stats().in_use, 0);
    EXPECT_EQ(c.stats().idle, 0);
    HttpOutcome second = co_await c.Send(Get("/after"), e.MonoNow() + seconds(5));
    co_return std::make_pair(*first.outcome, second);
  };
  auto [first, second] = env.RunMain(main(env, *client, server));
  EXPECT_EQ(first.failure, HttpFailure::kCancelled) << first.detail;
  EXPECT_TRUE(first.request_sent);
  EXPECT_TRUE(second.ok()) << second.detail;
  EXPECT_EQ(server.connections_accepted(), 2);
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, DestroyingTheClientWithRequestsInFlight) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/hang").Hang().Times(2);
  HttpClientOptions options;
  options.max_connections = 2;
  auto client = MakeClient(env, server.url(), options);
  auto outcomes = std::make_shared<std::vector<HttpOutcome>>();
  auto main = [](RealEnv& e, std::unique_ptr<HttpClient>& c, ScriptedHttpServer& s,
                 std::shared_ptr<std::vector<HttpOutcome>> outs) -> Task<void> {
    std::vector<TaskHandle> tasks;
    for (int i = 0; i < 3; ++i) {  // two in flight, one waiting for a slot
      tasks.push_back(e.Spawn(
          [](Task<HttpOutcome> send, std::shared_ptr<std::vector<HttpOutcome>> o) -> Task<void> {
            o->push_back(co_await std::move(send));
          }(c->Send(Get("/hang"), e.MonoNow() + seconds(30)), outs),
          "inflight"));
    }
    std::function<bool()> both_sent = [&s] { return s.received().size() == 2; };
    EXPECT_TRUE(co_await WaitUntil(e, both_sent));
    c.reset();  // the tasks still hold Send's Task; it must not touch the dead client
    for (auto& t : tasks) co_await t.Join();
  };
  env.RunMain(main(env, client, server, outcomes));
  ASSERT_EQ(outcomes->size(), 3u);
  int sent = 0;
  for (const auto& o : *outcomes) {
    EXPECT_EQ(o.failure, HttpFailure::kShutdown) << o.detail;
    sent += o.request_sent ? 1 : 0;
  }
  EXPECT_EQ(sent, 2);
}

TEST(HttpClientTest, DeadPooledConnectionIsReplacedForIdempotentRequestsOnly) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  // Each first request's connection is closed by the server right after its reply.
  server.Expect("GET", "/1").Respond(200);
  server.ExpectCloseBeforeRead();
  server.Expect("GET", "/2").Respond(200, {}, "second");
  server.ExpectCloseBeforeRead();
  HttpClientOptions options;
  options.peek_idle_connections = false;  // reach the re-send path deterministically
  auto client = MakeClient(env, server.url(), options);
  ASSERT_TRUE(SendOne(env, *client, Get("/1")).ok());
  // Let the server close it, then reuse the dead connection.
  ASSERT_TRUE(env.RunMain(WaitUntil(env, [&] { return server.open_connections() == 0; })));
  HttpOutcome got = SendOne(env, *client, Get("/2"));
  ASSERT_TRUE(got.ok()) << got.detail;
  EXPECT_EQ(got.response.body, "second");
  EXPECT_EQ(client->stats().stale_resends, 1u);

  // A PUT on the next dead connection is not re-sent: the caller learns "unknown".
  ASSERT_TRUE(env.RunMain(WaitUntil(env, [&] { return server.open_connections() == 0; })));
  HttpOutcome put = SendOne(env, *client, Put("/3", "v"));
  EXPECT_EQ(put.failure, HttpFailure::kConnectionLost) << put.detail;
  EXPECT_TRUE(put.request_sent);
  EXPECT_EQ(client->stats().stale_resends, 1u);
  EXPECT_EQ(server.received().size(), 2u);  // the PUT never reached the script
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, PeekDetectsAClosedIdleConnection) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/1").Respond(200);
  server.ExpectCloseBeforeRead();
  server.Expect("PUT", "/2").Respond(200);
  auto client = MakeClient(env, server.url());
  ASSERT_TRUE(SendOne(env, *client, Get("/1")).ok());
  ASSERT_TRUE(env.RunMain(WaitUntil(env, [&] { return server.open_connections() == 0; })));
  // Even a PUT is safe: the dead connection is noticed before anything is written.
  HttpOutcome put = SendOne(env, *client, Put("/2", "v"));
  EXPECT_TRUE(put.ok()) << put.detail;
  EXPECT_EQ(client->stats().stale_dropped, 1u);
  EXPECT_EQ(client->stats().stale_resends, 0u);
  EXPECT_EQ(server.connections_accepted(), 2);
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, OversizedReplyIsRejected) {
  RealEnv env;
  ScriptedHttpServer server(env.context());
  server.Expect("GET", "/big").Respond(200, {}, std::string(100, 'x'));
  HttpClientOptions options;
  options.max_response_body_bytes = 10;
  auto client = MakeClient(env, server.url(), options);
  HttpOutcome out = SendOne(env, *client, Get("/big"));
  EXPECT_EQ(out.failure, HttpFailure::kResponseTooLarge) << out.detail;
  EXPECT_EQ(client->stats().idle, 0);
}

TEST(HttpClientTest, TlsWithATrustedSelfSignedCertificate) {
  RealEnv env;
  TestCertificate cert = MakeSelfSignedCertificate("127.0.0.1");
  ScriptedHttpServer server(env.context(), {cert.cert_pem, cert.key_pem});
  server.Expect("PUT", "/b/k").Respond(200, {{"ETag", "\"e\""}}).Check([](auto& r) {
    EXPECT_EQ(r.body, "secret body");
  });
  server.Expect("GET", "/b/k").Respond(200, {}, "tls ok");
  ASSERT_EQ(server.url().substr(0, 8), "https://");
  HttpClientOptions options;
  options.extra_ca_pem = cert.cert_pem;
  auto client = MakeClient(env, server.url(), options);
  HttpOutcome put = SendOne(env, *client, Put("/b/k", "secret body"));
  ASSERT_TRUE(put.ok()) << put.detail;
  HttpOutcome get = SendOne(env, *client, Get("/b/k"));
  ASSERT_TRUE(get.ok()) << get.detail;
  EXPECT_EQ(get.response.body, "tls ok");
  EXPECT_EQ(server.connections_accepted(), 1);  // keep-alive over TLS too
  server.VerifyAllConsumed();
}

TEST(HttpClientTest, TlsWithAnUntrustedCertificateFailsVerification) {
  RealEnv env;
  TestCertificate cert = MakeSelfSignedCertificate("127.0.0.1");
  ScriptedHttpServer server(env.context(), {cert.cert_pem, cert.key_pem});
  auto client = MakeClient(env, server.url());  // system CAs only
  HttpOutcome out = SendOne(env, *client, Put("/b/k", "v"));
  EXPECT_EQ(out.failure, HttpFailure::kTlsVerifyFailed) << out.detail;
  EXPECT_FALSE(out.request_sent);
  EXPECT_TRUE(server.received().empty());
}

TEST(HttpClientTest, TlsWithTheWrongHostNameFailsVerification) {
  RealEnv env;
  TestCertificate cert = MakeSelfSignedCertificate("other.example");  // not 127.0.0.1
  ScriptedHttpServer server(env.context(), {cert.cert_pem, cert.key_pem});
  HttpClientOptions options;
  options.extra_ca_pem = cert.cert_pem;
  auto client = MakeClient(env, server.url(), options);
  HttpOutcome out = SendOne(env, *client, Get("/"));
  EXPECT_EQ(out.failure, HttpFailure::kTlsVerifyFailed) << out.detail;
  EXPECT_FALSE(out.request_sent);
}

TEST(HttpClientTest, RejectsBadOptions) {
  RealEnv env;
  auto ep = ParseHttpEndpoint("https://127.0.0.1:1");
  ASSERT_TRUE(ep.ok());
  HttpClientOptions zero;
  zero.max_connections = 0;
  EXPECT_EQ(HttpClient::Create(env, *ep, zero).code(), Code::kInvalidArgument);
  HttpClientOptions all_reserved;
  all_reserved.max_connections = 4;
  all_reserved.reserved_urgent_connections = 4;
  auto refused = HttpClient::Create(env, *ep, all_reserved);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().ToString().find("reserved_urgent_connections"), std::string::npos);
  HttpClientOptions bad_ca;
  bad_ca.extra_ca_pem = "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n";
  EXPECT_EQ(HttpClient::Create(env, *ep, bad_ca).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace wk
