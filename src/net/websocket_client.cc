#include "net/websocket_client.h"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <functional>
#include <optional>
#include <utility>

#include "base/ascii.h"
#include "env/env.h"
#include "net/http_endpoint.h"
#include "net/websocket_frames.h"
#include "net/websocket_session.h"

namespace wk {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

WebSocketClientConnection::WebSocketClientConnection(std::shared_ptr<WebSocketSession> session, ServerHeaders headers,
                                                     std::string remote)
    : unstarted_(std::move(session)), session_(unstarted_), headers_(std::move(headers)), remote_(std::move(remote)) {}

WebSocketClientConnection::~WebSocketClientConnection() {
  if (unstarted_) unstarted_->Cut();
}

void WebSocketClientConnection::Start(const WebSocketAttach& attach) {
  if (!unstarted_) return;
  // From here the session holds itself (its pending reads and timers, a running OnMessage),
  // so a handler that keeps this object makes no cycle with it.
  std::shared_ptr<WebSocketSession> session = std::move(unstarted_);
  session->Start(attach);
}

void WebSocketClientConnection::Cut() {
  if (auto session = session_.lock()) session->Cut();
}

void WebSocketClientConnection::Shutdown() {
  if (auto session = session_.lock()) session->Shutdown();
}

namespace {

// One attempt's connection until its 101 (or answer) is read. Owned by shared_ptr: every
// pending Asio handler holds one, so an operation that completes after its caller gave up
// (a timeout, a cancellation) finds its buffers alive.
struct Attempt {
  explicit Attempt(RealEnv& env) : resolver(env.context()), timer(env.context()) {}

  beast::tcp_stream& Lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  // Ends whatever is in flight: its handler sees an error.
  void Abort() {
    resolver.cancel();
    if (tls || plain) {
      error_code ignored;
      Lowest().socket().close(ignored);
    }
  }
  // Runs op on whichever stream this is.
  template <typename Op>
  void WithStream(Op&& op) {
    if (tls) {
      op(*tls);
    } else {
      op(*plain);
    }
  }

  tcp::resolver resolver;
  net::steady_timer timer;
  tcp::resolver::results_type endpoints;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  std::string request_text;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  bool expired = false;  // the deadline passed (and aborted what was in flight)
  bool done = false;     // the deadline no longer applies
};

// Aborts the attempt after `after` (its operation in flight then fails), unless it is done.
void ArmDeadline(const std::shared_ptr<Attempt>& attempt, Duration after) {
  attempt->timer.expires_after(after);
  attempt->timer.async_wait([attempt](const error_code& ec) {
    if (ec || attempt->done) return;
    attempt->expired = true;
    attempt->Abort();
  });
}

// Awaits one operation: start(latch) begins it and its handler sets the latch. A cancelled
// task gets operation_aborted at once (the caller then aborts the attempt).
//
// Callers pass lambdas that capture by reference only (GCC 12 and by-value captures of a
// temporary lambda inside a co_await expression: docs/DEVELOPING.md, "Coroutines"); start
// runs synchronously inside Await, and the handlers it makes copy what they need.
Task<error_code> Await(RealEnv& env, std::function<void(const Latch<error_code>&)> start) {
  Latch<error_code> latch(env, [] { return error_code(net::error::operation_aborted); });
  start(latch);
  error_code ec = co_await latch.Wait();
  co_return ec;
}

// A failed step (what failed, and why: an error code's message or another reason): the
// attempt is aborted; kCancelled, or what the header says of a failure before and after
// sending.
Status StepFailed(Attempt& attempt, const CancelToken& cancel, bool sent, const std::string& what,
                  const std::string& detail) {
  attempt.done = true;
  attempt.timer.cancel();
  attempt.Abort();
  if (cancel && cancel->cancelled()) return Cancelled(what + ": cancelled");
  std::string why = what + ": " + (attempt.expired ? std::string("timed out") : detail);
  if (sent) return UnknownOutcome(std::move(why));
  return Retryable(std::move(why));
}

bool IsIpLiteral(const std::string& host) {
  error_code ec;
  net::ip::make_address(host, ec);
  return !ec;
}

// Why the request cannot be sent as an opening handshake; empty when it can.
std::string BadRequestReason(const ServerRequest& request) {
  const std::optional<std::string> handshake = CheckWebSocketHandshake(request);
  if (!handshake) return "not a WebSocket opening handshake (no Upgrade: websocket)";
  if (!handshake->empty()) return *handshake;
  if (!request.target.starts_with('/')) return "the target must be a path";
  for (char c : request.target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return "the target holds a space or a control character";
  }
  for (const auto& [name, value] : request.headers) {
    if (!IsHttpToken(name)) return "header name '" + name.substr(0, 64) + "' is not a token";
    if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
      return "header '" + name + "' has CR, LF or NUL in its value";
    }
  }
  return {};
}

std::optional<std::string_view> Find(const ServerHeaders& headers, std::string_view name) {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreAsciiCase(n, name)) return std::string_view(v);
  }
  return std::nullopt;
}

