// Test-only: a small asynchronous HTTP/1.1 client on a RealEnv's loop, for the server
// tests (raw requests out, Beast's parser in). Every operation gives up after
// kClientTimeout (or the time it is given), so a server bug fails a test, never hangs it.
// RunServed sets up what most of those tests start with: a server on 127.0.0.1:0 and a
// client connected to it.
//
// Threading: the loop thread; awaited from the test's coroutines. To 127.0.0.1 only (from
// any loopback address).
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "env/real_env.h"
#include "net/http_server.h"

// ASSERT_* returns, which a coroutine may not: this one co_returns.
#define CO_ASSERT_TRUE(cond)                       \
  do {                                             \
    if (!(cond)) {                                 \
      ADD_FAILURE() << "assertion failed: " #cond; \
      co_return;                                   \
    }                                              \
  } while (0)

namespace wk::http_test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

inline constexpr Duration kClientTimeout = std::chrono::seconds(5);

struct IoDone {
  error_code ec;
  std::size_t bytes = 0;
};
using IoStart = std::function<void(Latch<IoDone>)>;

// Awaits one Asio operation: start begins it and its completion handler sets the latch.
inline Task<IoDone> AwaitIo(Env& env, IoStart start) {
  Latch<IoDone> latch(env, [] { return IoDone{net::error::operation_aborted, 0}; });
  start(latch);
  co_return co_await latch.Wait();
}

struct Reply {
  error_code ec;  // set: no complete response arrived (closed, reset, timeout)
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // in order
  std::string content_type, content_length, allow, connection;

  bool Has(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (beast::iequals(n, name)) return true;
    }
    return false;
  }
  std::string Get(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (beast::iequals(n, name)) return v;
    }
    return {};
  }
};

class TestClient {
 public:
  explicit TestClient(RealEnv& env) : env_(env), stream_(env.context()) {}

  // from: the local address to connect from ("127.0.0.2": all of 127/8 is loopback), or
  // empty for the system's choice.
  Task<error_code> Connect(std::uint16_t port, std::string from = {}) {
    const tcp::endpoint endpoint(net::ip::address_v4::loopback(), port);
    if (!from.empty()) {
      error_code bind_ec;
      stream_.socket().open(tcp::v4(), bind_ec);
      if (!bind_ec) stream_.socket().bind(tcp::endpoint(net::ip::make_address(from), 0), bind_ec);
      if (bind_ec) co_return bind_ec;
    }
    IoStart start = [this, endpoint](Latch<IoDone> done) {
      stream_.expires_after(kClientTimeout);
      stream_.async_connect(endpoint, [done](const error_code& ec) { done.Set(IoDone{ec, 0}); });
    };
    IoDone result = co_await AwaitIo(env_, start);
    co_return result.ec;
  }

  Task<error_code> Send(std::string raw) {
    auto data = std::make_shared<std::string>(std::move(raw));
    IoStart start = [this, data](Latch<IoDone> done) {
      stream_.expires_after(kClientTimeout);
      net::async_write(stream_, net::buffer(*data),
                       [done, data](const error_code& ec, std::size_t n) { done.Set(IoDone{ec, n}); });
    };
    IoDone result = co_await AwaitIo(env_, start);
    co_return result.ec;
  }

  // Reads one response (a 100 Continue counts as one). head: it answers a HEAD request.
  Task<Reply> Read(bool head) {
    auto parser = std::make_shared<http::response_parser<http::string_body>>();
    parser->skip(head);
    parser->body_limit(64 * 1024 * 1024);
    IoStart start = [this, parser](Latch<IoDone> done) {
      stream_.expires_after(kClientTimeout);
      http::async_read(stream_, buffer_, *parser,
                       [done, parser](const error_code& ec, std::size_t n) { done.Set(IoDone{ec, n}); });
    };
    IoDone result = co_await AwaitIo(env_, start);
    Reply reply;
    reply.ec = result.ec;
    if (!result.ec) {
      const auto& response = parser->get();
      reply.status = static_cast<int>(response.result_int());
      reply.body = response.body();
      for (const auto& field : response) {
        reply.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
      }
      reply.content_type = reply.Get("Content-Type");
      reply.content_length = reply.Get("Content-Length");
      reply.allow = reply.Get("Allow");
      reply.connection = reply.Get("Connection");
    }
    co_return reply;
  }

