#include "net/http_server.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "env/real_env.h"
#include "net/testing/http_test_client.h"

namespace wk {
namespace {

using http_test::error_code;
using http_test::Reply;
using http_test::RunServed;
using http_test::StartOrFail;
using http_test::Served;
using http_test::TestClient;
using std::chrono::milliseconds;
using std::chrono::seconds;

// What the test handlers saw. Lives in the test's frame, which outlives the server and
// (the tests wait for them) every handler task.
struct Calls {
  std::vector<ServerRequest> requests;
  std::vector<std::string> events;  // "start /x", "end /x"
  int started = 0;
  int finished = 0;
  int in_flight = 0;
  int max_in_flight = 0;
};

// Answers 200 "echo:<body>" at once and records the request.
ServerHandler EchoHandler(Calls* calls) {
  return [calls](ServerRequest request) {
    calls->requests.push_back(request);
    ++calls->started;
    ++calls->finished;
    ServerResponse response = TextResponse(200, "echo:" + request.body);
    return ReadyResponse(std::move(response));
  };
}

// Sleeps `delay` (or the milliseconds in a "?ms=N" query), then answers 200 with the
// target as the body.
Task<ServerResponse> SlowAnswer(Env* env, Calls* calls, Duration delay, ServerRequest request) {
  const std::size_t query = request.target.find("?ms=");
  if (query != std::string::npos) delay = milliseconds(std::stoi(request.target.substr(query + 4)));
  const std::string path = request.target.substr(0, query);
  calls->events.push_back("start " + path);
  ++calls->started;
  calls->max_in_flight = std::max(calls->max_in_flight, ++calls->in_flight);
  co_await env->SleepFor(delay);
  --calls->in_flight;
  ++calls->finished;
  calls->events.push_back("end " + path);
  co_return TextResponse(200, path);
}

ServerHandler SlowHandler(Env* env, Calls* calls, Duration delay) {
  return [env, calls, delay](ServerRequest request) {
    return SlowAnswer(env, calls, delay, std::move(request));
  };
}

// Answers with the response the test sets.
ServerHandler FixedHandler(ServerResponse* response) {
  return [response](ServerRequest) { return ReadyResponse(*response); };
}

// Answers 200 "ok\n" to every request.
ServerHandler OkHandler() {
  return [](ServerRequest) { return ReadyResponse(TextResponse(200, "ok\n")); };
}

// The default limits but for the body's.
HttpServerLimits MaxBody(std::size_t bytes) {
  HttpServerLimits limits;
  limits.max_body_bytes = bytes;
  return limits;
}

// Waits (bounded: polls every 10 ms) until cond holds; returns whether it did.
Task<bool> WaitFor(Env* env, std::function<bool()> cond, int polls = 500) {
  for (int i = 0; i < polls; ++i) {
    if (cond()) co_return true;
    co_await env->SleepFor(milliseconds(10));
  }
  co_return cond();
}

// ---- Requests and responses.

TEST(HttpServerTest, RoundTripCarriesMethodTargetHeadersBodyAndRemote) {
  RealEnv env;
  Calls calls;
  ServerHandler handler = [&calls](ServerRequest request) {
    calls.requests.push_back(request);
    ServerResponse response;
    response.status = 201;
    response.headers = {{"X-Reply", "yes"}, {"x-lower", "kept as sent"}, {"Content-Type", "application/json"}};
    response.body = "{\"got\":\"" + request.body + "\"}";
    return ReadyResponse(std::move(response));
  };
  RunServed(env, handler, {}, [&](Served& s) -> Task<void> {
    Reply r = co_await s.client.Request("POST", "/v1/actors/t/c/n/x?y=1", "X-Custom: A\r\nx-other: b\r\n", "hello");
    CO_ASSERT_TRUE(!r.ec);
    EXPECT_EQ(r.status, 201);
    EXPECT_EQ(r.Get("X-Reply"), "yes");
    EXPECT_EQ(r.Get("X-Lower"), "kept as sent");
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_EQ(r.body, "{\"got\":\"hello\"}");
    EXPECT_EQ(r.content_length, std::to_string(r.body.size()));

    CO_ASSERT_TRUE(calls.requests.size() == 1u);
    const ServerRequest& got = calls.requests[0];
    EXPECT_EQ(got.method, "POST");
    EXPECT_EQ(got.target, "/v1/actors/t/c/n/x?y=1");
    EXPECT_EQ(got.body, "hello");
    const ServerHeaders expected = {
        {"Host", "127.0.0.1"}, {"X-Custom", "A"}, {"x-other", "b"}, {"Content-Length", "5"}};
    EXPECT_EQ(got.headers, expected);
    EXPECT_EQ(got.Header("x-custom"), "A");
    EXPECT_EQ(got.Header("X-OTHER"), "b");
    EXPECT_EQ(got.Header("missing"), std::nullopt);
    EXPECT_TRUE(got.remote.starts_with("127.0.0.1:")) << got.remote;
    EXPECT_NE(got.remote, "127.0.0.1:" + std::to_string(s.server->bound_port()));

    // An unknown method is passed on as sent.
    r = co_await s.client.Request("PURGE", "/x");
    EXPECT_EQ(r.status, 201);
    CO_ASSERT_TRUE(calls.requests.size() == 2u);
    EXPECT_EQ(calls.requests[1].method, "PURGE");
    EXPECT_EQ(calls.requests[1].body, "");
  });
}

TEST(HttpServerTest, ManySlowHandlersRunConcurrentlyOnSeparateConnections) {
  RealEnv env;
  Calls calls;
  constexpr int kClients = 24;
  constexpr Duration kDelay = milliseconds(400);
  RunServed(env, SlowHandler(&env, &calls, kDelay), {}, [&](Served& s) -> Task<void> {
    std::vector<std::unique_ptr<TestClient>> clients;
    for (int i = 1; i < kClients; ++i) clients.push_back(co_await s.Connect());
    const MonoTime start = env.MonoNow();
    for (int i = 0; i < kClients; ++i) {
      TestClient& c = i == 0 ? s.client : *clients[i - 1];
      CO_ASSERT_TRUE(!(co_await c.Send("GET /c" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n")));
    }
    for (int i = 0; i < kClients; ++i) {
      TestClient& c = i == 0 ? s.client : *clients[i - 1];
      Reply r = co_await c.Read(false);
      CO_ASSERT_TRUE(!r.ec);
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.body, "/c" + std::to_string(i));
    }
    // Serially they would take kClients * 400 ms.
    EXPECT_LT(env.MonoNow() - start, kDelay * 4);
    EXPECT_EQ(calls.max_in_flight, kClients);
    EXPECT_EQ(s.server->open_connections(), static_cast<std::size_t>(kClients));
  });
}

TEST(HttpServerTest, PipelinedRequestsAreHandledOneAtATimeAndAnsweredInOrder) {
  RealEnv env;
  Calls calls;
  RunServed(env, SlowHandler(&env, &calls, milliseconds(0)), {}, [&](Served& s) -> Task<void> {
    // The first is the slowest: answering in completion order would put it last.
    std::string three =
        "GET /first?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n"
        "POST /second?ms=10 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        "GET /third?ms=0 HTTP/1.1\r\nHost: x\r\n\r\n";
    CO_ASSERT_TRUE(!(co_await s.client.Send(three)));
    Reply first = co_await s.client.Read(false);
    Reply second = co_await s.client.Read(false);
    Reply third = co_await s.client.Read(false);
    EXPECT_EQ(first.body, "/first");
    EXPECT_EQ(second.body, "/second");
    EXPECT_EQ(third.body, "/third");
    const std::vector<std::string> expected = {"start /first",  "end /first",  "start /second",
                                               "end /second",   "start /third", "end /third"};
    EXPECT_EQ(calls.events, expected);
    EXPECT_EQ(calls.max_in_flight, 1);
  });
}

TEST(HttpServerTest, KeepAliveReusesOneConnection) {
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), {}, [&](Served& s) -> Task<void> {
    for (int i = 0; i < 5; ++i) {
      std::string body = "n" + std::to_string(i);
      Reply r = co_await s.client.Request("POST", "/x", "", body);
      CO_ASSERT_TRUE(!r.ec);
      EXPECT_EQ(r.body, "echo:" + body);
      EXPECT_NE(r.connection, "close");
    }
    EXPECT_EQ(s.server->open_connections(), 1u);
    CO_ASSERT_TRUE(calls.requests.size() == 5u);
    for (const ServerRequest& request : calls.requests) EXPECT_EQ(request.remote, calls.requests[0].remote);
  });
}

TEST(HttpServerTest, ConnectionCloseAndHttp10AreHonoured) {
  RealEnv env;
  ServerResponse closing = TextResponse(200, "bye\n");
  closing.headers.emplace_back("Connection", "Close");
  ServerHandler handler = [&closing](ServerRequest request) {
    return ReadyResponse(request.target == "/handler-closes" ? closing : TextResponse(200, "ok\n"));
  };
  RunServed(env, handler, {}, [&](Served& s) -> Task<void> {
    co_await http_test::ExpectCloseAndHttp10Honoured(s, "/x");

    // HTTP/1.0 with keep-alive stays open.
    auto old_keep = co_await s.Connect();
    for (int i = 0; i < 2; ++i) {
      CO_ASSERT_TRUE(!(co_await old_keep->Send("GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")));
      Reply r = co_await old_keep->Read(false);
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.connection, "keep-alive");
    }

    // The handler may close: its Connection header is not passed on as is.
    auto handler_closes = co_await s.Connect();
    Reply r = co_await handler_closes->Request("GET", "/handler-closes");
    EXPECT_EQ(r.body, "bye\n");
    EXPECT_EQ(r.connection, "close");
    EXPECT_TRUE(co_await handler_closes->SeesClose(seconds(5)));
  });
}

TEST(HttpServerTest, HeadSendsHeadersWithoutBody) {
  RealEnv env;
  ServerResponse response = TextResponse(200, "twelve bytes");
  RunServed(env, FixedHandler(&response), {}, [&](Served& s) -> Task<void> {
    Reply head = co_await s.client.Request("HEAD", "/x");
    CO_ASSERT_TRUE(!head.ec);
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.content_length, "12");
    EXPECT_TRUE(head.body.empty());
    // Had the server sent a body after the HEAD reply, this GET would read it as garbage.
    Reply get = co_await s.client.Request("GET", "/x");
    CO_ASSERT_TRUE(!get.ec);
    EXPECT_EQ(get.body, "twelve bytes");
    // A HEAD answer without a body keeps the handler's Content-Length.
    response = TextResponse(200, "");
    response.headers.emplace_back("Content-Length", "4096");
    head = co_await s.client.Request("HEAD", "/x");
    EXPECT_EQ(head.content_length, "4096");
    // Not for GET: there the body's size is the truth.
    get = co_await s.client.Request("GET", "/x");
    CO_ASSERT_TRUE(!get.ec);
    EXPECT_EQ(get.content_length, "0");
    EXPECT_EQ(s.server->open_connections(), 1u);
  });
}

