// HttpServer: one HTTP/1.1 listener, plain or over TLS. It frames requests and responses
// and hands every request to an asynchronous handler; what the paths mean (the actor API
// `/v1/actors/...`, `/metrics`, `/healthz`, `/readyz`, see server/admin_routes.h) is the
// handler's business (docs/architecture.md, "Serving and routing"). A node runs one for its
// clients, one for its peers (TLS with client certificates, docs/security.md) and, with
// node.admin_listen set, a third for the admin routes, so a flood of client connections
// cannot starve the probes (cli/serve_cmd.cc).
//
// TLS. With a TLS context, each connection starts with the handshake (within
// read_timeout and the first request's deadline; evictable meanwhile); one that fails is
// closed without an answer. The context decides what is required of the client: the peer
// listener's (net/tls_identity.h MakePeerServerContext) requires a certificate and checks
// its pin during the handshake. The pin of the client's certificate, when it sent one, is
// handed to the header check and the handler with each request
// (ServerRequest::peer_cert_pin).
//
// One connection, one request at a time:
//   waiting   for the first byte of a request, at most idle_timeout (an idle keep-alive
//             connection is closed after it); a new connection's first request must have
//             its whole header within first_request_timeout of the accept;
//   reading   the header and the body, from that first byte, within read_timeout;
//   checking  (only with a header check, for a request that has a body) the check's Task
//             runs on the Env; then back to reading the body, or answering;
//   handling  the handler's Task runs as its own task on the Env (Env::Spawn), so many
//             connections are handled concurrently; the server sets no deadline here (an
//             actor event may take long; the handler bounds its own work);
//   writing   the response, within write_timeout;
//   then back to waiting (keep-alive) or closing.
// Pipelined requests wait in the connection's buffer and are answered in order, one after
// the other. A client that disconnects while its handler runs is noticed only when the
// response is written: the handler runs to its end and the response is dropped.
//
// Requests (the bounds are in HttpServerLimits, with their reasons):
//   - Header over max_header_bytes: 431, then the connection closes.
//   - A Content-Length over max_body_bytes: 413 at once, WITHOUT reading the body, then
//     the connection closes (the handler is not called). A chunked body is read and
//     de-chunked up to max_body_bytes; one longer gets 413 and the connection closes.
//     With max_body_bytes == 0 a chunked request gets 413 without waiting for its body.
//   - "Expect: 100-continue" (HTTP/1.1) is answered "100 Continue" before the body is
//     read, and not at all when the body is refused.
//   - Malformed requests get 400 and the connection closes. Besides what the parser
//     rejects: an HTTP/1.1 request without Host, and every framing RFC 9112 lets a server
//     refuse and a proxy in front might read differently (request smuggling): a
//     Transfer-Encoding other than exactly "chunked" (gzip, chunked; chunked twice; one
//     split over two fields), any Transfer-Encoding in HTTP/1.0, Transfer-Encoding with
//     Content-Length, more than one Content-Length field (even equal), a Content-Length
//     that is not one decimal number ("0, 0", "+3"), a folded header line (obs-fold) or
//     whitespace before the first field (sections 2.2, 5.2, 6.1, 6.3).
//   - After any of these error replies the server reads and discards what the client
//     still sends for a short while before closing (a "lingering close"), so the reply is
//     not destroyed by a reset.
//   - A chunked body's trailer fields are read and dropped: the handler sees only the
//     header's fields (a field a trailer could add after the header was checked, an
//     Authorization say, never reaches it).
//   - A request with more than one Host field gets 400 (RFC 9112 section 3.2).
//
// Connections (docs/security.md, "Connections and requests"):
//   - At most max_connections open connections, and at most max_connections_per_client
//     from one client address (an IPv4 address; an IPv6 /64, what one host is usually
//     given). A connection over the per-client cap is closed at once, before anything is
//     read from it. One over max_connections first evicts the open connection that has
//     waited longest without a complete request header (connections that never completed
//     one before idle keep-alive ones); when every connection is mid-request it is closed
//     at once instead. So idle or slow connections, from however many addresses, cannot
//     keep a client that sends its request promptly out.
//   - A new connection must complete its first request's header within
//     first_request_timeout of being accepted (a slowloris bound); later requests have
//     idle_timeout to start and read_timeout to be read.
//   - Request bodies being received or handled hold at most max_buffered_body_bytes in
//     all: a request whose body would pass it gets 503 with Retry-After before its body is
//     read (a Content-Length counts in full; a chunked body counts as max_body_bytes), and
//     the connection closes. A body's bytes count until its handler's Task ends.
//   - The header check, when one is given to Start, sees a request that has a body (its
//     method, target, header fields and remote, with an empty body) before the body is
//     read; an answer it returns is sent at once, the body is never read, and the
//     connection closes. So a handler can refuse an unauthenticated request before its
//     body takes memory or time.
//
// Responses. The handler's ServerResponse is sent with the request's HTTP version:
//   - Content-Length is the body's size, set by the server; the handler's Content-Length
//     and Transfer-Encoding headers are dropped, except that a HEAD answer with an empty
//     body keeps the handler's Content-Length (so a handler may answer HEAD without
//     producing the body). A HEAD answer never carries a body.
//   - 204 and 304 are sent without a body or Content-Length.
//   - The handler's Connection header is dropped; "close" in it closes the connection
//     after this response. Otherwise keep-alive follows HTTP/1.1 (persistent unless
//     "Connection: close") and HTTP/1.0 (only with "Connection: keep-alive").
//   - A status outside 200..599, or a header whose name is not a token or whose value
//     holds CR, LF or NUL, is not sent: the client gets 500 and the server logs a warning
//     (a handler may relay what a WebAssembly actor produced; it cannot split a response).
//
// Threading: everything runs on the RealEnv's event loop (its io_context); the server
// starts no thread. Start, Stop, the destructor and the accessors must be called on the
// loop thread (or before the loop runs). The handler is called on the loop thread, from
// its request's task (never from inside the server's own code); it must not block (it
// returns a Task). It may stop or destroy the server, even before it returns.
//
// Lifetime: Stop() closes the listening socket and every connection; the destructor calls
// it. The handler is never called after Stop() returns. A handler Task already running
// then is not cancelled: it runs to its end on the Env and its response is dropped (the
// connection state it returns to is shared with, and kept alive by, that task). Cancel
// such tasks through the Env if they must end (RealEnv::RunMain does at shutdown). The
// handler's captures must outlive every handler Task they are used by.
//
// This is a real-runtime component (sockets): it never runs in the simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/metrics.h"
#include "base/status.h"
#include "base/time.h"
#include "env/real_env.h"
#include "net/http_types.h"

