#include "server/admin_http.h"

#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/log.h"
#include "base/metrics.h"

namespace wk {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// Limits of this file, with their reasons (the configurable ones are in Limits).
// After an error reply (400, 413, 431) the client may still be sending; closing with
// unread data makes the kernel send a reset, which can destroy the reply before the
// client reads it. So the server stops sending and reads and discards for a while first
// ("lingering close"), bounded in time and bytes so it cannot be used to hold a slot.
constexpr Duration kLingerTimeout = std::chrono::seconds(2);
constexpr std::size_t kMaxLingerBytes = 64 * 1024;
constexpr std::size_t kLingerReadBytes = 4 * 1024;
// A failed accept (out of file descriptors, say) is retried after this pause instead of
// at once, which would spin the loop while the condition lasts.
constexpr Duration kAcceptRetryDelay = std::chrono::milliseconds(100);

constexpr std::string_view kPlainText = "text/plain; charset=utf-8";
constexpr std::string_view kAllowedMethods = "GET, HEAD";

// Every beast::http::error (a malformed request) shares one category; socket errors
// and timeouts have others.
bool IsHttpParseError(const error_code& ec) {
  static const boost::system::error_category& http_category =
      http::make_error_code(http::error::bad_method).category();
  return ec.category() == http_category;
}

std::string AddressError(const std::string& address, std::string_view why) {
  return "admin listen address '" + address + "': " + std::string(why);
}

// "IP:PORT", "[IPv6]:PORT" or "localhost:PORT".
Result<tcp::endpoint> ParseListenAddress(const std::string& address) {
  std::string_view host;
  std::string_view port_text;
  const std::string_view text = address;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument(AddressError(address, "expected [IPv6]:PORT"));
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgument(AddressError(address, "expected IP:PORT (e.g. 127.0.0.1:9100)"));
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return InvalidArgument(
          AddressError(address, "an IPv6 address needs brackets (e.g. [::1]:9100)"));
    }
  }
  if (host.empty()) {
    // Not "all interfaces" by default: exposing the admin port must be a choice.
    return InvalidArgument(
        AddressError(address, "missing host (use 0.0.0.0:PORT to listen on every interface)"));
  }
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return InvalidArgument(AddressError(address, "port must be a number in 0..65535"));
  }
  net::ip::address ip;
  if (host == "localhost") {
    ip = net::ip::address_v4::loopback();
  } else {
    error_code parse_ec;
    ip = net::ip::make_address(std::string(host), parse_ec);
    if (parse_ec) {
      return InvalidArgument(AddressError(address, "host must be an IP address or localhost"));
    }
  }
  return tcp::endpoint(ip, static_cast<std::uint16_t>(port));
}

class Session;

}  // namespace

struct AdminHttpServer::State {
  State(net::io_context& io, std::string address, Handlers h, Limits l)
      : listen_address(std::move(address)),
        handlers(std::move(h)),
        limits(l),
        acceptor(io),
        retry_timer(io) {}

  const std::string listen_address;
  Handlers handlers;  // emptied by Stop(): never called after it
  const Limits limits;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  std::uint16_t port = 0;
  bool stopped = false;
  std::uint64_t next_session_id = 1;
  std::uint64_t rejected = 0;
  // Open connections, by id. Not owning: every Session is owned by its pending Asio
  // handlers and removes itself here when the last one lets go.
  std::unordered_map<std::uint64_t, std::weak_ptr<Session>> sessions;
};

namespace {

// One accepted connection. States: reading a request header -> writing its response ->
// (keep-alive) reading the next header, or (close) lingering -> closed. Also closed by a
// timeout, a socket error or Stop(). Always owned by shared_ptr, held by whichever Asio
// handler is pending, so buffers outlive every operation using them.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<AdminHttpServer::State> state, tcp::socket socket, std::uint64_t id)
      : state_(std::move(state)),
        stream_(std::move(socket)),
        // Twice the header limit: room for one maximal header plus the start of a
        // pipelined one. A header that does not fit is answered 431 like one too long.
        buffer_(2 * state_->limits.max_header_bytes),
        id_(id) {}

  ~Session() { state_->sessions.erase(id_); }

  void Start() { ReadRequest(); }

  // Stop(): cancels whatever is in flight; the handlers then see state_->stopped.
  void Abort() { stream_.close(); }