TEST(HttpServerTest, ResponseFramingIsTheServers) {
  RealEnv env;
  ServerResponse response;
  RunServed(env, FixedHandler(&response), {}, [&](Served& s) -> Task<void> {
    // The handler's framing headers are replaced by the server's.
    response = TextResponse(200, "abc");
    response.headers.emplace_back("Content-Length", "999");
    response.headers.emplace_back("Transfer-Encoding", "chunked");
    Reply r = co_await s.client.Request("GET", "/x");
    CO_ASSERT_TRUE(!r.ec);
    EXPECT_EQ(r.content_length, "3");
    EXPECT_FALSE(r.Has("Transfer-Encoding"));
    EXPECT_EQ(r.body, "abc");

    // 204: no body, no Content-Length.
    response = ServerResponse{};
    response.status = 204;
    response.body = "dropped";
    r = co_await s.client.Request("DELETE", "/x");
    CO_ASSERT_TRUE(!r.ec);
    EXPECT_EQ(r.status, 204);
    EXPECT_FALSE(r.Has("Content-Length"));

    // What would break the framing is not sent: 500 instead, and the connection stays.
    response = TextResponse(200, "x");
    response.headers.emplace_back("X-Split", "a\r\nSet-Cookie: evil=1");
    r = co_await s.client.Request("GET", "/x");
    CO_ASSERT_TRUE(!r.ec);
    EXPECT_EQ(r.status, 500);
    EXPECT_FALSE(r.Has("Set-Cookie"));
    EXPECT_FALSE(r.Has("X-Split"));
    response = TextResponse(200, "x");
    response.headers.emplace_back("Bad Name", "v");
    r = co_await s.client.Request("GET", "/x");
    EXPECT_EQ(r.status, 500);
    for (int status : {0, 100, 101, 199, 600}) {
      response = TextResponse(status, "x");
      r = co_await s.client.Request("GET", "/x");
      EXPECT_EQ(r.status, 500) << status;
    }
    response = TextResponse(599, "x");
    r = co_await s.client.Request("GET", "/x");
    EXPECT_EQ(r.status, 599);
    EXPECT_EQ(s.server->open_connections(), 1u);
  });
}

