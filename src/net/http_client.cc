#include "net/http_client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <deque>
#include <optional>
#include <unordered_map>

#include "base/version.h"
#include "net/plain_or_tls_socket.h"

namespace wk {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// Sets TCP_QUICKACK on the socket (best effort: a failure only costs the delayed ACK).
void QuickAck(boost::asio::ip::tcp::socket& socket) {
  const int one = 1;
  (void)::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

// Limits, with their reasons.
// S3's reply headers are about 1 KiB; this leaves room for proxies and CDNs.
constexpr std::uint32_t kMaxResponseHeaderBytes = 64 * 1024;
// One endpoint never needs more sockets than this; a bigger number is a typo that would
// exhaust file descriptors.
constexpr int kMaxConnectionsLimit = 1024;

bool IsIpLiteral(const std::string& host) {
  error_code ec;
  net::ip::make_address(host, ec);
  return !ec;
}

// One TCP (optionally TLS) connection and everything its in-flight operations touch.
// Always owned by shared_ptr: every Asio handler holds one, so an operation that
// completes after its caller gave up finds its buffers alive.
struct Connection : PlainOrTlsSocket, std::enable_shared_from_this<Connection> {
  Connection(net::io_context& io, ssl::context* tls_context, std::uint64_t connection_id)
      : PlainOrTlsSocket(tcp::socket(io), tls_context), id(connection_id), resolver(io) {}

  // Stops whatever is in flight and makes the connection unusable. The pending handlers
  // run later with operation_aborted.
  void Abort() {
    broken = true;
    resolver.cancel();
    error_code ignored;
    socket().close(ignored);
  }

  // A pooled connection the server has closed shows EOF (or an error) to a
  // non-blocking peek; bytes we did not ask for mean the stream is out of step. Either
  // way it must not carry another request.
  bool LooksAlive() {
    if (broken || !socket().is_open()) return false;
    char byte;
    ssize_t n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  const std::uint64_t id;
  tcp::resolver resolver;
  tcp::resolver::results_type endpoints;
  bool connected = false;  // connected (and TLS-established): may carry requests
  bool broken = false;     // aborted; never reused
  MonoTime idle_since{};
  boost::beast::flat_buffer buffer;
  std::optional<http::request<http::string_body>> request;
  std::optional<http::response_parser<http::string_body>> parser;
};

// What ends one wait of a call (see "Concept" in http_client.h).
struct Wake {
  enum Kind : std::uint8_t { kDone, kTimeout, kCancelled, kShutdown };
  Kind kind = kDone;
  error_code ec;                         // kDone: the operation's result
  std::shared_ptr<Connection> granted;   // kDone of a pool wait: a connection handed over
                                         // (null: a slot for a new connection)
};

// Shared by one call's coroutine and its deadline timer.
struct CallState {
  bool expired = false;
  std::optional<Latch<Wake>> current;  // the wait in progress, if any
};

HttpOutcome Failure(HttpFailure f, bool sent, std::string detail) {
  HttpOutcome out;
  out.failure = f;
  out.request_sent = sent;
  out.detail = std::move(detail);
  return out;
}

// Awaits one operation: start(latch) begins it and its handler sets the latch. Ends
// early with kTimeout / kCancelled when the deadline passes or the task is cancelled.
//
// Callers pass lambdas that capture by reference only. g++ 12 destroys a lambda's
// by-value captures twice when the lambda is a temporary inside a co_await expression
// (a shared_ptr capture becomes a use-after-free under ASan); start runs synchronously
// inside Step, so references are safe, and the handlers it creates copy what they need.
Task<Wake> Step(Env& env, std::shared_ptr<CallState> call,
                std::function<void(const Latch<Wake>&)> start) {
  CancelToken token = co_await CurrentCancel();
  if (token && token->cancelled()) co_return Wake{Wake::kCancelled};
  if (call->expired) co_return Wake{Wake::kTimeout};
  Latch<Wake> latch(env, [] { return Wake{Wake::kCancelled}; });
  call->current = latch;
  start(latch);
  Wake wake = co_await latch.Wait();
  call->current.reset();
  co_return wake;
}

}  // namespace

std::string_view HttpFailureName(HttpFailure f) {
  switch (f) {
    case HttpFailure::kNone: return "none";
    case HttpFailure::kResolveNotFound: return "resolve-not-found";
    case HttpFailure::kResolveFailed: return "resolve-failed";
    case HttpFailure::kConnectFailed: return "connect-failed";
    case HttpFailure::kTlsVerifyFailed: return "tls-verify-failed";
    case HttpFailure::kTlsHandshakeFailed: return "tls-handshake-failed";
    case HttpFailure::kTimeout: return "timeout";
    case HttpFailure::kConnectionLost: return "connection-lost";
    case HttpFailure::kResponseTooLarge: return "response-too-large";
    case HttpFailure::kCancelled: return "cancelled";
    case HttpFailure::kShutdown: return "shutdown";
  }
  return "?";
}

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (boost::beast::iequals(n, name)) return v;
  }
  return {};
}

