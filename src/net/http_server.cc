#include "net/http_server.h"

#include <openssl/ssl.h>

#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/ascii.h"
#include "base/log.h"
#include "net/tls_identity.h"
#include "net/websocket.h"
#include "net/websocket_frames.h"
#include "net/websocket_session.h"

namespace wk {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// Limits of this file, with their reasons (the configurable ones are in HttpServerLimits).
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
// A handler task is named after its request (Env::LiveTaskNames, the shutdown report);
// this much of the target is enough to recognise it.
constexpr std::size_t kTaskNameTargetBytes = 80;
// Beast keeps a field's name and value lengths in 16 bits (and throws beyond them).
constexpr std::size_t kMaxResponseFieldBytes = std::numeric_limits<std::uint16_t>::max() - 2;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// Every beast::http::error (a malformed request) shares one category; socket errors
// and timeouts have others.
bool IsHttpParseError(const error_code& ec) {
  static const boost::system::error_category& http_category =
      http::make_error_code(http::error::bad_method).category();
  return ec.category() == http_category;
}

std::string AddressError(const std::string& address, std::string_view why) {
  return "listen address '" + address + "': " + std::string(why);
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
      return InvalidArgument(AddressError(address, "expected IP:PORT (e.g. 127.0.0.1:8080)"));
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return InvalidArgument(
          AddressError(address, "an IPv6 address needs brackets (e.g. [::1]:8080)"));
    }
  }
  if (host.empty()) {
    // Not "all interfaces" by default: exposing the port must be a choice.
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

std::string FormatEndpoint(const tcp::endpoint& endpoint) {
  const std::string ip = endpoint.address().to_string();
  const std::string port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + ip + "]:" + port : ip + ":" + port;
}

// What max_connections_per_client counts by: an IPv4 address (an IPv4-mapped IPv6 one
// included), or an IPv6 address's /64, the block one host or one customer is usually
// given (counting whole IPv6 addresses would let one host open as many as it likes).
std::string ClientKey(const net::ip::address& address) {
  if (address.is_v6()) {
    const net::ip::address_v6 v6 = address.to_v6();
    if (v6.is_v4_mapped()) return net::ip::make_address_v4(net::ip::v4_mapped, v6).to_string();
    net::ip::address_v6::bytes_type bytes = v6.to_bytes();
    std::fill(bytes.begin() + 8, bytes.end(), 0);
    return net::ip::address_v6(bytes).to_string() + "/64";
  }
  return address.to_string();
}

// RFC 9110 section 5.6.2: token = 1*tchar.
// Why the server will not send these response headers as they are; empty when it will.
std::string InvalidHeadersReason(const ServerHeaders& headers) {
  for (const auto& [name, value] : headers) {
    if (!IsHttpToken(name) || name.size() > kMaxResponseFieldBytes) {
      return "header name '" + name.substr(0, 64) + "' is not a token";
    }
    if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos ||
        value.size() > kMaxResponseFieldBytes) {
      return "header '" + name + "' has CR, LF or NUL in its value, or is too long";
    }
  }
  return {};
}

// Why the server will not send a handler's response as it is; empty when it will.
std::string InvalidResponseReason(const ServerResponse& response) {
  if (response.status < 200 || response.status > 599) {
    return "status " + std::to_string(response.status) + " is not in 200..599";
  }
  return InvalidHeadersReason(response.headers);
}

// Why the server will not upgrade with this response (status 101 or upgrade set); empty
// when it will. key: the request's Sec-WebSocket-Key, empty unless the request was a valid
// opening handshake (CheckWebSocketHandshake) in HTTP/1.1.
std::string InvalidUpgradeReason(const ServerResponse& response, std::string_view key) {
  if (!response.upgrade) return "status 101 without an upgrade";
  if (response.status != 101) return "an upgrade with status " + std::to_string(response.status) + ", not 101";
  if (key.empty()) return "an upgrade for a request that is not a valid WebSocket opening handshake";
  const WebSocketLimits& limits = response.upgrade->limits;
  if (limits.ping_interval <= Duration::zero() || limits.close_timeout <= Duration::zero()) {
    return "an upgrade whose ping_interval or close_timeout is not > 0";
  }
  return InvalidHeadersReason(response.upgrade->headers);
}

// The headers of a 101 the server writes itself (a handler's are dropped).
bool IsUpgradeOwnHeader(std::string_view name) {
  return beast::iequals(name, "Upgrade") || beast::iequals(name, "Connection") ||
         beast::iequals(name, "Sec-WebSocket-Accept") || beast::iequals(name, "Content-Length") ||
         beast::iequals(name, "Transfer-Encoding");
}

std::optional<std::uint64_t> ParseContentLength(std::string_view text) {
  std::uint64_t length = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return length;
}

// Whether a request's header section (from wherever the parser stands in it, through the
// CRLF that ends its last field line; continues_line: the start line was consumed already,
// so text begins a field line) has a line that begins with SP or HTAB: an obs-fold, or
// whitespace between the start line and the first field. RFC 9112 sections 5.2 and 2.2:
// a server must refuse it (or rewrite it, which a proxy in front may do differently).
bool HasFoldedLine(std::string_view text, bool continues_line) {
  if (continues_line && !text.empty() && (text.front() == ' ' || text.front() == '\t')) return true;
  return text.find("\r\n ") != std::string_view::npos || text.find("\r\n\t") != std::string_view::npos;
}

