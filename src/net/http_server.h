// HttpServer: one HTTP/1.1 listener, plain or over TLS, that frames requests and responses
// and hands each request to an asynchronous handler (what paths mean is the handler's).
// Guarantees: every bound of HttpServerLimits (header and body sizes, connections in all and
// per client, buffered body bytes, timeouts) is enforced before a request reaches the
// handler; a response that cannot be sent safely becomes a 500; the handler is never called
// after Stop returns. A response with `upgrade` (http_types.h) turns its connection into a
// WebSocket (websocket.h): the server writes the 101 and runs the connection
// (websocket_session.h) under that upgrade's WebSocketLimits. An upgraded connection leaves the HTTP accounting
// (max_connections and max_connections_per_client count HTTP connections only, so thousands
// of idle WebSockets never hold an HTTP slot) and is counted by open_websockets() instead;
// Stop() closes every WebSocket too. Threading: the RealEnv's loop thread only; starts no
// thread; real runtime only. Details: docs/internals.md, "HttpServer".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/metrics.h"
#include "base/status.h"
#include "base/time.h"
#include "env/real_env.h"
#include "net/http_types.h"
#include "net/websocket.h"

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
  // Tasks already running finish on their own (see the header comment). Every WebSocket is
  // sent a close frame (1001) if its socket takes it at once and is then cut; its
  // WebSocketHandler::OnClosed(1006, "") is called before Stop returns, or, when its
  // OnMessage Task is still running, as soon as that Task ends.
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
  // WebSockets open now (upgraded connections whose socket is not closed yet); 0 after
  // Stop(). They are not in open_connections().
  std::size_t open_websockets() const;
  // WebSockets that ended for this reason since Start (each counted once, by the first cause).
  std::uint64_t websockets_closed(WebSocketEnd why) const;

  struct State;  // shared with in-flight Asio handlers and handler tasks; in the .cc

 private:
  explicit HttpServer(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// The listener's counters as views in registry (docs/architecture.md, "Metrics"), labelled
// listener=`listener` ("api", "admin"): wasmkeep_http_connections_open,
// _connections_rejected_total{reason="full"|"per_client"}, _connections_evicted_total,
// wasmkeep_http_bodies_refused_total, wasmkeep_http_buffered_body_bytes,
// wasmkeep_websockets_open and wasmkeep_websocket_closed_total{reason=WebSocketEndName}.
// server must outlive every scrape of registry; scrapes run on the loop thread, as the
// server does.
void PublishHttpServerMetrics(MetricsRegistry& registry, const HttpServer& server, const std::string& listener);

}  // namespace wk