// ---- Request bodies.

TEST(HttpServerTest, ContentLengthOverTheLimitIs413WithoutReadingTheBody) {
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), MaxBody(1000), [&](Served& s) -> Task<void> {
    // Exactly the limit is accepted.
    std::string body(1000, 'b');
    Reply r = co_await s.client.Request("PUT", "/x", "", body);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "echo:" + body);
    EXPECT_EQ(calls.started, 1);

    // One byte over: answered before a byte of the body is sent.
    Served::Exchange over = co_await s.SendOnNewConnection("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n");
    EXPECT_EQ(over.reply.status, 413);
    EXPECT_EQ(over.reply.connection, "close");
    EXPECT_TRUE(co_await over.client->SeesClose(seconds(5)));
    EXPECT_EQ(calls.started, 1);  // the handler was not called

    // A Content-Length far beyond any memory is refused the same way.
    Served::Exchange huge =
        co_await s.SendOnNewConnection("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551615\r\n\r\n");
    EXPECT_EQ(huge.reply.status, 413);
    EXPECT_EQ(calls.started, 1);
  });
}

TEST(HttpServerTest, DefaultBodyLimitIsOneMebibytePlus64KiB) {
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), {}, [&](Served& s) -> Task<void> {
    std::string body(1024 * 1024 + 64 * 1024, 'm');
    Reply r = co_await s.client.Request("POST", "/x", "", body);
    CO_ASSERT_TRUE(!r.ec);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body.size(), body.size() + 5);
    std::string header = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size() + 1) + "\r\n\r\n";
    Served::Exchange over = co_await s.SendOnNewConnection(header);
    EXPECT_EQ(over.reply.status, 413);
    EXPECT_EQ(calls.started, 1);
  });
}

TEST(HttpServerTest, ChunkedBodiesAreDechunkedUpToTheLimit) {
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), MaxBody(16), [&](Served& s) -> Task<void> {
    CO_ASSERT_TRUE(!(co_await s.client.Send(
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")));
    Reply r = co_await s.client.Read(false);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "echo:hello world");
    CO_ASSERT_TRUE(calls.requests.size() == 1u);
    EXPECT_EQ(calls.requests[0].Header("x-trailer"), std::nullopt) << "trailer fields are dropped";
    // The connection carries on after a chunked body.
    r = co_await s.client.Request("POST", "/x", "", "again");
    EXPECT_EQ(r.body, "echo:again");

    // 17 bytes in chunks: 413 once the limit is passed, and the connection closes.
    Served::Exchange over = co_await s.SendOnNewConnection(
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "8\r\n12345678\r\n9\r\n123456789\r\n0\r\n\r\n");
    EXPECT_EQ(over.reply.status, 413);
    EXPECT_TRUE(co_await over.client->SeesClose(seconds(5)));
    EXPECT_EQ(calls.started, 2);
  });
}

TEST(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), MaxBody(100), [&](Served& s) -> Task<void> {
    CO_ASSERT_TRUE(!(co_await s.client.Send(
        "PUT /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")));
    Reply interim = co_await s.client.Read(false);
    CO_ASSERT_TRUE(!interim.ec);
    EXPECT_EQ(interim.status, 100);
    CO_ASSERT_TRUE(!(co_await s.client.Send("hello")));
    Reply r = co_await s.client.Read(false);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "echo:hello");
    // A body over the limit gets the 413 instead of the 100.
    CO_ASSERT_TRUE(!(co_await s.client.Send(
        "PUT /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 101\r\n\r\n")));
    r = co_await s.client.Read(false);
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(calls.started, 1);
  });
}

// ---- Bad requests.

TEST(HttpServerTest, OversizedHeaderGets431AndTheConnectionCloses) {
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), {}, [&](Served& s) -> Task<void> {
    std::string just_under = "Authorization: Bearer " + std::string(7 * 1024, 'a') + "\r\n";
    std::string too_big = "X-Pad: " + std::string(10 * 1024, 'a') + "\r\n";
    Reply r = co_await s.client.Request("GET", "/x", just_under);
    EXPECT_EQ(r.status, 200);
    r = co_await s.client.Request("GET", "/x", too_big);
    EXPECT_EQ(r.status, 431);
    EXPECT_TRUE(co_await s.client.SeesClose(seconds(5)));
    EXPECT_EQ(calls.started, 1);
  });
}

TEST(HttpServerTest, MalformedRequestsGet400AndTheConnectionCloses) {
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), {}, [&](Served& s) -> Task<void> {
    const std::vector<std::string> bad = {
        "this is not http\r\n\r\n",
        "GET /x HTTP/1.1\r\n\r\n",  // HTTP/1.1 without Host
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc",  // length unknown
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "GET /x HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",  // which host?
        "GET /x HTTP/1.0\r\nHost: a.example\r\nhost: b.example\r\n\r\n",
    };
    for (const std::string& raw : bad) {
      Served::Exchange x = co_await s.SendOnNewConnection(raw);
      EXPECT_EQ(x.reply.status, 400) << raw;
      EXPECT_TRUE(co_await x.client->SeesClose(seconds(5))) << raw;
    }
    EXPECT_EQ(calls.started, 0);
  });
}

