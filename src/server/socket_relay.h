// SocketRelay: a client's WebSocket to an actor that another node holds, relayed to that node
// (docs/websockets.md, "Through a node that does not own the actor"): ActorHost's
// FrontDeps::relay_socket (routing/front.h). For an opening handshake whose token the front
// has checked and removed, Relay
//   - signs it for the owner as a forwarded request is signed (Forwarder::Sign: tenant, hop
//     count, the client's headers; the token never leaves this node), with the raw headers
//     the owner checks the handshake on (Upgrade, Connection, Sec-WebSocket-Key, -Version);
//   - connects to the owner's peer listener over TLS only under the pin of the owner's live
//     node record (PeerTrust), presenting this node's identity (websocket_client.h);
//   - on the owner's 101: answers the client 101 (with the owner's Sec-WebSocket-Protocol)
//     and, once the client's connection is up, joins the two message by message; any other
//     answer of the owner goes to the client as is (hop-by-hop headers dropped), but a
//     refused signature (401 X-Wasmkeep-Forwarding-Refused) becomes 503; an owner not
//     trusted or not reached (connect, TLS, timeout) is 503 with Retry-After naming it.
// Ends: the owner's close reaches the client with its code and reason, or 1012 ("the
// actor's owner went away: reconnect") when the owner's connection ended without one (a
// node killed, a network cut, a ping unanswered, an owner no longer trusted:
// DropUntrusted); the client's close reaches the owner with its code (1000 for none), and a
// client that vanished is cut on the owner's side too, so the actor sees the 1006 a direct
// client's end would show it. Each side is closed once the other ended.
// Backpressure: a message is passed on only once the other side's send queue holds at most
// half its bound (websockets.max_send_queue_bytes), and the next one is read only then
// (websocket.h: one OnMessage at a time), so a relayed connection holds at most about half
// that bound per direction, the bound itself is never what closes it, and a slow side slows
// the other down through TCP as a direct connection would.
//
// Threading: the RealEnv's loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "base/metrics.h"
#include "env/real_env.h"
#include "net/http_types.h"
#include "net/peer_transport.h"
#include "net/peer_trust.h"
#include "net/tls_identity.h"
#include "net/websocket.h"
#include "routing/forwarder.h"

namespace boost::asio::ssl {
class context;
}

namespace wk {

struct SocketRelayOptions {
  // Both sides' bounds: the node's [websockets] (the client's side is held to them as a
  // connection to an actor here is; the owner's side takes the actor's messages at any rate).
  WebSocketLimits limits;
  // Relayed connections open at once (websockets.max_connections, counted apart from the
  // connections the node holds for its own actors); one more handshake is answered 503.
  std::size_t max_connections = 50'000;
  // Reaching the owner's peer listener, and its answer (its open event included).
  Duration connect_timeout = std::chrono::seconds(5);
  Duration handshake_timeout = std::chrono::seconds(10);
  // Once open, writing one batch of frames to either side (server.write_timeout's role).
  Duration write_timeout = std::chrono::seconds(30);
  // The body of an owner's refusal (an actor's answer to its open event is at most
  // actors.max_response_bytes).
  std::size_t max_answer_body_bytes = std::size_t{1} << 20;
  int retry_after_seconds = 1;
};

struct SocketRelayStats {
  std::uint64_t relayed = 0;             // connections joined (the owner's 101 passed on)
  std::uint64_t answered = 0;            // handshakes the owner answered otherwise, passed on
  std::uint64_t failed = 0;              // handshakes answered 503 here: the owner not trusted, not
                                         // reached, refusing the signature; max_connections reached
  std::uint64_t messages_to_owner = 0;   // messages passed from clients to owners
  std::uint64_t messages_to_client = 0;  // and back
  std::uint64_t owner_gone = 0;          // clients closed with 1012: the owner's end dropped
};

class SocketRelay {
 public:
  // forwarder, identity and trust must outlive the relay.
  SocketRelay(RealEnv& env, Forwarder& forwarder, const TlsIdentity& identity, const PeerTrust& trust,
              SocketRelayOptions options);
  // Stop(1001, "the node is stopping"), and the owner's side of each connection is ended at
  // once (WebSocketClientConnection::Shutdown), so no connection waits for the loop to run
  // again (the node is going away; its client listener has stopped or stops next).
  ~SocketRelay();
  SocketRelay(const SocketRelay&) = delete;
  SocketRelay& operator=(const SocketRelay&) = delete;

  // FrontDeps::relay_socket: `request` is the client's handshake without its token, `tenant`
  // the one its token named, `hops` the hop count to sign. See the header comment.
  Task<ServerResponse> Relay(PeerTarget to, ServerRequest request, std::string tenant, int hops);

  // Closes every relayed connection, the owner's side with 1001 ("the relaying node is
  // stopping") and the client's with code and reason, and answers every handshake from now
  // on 503 (ActorHost::Shutdown: 1012, so the clients reconnect through another node).
  void Stop(int code, const std::string& reason);
  // Cuts the owner's side of every relayed connection whose owner the trust no longer names
  // as it did when the connection opened (fenced, released, restarted, moved); their clients
  // are closed with 1012. Call after each PeerTrust::Update.
  void DropUntrusted();

  // Relayed connections open now (from the owner's 101 until both sides ended).
  std::size_t open() const;
  const SocketRelayStats& stats() const;

  struct State;  // shared with the connections, which may outlive the relay; in the .cc

 private:
  // The pinned TLS context for peer, made once per trusted entry.
  Result<std::shared_ptr<boost::asio::ssl::context>> ContextFor(const TrustedPeer& peer);
  ServerResponse Unavailable(const NodeId& owner, std::string why);

  RealEnv& env_;
  Forwarder& forwarder_;
  const TlsIdentity& identity_;
  const PeerTrust& trust_;
  std::shared_ptr<State> state_;
  std::map<NodeId, std::pair<TrustedPeer, std::shared_ptr<boost::asio::ssl::context>>> contexts_;
};

// wasmkeep_websocket_relayed_open, wasmkeep_websocket_relayed_total,
// wasmkeep_websocket_relayed_messages_total{direction="to_owner"|"to_client"},
// wasmkeep_websocket_relay_failed_total, wasmkeep_websocket_relay_owner_gone_total
// (docs/websockets.md, "Metrics"). REQUIRES: relay outlives every scrape (loop thread).
void PublishSocketRelayMetrics(MetricsRegistry& registry, const SocketRelay& relay);

}  // namespace wk