 private:
  void ReadRequest() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->limits.max_header_bytes));
    stream_.expires_after(state_->limits.idle_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](const error_code& ec, std::size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(const error_code& ec) {
    if (state_->stopped) return;
    if (ec) {
      if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
        Respond(http::status::request_header_fields_too_large, 11, "request header too large\n",
                kPlainText, /*keep_alive=*/false, /*head=*/false);
      } else if (IsHttpParseError(ec) && ec != http::error::end_of_stream &&
                 ec != http::error::partial_message) {
        Respond(http::status::bad_request, 11, "bad request\n", kPlainText, false, false);
      } else {
        // The client closed (between requests or mid-request), the idle timeout fired
        // (beast has closed the socket), or the socket failed: nothing to answer.
        Close();
      }
      return;
    }

    const auto& request = parser_->get();
    const unsigned version = request.version();
    const bool keep_alive = request.keep_alive();
    const bool has_body = parser_->chunked() || parser_->content_length().value_or(0) > 0;
    if (has_body) {
      Respond(http::status::payload_too_large, version, "request bodies are not accepted\n",
              kPlainText, false, false);
      return;
    }

    std::string_view path(request.target().data(), request.target().size());
    path = path.substr(0, path.find('?'));
    const bool is_get = request.method() == http::verb::get;
    const bool is_head = request.method() == http::verb::head;
    const AdminHttpServer::Handlers& h = state_->handlers;

    if (path != "/metrics" && path != "/healthz" && path != "/readyz") {
      Respond(http::status::not_found, version, "not found\n", kPlainText, keep_alive, is_head);
      return;
    }
    if (!is_get && !is_head) {
      Respond(http::status::method_not_allowed, version, "method not allowed\n", kPlainText,
              keep_alive, false, /*allow=*/true);
      return;
    }
    if (path == "/metrics") {
      Respond(http::status::ok, version, h.metrics_text(), kPrometheusTextContentType, keep_alive,
              is_head);
    } else if (path == "/healthz") {
      const bool healthy = h.healthy();
      Respond(healthy ? http::status::ok : http::status::service_unavailable, version,
              healthy ? "ok\n" : "unhealthy\n", kPlainText, keep_alive, is_head);
    } else {
      const bool ready = h.ready();
      std::string body = "ready\n";
      if (!ready) {
        body = h.ready_detail ? h.ready_detail() : std::string();
        if (body.empty()) body = "not ready";
        if (body.back() != '\n') body += '\n';
      }
      Respond(ready ? http::status::ok : http::status::service_unavailable, version,
              std::move(body), kPlainText, keep_alive, is_head);
    }
  }

  // Writes one response; then reads the next request (keep_alive) or closes.
  void Respond(http::status status, unsigned version, std::string body,
               std::string_view content_type, bool keep_alive, bool head, bool allow = false) {
    response_ = http::response<http::string_body>{};
    response_.result(status);
    response_.version(version);
    response_.set(http::field::content_type, content_type);
    // Probe answers change from one second to the next; no proxy may cache them.
    response_.set(http::field::cache_control, "no-store");
    if (allow) response_.set(http::field::allow, kAllowedMethods);
    response_.keep_alive(keep_alive);
    response_.body() = std::move(body);
    response_.prepare_payload();  // Content-Length of the GET body, also for HEAD
    if (head) response_.body().clear();
    stream_.expires_after(state_->limits.idle_timeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep_alive](const error_code& ec, std::size_t) {
                        self->OnWritten(ec, keep_alive);
                      });
  }

  void OnWritten(const error_code& ec, bool keep_alive) {
    if (state_->stopped) return;
    if (ec) {
      Close();
    } else if (keep_alive) {
      ReadRequest();
    } else {
      error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      stream_.expires_after(kLingerTimeout);
      Linger();
    }
  }

  // Reads and discards until the client closes, kLingerTimeout passes (the stream's
  // deadline, set once) or kMaxLingerBytes arrive.
  void Linger() {
    stream_.async_read_some(net::buffer(linger_buffer_),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                              if (self->state_->stopped) return;
                              self->lingered_bytes_ += n;
                              if (ec || self->lingered_bytes_ > kMaxLingerBytes) {
                                self->Close();
                              } else {
                                self->Linger();
                              }
                            });
  }

  void Close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  const std::shared_ptr<AdminHttpServer::State> state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> response_;
  std::array<char, kLingerReadBytes> linger_buffer_{};
  std::size_t lingered_bytes_ = 0;
  const std::uint64_t id_;
};

void Accept(const std::shared_ptr<AdminHttpServer::State>& state);