// Why a parsed request's framing is refused (RFC 9112 sections 6.1 and 6.3), or empty.
// The parser accepts each of these, and a proxy in front may frame such a request
// differently from this server (request smuggling), so only one framing passes: at most
// one Content-Length field holding one decimal number, or (HTTP/1.1 only) a
// Transfer-Encoding of exactly "chunked" and no Content-Length.
template <typename Header>
std::string FramingError(const Header& header) {
  std::size_t length_fields = 0;
  std::string_view length_value;
  std::vector<std::string_view> codings;
  bool has_transfer_encoding = false;
  for (const auto& field : header) {
    if (field.name() == http::field::content_length) {
      ++length_fields;
      length_value = field.value();
    } else if (field.name() == http::field::transfer_encoding) {
      has_transfer_encoding = true;
      ForEachHeaderListItem(field.value(), [&](std::string_view coding) { codings.push_back(coding); });
    }
  }
  if (has_transfer_encoding) {
    if (header.version() < 11) return "bad request: Transfer-Encoding in an HTTP/1.0 request\n";
    if (length_fields > 0) return "bad request: both Transfer-Encoding and Content-Length\n";
    if (codings.size() != 1 || !beast::iequals(codings.front(), "chunked")) {
      return "bad request: the only Transfer-Encoding accepted is chunked alone\n";
    }
  }
  if (length_fields > 1) return "bad request: more than one Content-Length field\n";
  if (length_fields == 1 && !ParseContentLength(length_value)) {
    return "bad request: Content-Length must be one decimal number\n";
  }
  return {};
}

// What Stop() and the eviction need of a session, whichever stream it runs on.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Cancels whatever is in flight; the Asio handlers then see the server stopped.
  virtual void Abort() = 0;
  // Closes the connection to make room for a new one (it has no complete request).
  virtual void Evict() = 0;
};

}  // namespace

struct HttpServer::State {
  State(RealEnv& e, std::string address, ServerHandler h, HttpServerLimits l, HeaderCheck check,
        std::shared_ptr<net::ssl::context> tls_context)
      : env(e),
        listen_address(std::move(address)),
        handler(std::make_shared<const ServerHandler>(std::move(h))),
        header_check(check ? std::make_shared<const HeaderCheck>(std::move(check)) : nullptr),
        limits(l),
        tls(std::move(tls_context)),
        acceptor(e.context()),
        retry_timer(e.context()) {}

  RealEnv& env;
  const std::string listen_address;
  // Reset by Stop(); each handler task holds its own reference while it runs.
  std::shared_ptr<const ServerHandler> handler;
  // Null when Start had none; reset by Stop() like handler.
  std::shared_ptr<const HeaderCheck> header_check;
  const HttpServerLimits limits;
  const std::shared_ptr<net::ssl::context> tls;  // null: plain HTTP
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  std::uint16_t port = 0;
  bool stopped = false;
  std::uint64_t next_session_id = 1;
  std::uint64_t rejected = 0;
  std::uint64_t rejected_per_client = 0;
  std::uint64_t evicted = 0;
  std::uint64_t bodies_refused = 0;
  // Connections holding a slot: accepted and not yet closed (a closed Session may live a
  // little longer, until its pending Asio handlers have run, without holding one).
  std::size_t open = 0;
  // Slots held per ClientKey; an entry is erased when its count reaches 0.
  std::unordered_map<std::string, std::size_t> per_client;
  // The connections that may be evicted (no complete request header yet), oldest first:
  // (tier, order) -> session id. Tier 0: no request yet on the connection; tier 1: an idle
  // keep-alive connection, or one reading a later request's header.
  std::map<std::pair<int, std::uint64_t>, std::uint64_t> evictable;
  std::uint64_t next_evictable_order = 0;
  // Bytes of request bodies reserved (see BodyReservation).
  std::size_t body_bytes = 0;
  // Open connections, by id. Not owning: every Session is owned by its pending Asio
  // handler or by its running handler task, and removes itself here when the last one
  // lets go. Emptied by Stop().
  std::unordered_map<std::uint64_t, std::weak_ptr<SessionBase>> sessions;
  // Upgraded connections whose socket is open, by id (the HTTP session's). Not owning, like
  // sessions; emptied by Stop().
  std::unordered_map<std::uint64_t, std::weak_ptr<WebSocketSession>> websockets;
  // WebSockets ended, by WebSocketEnd.
  std::array<std::uint64_t, kWebSocketEndCount> websockets_closed{};
};

namespace {

// Bytes of max_buffered_body_bytes held by one request's body, from its header until its
// handler's Task ends (the body lives in that Task) or the connection closes before.
class BodyReservation {
 public:
  BodyReservation(std::shared_ptr<HttpServer::State> state, std::size_t bytes)
      : state_(std::move(state)), bytes_(bytes) {
    state_->body_bytes += bytes_;
  }
  ~BodyReservation() {
    if (state_) state_->body_bytes -= bytes_;
  }
  BodyReservation(BodyReservation&& other) noexcept
      : state_(std::move(other.state_)), bytes_(std::exchange(other.bytes_, 0)) {}
  BodyReservation& operator=(BodyReservation&&) = delete;
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;