// Why a 101 to request is not a valid acceptance (RFC 6455 section 4.1); empty when it is.
std::string BadUpgradeReason(const ServerHeaders& answer, const ServerRequest& request) {
  const auto upgrade = Find(answer, "Upgrade");
  if (!upgrade || !HeaderListHasToken(*upgrade, "websocket")) return "the 101 has no Upgrade: websocket";
  const auto connection = Find(answer, "Connection");
  if (!connection || !HeaderListHasToken(*connection, "upgrade")) return "the 101's Connection does not name upgrade";
  const auto accept = Find(answer, "Sec-WebSocket-Accept");
  const std::string expected = WebSocketAcceptKey(request.Header("Sec-WebSocket-Key").value_or(""));
  if (!accept || expected.empty() || *accept != expected) return "the 101's Sec-WebSocket-Accept is not the key's";
  if (Find(answer, "Sec-WebSocket-Extensions")) return "the 101 names an extension (this client takes none)";
  if (const auto protocol = Find(answer, "Sec-WebSocket-Protocol")) {
    bool offered = false;
    for (const auto& [n, v] : request.headers) {
      if (EqualsIgnoreAsciiCase(n, "Sec-WebSocket-Protocol") && HeaderListHasToken(v, *protocol)) offered = true;
    }
    if (!offered) return "the 101 names subprotocol '" + std::string(*protocol) + "', which was not offered";
  }
  return {};
}

std::string FormatEndpoint(const tcp::endpoint& endpoint) {
  const std::string ip = endpoint.address().to_string();
  const std::string port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + ip + "]:" + port : ip + ":" + port;
}

}  // namespace

