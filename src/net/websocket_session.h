// WebSocketSession: one open WebSocket (RFC 6455) on a plain or TLS stream, either end of it:
// the loop that runs the connection once the opening handshake is done, for HttpServer (the
// server's end, after its 101) and the WebSocket client (websocket_client.h, after the
// server's 101). It is the WebSocketPeer its handler sends through, and calls that
// WebSocketHandler as websocket.h says: OnMessage one message at a time (the next frame is
// read only once its Task ends), OnClosed once, last, through Env::Post.
//
// Guarantees: every bound of WebSocketLimits (the message size: 1009; the send queue: 1008;
// the message rate: 1008; ping_interval, close_timeout) and write_timeout; frames checked by
// WebSocketFrameParser for the role; a client's frames masked with fresh random masks
// (OpenSSL's generator); the close handshake both ways. Details: docs/internals.md, "HttpServer"
// (WebSockets).
//
// Threading: the RealEnv's loop thread only; real runtime only (never in the simulator).
#pragma once

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <functional>
#include <memory>
#include <string>

#include "base/time.h"
#include "env/real_env.h"
#include "net/websocket.h"
#include "net/websocket_frames.h"

namespace wk {

struct WebSocketSessionSetup {
  WebSocketRole role = WebSocketRole::kServer;
  WebSocketLimits limits;
  // Writing one batch of frames: a peer that does not read for this long is cut (kSlowReader).
  Duration write_timeout = std::chrono::seconds(30);
  // "ip:port" of the other end (WebSocketPeer::remote).
  std::string remote;
  // Bytes read past the handshake: the other end's first frames.
  std::string leftover;
  // Called once with the first cause of the end (the server's wasmkeep_websocket_closed_total).
  // May be empty.
  std::function<void(WebSocketEnd)> on_end;
  // Called once when the socket is closed, or when the session is destroyed without having
  // closed it (the server forgets the connection). May be empty.
  std::function<void()> on_socket_closed;
  // Kept as long as the session (the TLS context its stream was made with). May be null.
  std::shared_ptr<const void> keep_alive;
};

class WebSocketSession : public WebSocketPeer {
 public:
  // Calls attach with this peer (the handler may Send or Close from inside it), then starts
  // reading; a null handler closes the connection with 1011. Once.
  virtual void Start(const WebSocketAttach& attach) = 0;
  // HttpServer::Stop: a close frame (1001) if it goes out at once, then the socket is cut;
  // OnClosed(1006) before it returns (or once a running OnMessage ends).
  virtual void Shutdown() = 0;
  // Ends the connection now without a close frame (the other end sees it drop: 1006);
  // OnClosed(1006) follows. Counted as kNode.
  virtual void Cut() = 0;
};

// A session over stream, not yet started (Start). Destroying it unstarted closes the socket.
std::shared_ptr<WebSocketSession> MakeWebSocketSession(RealEnv& env, boost::beast::tcp_stream stream,
                                                       WebSocketSessionSetup setup);
std::shared_ptr<WebSocketSession> MakeWebSocketSession(RealEnv& env,
                                                       boost::beast::ssl_stream<boost::beast::tcp_stream> stream,
                                                       WebSocketSessionSetup setup);

}  // namespace wk