TEST(HttpServerTest, EveryFramingRfc9112RefusesGets400AndTheConnectionCloses) {
  // The finding (issue "Hostile tenants, round two"): each of these was answered 200. A
  // proxy in front that frames such a request differently from this server lets a client
  // hide a second request in the first one's body (request smuggling).
  RealEnv env;
  Calls calls;
  RunServed(env, EchoHandler(&calls), {}, [&](Served& s) -> Task<void> {
    const std::vector<std::string> bad = {
        // A transfer coding other than a final, single chunked (RFC 9112 section 6.1).
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: 3\r\n\r\nabc",
        // Transfer-Encoding in HTTP/1.0, chunked or not (section 6.1).
        "POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "POST /x HTTP/1.0\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
        // Transfer-Encoding with Content-Length, in either order (section 6.3).
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n",
        // More than one Content-Length, even equal; a list; not a decimal number (6.3).
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0, 0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3,3\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n",
        // Obs-fold (section 5.2), in any field, and whitespace before the first field (2.2).
        "GET /x HTTP/1.1\r\nHost: x\r\nX-Note: one\r\n two\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: x\r\nX-Note: one\r\n\ttwo\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "GET /x HTTP/1.1\r\n Host: x\r\n\r\n",
    };
    for (const std::string& raw : bad) {
      Served::Exchange x = co_await s.SendOnNewConnection(raw);
      EXPECT_EQ(x.reply.status, 400) << raw;
      EXPECT_TRUE(co_await x.client->SeesClose(seconds(5))) << raw;
    }
    EXPECT_EQ(calls.started, 0);

    // A fold, or whitespace before the first field, that arrives after the start line was
    // parsed on its own (the parser consumes a whole start line before the fields arrive).
    const std::vector<std::pair<std::string, std::string>> split = {
        {"GET /x HTTP/1.1\r\n", " Host: x\r\n\r\n"},
        {"GET /x HTTP/1.1\r\nHost: x\r\nX-Note: one\r\n", " two\r\n\r\n"},
        {"GET /x HTTP/1.1\r\nHost: x\r\nX-Note: one\r", "\n two\r\n\r\n"},
    };
    for (const auto& [first, second] : split) {
      std::unique_ptr<TestClient> c = co_await s.Connect();
      EXPECT_FALSE(co_await c->Send(first));
      co_await env.SleepFor(milliseconds(50));
      EXPECT_FALSE(co_await c->Send(second));
      Reply r = co_await c->Read(false);
      EXPECT_EQ(r.status, 400) << first << second;
      EXPECT_TRUE(co_await c->SeesClose(seconds(5))) << first << second;
    }
    EXPECT_EQ(calls.started, 0);

    // What stays accepted, on one keep-alive connection: one Content-Length with spaces
    // around it, chunked alone in any case, spaces inside a value.
    EXPECT_FALSE(co_await s.client.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length:  3 \r\n\r\nabc"));
    Reply r = co_await s.client.Read(false);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "echo:abc");
    EXPECT_FALSE(co_await s.client.Send(
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nX-Note: one two\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n"));
    r = co_await s.client.Read(false);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "echo:abc");
    EXPECT_EQ(calls.started, 2);
  });
}

TEST(HttpServerTest, TrailerFieldsNeverReachTheHandler) {
  // A trailer arrives after the header was checked (by a proxy, by this server): a field
  // in it, an Authorization or a second Host say, must not be taken as the request's.
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls calls;
    auto server = StartOrFail(e, EchoHandler(&calls));
    CO_ASSERT_TRUE(server != nullptr);
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await client.Send(
        "POST /x HTTP/1.1\r\nHost: x\r\nX-Before: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n0\r\nAuthorization: Bearer smuggled\r\nHost: other\r\nX-After: 2\r\n\r\n")));
    Reply r = co_await client.Read(false);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "echo:abc");
    CO_ASSERT_TRUE(calls.requests.size() == 1u);
    const ServerRequest& got = calls.requests[0];
    EXPECT_EQ(got.Header("Authorization"), std::nullopt);
    EXPECT_EQ(got.Header("X-After"), std::nullopt);
    EXPECT_EQ(got.Header("Host"), "x");
    EXPECT_EQ(got.Header("X-Before"), "1");
    const ServerHeaders expected = {{"Host", "x"}, {"X-Before", "1"}, {"Transfer-Encoding", "chunked"}};
    EXPECT_EQ(got.headers, expected);
  }(env));
}

// ---- Fair connections (docs/security.md, "Connections and requests").

// Raises this process's open-file limit to at least want (up to the hard limit); false
// if it cannot.
bool RaiseFileLimit(rlim_t want) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= want) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < want) return false;
  limit.rlim_cur = want;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

// Opens n connections to port from the local address `from`, sends nothing, and keeps
// them in *out. Returns how many connected (the server may close them at once).
Task<int> OpenIdle(RealEnv* e, std::uint16_t port, std::string from, int n,
                   std::vector<std::unique_ptr<http_test::tcp::socket>>* out) {
  int connected = 0;
  for (int i = 0; i < n; ++i) {
    auto socket = std::make_unique<http_test::tcp::socket>(e->context());
    error_code ec;
    socket->open(http_test::tcp::v4(), ec);
    if (!ec) socket->bind(http_test::tcp::endpoint(boost::asio::ip::make_address(from), 0), ec);
    if (ec) co_return connected;
    http_test::tcp::socket* raw = socket.get();
    const http_test::tcp::endpoint to(boost::asio::ip::address_v4::loopback(), port);
    http_test::IoDone done = co_await http_test::AwaitIo(*e, [raw, to](Latch<http_test::IoDone> latch) {
      raw->async_connect(to, [latch](const error_code& connect_ec) { latch.Set(http_test::IoDone{connect_ec, 0}); });
    });
    if (!done.ec) ++connected;
    out->push_back(std::move(socket));
  }
  co_return connected;
}

// A stand-in for the actor API: 200 with the right bearer token, else 401.
ServerHandler TokenHandler(Calls* calls) {
  return [calls](ServerRequest request) {
    ++calls->started;
    ++calls->finished;
    calls->requests.push_back(request);
    const bool ok = request.Header("Authorization") == std::optional<std::string_view>("Bearer good");
    return ReadyResponse(TextResponse(ok ? 200 : 401, ok ? "served\n" : "no\n"));
  };
}

// A client that sends its request at once, from `from`: served (twice, on one connection)?
Task<bool> PromptClientServed(RealEnv* e, std::uint16_t port, std::string from) {
  TestClient client(*e);
  if (co_await client.Connect(port, from)) co_return false;
  Reply r = co_await client.Request("POST", "/v1/actors/t/c/n/x", "Authorization: Bearer good\r\n", "hi");
  if (r.status != 200 || r.body != "served\n") co_return false;
  // Idle connections that completed a request go after those that never sent one.
  Reply again = co_await client.Request("GET", "/v1/actors/t/c/n/x", "Authorization: Bearer good\r\n");
  co_return again.status == 200;
}