namespace boost::asio::ssl {
class context;
}

namespace wk {

// The bounds of one HttpServer (see the header comment). Start checks them.
struct HttpServerLimits {
  // Clients send a few hundred bytes of headers (a bearer token is the longest); 8 KiB is
  // what common servers allow and keeps the per-connection buffer (twice this) small.
  std::size_t max_header_bytes = 8 * 1024;
  // An actor's request body is at most actors.max_request_bytes, 1 MiB by default
  // (docs/abi.md); 64 KiB above it lets a body slightly over that limit reach the
  // router, which answers it with the actor API's own 413. The whole body is held in
  // memory; max_buffered_body_bytes bounds all of them together.
  std::size_t max_body_bytes = 1024 * 1024 + 64 * 1024;
  // Bounds file descriptors and memory if something (or someone) opens connections in a
  // loop; well above what a node serves at once.
  std::size_t max_connections = 1024;
  // Waiting for a request on an open connection. Longer than the keep-alive reuse
  // interval of clients and scrapers (15 s to 30 s), short enough to free slots held by
  // idle or stalled clients.
  Duration idle_timeout = std::chrono::seconds(30);
  // Reading one request (header and body) from its first byte: a slow client cannot hold
  // a slot forever. 30 s admits a maximal body at about 40 KB/s.
  Duration read_timeout = std::chrono::seconds(30);
  // Writing one response. Same reasoning as read_timeout.
  Duration write_timeout = std::chrono::seconds(30);
  // Connections from one client address (IPv4 address, IPv6 /64): one host cannot take
  // every slot. Well above what one client's pool opens (a few to a few dozen), well
  // below max_connections.
  std::size_t max_connections_per_client = 64;
  // From accept to the end of the first request's header. A client sends its first
  // request at once (a few round trips at most); a connection that sends nothing, or its
  // header a byte at a time, is cut after this instead of after idle_timeout plus
  // read_timeout. Above any sane network's round trips, well below those timeouts.
  Duration first_request_timeout = std::chrono::seconds(10);
  // Request bodies held at once, across all connections (reserved when the header is
  // read, freed when the handler's Task ends). Bounds the memory bodies take whatever
  // the number of connections: 64 MiB is about 60 maximal actor requests at once.
  std::size_t max_buffered_body_bytes = 64 * 1024 * 1024;
};

// Sees a request that has a body before the body is read (the request's body is empty
// then). nullopt: read the body and hand the request to the handler. A response: send it
// instead, without reading the body, and close the connection. Called on the loop thread;
// its Task runs as its own task on the Env. Must not throw.
using HeaderCheck = std::function<Task<std::optional<ServerResponse>>(const ServerRequest&)>;

class HttpServer {
 public:
  // Binds listen_address ("IP:PORT": "127.0.0.1:8080", "0.0.0.0:8080", "[::1]:8080";
  // "localhost" means 127.0.0.1; PORT 0 picks a free port, see bound_port()) and starts
  // accepting on env's loop. REQUIRES: env outlives the server and every handler task;
  // handler is set; limits are sane (max_connections > 0, max_header_bytes in
  // 1 KiB..1 MiB, timeouts > 0, max_connections_per_client > 0): checked, a crash
  // otherwise. header_check may be empty (every body is read before the handler is called).
  // tls: serve TLS with this context (shared by every connection); null for plain HTTP.
  // Errors, each a one-line message naming the address:
  //   kInvalidArgument  the address does not parse (no port, port not in 0..65535, host
  //                     not an IP address)
  //   kFatal            the socket cannot be bound or listened on (address in use,
  //                     permission denied, address not on this host)
  static Result<std::unique_ptr<HttpServer>> Start(RealEnv& env, std::string listen_address,
                                                   ServerHandler handler, HttpServerLimits limits = {},
                                                   HeaderCheck header_check = {},
                                                   std::shared_ptr<boost::asio::ssl::context> tls = nullptr);

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually listened on (the chosen one when the address said port 0).
  std::uint16_t bound_port() const;
  // The address as given to Start.
  const std::string& listen_address() const;