Task<Result<WebSocketClientAnswer>> ConnectWebSocket(RealEnv& env, std::string address, ServerRequest request,
                                                     WebSocketClientOptions options) {
  // The address: host and a port.
  const std::size_t bracket = address.rfind(']');
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    co_return InvalidArgument("WebSocket address '" + address + "' has no port (host:port)");
  }
  auto endpoint = ParseHttpEndpoint("http://" + address);
  if (!endpoint.ok()) co_return InvalidArgument("WebSocket address '" + address + "': " + endpoint.status().message());
  if (std::string why = BadRequestReason(request); !why.empty()) {
    co_return InvalidArgument("WebSocket request to " + address + ": " + why);
  }

  auto attempt = std::make_shared<Attempt>(env);
  Attempt& a = *attempt;
  a.parser.header_limit(static_cast<std::uint32_t>(options.max_head_bytes));
  a.parser.body_limit(options.max_answer_body_bytes);
  a.request_text = request.method + " " + request.target + " HTTP/1.1\r\n";
  if (!request.Header("Host")) a.request_text += "Host: " + address + "\r\n";
  for (const auto& [name, value] : request.headers) a.request_text += name + ": " + value + "\r\n";
  a.request_text += "\r\n";
  const CancelToken cancel = co_await CurrentCancel();

  // Resolve and connect, by connect_timeout.
  ArmDeadline(attempt, options.connect_timeout);
  error_code ec = co_await Await(env, [&attempt, &endpoint](const Latch<error_code>& latch) {
    attempt->resolver.async_resolve(endpoint->host, std::to_string(endpoint->port), tcp::resolver::numeric_service,
                                    [attempt, latch](const error_code& e, tcp::resolver::results_type results) {
                                      attempt->endpoints = std::move(results);
                                      latch.Set(e);
                                    });
  });
  if (ec || (cancel && cancel->cancelled())) {
    co_return StepFailed(a, cancel, false, "resolving " + endpoint->host, ec.message());
  }
  if (options.tls) {
    a.tls.emplace(beast::tcp_stream(env.context()), *options.tls);
  } else {
    a.plain.emplace(env.context());
  }
  ec = co_await Await(env, [&attempt](const Latch<error_code>& latch) {
    net::async_connect(attempt->Lowest().socket(), attempt->endpoints,
                       [attempt, latch](const error_code& e, const tcp::endpoint&) { latch.Set(e); });
  });
  if (ec || (cancel && cancel->cancelled())) {
    co_return StepFailed(a, cancel, false, "connecting to " + address, ec.message());
  }
  {
    // Messages are latency-bound: Nagle's algorithm would hold a small one for the peer's
    // delayed ACK.
    error_code ignored;
    a.Lowest().socket().set_option(tcp::no_delay(true), ignored);
  }
  error_code endpoint_ec;
  const tcp::endpoint remote_endpoint = a.Lowest().socket().remote_endpoint(endpoint_ec);
  const std::string remote = endpoint_ec ? address : FormatEndpoint(remote_endpoint);

  // The TLS handshake, the request and the answer's head, by handshake_timeout.
  ArmDeadline(attempt, options.handshake_timeout);
  if (a.tls) {
    // SNI must be a DNS name (RFC 6066 forbids IP literals).
    if (!IsIpLiteral(endpoint->host)) SSL_set_tlsext_host_name(a.tls->native_handle(), endpoint->host.c_str());
    ec = co_await Await(env, [&attempt](const Latch<error_code>& latch) {
      attempt->tls->async_handshake(net::ssl::stream_base::client, [attempt, latch](const error_code& e) { latch.Set(e); });
    });
    if (ec || (cancel && cancel->cancelled())) {
      co_return StepFailed(a, cancel, false, "TLS handshake with " + address, ec.message());
    }
  }
  ec = co_await Await(env, [&attempt](const Latch<error_code>& latch) {
    attempt->WithStream([&](auto& stream) {
      net::async_write(stream, net::buffer(attempt->request_text),
                       [attempt, latch](const error_code& e, std::size_t) { latch.Set(e); });
    });
  });
  if (ec || (cancel && cancel->cancelled())) {
    co_return StepFailed(a, cancel, true, "sending the handshake to " + address, ec.message());
  }
  ec = co_await Await(env, [&attempt](const Latch<error_code>& latch) {
    attempt->WithStream([&](auto& stream) {
      http::async_read_header(stream, attempt->buffer, attempt->parser,
                              [attempt, latch](const error_code& e, std::size_t) { latch.Set(e); });
    });
  });
  if (ec == http::error::header_limit) {
    co_return StepFailed(a, cancel, true, "reading the answer of " + address,
                         "its head is over " + std::to_string(options.max_head_bytes) + " bytes");
  }
  if (ec || (cancel && cancel->cancelled())) {
    co_return StepFailed(a, cancel, true, "reading the answer of " + address, ec.message());
  }

  WebSocketClientAnswer answer;
  const auto& head = a.parser.get();
  answer.status = static_cast<int>(head.result_int());
  for (const auto& field : head) answer.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));

  if (answer.status == 101) {
    if (std::string why = BadUpgradeReason(answer.headers, request); !why.empty()) {
      co_return StepFailed(a, cancel, true, "the 101 of " + address + " is not a valid upgrade", why);
    }
    a.done = true;
    a.timer.cancel();
    WebSocketSessionSetup setup;
    setup.role = WebSocketRole::kClient;
    setup.limits = options.limits;
    setup.write_timeout = options.write_timeout;
    setup.remote = remote;
    // Bytes after the 101's head are the server's first frames.
    setup.leftover = beast::buffers_to_string(a.buffer.data());
    setup.keep_alive = options.tls;
    std::shared_ptr<WebSocketSession> session;
    if (a.tls) {
      session = MakeWebSocketSession(env, std::move(*a.tls), std::move(setup));
    } else {
      session = MakeWebSocketSession(env, std::move(*a.plain), std::move(setup));
    }
    answer.connection =
        std::make_shared<WebSocketClientConnection>(std::move(session), std::move(answer.headers), remote);
    answer.status = 101;
    answer.headers = {};
    co_return std::move(answer);
  }

  // A refusal: its body too (under max_answer_body_bytes), then the connection is closed.
  if (!a.parser.is_done()) {
    ec = co_await Await(env, [&attempt](const Latch<error_code>& latch) {
      attempt->WithStream([&](auto& stream) {
        http::async_read(stream, attempt->buffer, attempt->parser,
                         [attempt, latch](const error_code& e, std::size_t) { latch.Set(e); });
      });
    });
    if (ec == http::error::body_limit) {
      co_return StepFailed(a, cancel, true, "reading the answer of " + address,
                           "its body is over " + std::to_string(options.max_answer_body_bytes) + " bytes");
    }
    if (ec || (cancel && cancel->cancelled())) {
      co_return StepFailed(a, cancel, true, "reading the answer of " + address, ec.message());
    }
  }
  answer.body = std::move(a.parser.get().body());
  a.done = true;
  a.timer.cancel();
  a.Abort();
  co_return std::move(answer);
}

}  // namespace wk