// ---- The pool.

struct HttpClient::Pool : std::enable_shared_from_this<HttpClient::Pool> {
  Pool(RealEnv& e, HttpEndpoint ep, HttpClientOptions o)
      : env(e), endpoint(std::move(ep)), options(std::move(o)) {}

  struct Waiter {
    std::optional<Latch<Wake>> latch;
  };

  int total() const { return in_use + static_cast<int>(idle.size()); }
  // How many connections may be checked out for a request of this lane to take one more.
  int Limit(bool urgent) const {
    return urgent ? options.max_connections : options.max_connections - options.reserved_urgent_connections;
  }

  // REQUIRES: the caller holds a slot (in_use counts it).
  std::shared_ptr<Connection> NewConnection() {
    return std::make_shared<Connection>(env.context(), tls.get(), next_connection_id++);
  }

  void CheckOut(const std::shared_ptr<Connection>& conn) { busy[conn->id] = conn; }

  bool Reusable(Connection& conn) {
    if (env.MonoNow() - conn.idle_since >= options.max_idle) return false;
    return !options.peek_idle_connections || conn.LooksAlive();
  }

  // Gives back a checked-out connection (or the slot of one that is not reusable): to the
  // oldest urgent waiter still waiting, else to the oldest other waiter if the slot is one
  // that lane may take (in_use still counts the slot being handed over).
  void Release(std::shared_ptr<Connection> conn, bool reusable) {
    busy.erase(conn->id);
    if (shut_down || conn->broken) reusable = false;
    if (!reusable) conn->Abort();
    if (!shut_down && HandOver(urgent_waiters, conn, reusable)) return;
    if (!shut_down && in_use <= Limit(false) && HandOver(other_waiters, conn, reusable)) return;
    --in_use;
    WK_CHECK(in_use >= 0, "HttpClient pool slot released twice");
    if (reusable) {
      conn->idle_since = env.MonoNow();
      idle.push_back(std::move(conn));
      ScheduleReaper();
    }
  }

  // Hands the slot (and the connection, if reusable) to the first waiter of the queue that
  // is still waiting. False if none is.
  bool HandOver(std::deque<std::shared_ptr<Waiter>>& queue, const std::shared_ptr<Connection>& conn,
                bool reusable) {
    while (!queue.empty()) {
      std::shared_ptr<Waiter> w = std::move(queue.front());
      queue.pop_front();
      // Set fails for a waiter that already timed out or was cancelled: try the next.
      if (w->latch && w->latch->Set(Wake{Wake::kDone, {}, reusable ? conn : nullptr})) return true;
    }
    return false;
  }

  void ReapIdle() {
    const MonoTime now = env.MonoNow();
    while (!idle.empty() && now - idle.front()->idle_since >= options.max_idle) {
      idle.front()->Abort();
      idle.erase(idle.begin());
      ++stats.stale_dropped;
    }
  }

  // Keeps one timer armed for the oldest idle connection's expiry.
  void ScheduleReaper() {
    if (reaper || idle.empty() || shut_down) return;
    std::weak_ptr<Pool> weak = shared_from_this();
    reaper = env.StartTimer(idle.front()->idle_since + options.max_idle, [weak] {
      if (auto pool = weak.lock()) {
        pool->reaper.reset();
        pool->ReapIdle();
        pool->ScheduleReaper();
      }
    });
  }