// GET /healthz on port: the status, or 0 if none came.
Task<int> Probe(RealEnv* e, std::uint16_t port) {
  TestClient client(*e);
  if (co_await client.Connect(port)) co_return 0;
  co_return (co_await client.Request("GET", "/healthz")).status;
}

TEST(HttpServerTest, TwoThousandIdleConnectionsDoNotKeepOutAPromptClientOrTheProbes) {
  // The finding: 1,000 idle connections (one client, or a few) took every slot of the one
  // listener, so nobody could be served and probes failed. Now: a per-client cap, the
  // eviction of connections that have sent no request, and probes on their own listener.
  if (!RaiseFileLimit(8192)) GTEST_SKIP() << "needs 8192 open files (ulimit -n)";
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls api_calls;
    auto api = StartOrFail(e, TokenHandler(&api_calls));  // default limits: 1024, 64 per client
    CO_ASSERT_TRUE(api != nullptr);
    HttpServerLimits admin_limits;
    admin_limits.max_connections = 64;
    admin_limits.max_connections_per_client = 16;
    admin_limits.max_body_bytes = 0;
    auto admin = StartOrFail(e, OkHandler(), admin_limits);
    CO_ASSERT_TRUE(admin != nullptr);
    const HttpServerLimits defaults;
    std::vector<std::unique_ptr<http_test::tcp::socket>> idle;
    // Every idle connection the server has accepted is open, rejected or evicted.
    auto settled = [&api](std::size_t opened) {
      return std::function<bool()>([&api, opened] {
        return api->open_connections() + api->rejected_connections() + api->evicted_connections() == opened;
      });
    };

    // 2,000 idle connections from one address: it keeps 64, and the others are served.
    EXPECT_EQ(co_await OpenIdle(&e, api->bound_port(), "127.0.0.2", 2000, &idle), 2000);
    CO_ASSERT_TRUE(co_await WaitFor(&e, settled(2000), 3000));
    EXPECT_TRUE(co_await PromptClientServed(&e, api->bound_port(), "127.0.0.1"));
    EXPECT_EQ(co_await Probe(&e, admin->bound_port()), 200);
    EXPECT_EQ(api->rejected_per_client(), 2000 - defaults.max_connections_per_client);
    std::function<bool()> back = [&] { return api->open_connections() == defaults.max_connections_per_client; };
    CO_ASSERT_TRUE(co_await WaitFor(&e, back));

    // 2,000 more from 40 addresses, 50 each (under the per-client cap): past 1,024 open,
    // each new one evicts the oldest that has sent nothing.
    for (int a = 3; a < 43; ++a) {
      EXPECT_EQ(co_await OpenIdle(&e, api->bound_port(), "127.0.0." + std::to_string(a), 50, &idle), 50);
    }
    CO_ASSERT_TRUE(co_await WaitFor(&e, settled(4000), 3000));
    EXPECT_EQ(api->open_connections(), defaults.max_connections);
    // Served from a fresh address and from one of the flooding ones alike; probes answer.
    EXPECT_TRUE(co_await PromptClientServed(&e, api->bound_port(), "127.0.0.1"));
    EXPECT_TRUE(co_await PromptClientServed(&e, api->bound_port(), "127.0.0.3"));
    EXPECT_EQ(co_await Probe(&e, admin->bound_port()), 200);
    EXPECT_EQ(api_calls.started, 6);
    EXPECT_GE(api->evicted_connections(),
              2000 + defaults.max_connections_per_client - defaults.max_connections);
    EXPECT_LE(api->open_connections(), defaults.max_connections);
    for (auto& socket : idle) socket->close();
  }(env));
}

TEST(HttpServerTest, OneClientAddressGetsAtMostItsShare) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls calls;
    HttpServerLimits limits;
    limits.max_connections_per_client = 2;
    auto server = StartOrFail(e, EchoHandler(&calls), limits);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient a(e), b(e), c(e), other(e), d(e);
    CO_ASSERT_TRUE(!(co_await a.Connect(server->bound_port(), "127.0.0.5")));
    CO_ASSERT_TRUE(!(co_await b.Connect(server->bound_port(), "127.0.0.5")));
    EXPECT_EQ((co_await a.Request("GET", "/a")).status, 200);
    EXPECT_EQ((co_await b.Request("GET", "/b")).status, 200);
    CO_ASSERT_TRUE(!(co_await c.Connect(server->bound_port(), "127.0.0.5")));
    EXPECT_TRUE(co_await c.SeesClose(seconds(5)));
    EXPECT_EQ(server->rejected_per_client(), 1u);
    CO_ASSERT_TRUE(!(co_await other.Connect(server->bound_port(), "127.0.0.6")));
    EXPECT_EQ((co_await other.Request("GET", "/other")).status, 200);
    // A connection closed gives its slot back.
    a.Close();
    std::function<bool()> freed = [&server] { return server->open_connections() == 2u; };
    CO_ASSERT_TRUE(co_await WaitFor(&e, freed));
    CO_ASSERT_TRUE(!(co_await d.Connect(server->bound_port(), "127.0.0.5")));
    EXPECT_EQ((co_await d.Request("GET", "/d")).status, 200);
  }(env));
}

TEST(HttpServerTest, ConnectionsMidRequestAreNeverEvicted) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls calls;
    HttpServerLimits limits;
    limits.max_connections = 2;
    auto server = StartOrFail(e, SlowHandler(&e, &calls, milliseconds(400)), limits);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient busy1(e), busy2(e), late(e);
    CO_ASSERT_TRUE(!(co_await busy1.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await busy2.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await busy1.Send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")));
    CO_ASSERT_TRUE(!(co_await busy2.Send("GET /two HTTP/1.1\r\nHost: x\r\n\r\n")));
    std::function<bool()> both = [&calls] { return calls.started == 2; };
    CO_ASSERT_TRUE(co_await WaitFor(&e, both));
    CO_ASSERT_TRUE(!(co_await late.Connect(server->bound_port())));
    EXPECT_TRUE(co_await late.SeesClose(seconds(5)));
    EXPECT_EQ(server->rejected_connections(), 1u);
    EXPECT_EQ(server->evicted_connections(), 0u);
    EXPECT_EQ((co_await busy1.Read(false)).body, "/one");
    EXPECT_EQ((co_await busy2.Read(false)).body, "/two");
  }(env));
}