 private:
  std::shared_ptr<HttpServer::State> state_;
  std::size_t bytes_;
};


// One accepted connection; see the states in http_server.h: waiting -> reading ->
// handling -> writing -> waiting (keep-alive), or lingering -> closed after a response
// that closes. Also closed by a timeout, a socket error or Stop(). Always owned by
// shared_ptr, held by whichever Asio handler is pending or by the handler task, so
// buffers outlive every operation using them. Stream is beast::tcp_stream (plain) or
// beast::ssl_stream over one (TLS: a handshake comes first, within read_timeout and the
// first request's deadline).
template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  // Takes one slot (open, per_client[client_key]); the caller has checked the caps.
  Session(std::shared_ptr<HttpServer::State> state, Stream stream, std::uint64_t id,
          std::string remote, std::string client_key)
      : state_(std::move(state)),
        stream_(std::move(stream)),
        // Twice the header limit: room for one maximal header plus the start of a
        // pipelined one. A header that does not fit is answered 431 like one too long.
        buffer_(2 * state_->limits.max_header_bytes),
        id_(id),
        remote_(std::move(remote)),
        client_key_(std::move(client_key)),
        first_request_deadline_(std::chrono::steady_clock::now() + state_->limits.first_request_timeout) {
    ++state_->open;
    ++state_->per_client[client_key_];
  }

  ~Session() override {
    ReleaseSlot();
    state_->sessions.erase(id_);
  }

  void Start() {
    if constexpr (kTls) {
      Handshake();
    } else {
      WaitForRequest();
    }
  }

  // Stop(): cancels whatever is in flight; the Asio handlers then see state_->stopped.
  void Abort() override {
    ReleaseSlot();
    Lowest().close();
  }

  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

  // Closes the connection to make room for a new one (it has no complete request).
  void Evict() override {
    WK_LOG_DEBUG("HTTP connection evicted for a new one",
                 {{"address", state_->listen_address}, {"remote", remote_}});
    Close();
  }

  bool stopped() const { return state_->stopped; }