void OnAccepted(const std::shared_ptr<AdminHttpServer::State>& state, const error_code& ec,
                tcp::socket socket) {
  if (state->stopped) return;
  if (ec) {
    WK_LOG_WARN("admin HTTP accept failed",
                {{"address", state->listen_address}, {"error", ec.message()}});
    state->retry_timer.expires_after(kAcceptRetryDelay);
    state->retry_timer.async_wait([state](const error_code& wait_ec) {
      if (!wait_ec && !state->stopped) Accept(state);
    });
    return;
  }
  if (state->sessions.size() >= state->limits.max_connections) {
    // Closed before reading anything: the cheapest answer, and it keeps the slots for
    // the clients already connected. Debug level: a flood would otherwise flood the log.
    ++state->rejected;
    WK_LOG_DEBUG("admin HTTP connection rejected: too many open",
                 {{"address", state->listen_address}});
    error_code ignored;
    socket.close(ignored);
  } else {
    const std::uint64_t id = state->next_session_id++;
    auto session = std::make_shared<Session>(state, std::move(socket), id);
    state->sessions.emplace(id, session);
    session->Start();
  }
  Accept(state);
}

void Accept(const std::shared_ptr<AdminHttpServer::State>& state) {
  state->acceptor.async_accept([state](const error_code& ec, tcp::socket socket) {
    OnAccepted(state, ec, std::move(socket));
  });
}

}  // namespace

Result<std::unique_ptr<AdminHttpServer>> AdminHttpServer::Start(RealEnv& env,
                                                                std::string listen_address,
                                                                Handlers handlers, Limits limits) {
  WK_CHECK(handlers.metrics_text && handlers.healthy && handlers.ready,
           "AdminHttpServer needs the metrics_text, healthy and ready handlers");
  WK_CHECK(limits.max_connections > 0, "AdminHttpServer: max_connections must be > 0");
  WK_CHECK(limits.max_header_bytes >= 1024 && limits.max_header_bytes <= 1024 * 1024,
           "AdminHttpServer: max_header_bytes must be in 1 KiB..1 MiB");
  WK_CHECK(limits.idle_timeout > Duration::zero(), "AdminHttpServer: idle_timeout must be > 0");

  Result<tcp::endpoint> endpoint = ParseListenAddress(listen_address);
  if (!endpoint.ok()) return endpoint.status();

  auto state = std::make_shared<State>(env.context(), listen_address, std::move(handlers), limits);
  tcp::acceptor& acceptor = state->acceptor;
  error_code ec;
  std::string_view step = "open";
  acceptor.open(endpoint->protocol(), ec);
  if (!ec) {
    // Lets a restarted node bind while the old process's connections sit in TIME_WAIT.
    // (On Linux it does not let two live listeners share a port.)
    step = "set SO_REUSEADDR";
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    step = "bind";
    acceptor.bind(*endpoint, ec);
  }
  if (!ec) {
    step = "listen";
    acceptor.listen(net::socket_base::max_listen_connections, ec);
  }
  if (!ec) state->port = acceptor.local_endpoint(ec).port();
  if (ec) {
    return Fatal(AddressError(listen_address, "cannot " + std::string(step) + ": " + ec.message()));
  }

  Accept(state);
  WK_LOG_INFO("admin HTTP server listening",
              {{"address", listen_address}, {"port", std::to_string(state->port)}});
  return std::unique_ptr<AdminHttpServer>(new AdminHttpServer(std::move(state)));
}

AdminHttpServer::AdminHttpServer(std::shared_ptr<State> state) : state_(std::move(state)) {}

AdminHttpServer::~AdminHttpServer() { Stop(); }

std::uint16_t AdminHttpServer::bound_port() const { return state_->port; }
const std::string& AdminHttpServer::listen_address() const { return state_->listen_address; }
std::size_t AdminHttpServer::open_connections() const { return state_->sessions.size(); }
std::uint64_t AdminHttpServer::rejected_connections() const { return state_->rejected; }

void AdminHttpServer::Stop() {
  State& s = *state_;
  if (s.stopped) return;
  s.stopped = true;
  error_code ignored;
  s.acceptor.close(ignored);
  s.retry_timer.cancel();
  // Collected first: a Session whose last owner is released below erases itself from
  // the map, which must not happen while the map is being iterated.
  std::vector<std::shared_ptr<Session>> live;
  live.reserve(s.sessions.size());
  for (const auto& [id, weak] : s.sessions) {
    if (auto session = weak.lock()) live.push_back(std::move(session));
  }
  for (const auto& session : live) session->Abort();
  live.clear();
  s.handlers = {};  // drop the captures: they need not outlive Stop()
  WK_LOG_INFO("admin HTTP server stopped",
              {{"address", s.listen_address}, {"port", std::to_string(s.port)}});
}

}  // namespace wk