TEST(HttpServerTest, AFirstRequestMustArriveWithinFirstRequestTimeout) {
  // Slowloris: a connection that sends nothing, or its header a byte at a time, held a
  // slot for idle_timeout plus read_timeout (a minute by default).
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls calls;
    HttpServerLimits limits;
    limits.first_request_timeout = milliseconds(300);
    limits.idle_timeout = seconds(5);
    limits.read_timeout = seconds(5);
    auto server = StartOrFail(e, EchoHandler(&calls), limits);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient silent(e), dribbling(e), prompt(e);
    const MonoTime start = e.MonoNow();
    CO_ASSERT_TRUE(!(co_await silent.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await dribbling.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await prompt.Connect(server->bound_port())));
    EXPECT_EQ((co_await prompt.Request("GET", "/x")).status, 200);
    for (const char* piece : {"GET ", "/x ", "HTTP/1.1\r\n", "Host: x\r\n"}) {
      CO_ASSERT_TRUE(!(co_await dribbling.Send(piece)));
      co_await e.SleepFor(milliseconds(100));
    }
    EXPECT_TRUE(co_await silent.SeesClose(seconds(3)));
    EXPECT_TRUE(co_await dribbling.SeesClose(seconds(3)));
    EXPECT_LT(e.MonoNow() - start, seconds(3)) << "cut at first_request_timeout, not idle + read";
    // A connection that has completed a request is idle under idle_timeout instead.
    co_await e.SleepFor(milliseconds(500));
    EXPECT_EQ((co_await prompt.Request("GET", "/y")).status, 200);
    EXPECT_EQ(calls.started, 2);
  }(env));
}

TEST(HttpServerTest, BodiesHeldAtOnceAreBoundedAcrossConnections) {
  // The finding: every connection could hold a maximal body in memory (max_connections
  // times max_body_bytes, a gigabyte by default), whoever sent it.
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls calls;
    HttpServerLimits limits;
    limits.max_body_bytes = 1000;
    limits.max_buffered_body_bytes = 2500;
    auto server = StartOrFail(e, EchoHandler(&calls), limits);
    CO_ASSERT_TRUE(server != nullptr);
    const std::string kilobyte(1000, 'k');
    const std::string declare = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n";
    // Two bodies on their way (2,000 bytes held), sent in part.
    TestClient a(e), b(e), over(e), small(e), chunked(e);
    CO_ASSERT_TRUE(!(co_await a.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await a.Send(declare + kilobyte.substr(0, 10))));
    CO_ASSERT_TRUE(!(co_await b.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await b.Send(declare + kilobyte.substr(0, 10))));
    std::function<bool()> held = [&server] { return server->buffered_body_bytes() == 2000u; };
    CO_ASSERT_TRUE(co_await WaitFor(&e, held));
    // A third would pass 2,500: 503 with Retry-After before its body is read.
    CO_ASSERT_TRUE(!(co_await over.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await over.Send(declare)));
    Reply r = co_await over.Read(false);
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.Get("Retry-After"), "1");
    EXPECT_TRUE(co_await over.SeesClose(seconds(5)));
    // A chunked body counts as max_body_bytes: refused too.
    CO_ASSERT_TRUE(!(co_await chunked.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await chunked.Send("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")));
    EXPECT_EQ((co_await chunked.Read(false)).status, 503);
    // One that fits still goes through.
    CO_ASSERT_TRUE(!(co_await small.Connect(server->bound_port())));
    EXPECT_EQ((co_await small.Request("POST", "/x", "", std::string(400, 's'))).status, 200);
    EXPECT_EQ(server->bodies_refused(), 2u);
    // Finished bodies give their bytes back.
    CO_ASSERT_TRUE(!(co_await a.Send(kilobyte.substr(10))));
    EXPECT_EQ((co_await a.Read(false)).status, 200);
    b.Close();
    std::function<bool()> none = [&server] { return server->buffered_body_bytes() == 0u; };
    CO_ASSERT_TRUE(co_await WaitFor(&e, none));
    TestClient again(e);
    CO_ASSERT_TRUE(!(co_await again.Connect(server->bound_port())));
    EXPECT_EQ((co_await again.Request("POST", "/x", "", kilobyte)).status, 200);
    EXPECT_EQ(calls.started, 3);
  }(env));
}

TEST(HttpServerTest, TheHeaderCheckRefusesARequestBeforeItsBodyIsRead) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls calls;
    int checks = 0;
    HeaderCheck check = [&checks](const ServerRequest& request) {
      ++checks;
      std::optional<ServerResponse> answer;
      if (!request.body.empty()) answer = TextResponse(500, "the check saw a body\n");
      if (request.Header("Authorization") != std::optional<std::string_view>("Bearer good")) {
        answer = TextResponse(401, "no\n");
      }
      return [](std::optional<ServerResponse> a) -> Task<std::optional<ServerResponse>> { co_return a; }(answer);
    };
    HttpServerLimits limits;
    limits.max_body_bytes = 1 << 20;
    auto started = HttpServer::Start(e, "127.0.0.1:0", EchoHandler(&calls), limits, check);
    CO_ASSERT_TRUE(started.ok());
    std::unique_ptr<HttpServer> server = std::move(started).value();
    // Declares a mebibyte and sends none of it: answered 401 at once, body never read.
    TestClient anonymous(e);
    CO_ASSERT_TRUE(!(co_await anonymous.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await anonymous.Send("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")));
    Reply r = co_await anonymous.Read(false);
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(server->buffered_body_bytes(), 0u);
    EXPECT_TRUE(co_await anonymous.SeesClose(seconds(5)));
    // Expect: 100-continue without a token: the refusal instead of the 100.
    TestClient asks(e);
    CO_ASSERT_TRUE(!(co_await asks.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await asks.Send(
        "PUT /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")));
    EXPECT_EQ((co_await asks.Read(false)).status, 401);
    // With the token the body is read and the handler called; a request without a body
    // is not checked (the handler decides).
    TestClient good(e);
    CO_ASSERT_TRUE(!(co_await good.Connect(server->bound_port())));
    r = co_await good.Request("PUT", "/x", "Authorization: Bearer good\r\n", "hello");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "echo:hello");
    EXPECT_EQ((co_await good.Request("GET", "/x")).status, 200);
    EXPECT_EQ(checks, 3);
    EXPECT_EQ(calls.started, 2);
  }(env));
}