  // The handler task's answer to the request Dispatch() handed out.
  void OnHandled(ServerResponse response) {
    if (state_->stopped) {
      if (response.upgrade && response.upgrade->abandoned) response.upgrade->abandoned();
      return;
    }
    if (response.upgrade || response.status == 101) {
      Upgrade(std::move(response));
      return;
    }
    Write(std::move(response));
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // TLS: the handshake, under read_timeout and the first request's deadline. A client
  // whose certificate the context refuses (the peer listener's pin check) fails here and
  // is closed without an answer. Evictable meanwhile, like a connection without a request.
  void Handshake() {
    MarkEvictable();
    Lowest().expires_at(
        std::min(std::chrono::steady_clock::now() + state_->limits.read_timeout, first_request_deadline_));
    stream_.async_handshake(net::ssl::stream_base::server, [self = shared_from_this()](const error_code& ec) {
      if (self->state_->stopped) return;
      if (ec) {
        // Debug level: a scanner or a refused peer would otherwise flood the log.
        WK_LOG_DEBUG("TLS handshake failed",
                     {{"address", self->state_->listen_address}, {"remote", self->remote_}, {"error", ec.message()}});
        self->Close();
        return;
      }
      if (X509* cert = SSL_get0_peer_certificate(self->stream_.native_handle())) self->peer_pin_ = SpkiPin(cert);
      self->WaitForRequest();
    });
  }

  // Waiting: for the first bytes of the next request, under idle_timeout (the first
  // request: also under first_request_timeout from the accept).
  void WaitForRequest() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->limits.max_header_bytes));
    parser_->body_limit(state_->limits.max_body_bytes);
    reading_body_ = false;
    MarkEvictable();
    if (buffer_.size() > 0) {  // a pipelined request has arrived already
      ReadHeader();
      return;
    }
    const auto idle_deadline = std::chrono::steady_clock::now() + state_->limits.idle_timeout;
    Lowest().expires_at(headers_read_ == 0 ? std::min(idle_deadline, first_request_deadline_) : idle_deadline);
    stream_.async_read_some(buffer_.prepare(buffer_.max_size()),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                              if (self->state_->stopped) return;
                              if (ec) {
                                // Closed between requests, idle too long, or failed.
                                self->Close();
                                return;
                              }
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  // Reading: read_timeout from here covers the header, the body and a 100 Continue; the
  // first request's header must also end by first_request_deadline_.
  void ReadHeader() {
    request_deadline_ = std::chrono::steady_clock::now() + state_->limits.read_timeout;
    Lowest().expires_at(headers_read_ == 0 ? std::min(request_deadline_, first_request_deadline_)
                                          : request_deadline_);
    header_scanned_ = 0;
    header_consumed_ = 0;
    ParseHeader();
  }

  // The header's read loop (what http::async_read_header does, plus a look at the raw
  // bytes). The parser folds an obs-fold into the field's value without a trace, so the
  // raw header is checked here first: the parser consumes a start line as soon as it is
  // whole, but the fields only all at once, so when the blank line that ends them has
  // arrived, every field line is still in buffer_.
  void ParseHeader() {
    const std::string_view raw(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    // Searched from where the last search stopped (less the 3 bytes an end split across
    // reads may have begun with): a header trickled in byte by byte costs linear time.
    const std::size_t end = raw.find("\r\n\r\n", header_scanned_ >= 3 ? header_scanned_ - 3 : 0);
    if (end == std::string_view::npos) {
      header_scanned_ = raw.size();
    } else if (HasFoldedLine(raw.substr(0, end + 2), header_consumed_ > 0)) {
      UnmarkEvictable();
      RespondError(400, "bad request: a folded header line (obs-fold)\n");
      return;
    }
    error_code ec;
    const std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    header_consumed_ += used;
    header_scanned_ -= std::min(used, header_scanned_);
    if (ec != http::error::need_more) {
      OnHeader(ec);
      return;
    }
    if (buffer_.size() >= buffer_.max_size()) {
      OnHeader(http::error::buffer_overflow);
      return;
    }
    stream_.async_read_some(buffer_.prepare(buffer_.max_size() - buffer_.size()),
                            [self = shared_from_this()](const error_code& read_ec, std::size_t n) {
                              if (self->state_->stopped) return;
                              if (read_ec) {
                                // Closed mid-header, the read timeout, a failed socket:
                                // OnReadError closes without an answer.
                                self->OnHeader(read_ec == net::error::eof
                                                   ? error_code(http::error::partial_message)
                                                   : read_ec);
                                return;
                              }
                              self->buffer_.commit(n);
                              self->ParseHeader();
                            });
  }

  void OnHeader(const error_code& ec) {
    if (state_->stopped) return;
    UnmarkEvictable();
    if (ec) {
      OnReadError(ec);
      return;
    }
    ++headers_read_;
    Lowest().expires_at(request_deadline_);  // the body: read_timeout from the first byte
    const http::request_parser<http::string_body>::value_type& header = parser_->get();
    if (header.version() >= 11 && header.find(http::field::host) == header.end()) {
      RespondError(400, "bad request: an HTTP/1.1 request needs a Host header\n");
      return;
    }
    if (header.count(http::field::host) > 1) {
      // Two Hosts may be read differently by a proxy in front and by this server.
      RespondError(400, "bad request: more than one Host header\n");
      return;
    }
    if (const std::string framing = FramingError(header); !framing.empty()) {
      RespondError(400, framing);
      return;
    }
    // The request as the handler will see it, taken now: fields a chunked body's trailer
    // adds later are not the header's and are dropped (http_server.h, "Requests").
    version_ = header.version();
    keep_alive_ = header.keep_alive();
    head_ = header.method() == http::verb::head;
    request_ = ServerRequest{};
    request_.method.assign(header.method_string().data(), header.method_string().size());
    request_.target.assign(header.target().data(), header.target().size());
    request_.headers.reserve(static_cast<std::size_t>(std::distance(header.begin(), header.end())));
    for (const auto& field : header) {
      request_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request_.remote = remote_;
    request_.peer_cert_pin = peer_pin_;
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
    if (parser_->chunked() && state_->limits.max_body_bytes == 0) {
      RespondError(413, "request bodies are not accepted\n");
      return;
    }
    if (state_->header_check) {
      std::string name = "http check " + request_.method + " " + request_.target.substr(0, kTaskNameTargetBytes);
      state_->env.Spawn(RunHeaderCheck(state_->header_check, shared_from_this(), request_), std::move(name));
      return;
    }
    ReceiveBody();
  }

  // Checking: the header check's Task, on the Env (like a handler's).
  static Task<void> RunHeaderCheck(std::shared_ptr<const HeaderCheck> check, std::shared_ptr<Session> session,
                                   ServerRequest request) {
    if (session->stopped()) co_return;
    Task<std::optional<ServerResponse>> call = (*check)(request);
    std::optional<ServerResponse> answer = co_await std::move(call);
    session->OnChecked(std::move(answer));
  }

  void OnChecked(std::optional<ServerResponse> answer) {
    if (state_->stopped) return;
    if (answer) {
      // The body stays unread: the connection cannot carry another request.
      keep_alive_ = false;
      Write(std::move(*answer));
      return;
    }
    Lowest().expires_at(request_deadline_);
    ReceiveBody();
  }

  // Reserves the body's bytes, answers a 100 Continue if asked, then reads the body.
  void ReceiveBody() {
    const std::uint64_t declared = parser_->chunked() ? state_->limits.max_body_bytes
                                                      : parser_->content_length().value_or(0);
    const std::size_t bytes = static_cast<std::size_t>(declared);
    if (state_->body_bytes + bytes > state_->limits.max_buffered_body_bytes) {
      ++state_->bodies_refused;
      WK_LOG_DEBUG("HTTP request body refused: too many bodies held",
                   {{"address", state_->listen_address}, {"remote", remote_}, {"bytes", std::to_string(bytes)}});
      RespondError(503, "busy: too many request bodies are being received; retry\n", /*retry_after=*/true);
      return;
    }
    body_.emplace(state_, bytes);
    const http::request_parser<http::string_body>::value_type& header = parser_->get();
    const auto expect = header.find(http::field::expect);
    if (header.version() >= 11 && expect != header.end() &&
        beast::iequals(expect->value(), "100-continue")) {
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](const error_code& write_ec, std::size_t) {
                         if (self->state_->stopped) return;
                         if (write_ec) {
                           self->Close();
                         } else {
                           self->ReadBody();
                         }
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    reading_body_ = true;
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](const error_code& ec, std::size_t) {
                       if (self->state_->stopped) return;
                       if (ec) {
                         self->OnReadError(ec);
                       } else {
                         self->Dispatch();
                       }
                     });
  }

  void OnReadError(const error_code& ec) {
    if (ec == http::error::body_limit) {
      // A Content-Length over the limit fails right after the header, unread.
      RespondError(413, "request body too large\n");
    } else if (!reading_body_ &&
               (ec == http::error::header_limit || ec == http::error::buffer_overflow)) {
      RespondError(431, "request header too large\n");
    } else if (IsHttpParseError(ec) && ec != http::error::end_of_stream &&
               ec != http::error::partial_message) {
      RespondError(400, "bad request\n");
    } else {
      // The client closed (mid-request), the read timeout fired (beast has closed the
      // socket), or the socket failed: nothing to answer.
      Close();
    }
  }

  // Handling: the request (taken in OnHeader; the body now) goes to the handler as its
  // own task on the Env.
  void Dispatch() {
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    ServerRequest request = std::move(request_);
    request_ = ServerRequest{};
    request.body = std::move(message.body());
    // Whether the handler may upgrade this connection (checked again here, whatever the
    // handler concluded); RFC 6455 section 4.1 asks for HTTP/1.1 at least.
    upgrade_key_.clear();
    if (const std::optional<std::string> check = CheckWebSocketHandshake(request);
        check && check->empty() && version_ >= 11) {
      upgrade_key_ = std::string(request.Header("Sec-WebSocket-Key").value_or(""));
    }

    std::string name = "http " + request.method + " " + request.target.substr(0, kTaskNameTargetBytes);
    Lowest().expires_never();  // the handler bounds its own time
    std::optional<BodyReservation> body = std::move(body_);
    body_.reset();
    state_->env.Spawn(RunHandler(state_->handler, shared_from_this(), std::move(request), std::move(body)),
                      std::move(name));
  }

  // A spawned task starts on a later turn of the loop: the server may have stopped by
  // then, and the handler must not be called after Stop(). body holds the request body's
  // share of max_buffered_body_bytes until the task ends.
  static Task<void> RunHandler(std::shared_ptr<const ServerHandler> handler,
                               std::shared_ptr<Session> session, ServerRequest request,
                               std::optional<BodyReservation> body) {
    if (session->stopped()) co_return;
    Task<ServerResponse> call = (*handler)(std::move(request));
    ServerResponse response = co_await std::move(call);
    body.reset();  // the handler is done with the body (a cancelled task frees it too)
    session->OnHandled(std::move(response));
  }

  // Upgrading: writes the 101 (websocket.h), then hands the stream to a WebSocketSession.
  // Anything wrong with the response is a 500 (and its upgrade is abandoned).
  void Upgrade(ServerResponse response) {
    std::string why = InvalidUpgradeReason(response, upgrade_key_);
    const std::string accept = why.empty() ? WebSocketAcceptKey(upgrade_key_) : std::string();
    if (why.empty() && accept.empty()) why = "OpenSSL could not compute Sec-WebSocket-Accept";
    if (!why.empty()) {
      WK_LOG_WARN("HTTP handler's upgrade not done, answering 500",
                  {{"why", why}, {"remote", remote_}, {"address", state_->listen_address}});
      const std::shared_ptr<WebSocketUpgrade> upgrade = std::move(response.upgrade);
      if (upgrade && upgrade->abandoned) {
        upgrade->abandoned();
        if (state_->stopped) return;  // abandoned may stop the server
      }
      Write(TextResponse(500, "internal error: invalid upgrade\n"));
      return;
    }
    upgrade_response_ =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: " + accept + "\r\n";
    for (const auto& [name, value] : response.upgrade->headers) {
      if (IsUpgradeOwnHeader(name)) continue;
      upgrade_response_ += name + ": " + value + "\r\n";
    }
    upgrade_response_ += "\r\n";
    pending_upgrade_ = std::move(response.upgrade);
    Lowest().expires_after(state_->limits.write_timeout);
    net::async_write(stream_, net::buffer(upgrade_response_),
                     [self = shared_from_this()](const error_code& ec, std::size_t) { self->OnUpgradeWritten(ec); });
  }

  void OnUpgradeWritten(const error_code& ec) {
    std::string().swap(upgrade_response_);
    const std::shared_ptr<WebSocketUpgrade> upgrade = std::move(pending_upgrade_);
    if (state_->stopped || ec) {
      // The 101 did not go out: the handler's reservation is undone, attach never called.
      if (!state_->stopped) Close();
      if (upgrade->abandoned) upgrade->abandoned();
      return;
    }
    // Bytes after the request header are the client's first frames.
    const std::string leftover(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.clear();
    buffer_.shrink_to_fit();
    Lowest().expires_never();
    // The connection leaves the HTTP accounting: no slot, no longer this session's.
    ReleaseSlot();
    state_->sessions.erase(id_);
    WebSocketSessionSetup setup;
    setup.role = WebSocketRole::kServer;
    setup.limits = upgrade->limits;
    setup.write_timeout = state_->limits.write_timeout;
    setup.remote = remote_;
    setup.leftover = leftover;
    setup.on_end = [state = state_](WebSocketEnd why) { ++state->websockets_closed[static_cast<std::size_t>(why)]; };
    setup.on_socket_closed = [state = state_, id = id_] { state->websockets.erase(id); };
    std::shared_ptr<WebSocketSession> socket = MakeWebSocketSession(state_->env, std::move(stream_), std::move(setup));
    state_->websockets.emplace(id_, socket);
    socket->Start(upgrade->attach);
  }

  void RespondError(int status, std::string_view text, bool retry_after = false) {
    version_ = 11;
    keep_alive_ = false;
    head_ = false;
    ServerResponse response = TextResponse(status, std::string(text));
    if (retry_after) response.headers.emplace_back("Retry-After", "1");
    Write(std::move(response));
  }

  // Writing: frames the response (see "Responses" in http_server.h).
  void Write(ServerResponse response) {
    const std::string why = InvalidResponseReason(response);
    if (!why.empty()) {
      WK_LOG_WARN("HTTP handler's response not sent, answering 500",
                  {{"why", why}, {"remote", remote_}, {"address", state_->listen_address}});
      response = TextResponse(500, "internal error: invalid response\n");
    }
    bool keep_alive = keep_alive_;
    std::optional<std::uint64_t> handler_length;
    response_ = http::response<http::string_body>{};
    response_.version(version_);
    response_.result(static_cast<unsigned>(response.status));
    for (const auto& [name, value] : response.headers) {
      if (beast::iequals(name, "Content-Length")) {
        handler_length = ParseContentLength(value);
      } else if (beast::iequals(name, "Connection")) {
        if (HeaderListHasToken(value, "close")) keep_alive = false;
      } else if (!beast::iequals(name, "Transfer-Encoding")) {
        response_.insert(name, value);
      }
    }
    response_.keep_alive(keep_alive);
    if (response.status != 204 && response.status != 304) {
      const bool head_length = head_ && response.body.empty() && handler_length.has_value();
      response_.content_length(head_length ? *handler_length : response.body.size());
      if (!head_) response_.body() = std::move(response.body);
    }
    Lowest().expires_after(state_->limits.write_timeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep_alive](const error_code& ec, std::size_t) {
                        self->OnWritten(ec, keep_alive);
                      });
  }

  void OnWritten(const error_code& ec, bool keep_alive) {
    if (state_->stopped) return;
    response_ = {};  // free the body now, not at the next response
    if (ec) {
      Close();
    } else if (keep_alive) {
      WaitForRequest();
    } else {
      error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Lowest().expires_after(kLingerTimeout);
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
    ReleaseSlot();
    error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  // The slot counts (open, per_client), eviction and the body's bytes: given back once,
  // when the connection closes (or the Session goes).
  void ReleaseSlot() {
    if (!holds_slot_) return;
    holds_slot_ = false;
    UnmarkEvictable();
    body_.reset();
    --state_->open;
    const auto it = state_->per_client.find(client_key_);
    if (it != state_->per_client.end() && --it->second == 0) state_->per_client.erase(it);
  }

  void MarkEvictable() {
    if (!holds_slot_ || evictable_key_) return;
    evictable_key_.emplace(headers_read_ == 0 ? 0 : 1, state_->next_evictable_order++);
    state_->evictable.emplace(*evictable_key_, id_);
  }

  void UnmarkEvictable() {
    if (!evictable_key_) return;
    state_->evictable.erase(*evictable_key_);
    evictable_key_.reset();
  }

  const std::shared_ptr<HttpServer::State> state_;
  Stream stream_;
  beast::flat_buffer buffer_;
  const std::uint64_t id_;
  const std::string remote_;
  const std::string client_key_;
  std::string peer_pin_;  // TLS: the pin of the client's certificate, if it sent one
  const std::chrono::steady_clock::time_point first_request_deadline_;
  std::chrono::steady_clock::time_point request_deadline_{};
  bool holds_slot_ = true;
  std::optional<std::pair<int, std::uint64_t>> evictable_key_;
  std::uint64_t headers_read_ = 0;  // complete request headers on this connection
  // Of the header being read (ParseHeader): bytes of buffer_ searched for its end, and
  // bytes the parser has consumed (its start line).
  std::size_t header_scanned_ = 0;
  std::size_t header_consumed_ = 0;
  std::optional<http::request_parser<http::string_body>> parser_;
  ServerRequest request_;  // the request being read, from its header on
  std::optional<BodyReservation> body_;
  bool reading_body_ = false;
  // Of the request being handled: how to frame its response.
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;
  http::response<http::string_body> response_;
  // Upgrading: the request's Sec-WebSocket-Key if it may be upgraded (see Dispatch), the
  // 101 being written and what it upgrades to.
  std::string upgrade_key_;
  std::string upgrade_response_;
  std::shared_ptr<WebSocketUpgrade> pending_upgrade_;
  std::array<char, kLingerReadBytes> linger_buffer_{};
  std::size_t lingered_bytes_ = 0;
};

void Accept(const std::shared_ptr<HttpServer::State>& state);

// Closes the connection that has waited longest without a complete request header (tier
// 0, never sent one, before tier 1); false if there is none.
bool EvictOne(HttpServer::State& state) {
  while (!state.evictable.empty()) {
    const auto oldest = state.evictable.begin();
    const std::uint64_t id = oldest->second;
    const auto it = state.sessions.find(id);
    std::shared_ptr<SessionBase> session = it == state.sessions.end() ? nullptr : it->second.lock();
    if (!session) {  // going away already; not counted, so not the one to free
      state.evictable.erase(oldest);
      continue;
    }
    session->Evict();  // gives its slot back, and leaves the evictable set
    ++state.evicted;
    return true;
  }
  return false;
}

void OnAccepted(const std::shared_ptr<HttpServer::State>& state, const error_code& ec,
                tcp::socket socket) {
  if (state->stopped) return;
  if (ec) {
    WK_LOG_WARN("HTTP accept failed", {{"address", state->listen_address}, {"error", ec.message()}});
    state->retry_timer.expires_after(kAcceptRetryDelay);
    state->retry_timer.async_wait([state](const error_code& wait_ec) {
      if (!wait_ec && !state->stopped) Accept(state);
    });
    return;
  }
  error_code endpoint_ec;
  const tcp::endpoint remote = socket.remote_endpoint(endpoint_ec);
  if (endpoint_ec) {
    // The peer is gone already (reset before we looked): nothing to serve.
    error_code ignored;
    socket.close(ignored);
  } else {
    // Refused ones are closed before reading anything: the cheapest answer. Debug level:
    // a flood would otherwise flood the log.
    std::string client_key = ClientKey(remote.address());
    const auto client = state->per_client.find(client_key);
    if (client != state->per_client.end() && client->second >= state->limits.max_connections_per_client) {
      ++state->rejected;
      ++state->rejected_per_client;
      WK_LOG_DEBUG("HTTP connection rejected: too many open from this client",
                   {{"address", state->listen_address}, {"remote", FormatEndpoint(remote)}});
      error_code ignored;
      socket.close(ignored);
    } else if (state->open >= state->limits.max_connections && !EvictOne(*state)) {
      ++state->rejected;
      WK_LOG_DEBUG("HTTP connection rejected: too many open",
                   {{"address", state->listen_address}, {"remote", FormatEndpoint(remote)}});
      error_code ignored;
      socket.close(ignored);
    } else {
      // Responses are written whole, often several in a row on one connection (pipelining,
      // a 100 Continue): Nagle's algorithm would hold each small one until the client's
      // delayed ACK (about 40 ms).
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      const std::uint64_t id = state->next_session_id++;
      if (state->tls) {
        using TlsStream = beast::ssl_stream<beast::tcp_stream>;
        auto session = std::make_shared<Session<TlsStream>>(
            state, TlsStream(beast::tcp_stream(std::move(socket)), *state->tls), id, FormatEndpoint(remote),
            std::move(client_key));
        state->sessions.emplace(id, session);
        session->Start();
      } else {
        auto session = std::make_shared<Session<beast::tcp_stream>>(state, beast::tcp_stream(std::move(socket)), id,
                                                                    FormatEndpoint(remote), std::move(client_key));
        state->sessions.emplace(id, session);
        session->Start();
      }
    }
  }
  Accept(state);
}

void Accept(const std::shared_ptr<HttpServer::State>& state) {
  state->acceptor.async_accept([state](const error_code& ec, tcp::socket socket) {
    OnAccepted(state, ec, std::move(socket));
  });
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(RealEnv& env, std::string listen_address,
                                                      ServerHandler handler, HttpServerLimits limits,
                                                      HeaderCheck header_check,
                                                      std::shared_ptr<net::ssl::context> tls) {
  WK_CHECK(static_cast<bool>(handler), "HttpServer needs a handler");
  WK_CHECK(limits.max_connections > 0, "HttpServer: max_connections must be > 0");
  WK_CHECK(limits.max_connections_per_client > 0, "HttpServer: max_connections_per_client must be > 0");
  WK_CHECK(limits.first_request_timeout > Duration::zero(), "HttpServer: first_request_timeout must be > 0");
  WK_CHECK(limits.max_buffered_body_bytes >= limits.max_body_bytes,
           "HttpServer: max_buffered_body_bytes must hold at least one body of max_body_bytes");
  WK_CHECK(limits.max_header_bytes >= 1024 && limits.max_header_bytes <= 1024 * 1024,
           "HttpServer: max_header_bytes must be in 1 KiB..1 MiB");
  WK_CHECK(limits.idle_timeout > Duration::zero() && limits.read_timeout > Duration::zero() &&
               limits.write_timeout > Duration::zero(),
           "HttpServer: timeouts must be > 0");

  Result<tcp::endpoint> endpoint = ParseListenAddress(listen_address);
  if (!endpoint.ok()) return endpoint.status();

  auto state = std::make_shared<State>(env, listen_address, std::move(handler), limits, std::move(header_check),
                                       std::move(tls));
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
  WK_LOG_INFO("HTTP server listening", {{"address", listen_address},
                                        {"port", std::to_string(state->port)},
                                        {"tls", state->tls ? "on" : "off"}});
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(state)));
}

HttpServer::HttpServer(std::shared_ptr<State> state) : state_(std::move(state)) {}

HttpServer::~HttpServer() { Stop(); }

std::uint16_t HttpServer::bound_port() const { return state_->port; }
const std::string& HttpServer::listen_address() const { return state_->listen_address; }
std::size_t HttpServer::open_connections() const { return state_->open; }
std::uint64_t HttpServer::rejected_connections() const { return state_->rejected; }
std::uint64_t HttpServer::rejected_per_client() const { return state_->rejected_per_client; }
std::uint64_t HttpServer::evicted_connections() const { return state_->evicted; }
std::uint64_t HttpServer::bodies_refused() const { return state_->bodies_refused; }
std::size_t HttpServer::buffered_body_bytes() const { return state_->body_bytes; }
std::size_t HttpServer::open_websockets() const { return state_->websockets.size(); }
std::uint64_t HttpServer::websockets_closed(WebSocketEnd why) const {
  return state_->websockets_closed[static_cast<std::size_t>(why)];
}

void HttpServer::Stop() {
  State& s = *state_;
  if (s.stopped) return;
  s.stopped = true;
  error_code ignored;
  s.acceptor.close(ignored);
  s.retry_timer.cancel();
  // Collected first: a Session whose last owner is released below erases itself from
  // the map, which must not happen while the map is being iterated.
  std::vector<std::shared_ptr<SessionBase>> live;
  live.reserve(s.sessions.size());
  for (const auto& [id, weak] : s.sessions) {
    if (auto session = weak.lock()) live.push_back(std::move(session));
  }
  s.sessions.clear();  // a session whose handler task still runs is closed all the same
  for (const auto& session : live) session->Abort();
  live.clear();
  // The same for WebSockets; each calls its handler's OnClosed (which may call back here).
  std::vector<std::shared_ptr<WebSocketSession>> sockets;
  sockets.reserve(s.websockets.size());
  for (const auto& [id, weak] : s.websockets) {
    if (auto socket = weak.lock()) sockets.push_back(std::move(socket));
  }
  s.websockets.clear();
  for (const auto& socket : sockets) socket->Shutdown();
  sockets.clear();
  s.handler.reset();
  s.header_check.reset();
  WK_LOG_INFO("HTTP server stopped", {{"address", s.listen_address}, {"port", std::to_string(s.port)}});
}

void PublishHttpServerMetrics(MetricsRegistry& registry, const HttpServer& server, const std::string& listener) {
  const HttpServer* srv = &server;
  const std::string rejected_help =
      "Connections closed at accept: every slot busy mid-request, or the client's cap reached";
  registry.AddCallbackCounter(
      "wasmkeep_http_connections_rejected_total", rejected_help,
      [srv] { return static_cast<double>(srv->rejected_connections() - srv->rejected_per_client()); },
      {{"listener", listener}, {"reason", "full"}});
  registry.AddCallbackCounter("wasmkeep_http_connections_rejected_total", rejected_help,
                              [srv] { return static_cast<double>(srv->rejected_per_client()); },
                              {{"listener", listener}, {"reason", "per_client"}});
  registry.AddCallbackCounter("wasmkeep_http_connections_evicted_total",
                              "Connections without a request closed to make room for a new one",
                              [srv] { return static_cast<double>(srv->evicted_connections()); }, {{"listener", listener}});
  registry.AddCallbackCounter("wasmkeep_http_bodies_refused_total",
                              "Requests answered 503 because server.max_buffered_body_bytes were held",
                              [srv] { return static_cast<double>(srv->bodies_refused()); }, {{"listener", listener}});
  registry.AddCallbackGauge("wasmkeep_http_connections_open", "Connections holding a slot",
                            [srv] { return static_cast<double>(srv->open_connections()); }, {{"listener", listener}});
  registry.AddCallbackGauge("wasmkeep_http_buffered_body_bytes", "Bytes of request bodies held now",
                            [srv] { return static_cast<double>(srv->buffered_body_bytes()); }, {{"listener", listener}});
  registry.AddCallbackGauge("wasmkeep_websockets_open", "WebSockets open (not counted as HTTP connections)",
                            [srv] { return static_cast<double>(srv->open_websockets()); }, {{"listener", listener}});
  for (std::size_t i = 0; i < kWebSocketEndCount; ++i) {
    const auto why = static_cast<WebSocketEnd>(i);
    registry.AddCallbackCounter("wasmkeep_websocket_closed_total", "WebSockets ended, by the first cause",
                                [srv, why] { return static_cast<double>(srv->websockets_closed(why)); },
                                {{"listener", listener}, {"reason", std::string(WebSocketEndName(why))}});
  }
}

}  // namespace wk