  void Shutdown() {
    if (shut_down) return;
    shut_down = true;
    if (reaper) env.CancelTimer(*reaper);
    reaper.reset();
    for (auto& conn : idle) conn->Abort();
    idle.clear();
    for (auto& [id, weak] : busy) {
      if (auto conn = weak.lock()) conn->Abort();
    }
    for (auto* queue : {&urgent_waiters, &other_waiters}) {
      auto waiting = std::move(*queue);
      queue->clear();
      for (auto& w : waiting) {
        if (w->latch) w->latch->Set(Wake{Wake::kShutdown});
      }
    }
  }

  RealEnv& env;
  const HttpEndpoint endpoint;
  const HttpClientOptions options;
  std::shared_ptr<ssl::context> tls;  // null for http://
  // Connections checked out plus slots reserved for connections being opened. Invariants:
  // in_use + idle.size() <= options.max_connections; requests that are not urgent hold at
  // most Limit(false) of them.
  int in_use = 0;
  std::vector<std::shared_ptr<Connection>> idle;  // oldest first; reuse takes the newest
  std::deque<std::shared_ptr<Waiter>> urgent_waiters;  // FIFO
  std::deque<std::shared_ptr<Waiter>> other_waiters;   // FIFO
  std::unordered_map<std::uint64_t, std::weak_ptr<Connection>> busy;  // for Shutdown
  std::uint64_t next_connection_id = 1;
  bool shut_down = false;
  std::optional<Env::TimerId> reaper;
  HttpClientStats stats;
};