  // Closes the listening socket and every open connection (responses being written are
  // cut off). Idempotent. After it returns the handler is not called again; handler
  // Tasks already running finish on their own (see the header comment).
  void Stop();

  // Connections currently holding a slot (including ones closing after their last
  // response and ones waiting for their handler); 0 after Stop().
  std::size_t open_connections() const;
  // Connections closed at accept: max_connections were open and none could be evicted,
  // or the client already had max_connections_per_client open.
  std::uint64_t rejected_connections() const;
  // Of those, the ones refused by the per-client cap.
  std::uint64_t rejected_per_client() const;
  // Connections closed to make room for a new one (see "Connections").
  std::uint64_t evicted_connections() const;
  // Requests answered 503 because max_buffered_body_bytes were held.
  std::uint64_t bodies_refused() const;
  // Bytes of request bodies held now (see max_buffered_body_bytes).
  std::size_t buffered_body_bytes() const;

  struct State;  // shared with in-flight Asio handlers and handler tasks; in the .cc

 private:
  explicit HttpServer(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// The listener's counters as views in registry (docs/architecture.md, "Metrics"), labelled
// listener=`listener` ("api", "admin"): wasmkeep_http_connections_open,
// _connections_rejected_total{reason="full"|"per_client"}, _connections_evicted_total,
// wasmkeep_http_bodies_refused_total and wasmkeep_http_buffered_body_bytes. server must
// outlive every scrape of registry; scrapes run on the loop thread, as the server does.
void PublishHttpServerMetrics(MetricsRegistry& registry, const HttpServer& server, const std::string& listener);

}  // namespace wk