// ---- Connections, timeouts, disconnects, Stop.

TEST(HttpServerTest, ConnectionsBeyondTheLimitEvictTheLongestIdle) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    Calls calls;
    HttpServerLimits limits;
    limits.max_connections = 2;
    auto server = StartOrFail(e, EchoHandler(&calls), limits);
    CO_ASSERT_TRUE(server != nullptr);
    TestClient a(e), b(e), c(e), d(e), silent(e);
    CO_ASSERT_TRUE(!(co_await a.Connect(server->bound_port())));
    CO_ASSERT_TRUE(!(co_await b.Connect(server->bound_port())));
    EXPECT_EQ((co_await a.Request("GET", "/a")).status, 200);
    EXPECT_EQ((co_await b.Request("GET", "/b")).status, 200);
    EXPECT_EQ(server->open_connections(), 2u);
    // Both idle between requests: a third connection evicts the one idle longest (a).
    CO_ASSERT_TRUE(!(co_await c.Connect(server->bound_port())));
    EXPECT_TRUE(co_await a.SeesClose(seconds(5)));
    EXPECT_EQ((co_await c.Request("GET", "/c")).status, 200);
    EXPECT_EQ(server->evicted_connections(), 1u);
    EXPECT_EQ(server->rejected_connections(), 0u);
    EXPECT_EQ(server->open_connections(), 2u);
    // One that never sent a request goes before idle keep-alive ones, however recent.
    CO_ASSERT_TRUE(!(co_await silent.Connect(server->bound_port())));  // evicts b
    EXPECT_TRUE(co_await b.SeesClose(seconds(5)));
    CO_ASSERT_TRUE(!(co_await d.Connect(server->bound_port())));  // evicts silent, not c
    EXPECT_TRUE(co_await silent.SeesClose(seconds(5)));
    EXPECT_EQ((co_await c.Request("GET", "/c")).status, 200);
    EXPECT_EQ((co_await d.Request("GET", "/d")).status, 200);
    EXPECT_EQ(server->evicted_connections(), 3u);
    // A slot freed is usable again without evicting anyone.
    c.Close();
    std::function<bool()> done1 = [&server] { return server->open_connections() == 1u; };
    CO_ASSERT_TRUE(co_await WaitFor(&e, done1));
    TestClient f(e);
    CO_ASSERT_TRUE(!(co_await f.Connect(server->bound_port())));
    EXPECT_EQ((co_await f.Request("GET", "/f")).status, 200);
    EXPECT_EQ((co_await d.Request("GET", "/d")).status, 200);
    EXPECT_EQ(server->evicted_connections(), 3u);
  }(env));
}

TEST(HttpServerTest, IdleAndSlowConnectionsAreClosedAfterTheirTimeouts) {
  RealEnv env;
  Calls calls;
  HttpServerLimits limits;
  limits.idle_timeout = milliseconds(200);
  limits.read_timeout = milliseconds(300);
  RunServed(env, EchoHandler(&calls), limits, [&](Served& s) -> Task<void> {
    TestClient& idle = s.client;
    EXPECT_EQ((co_await idle.Request("GET", "/x")).status, 200);
    auto never_sends = co_await s.Connect();
    auto slow_header = co_await s.Connect();
    CO_ASSERT_TRUE(!(co_await slow_header->Send("GET /x HTTP/1.1\r\nHost:")));
    auto slow_body = co_await s.Connect();
    CO_ASSERT_TRUE(!(co_await slow_body->Send("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")));
    const MonoTime start = env.MonoNow();
    EXPECT_TRUE(co_await idle.SeesClose(seconds(5)));
    EXPECT_TRUE(co_await never_sends->SeesClose(seconds(5)));
    EXPECT_TRUE(co_await slow_header->SeesClose(seconds(5)));
    EXPECT_TRUE(co_await slow_body->SeesClose(seconds(5)));
    EXPECT_GE(env.MonoNow() - start, milliseconds(250));
    std::function<bool()> done2 = [&s] { return s.server->open_connections() == 0u; };
    CO_ASSERT_TRUE(co_await WaitFor(&env, done2));
    EXPECT_EQ(calls.started, 1);
  });
}

TEST(HttpServerTest, ClientDisconnectingDuringASlowHandlerIsHarmless) {
  RealEnv env;
  Calls calls;
  RunServed(env, SlowHandler(&env, &calls, milliseconds(300)), {}, [&](Served& s) -> Task<void> {
    {
      TestClient& leaves = s.client;
      CO_ASSERT_TRUE(!(co_await leaves.Send("GET /leaves HTTP/1.1\r\nHost: x\r\n\r\n")));
      // This one leaves with a second request queued behind the first.
      auto pipelines = co_await s.Connect();
      CO_ASSERT_TRUE(!(co_await pipelines->Send(
          "GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n\r\n")));
      std::function<bool()> done3 = [&calls] { return calls.started == 2; };
      CO_ASSERT_TRUE(co_await WaitFor(&env, done3));
      leaves.Close();
      pipelines->Close();
    }
    // The handlers finish; their responses go nowhere; the connections are closed.
    std::function<bool()> done4 = [&calls] { return calls.finished >= 2; };
    CO_ASSERT_TRUE(co_await WaitFor(&env, done4));
    std::function<bool()> done5 = [&s] { return s.server->open_connections() == 0u; };
    CO_ASSERT_TRUE(co_await WaitFor(&env, done5));
    EXPECT_LE(calls.started, 3);  // /p2 may have been read before the close was seen
    auto next = co_await s.Connect();
    Reply r = co_await next->Request("GET", "/next?ms=0");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "/next");
    std::function<bool()> done6 = [&calls] { return calls.in_flight == 0; };
    CO_ASSERT_TRUE(co_await WaitFor(&env, done6));
  });
}

