// WebSockets between a client and a node (RFC 6455), as the code that answers requests sees
// them: whether a request is a valid opening handshake, the bounds of one connection, the
// node's end of an open connection (WebSocketPeer) and what receives its events
// (WebSocketHandler). A handler answers an upgrade with a ServerResponse whose `upgrade` is
// set (http_types.h); HttpServer then writes the 101 itself (Sec-WebSocket-Accept) and runs
// the connection: framing, masking, fragments, ping/pong, the close handshake and every bound
// below. The WebSocket client (websocket_client.h) gives the same two interfaces for a
// connection it opened. docs/websockets.md tells the whole feature.
//
// Threading: plain values and interfaces; every call on the Env loop thread (the server's,
// or the simulator's network's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/time.h"
#include "env/task.h"

namespace wk {

struct ServerRequest;

// Close codes the node sends (RFC 6455 section 7.4.1).
inline constexpr int kCloseNormal = 1000;
inline constexpr int kCloseGoingAway = 1001;      // the node stops
inline constexpr int kCloseProtocolError = 1002;  // a frame broke the protocol
inline constexpr int kCloseUnsupported = 1003;    // (not sent: both kinds are accepted)
inline constexpr int kCloseInvalidData = 1007;    // a text message that is not UTF-8
inline constexpr int kClosePolicy = 1008;         // a rate or the send queue's bound
inline constexpr int kCloseTooBig = 1009;         // a message over max_message_bytes
inline constexpr int kCloseInternal = 1011;       // the actor failed to open it
inline constexpr int kCloseRestart = 1012;        // the actor's owner changed: reconnect
inline constexpr int kCloseTryAgain = 1013;       // a connection limit: try again later
// What a close frame's reason may hold: 125 bytes of payload less the 2-byte code.
inline constexpr std::size_t kMaxCloseReasonBytes = 123;

// A code an endpoint may send in a close frame (1000..1003, 1007..1014, 3000..4999).
bool IsSendableCloseCode(int code);

// Whether `request` asks for a WebSocket (an `Upgrade: websocket` header). nullopt: not an
// upgrade. Otherwise "" for a valid opening handshake (GET, `Connection` naming upgrade,
// `Sec-WebSocket-Version: 13`, a `Sec-WebSocket-Key` that is 16 bytes in base64), or what is
// wrong with it, naming the header (the answer is a 400, or 426 for another version).
std::optional<std::string> CheckWebSocketHandshake(const ServerRequest& request);

// The bounds of one connection (the [websockets] settings, docs/configuration.md).
struct WebSocketLimits {
  // A message (all its fragments together). Over it: closed with 1009.
  std::size_t max_message_bytes = 64 * 1024;
  // Bytes queued to a client that does not read them. Over it: closed with 1008 (the queue
  // is dropped), so a slow reader holds at most this much of the node's memory.
  std::size_t max_send_queue_bytes = 1024 * 1024;
  // Messages a connection may send per second (a token bucket of this rate and a burst of
  // twice it). Over it: closed with 1008. 0: no limit.
  double max_messages_per_second = 100;
  // A ping after this long without a frame from the client; no frame in as long again
  // closes the connection (1001 is not sent: the peer is gone).
  Duration ping_interval = std::chrono::seconds(30);
  // From our close frame to the end of the connection (the client's answering close).
  Duration close_timeout = std::chrono::seconds(5);
};

// Why a WebSocket ended: the reason label of wasmkeep_websocket_closed_total (a fixed set).
enum class WebSocketEnd : std::uint8_t {
  kClient,      // the other end closed it: its close frame first, or the connection dropped
  kNode,        // WebSocketPeer::Close, or an upgrade whose attach gave no handler (1011)
  kProtocol,    // a frame broke RFC 6455 (1002), or a text message was not UTF-8 (1007)
  kTooBig,      // a message over max_message_bytes (1009)
  kRate,        // messages over max_messages_per_second (1008)
  kSlowReader,  // the send queue over max_send_queue_bytes (1008), or a write over write_timeout
  kTimeout,     // a ping unanswered for ping_interval (the peer is gone)
  kStopped,     // HttpServer::Stop (1001)
};
inline constexpr std::size_t kWebSocketEndCount = 8;
// "client", "node", "protocol", "too_big", "rate", "slow_reader", "timeout", "stopped".
std::string_view WebSocketEndName(WebSocketEnd end);

// The node's end of one open WebSocket. Made by the server once its 101 is written (or by
// the client once the server's 101 is read); the handler keeps it (a shared_ptr) as long as
// it wants to send.
class WebSocketPeer {
 public:
  virtual ~WebSocketPeer() = default;
  // Queues one message. false: the connection is closing or closed (nothing queued), or this
  // message took the send queue past max_send_queue_bytes (the connection is then closed
  // with 1008 and the queue dropped).
  virtual bool Send(bool binary, std::string data) = 0;
  // Starts the close handshake with code (IsSendableCloseCode) and reason (cut to
  // kMaxCloseReasonBytes); messages queued before are sent first. Idempotent.
  virtual void Close(int code, std::string reason) = 0;
  // Bytes this connection holds in the node's memory now (buffers, queue, bookkeeping).
  virtual std::size_t memory_bytes() const = 0;
  // Bytes of messages queued and not yet written to the socket (0 once the connection ended).
  virtual std::size_t queued_bytes() const = 0;
  // Calls ready once, through Env::Post, when queued_bytes() is at most `bytes` (soon, if it
  // is now) or the connection has ended: how a sender waits for room instead of queueing
  // without bound (the relay, server/socket_relay.h). One waiter at a time: a second call
  // calls the first one's ready at once.
  virtual void WhenQueueAtMost(std::size_t bytes, std::function<void()> ready) = 0;
  // "ip:port" of the other end (the client, for the server's end).
  virtual const std::string& remote() const = 0;
};

// Receives one connection's events, in order. The server calls OnMessage for one message at
// a time and reads the next frame only once its Task ends (so a busy actor slows its
// clients down through TCP instead of queueing without bound); OnClosed exactly once, last,
// when the connection ended for any reason (a close frame, an error, a bound, Close, the
// server's Stop), with the code and reason received (1006 and "" when there was no close
// frame). The server keeps the handler alive until OnClosed returns.
class WebSocketHandler {
 public:
  virtual ~WebSocketHandler() = default;
  virtual Task<void> OnMessage(bool binary, std::string data) = 0;
  virtual void OnClosed(int code, std::string reason) = 0;
};

// Called once a connection is open, with its peer; returns the handler of its events (null:
// the connection is closed with 1011).
using WebSocketAttach = std::function<std::shared_ptr<WebSocketHandler>(std::shared_ptr<WebSocketPeer>)>;

// What a response carries to upgrade its connection (ServerResponse::upgrade). After the
// 101, `attach` is called once with the connection's peer and returns its handler (null:
// the connection is closed with 1011). If the 101 cannot be written, `attach` is never
// called and `abandoned` is (if set), so the caller can undo what it reserved.
struct WebSocketUpgrade {
  WebSocketLimits limits;
  WebSocketAttach attach;
  std::function<void()> abandoned;
  // Headers to add to the 101 (the actor's, e.g. Sec-WebSocket-Protocol).
  std::vector<std::pair<std::string, std::string>> headers;
};

}  // namespace wk