namespace {

using Pool = HttpClient::Pool;

struct Lease {
  std::shared_ptr<Connection> conn;  // null on failure
  Wake::Kind failure = Wake::kDone;
};

// A connection (pooled, or new and unconnected) and the slot it occupies, if the request's
// lane may take one ("Lanes", http_client.h). Waits at most once, for a Release or the
// deadline.
Task<Lease> Acquire(std::shared_ptr<Pool> pool, std::shared_ptr<CallState> call, bool allow_reuse, bool urgent) {
  if (pool->shut_down) co_return Lease{nullptr, Wake::kShutdown};
  const int max = pool->options.max_connections;
  const bool lane_has_room = pool->in_use < pool->Limit(urgent);
  if (lane_has_room && allow_reuse) {
    while (!pool->idle.empty()) {
      std::shared_ptr<Connection> conn = std::move(pool->idle.back());
      pool->idle.pop_back();
      if (pool->Reusable(*conn)) {
        ++pool->in_use;
        pool->CheckOut(conn);
        co_return Lease{std::move(conn)};
      }
      conn->Abort();
      ++pool->stats.stale_dropped;
    }
  } else if (lane_has_room && !pool->idle.empty() && pool->total() >= max) {
    // A fresh connection is wanted and the pool is full of idle ones: retire the oldest.
    pool->idle.front()->Abort();
    pool->idle.erase(pool->idle.begin());
  }
  if (lane_has_room && pool->total() < max) {
    ++pool->in_use;
    auto conn = pool->NewConnection();
    pool->CheckOut(conn);
    co_return Lease{std::move(conn)};
  }

  auto waiter = std::make_shared<Pool::Waiter>();
  auto& queue = urgent ? pool->urgent_waiters : pool->other_waiters;
  ++(urgent ? pool->stats.urgent_waits : pool->stats.other_waits);
  Wake wake = co_await Step(pool->env, call, [&queue, &waiter](const Latch<Wake>& latch) {
    waiter->latch = latch;
    queue.push_back(waiter);
  });
  // Still queued if the wait ended by timeout or cancellation.
  std::erase(queue, waiter);
  if (wake.kind != Wake::kDone) {
    if (wake.kind != Wake::kShutdown) ++(urgent ? pool->stats.urgent_wait_timeouts : pool->stats.other_wait_timeouts);
    co_return Lease{nullptr, wake.kind};
  }
  // Granted: Release handed its slot to us without decrementing in_use.
  std::shared_ptr<Connection> conn = std::move(wake.granted);
  if (conn && !allow_reuse) {
    conn->Abort();
    conn.reset();
  }
  if (!conn) conn = pool->NewConnection();
  pool->CheckOut(conn);
  if (pool->shut_down) {
    pool->Release(conn, false);
    co_return Lease{nullptr, Wake::kShutdown};
  }
  co_return Lease{std::move(conn)};
}

// The failure for a wait that ended without its operation completing, or nullopt.
std::optional<HttpOutcome> Interrupted(const Pool& pool, const Wake& wake, bool sent,
                                       std::string_view phase) {
  if (pool.shut_down) {
    return Failure(HttpFailure::kShutdown, sent,
                   "HTTP client shut down during " + std::string(phase));
  }
  switch (wake.kind) {
    case Wake::kDone: return std::nullopt;
    case Wake::kTimeout:
      return Failure(HttpFailure::kTimeout, sent, "deadline passed during " + std::string(phase));
    case Wake::kCancelled:
      return Failure(HttpFailure::kCancelled, sent, "cancelled during " + std::string(phase));
    case Wake::kShutdown:
      return Failure(HttpFailure::kShutdown, sent,
                     "HTTP client shut down during " + std::string(phase));
  }
  return std::nullopt;
}

// Resolves, connects and (for https) handshakes. Returns kNone on success.
Task<HttpOutcome> Connect(std::shared_ptr<Pool> pool, std::shared_ptr<CallState> call,
                          std::shared_ptr<Connection> conn) {
  const HttpEndpoint& ep = pool->endpoint;
  const std::string where = ep.host_header;

  Wake wake = co_await Step(pool->env, call, [&conn, &ep](const Latch<Wake>& latch) {
    conn->resolver.async_resolve(
        ep.host, std::to_string(ep.port), tcp::resolver::numeric_service,
        [conn, latch](const error_code& ec, tcp::resolver::results_type results) {
          conn->endpoints = std::move(results);
          latch.Set(Wake{Wake::kDone, ec});
        });
  });
  if (auto f = Interrupted(*pool, wake, false, "DNS resolution of " + where)) co_return *f;
  if (wake.ec) {
    // A name that does not exist needs an operator; a resolver hiccup does not.
    const bool not_found =
        wake.ec == net::error::host_not_found || wake.ec == net::error::no_data;
    co_return Failure(not_found ? HttpFailure::kResolveNotFound : HttpFailure::kResolveFailed,
                      false, "resolving " + ep.host + ": " + wake.ec.message());
  }

  wake = co_await Step(pool->env, call, [&conn](const Latch<Wake>& latch) {
    net::async_connect(conn->socket(), conn->endpoints,
                       [conn, latch](const error_code& ec, const tcp::endpoint&) {
                         latch.Set(Wake{Wake::kDone, ec});
                       });
  });
  if (auto f = Interrupted(*pool, wake, false, "connect to " + where)) co_return *f;
  if (wake.ec) {
    co_return Failure(HttpFailure::kConnectFailed, false,
                      "connect to " + where + ": " + wake.ec.message());
  }
  ++pool->stats.connections_opened;
  error_code ignored;
  // Requests are small and latency-bound; do not let Nagle hold the body back.
  conn->socket().set_option(tcp::no_delay(true), ignored);

  if (conn->tls) {
    SSL* native = conn->tls->native_handle();
    // SNI must be a DNS name (RFC 6066 forbids IP literals).
    if (!IsIpLiteral(ep.host)) SSL_set_tlsext_host_name(native, ep.host.c_str());
    if (!pool->options.tls_context) {
      // The default context: the CAs, then the host name. (A caller's context verifies
      // what it chose to, such as a pin.)
      conn->tls->set_verify_mode(ssl::verify_peer, ignored);
      conn->tls->set_verify_callback(ssl::host_name_verification(ep.host), ignored);
    }
    wake = co_await Step(pool->env, call, [&conn](const Latch<Wake>& latch) {
      conn->tls->async_handshake(ssl::stream_base::client, [conn, latch](const error_code& ec) {
        latch.Set(Wake{Wake::kDone, ec});
      });
    });
    if (auto f = Interrupted(*pool, wake, false, "TLS handshake with " + where)) co_return *f;
    if (wake.ec) {
      const long verify = SSL_get_verify_result(native);
      const bool verify_failed =
          verify != X509_V_OK ||
          (wake.ec.category() == net::error::get_ssl_category() &&
           ERR_GET_REASON(static_cast<unsigned long>(wake.ec.value())) ==
               SSL_R_CERTIFICATE_VERIFY_FAILED);
      if (verify_failed) {
        std::string why = verify != X509_V_OK ? X509_verify_cert_error_string(verify)
                                              : "certificate verify failed";
        co_return Failure(HttpFailure::kTlsVerifyFailed, false,
                          "TLS certificate of " + where + " not trusted: " + why);
      }
      co_return Failure(HttpFailure::kTlsHandshakeFailed, false,
                        "TLS handshake with " + where + ": " + wake.ec.message());
    }
  }
  conn->connected = true;
  co_return HttpOutcome{};
}

struct AttemptResult {
  HttpOutcome outcome;
  // Failed on a reused connection before any reply byte: the server had probably closed
  // it. An idempotent request may be re-sent on a new connection.
  bool stale = false;
};

Task<AttemptResult> Attempt(std::shared_ptr<Pool> pool, std::shared_ptr<CallState> call,
                            const HttpRequest& req, bool allow_reuse) {
  AttemptResult result;
  Lease lease = co_await Acquire(pool, call, allow_reuse, req.urgent);
  if (!lease.conn) {
    result.outcome = *Interrupted(*pool, Wake{lease.failure}, false, "wait for a free connection");
    co_return result;
  }
  std::shared_ptr<Connection> conn = std::move(lease.conn);
  const bool reused = conn->connected;
  if (reused) {
    ++pool->stats.reused;
  } else {
    HttpOutcome connected = co_await Connect(pool, call, conn);
    if (!connected.ok()) {
      pool->Release(conn, false);
      result.outcome = std::move(connected);
      co_return result;
    }
  }

  // ---- Send. From here on the server may act on the request.
  const std::string where = pool->endpoint.host_header;
  auto& msg = conn->request.emplace(req.method, req.target, 11);
  msg.set(http::field::host, pool->endpoint.host_header);
  msg.set(http::field::user_agent, kHttpUserAgent);
  for (const auto& [name, value] : req.headers) msg.set(name, value);
  msg.body() = req.body;
  msg.prepare_payload();
  msg.keep_alive(true);
  ++pool->stats.requests_sent;
  Wake wake = co_await Step(pool->env, call, [&conn](const Latch<Wake>& latch) {
    conn->WithStream([&](auto& stream) {
      http::async_write(stream, *conn->request,
                        [conn, latch](const error_code& ec, std::size_t) {
                          latch.Set(Wake{Wake::kDone, ec});
                        });
    });
  });
  if (auto f = Interrupted(*pool, wake, true, "send to " + where)) {
    pool->Release(conn, false);
    result.outcome = std::move(*f);
    co_return result;
  }
  if (wake.ec) {
    pool->Release(conn, false);
    result.outcome = Failure(HttpFailure::kConnectionLost, true,
                             "sending to " + where + ": " + wake.ec.message());
    result.stale = reused;
    co_return result;
  }

  // ---- Receive.
  // Acknowledge the reply's first segment at once. A server that writes the header and the
  // body in two sends with Nagle's algorithm on (Ceph RGW does) holds the body until that
  // segment is acknowledged, and Linux delays the ACK of a reused connection by up to 40 ms
  // when nothing of ours is ready to carry it (docs/benchmarks.md). Quick-ACK mode is not
  // sticky (the kernel leaves it by itself), so it is set again before every reply.
  QuickAck(conn->socket());
  auto& parser = conn->parser.emplace();
  parser.body_limit(static_cast<std::uint64_t>(pool->options.max_response_body_bytes));
  parser.header_limit(kMaxResponseHeaderBytes);
  // A HEAD reply carries Content-Length but no body.
  if (req.method == http::verb::head) parser.skip(true);
  wake = co_await Step(pool->env, call, [&conn](const Latch<Wake>& latch) {
    conn->WithStream([&](auto& stream) {
      http::async_read(stream, conn->buffer, *conn->parser,
                       [conn, latch](const error_code& ec, std::size_t) {
                         latch.Set(Wake{Wake::kDone, ec});
                       });
    });
  });
  if (wake.kind != Wake::kDone || wake.ec) {
    const bool got_some = conn->parser->got_some();
    pool->Release(conn, false);
    if (auto f = Interrupted(*pool, wake, true, "wait for the reply from " + where)) {
      result.outcome = std::move(*f);
    } else if (wake.ec == http::error::body_limit) {
      result.outcome = Failure(HttpFailure::kResponseTooLarge, true,
                               "reply from " + where + " is larger than " +
                                   std::to_string(pool->options.max_response_body_bytes) +
                                   " bytes");
    } else {
      result.outcome = Failure(HttpFailure::kConnectionLost, true,
                               "reading the reply from " + where + ": " + wake.ec.message());
      result.stale = reused && !got_some;
    }
    co_return result;
  }

  // A complete reply is the truth even if the deadline passed or the client is being
  // destroyed meanwhile: return it.
  auto& res = conn->parser->get();
  HttpResponse& out = result.outcome.response;
  out.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  const bool reusable = res.keep_alive() && conn->buffer.size() == 0;
  out.body = std::move(res.body());
  result.outcome.request_sent = true;
  conn->parser.reset();
  conn->request.reset();
  pool->Release(std::move(conn), reusable);
  co_return result;
}

Task<HttpOutcome> SendOnPool(std::shared_ptr<Pool> pool, HttpRequest request, MonoTime deadline) {
  auto call = std::make_shared<CallState>();
  std::weak_ptr<CallState> weak = call;
  const Env::TimerId timer = pool->env.StartTimer(deadline, [weak] {
    if (auto c = weak.lock()) {
      c->expired = true;
      if (c->current) c->current->Set(Wake{Wake::kTimeout});
    }
  });
  AttemptResult attempt = co_await Attempt(pool, call, request, /*allow_reuse=*/true);
  if (attempt.stale && request.idempotent) {
    ++pool->stats.stale_resends;
    attempt = co_await Attempt(pool, call, request, /*allow_reuse=*/false);
  }
  pool->env.CancelTimer(timer);
  co_return std::move(attempt.outcome);
}

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Create(RealEnv& env, HttpEndpoint endpoint,
                                                      HttpClientOptions options) {
  if (options.max_connections < 1 || options.max_connections > kMaxConnectionsLimit) {
    return InvalidArgument("max_connections must be in 1.." + std::to_string(kMaxConnectionsLimit));
  }
  if (options.reserved_urgent_connections < 0 || options.reserved_urgent_connections >= options.max_connections) {
    return InvalidArgument("reserved_urgent_connections must be in 0.." + std::to_string(options.max_connections - 1) +
                           " (below max_connections)");
  }
  if (options.max_idle <= Duration::zero()) return InvalidArgument("max_idle must be positive");
  auto pool = std::make_shared<Pool>(env, std::move(endpoint), std::move(options));
  if (pool->endpoint.tls && pool->options.tls_context) {
    pool->tls = pool->options.tls_context;
  } else if (pool->endpoint.tls) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    error_code ec;
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                         ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                         ssl::context::no_tlsv1_1,
                     ec);
    ctx->set_default_verify_paths(ec);
    if (ec) return Fatal("cannot load the system's CA certificates: " + ec.message());
    if (!pool->options.extra_ca_pem.empty()) {
      ctx->add_certificate_authority(net::buffer(pool->options.extra_ca_pem), ec);
      if (ec) return InvalidArgument("extra CA certificate does not parse: " + ec.message());
    }
    ctx->set_verify_mode(ssl::verify_peer, ec);
    pool->tls = std::move(ctx);
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(pool)));
}

HttpClient::~HttpClient() { pool_->Shutdown(); }

void HttpClient::Shutdown() { pool_->Shutdown(); }

Task<HttpOutcome> HttpClient::Send(HttpRequest request, MonoTime deadline) {
  // Not a coroutine itself: the returned Task holds the pool, never `this`, so it may
  // outlive the HttpClient.
  return SendOnPool(pool_, std::move(request), deadline);
}

const HttpEndpoint& HttpClient::endpoint() const { return pool_->endpoint; }

HttpClientStats HttpClient::stats() const {
  HttpClientStats s = pool_->stats;
  s.idle = static_cast<int>(pool_->idle.size());
  s.in_use = pool_->in_use;
  return s;
}

}  // namespace wk
