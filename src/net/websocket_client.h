// The client's end of a WebSocket (RFC 6455): ConnectWebSocket opens a TCP connection (plain,
// or TLS with the caller's context: the peer listener's pinned one for a relay,
// server/socket_relay.h), writes the opening handshake it is given, reads the answer and
// checks a 101 (Sec-WebSocket-Accept for the request's key, Upgrade, Connection, no
// extension, a subprotocol the request offered). A 101 gives a WebSocketClientConnection,
// not yet reading: Start runs it as HttpServer runs a server's end (websocket_session.h),
// with a WebSocketPeer to send and close and a WebSocketHandler for its events, under the
// same WebSocketLimits; this end masks every frame it sends with a fresh random mask and
// refuses a masked frame. Any other answer is returned (status, headers, body) so the
// caller can pass it on.
//
// Guarantees: the connect (name resolution included) ends by connect_timeout, and the TLS
// handshake, the request and the answer's head (and a refusal's body) by handshake_timeout;
// the answer's head and body are read under max_head_bytes and max_answer_body_bytes.
//
// Threading: the RealEnv's loop thread only (like HttpServer); real runtime only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/time.h"
#include "env/real_env.h"
#include "env/task.h"
#include "net/http_types.h"
#include "net/websocket.h"

namespace boost::asio::ssl {
class context;
}

namespace wk {

class WebSocketSession;

struct WebSocketClientOptions {
  // TLS with this context (its verification: a pin, for the peer listener); null: plain TCP.
  std::shared_ptr<boost::asio::ssl::context> tls;
  // The connection's bounds once open (as a server's upgrade has them).
  WebSocketLimits limits;
  // Name resolution and the TCP connect.
  Duration connect_timeout = std::chrono::seconds(5);
  // From the connect to the end of the answer's head (and of a refusal's body): the TLS
  // handshake, the request, the server's handling of it (an open event, for a node).
  Duration handshake_timeout = std::chrono::seconds(10);
  // Once open: writing one batch of frames (as HttpServerLimits::write_timeout).
  Duration write_timeout = std::chrono::seconds(30);
  // The answer's status line and header fields.
  std::size_t max_head_bytes = 16 * 1024;
  // A refusal's body (an actor's refusal of the open event is at most its response size).
  std::size_t max_answer_body_bytes = 1024 * 1024 + 64 * 1024;
};

// An open connection the server's 101 gave, not yet reading (nothing it sends is read before
// Start). Destroying it unstarted closes the socket without a close frame. Once started, the
// connection lives as long as it is open (as a server's does: its pending reads and timers
// hold it), whether this object is kept or not; Cut and Shutdown then act on it while it
// lives.
class WebSocketClientConnection {
 public:
  WebSocketClientConnection(std::shared_ptr<WebSocketSession> session, ServerHeaders headers, std::string remote);
  ~WebSocketClientConnection();
  WebSocketClientConnection(const WebSocketClientConnection&) = delete;
  WebSocketClientConnection& operator=(const WebSocketClientConnection&) = delete;

  // The 101's header fields, as received (Sec-WebSocket-Protocol among them).
  const ServerHeaders& headers() const { return headers_; }
  // "ip:port" of the server.
  const std::string& remote() const { return remote_; }
  // Calls attach at once with the connection's peer (the handler may Send or Close from
  // inside it), then reads: the handler's calls as websocket.h says (OnMessage one at a
  // time, OnClosed once, last). A null handler closes the connection with 1011. Once.
  void Start(const WebSocketAttach& attach);
  // Ends the connection now without a close frame (the server sees it drop: 1006); a started
  // handler's OnClosed(1006, "") follows. Before Start too.
  void Cut();
  // Ends the connection at once, as HttpServer::Stop ends its WebSockets: a close frame
  // (1001) if the socket takes it now (none if one was sent already), then the cut; a
  // started handler's OnClosed(1006, "") is called before it returns (or as soon as its
  // running OnMessage ends), so nothing of the connection waits for the loop to run again.
  void Shutdown();

 private:
  std::shared_ptr<WebSocketSession> unstarted_;  // until Start
  std::weak_ptr<WebSocketSession> session_;
  ServerHeaders headers_;
  std::string remote_;
};

// What the server answered an opening handshake.
struct WebSocketClientAnswer {
  // Set when it upgraded (a 101 that passed the checks above); the fields below are then
  // empty.
  std::shared_ptr<WebSocketClientConnection> connection;
  // Otherwise its answer: a status other than 101, the header fields as received, the body.
  int status = 0;
  ServerHeaders headers;
  std::string body;
};

// Connects to address ("host:port" or "[v6]:port"; a port is required) and writes request:
// method and target as given, every header as given (the caller drops what must not go),
// "Host: <address>" added when it has none. REQUIRES nothing of the request: it is checked.
// Errors:
//   kInvalidArgument  the address does not parse; the request is not a valid opening
//                     handshake (CheckWebSocketHandshake), its target is not a path, a
//                     header name is not a token or a value holds CR, LF or NUL
//   kRetryable        nothing was sent: the name did not resolve, the connect or the TLS
//                     handshake failed (a pin refused included) or took connect_timeout /
//                     handshake_timeout
//   kUnknownOutcome   the request was sent and no usable answer came (the server may have
//                     acted on it): a timeout, the connection lost, a head or body over its
//                     bound, or a 101 that fails a check (the message names which)
//   kCancelled        the awaiting task was cancelled
Task<Result<WebSocketClientAnswer>> ConnectWebSocket(RealEnv& env, std::string address, ServerRequest request,
                                                     WebSocketClientOptions options);

}  // namespace wk