  // Sends "METHOD target HTTP/1.1", Host, extra_headers (each ending in CRLF) and body
  // (with its Content-Length when it is not empty), then reads the response.
  Task<Reply> Request(std::string method, std::string target, std::string extra_headers = {},
                      std::string body = {}) {
    std::string raw = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers;
    if (!body.empty()) raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    raw += "\r\n" + body;
    const error_code ec = co_await Send(raw);
    if (ec) co_return Reply{ec};
    co_return co_await Read(method == "HEAD");
  }

  // True when the server closes the connection (EOF or reset) within `within`; false if
  // it stays open that long, or sends bytes.
  Task<bool> SeesClose(Duration within) {
    auto byte = std::make_shared<char>(0);
    IoStart start = [this, byte, within](Latch<IoDone> done) {
      stream_.expires_after(within);
      stream_.async_read_some(net::buffer(byte.get(), 1), [done, byte](const error_code& ec, std::size_t n) {
        done.Set(IoDone{ec, n});
      });
    };
    IoDone result = co_await AwaitIo(env_, start);
    co_return result.ec == net::error::eof || result.ec == net::error::connection_reset;
  }

  // Closes this side of the connection at once.
  void Close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  RealEnv& env_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

// One test's HttpServer on 127.0.0.1:0 and a client connected to it (RunServed).
struct Served {
  explicit Served(RealEnv& e) : env(e), client(e) {}

  // A reply read on a connection of its own, and that connection (to see it close).
  struct Exchange {
    std::unique_ptr<TestClient> client;
    Reply reply;
  };

  // A new client connected to the server; a failed connect fails the test (and the
  // client's later operations fail too).
  Task<std::unique_ptr<TestClient>> Connect() {
    auto c = std::make_unique<TestClient>(env);
    const error_code ec = co_await c->Connect(server->bound_port());
    if (ec) ADD_FAILURE() << "connecting a test client: " << ec.message();
    co_return c;
  }

  // Sends raw on a new connection and reads one reply (head: it answers a HEAD request).
  // Plain statements, no temporaries beside a co_await: GCC 12 destroys such a temporary
  // twice (docs/DEVELOPING.md, "Coroutines": GCC 12.2 bug 1).
  Task<Exchange> SendOnNewConnection(std::string raw, bool head = false) {
    Exchange x;
    x.client = co_await Connect();
    const error_code ec = co_await x.client->Send(std::move(raw));
    if (ec) {
      x.reply.ec = ec;
    } else {
      x.reply = co_await x.client->Read(head);
    }
    co_return x;
  }

  RealEnv& env;
  std::unique_ptr<HttpServer> server;
  TestClient client;
};

// An HttpServer on 127.0.0.1:0 with handler and limits, or nullptr after failing the test.
inline std::unique_ptr<HttpServer> StartOrFail(RealEnv& env, ServerHandler handler, HttpServerLimits limits = {}) {
  auto started = HttpServer::Start(env, "127.0.0.1:0", std::move(handler), limits);
  if (!started.ok()) {
    ADD_FAILURE() << started.status().ToString();
    return nullptr;
  }
  return std::move(started).value();
}

// Runs test on env's loop with an HttpServer started on 127.0.0.1:0 (handler, limits) and
// Served::client connected to it. A server that does not start, or a client that cannot
// connect, fails the test without running test. The server is destroyed when test ends
// (unless test destroyed it first).
inline void RunServed(RealEnv& env, ServerHandler handler, HttpServerLimits limits,
                      const std::function<Task<void>(Served&)>& test) {
  auto main = [](RealEnv& e, ServerHandler h, HttpServerLimits l,
                 const std::function<Task<void>(Served&)>* t) -> Task<void> {
    Served s(e);
    s.server = StartOrFail(e, std::move(h), l);
    if (s.server == nullptr) co_return;
    CO_ASSERT_TRUE(!(co_await s.client.Connect(s.server->bound_port())));
    co_await (*t)(s);
  };
  env.RunMain(main(env, std::move(handler), limits, &test));
}

// "Connection: close" on s.client closes it after the answer (200), and an HTTP/1.0
// request without keep-alive, on a connection of its own, is answered (200) and closed.
inline Task<void> ExpectCloseAndHttp10Honoured(Served& s, std::string target) {
  Reply r = co_await s.client.Request("GET", target, "Connection: close\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.connection, "close");
  EXPECT_TRUE(co_await s.client.SeesClose(std::chrono::seconds(5)));
  const std::string http10 = "GET " + target + " HTTP/1.0\r\n\r\n";
  Served::Exchange old = co_await s.SendOnNewConnection(http10);
  EXPECT_EQ(old.reply.status, 200);
  EXPECT_TRUE(co_await old.client->SeesClose(std::chrono::seconds(5)));
}

}  // namespace wk::http_test