TEST(HttpServerTest, StopWithHandlersInFlightClosesConnectionsAndDropsTheirResponses) {
  // AddressSanitizer / LeakSanitizer (debug preset) check the lifetimes here.
  RealEnv env;
  Calls calls;
  RunServed(env, SlowHandler(&env, &calls, milliseconds(300)), {}, [&](Served& s) -> Task<void> {
    const std::uint16_t port = s.server->bound_port();
    std::vector<std::unique_ptr<TestClient>> clients;
    for (int i = 0; i < 3; ++i) {
      clients.push_back(co_await s.Connect());
      std::string raw = "GET /s" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
      CO_ASSERT_TRUE(!(co_await clients.back()->Send(raw)));
    }
    std::function<bool()> done7 = [&calls] { return calls.started == 3; };
    CO_ASSERT_TRUE(co_await WaitFor(&env, done7));
    EXPECT_EQ(s.server->open_connections(), 4u);  // and s.client, idle
    s.server->Stop();
    s.server->Stop();  // idempotent
    EXPECT_EQ(s.server->open_connections(), 0u);
    for (auto& client : clients) EXPECT_TRUE(co_await client->SeesClose(seconds(5)));
    TestClient late(env);
    const error_code ec = co_await late.Connect(port);
    EXPECT_EQ(ec, boost::asio::error::connection_refused) << ec.message();
    // Destroyed too while the handlers still run: their ends must not touch it.
    s.server.reset();
    std::function<bool()> done8 = [&calls] { return calls.finished == 3; };
    CO_ASSERT_TRUE(co_await WaitFor(&env, done8));
    co_await env.SleepFor(milliseconds(20));  // let their last steps run
    EXPECT_EQ(env.live_tasks(), 1u);          // only this test's main task
  });
}

TEST(HttpServerTest, TheHandlerMayDestroyTheServer) {
  RealEnv env;
  Served* served = nullptr;
  int calls = 0;
  ServerHandler handler = [&served, &calls](ServerRequest) {
    ++calls;
    served->server.reset();  // from inside the handler call; its own Task still runs
    return ReadyResponse(TextResponse(200, "gone\n"));
  };
  RunServed(env, handler, {}, [&](Served& s) -> Task<void> {
    served = &s;
    CO_ASSERT_TRUE(!(co_await s.client.Send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n")));
    EXPECT_TRUE(co_await s.client.SeesClose(seconds(5)));  // no response: it was dropped
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(s.server, nullptr);
    co_await env.SleepFor(milliseconds(20));
    EXPECT_EQ(env.live_tasks(), 1u);
  });
}

TEST(HttpServerTest, DestroyingTheServerWithOpenConnectionsIsSafe) {
  RealEnv env;
  auto calls = std::make_unique<Calls>();
  RunServed(env, EchoHandler(calls.get()), {}, [&](Served& s) -> Task<void> {
    TestClient& idle = s.client;
    EXPECT_EQ((co_await idle.Request("GET", "/x")).status, 200);
    auto partial = co_await s.Connect();
    CO_ASSERT_TRUE(!(co_await partial->Send("GET /x HTTP/1.1\r\n")));
    auto partial_body = co_await s.Connect();
    CO_ASSERT_TRUE(!(co_await partial_body->Send("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nab")));
    // Connected, perhaps not yet accepted: its accept handler finds the server gone.
    auto pending = co_await s.Connect();
    s.server.reset();
    calls.reset();  // the handler's captures die too: nothing may call it now
    EXPECT_TRUE(co_await idle.SeesClose(seconds(5)));
    EXPECT_TRUE(co_await partial->SeesClose(seconds(5)));
    EXPECT_TRUE(co_await partial_body->SeesClose(seconds(5)));
    EXPECT_TRUE(co_await pending->SeesClose(seconds(5)));
    co_await env.SleepFor(milliseconds(20));  // let the aborted handlers run
  });
}

// ---- Start and stop.

TEST(HttpServerTest, BadAddressesAreInvalidArgumentsNamingTheAddress) {
  RealEnv env;
  for (std::string address : {"nope", "127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:-1",
                              "127.0.0.1:80x", "example.com:80", ":9100", "::1:80", "[::1]80",
                              "[::1", "300.1.1.1:80"}) {
    auto started = HttpServer::Start(env, address, OkHandler());
    ASSERT_FALSE(started.ok()) << address;
    EXPECT_EQ(started.code(), Code::kInvalidArgument) << address;
    EXPECT_NE(started.status().message().find("'" + address + "'"), std::string::npos)
        << started.status().message();
    EXPECT_EQ(started.status().message().find('\n'), std::string::npos);
  }
}

TEST(HttpServerTest, AddressInUseIsFatalAndNamesTheAddress) {
  RealEnv env;
  RunServed(env, OkHandler(), {}, [&](Served& s) -> Task<void> {
    const std::string address = "127.0.0.1:" + std::to_string(s.server->bound_port());
    auto second = HttpServer::Start(env, address, OkHandler());
    CO_ASSERT_TRUE(!second.ok());
    EXPECT_EQ(second.code(), Code::kFatal);
    EXPECT_NE(second.status().message().find(address), std::string::npos) << second.status().message();
    EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status().message();
  });
}

TEST(HttpServerTest, LocalhostAndIpv6LoopbackWork) {
  RealEnv env;
  env.RunMain([](RealEnv& e) -> Task<void> {
    auto started = HttpServer::Start(e, "localhost:0", OkHandler());
    CO_ASSERT_TRUE(started.ok());
    std::unique_ptr<HttpServer> server = std::move(started).value();
    TestClient client(e);
    CO_ASSERT_TRUE(!(co_await client.Connect(server->bound_port())));
    EXPECT_EQ((co_await client.Request("GET", "/healthz")).status, 200);
    // [::1] may be missing in a container without IPv6; then binding fails kFatal.
    auto v6 = HttpServer::Start(e, "[::1]:0", OkHandler());
    if (!v6.ok()) {
      EXPECT_EQ(v6.code(), Code::kFatal) << v6.status().ToString();
    }
  }(env));
}

TEST(HttpServerTest, StopClosesConnectionsAndThenConnectFails) {
  RealEnv env;
  RunServed(env, OkHandler(), {}, [&](Served& s) -> Task<void> {
    const std::uint16_t port = s.server->bound_port();
    EXPECT_EQ((co_await s.client.Request("GET", "/healthz")).status, 200);
    s.server->Stop();
    s.server->Stop();  // idempotent
    EXPECT_TRUE(co_await s.client.SeesClose(seconds(5)));
    TestClient late(env);
    const error_code ec = co_await late.Connect(port);
    EXPECT_EQ(ec, boost::asio::error::connection_refused) << ec.message();
    s.server.reset();
  });
}

}  // namespace
}  // namespace wk
