#include "server/socket_relay.h"

#include <algorithm>
#include <boost/asio/ssl/context.hpp>
#include <utility>

#include "base/ascii.h"
#include "base/log.h"
#include "env/env.h"
#include "net/websocket_client.h"
#include "routing/front.h"

namespace wk {

namespace {
struct Pipe;
}  // namespace

struct SocketRelay::State {
  State(RealEnv& e, SocketRelayOptions o) : env(e), options(std::move(o)) {}
  RealEnv& env;
  const SocketRelayOptions options;
  bool stopped = false;  // Stop: nothing new is relayed or joined
  std::size_t open = 0;  // Slots alive
  SocketRelayStats stats;
  std::uint64_t next_id = 1;
  // The joined connections, by id. Not owning: a Pipe is owned by its two sides' handlers
  // and erases itself here when they let go.
  std::map<std::uint64_t, std::weak_ptr<Pipe>> pipes;
};

namespace {

using State = SocketRelay::State;

constexpr std::string_view kOwnerGoneReason = "the actor's owner went away: reconnect";
constexpr std::string_view kRelayStoppingReason = "the relaying node is stopping";

// One relayed connection counted in State::open, from the owner's 101 (before the client's
// 101 is written) until both sides have ended, or until the upgrade is dropped unused.
class Slot {
 public:
  explicit Slot(std::shared_ptr<State> state) : state_(std::move(state)) { ++state_->open; }
  ~Slot() { --state_->open; }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  std::shared_ptr<State> state_;
};

// The two connections of one relayed WebSocket. Each side's handler holds it until that
// side's OnClosed. It refers to the two connections weakly (each lives while it is open, held
// by its pending reads and timers), so a connection, its handler and this make no cycle; a
// side's reference is dropped once that side has ended.
struct Pipe {
  ~Pipe() { state->pipes.erase(id); }
  std::shared_ptr<State> state;
  std::shared_ptr<Slot> slot;
  std::uint64_t id = 0;
  TrustedPeer owner_peer;  // as the trust named it when the connection opened
  std::shared_ptr<WebSocketClientConnection> owner_conn;  // to cut it (refers to it weakly)
  std::weak_ptr<WebSocketPeer> client;  // the client's connection (this node's server end)
  std::weak_ptr<WebSocketPeer> owner;   // the owner's (this node's client end)
};

// Passes one message to the other side once its send queue has room: at most half its bound
// and enough for this message, so relaying never takes a queue past its bound (a message
// larger than the bound itself cannot fit: Send then closes that side with 1008).
Task<void> Pass(std::shared_ptr<Pipe> pipe, bool to_owner, bool binary, std::string data) {
  std::shared_ptr<WebSocketPeer> to = (to_owner ? pipe->owner : pipe->client).lock();
  if (to == nullptr) co_return;
  State& state = *pipe->state;
  const std::size_t bound = state.options.limits.max_send_queue_bytes;
  const std::size_t room = std::min(bound / 2, bound >= data.size() ? bound - data.size() : 0);
  if (to->queued_bytes() > room) {
    Latch<bool> ready(state.env, [] { return false; });
    to->WhenQueueAtMost(room, [ready] { ready.Set(true); });
    const bool waited = co_await ready.Wait();
    if (!waited) co_return;  // cancelled: the node stops
  }
  if (!to->Send(binary, std::move(data))) co_return;  // that side ended meanwhile
  ++(to_owner ? state.stats.messages_to_owner : state.stats.messages_to_client);
}

// The client's connection ended: the owner's is closed with its code (a close frame without
// one: 1000), or cut when the client's ended without a close frame (the owner's actor then
// sees 1006, as it would have from a direct client).
void ClientEnded(Pipe& pipe, int code, const std::string& reason) {
  pipe.client.reset();
  std::shared_ptr<WebSocketPeer> owner = pipe.owner.lock();
  pipe.owner.reset();
  if (owner == nullptr) return;
  if (code == 1006) {
    pipe.owner_conn->Cut();
  } else {
    owner->Close(code == 1005 ? kCloseNormal : code, reason);
  }
}

// The owner's connection ended: the client's is closed with the owner's code and reason, or
// with 1012 when the owner's connection ended without a close frame.
void OwnerEnded(Pipe& pipe, int code, const std::string& reason) {
  pipe.owner.reset();
  std::shared_ptr<WebSocketPeer> client = pipe.client.lock();
  pipe.client.reset();
  if (client == nullptr) return;
  if (code == 1006) {
    ++pipe.state->stats.owner_gone;
    client->Close(kCloseRestart, std::string(kOwnerGoneReason));
  } else {
    client->Close(code == 1005 ? kCloseNormal : code, reason);
  }
}

// The handler of one side: its messages go to the other side, its end ends the other.
class Side final : public WebSocketHandler {
 public:
  Side(std::shared_ptr<Pipe> pipe, bool is_client) : pipe_(std::move(pipe)), is_client_(is_client) {}
  Task<void> OnMessage(bool binary, std::string data) override {
    return Pass(pipe_, /*to_owner=*/is_client_, binary, std::move(data));
  }
  void OnClosed(int code, std::string reason) override {
    std::shared_ptr<Pipe> pipe = std::move(pipe_);
    if (is_client_) {
      ClientEnded(*pipe, code, reason);
    } else {
      OwnerEnded(*pipe, code, reason);
    }
  }

 private:
  std::shared_ptr<Pipe> pipe_;
  const bool is_client_;
};

void ClosePipe(Pipe& pipe, int code, const std::string& reason) {
  // The owner's first: the client's close, echoed, would otherwise reach the owner as the
  // client's code.
  if (auto owner = pipe.owner.lock()) owner->Close(kCloseGoingAway, std::string(kRelayStoppingReason));
  if (auto client = pipe.client.lock()) client->Close(code, reason);
}

// The client's 101 is written: the two connections are joined and the owner's is read.
std::shared_ptr<WebSocketHandler> Join(const std::shared_ptr<State>& state,
                                       const std::shared_ptr<WebSocketClientConnection>& owner_conn,
                                       const TrustedPeer& owner_peer, const std::shared_ptr<Slot>& slot,
                                       std::shared_ptr<WebSocketPeer> client) {
  auto pipe = std::make_shared<Pipe>();
  pipe->state = state;
  pipe->slot = slot;
  pipe->id = state->next_id++;
  pipe->owner_peer = owner_peer;
  pipe->owner_conn = owner_conn;
  pipe->client = client;
  state->pipes.emplace(pipe->id, pipe);
  ++state->stats.relayed;
  owner_conn->Start([pipe](std::shared_ptr<WebSocketPeer> owner) -> std::shared_ptr<WebSocketHandler> {
    pipe->owner = owner;
    return std::make_shared<Side>(pipe, /*is_client=*/false);
  });
  if (state->stopped) ClosePipe(*pipe, kCloseGoingAway, "the node is stopping");
  return std::make_shared<Side>(pipe, /*is_client=*/true);
}

ServerResponse RelayRefused(const State& state, const NodeId& owner, const std::string& why) {
  WK_LOG_INFO("websocket relay failed", {{"owner", owner.str()}, {"why", why}});
  ServerResponse r = TextResponse(503, "the WebSocket cannot be relayed to the actor's owner " + owner.str() + ": " +
                                           why + "\n");
  r.headers.emplace_back("Retry-After", std::to_string(state.options.retry_after_seconds));
  return r;
}

}  // namespace

SocketRelay::SocketRelay(RealEnv& env, Forwarder& forwarder, const TlsIdentity& identity, const PeerTrust& trust,
                         SocketRelayOptions options)
    : env_(env),
      forwarder_(forwarder),
      identity_(identity),
      trust_(trust),
      state_(std::make_shared<State>(env, std::move(options))) {}

SocketRelay::~SocketRelay() {
  Stop(kCloseGoingAway, "the node is stopping");
  for (const auto& [id, weak] : std::map<std::uint64_t, std::weak_ptr<Pipe>>(state_->pipes)) {
    if (auto pipe = weak.lock()) pipe->owner_conn->Shutdown();
  }
}

std::size_t SocketRelay::open() const { return state_->open; }
const SocketRelayStats& SocketRelay::stats() const { return state_->stats; }

void SocketRelay::Stop(int code, const std::string& reason) {
  state_->stopped = true;
  // Collected first: closing may end a pipe, which erases itself from the map.
  std::vector<std::shared_ptr<Pipe>> live;
  for (const auto& [id, weak] : state_->pipes) {
    if (auto pipe = weak.lock()) live.push_back(std::move(pipe));
  }
  for (const auto& pipe : live) ClosePipe(*pipe, code, reason);
}

void SocketRelay::DropUntrusted() {
  std::erase_if(contexts_, [this](const auto& entry) {
    const TrustedPeer* now = trust_.Find(entry.first);
    return now == nullptr || *now != entry.second.first;
  });
  std::vector<std::shared_ptr<Pipe>> live;
  for (const auto& [id, weak] : state_->pipes) {
    if (auto pipe = weak.lock()) live.push_back(std::move(pipe));
  }
  for (const auto& pipe : live) {
    const TrustedPeer* now = trust_.Find(pipe->owner_peer.node_id);
    // Its client is closed with 1012 when the owner's side reports the cut (OwnerEnded).
    if ((now == nullptr || *now != pipe->owner_peer) && !pipe->owner.expired()) pipe->owner_conn->Cut();
  }
}

Result<std::shared_ptr<boost::asio::ssl::context>> SocketRelay::ContextFor(const TrustedPeer& peer) {
  auto it = contexts_.find(peer.node_id);
  if (it != contexts_.end() && it->second.first == peer) return it->second.second;
  auto made = MakePinnedClientContext(identity_, peer.pin);
  if (!made.ok()) return made.status();
  contexts_[peer.node_id] = {peer, *made};
  return *made;
}

Task<ServerResponse> SocketRelay::Relay(PeerTarget to, ServerRequest request, std::string tenant, int hops) {
  // Only state and locals after the first await: the relay may be destroyed meanwhile.
  std::shared_ptr<State> state = state_;
  RealEnv& env = env_;
  const SocketRelayOptions& options = state->options;
  if (state->stopped) co_return RelayRefused(*state, to.node_id, "this node is stopping");
  if (state->open >= options.max_connections) {
    ++state->stats.failed;
    co_return RelayRefused(*state, to.node_id,
                           "this node relays " + std::to_string(state->open) +
                               " WebSockets already (websockets.max_connections)");
  }
  const TrustedPeer* trusted = trust_.Find(to.node_id);
  if (trusted == nullptr || trusted->instance != to.instance || trusted->address != to.address) {
    ++state->stats.failed;
    co_return RelayRefused(*state, to.node_id,
                           "it is not a live peer with a pin in this node's view (instance " + to.instance.str() +
                               " at " + to.address + ")");
  }
  const TrustedPeer owner = *trusted;
  auto tls = ContextFor(owner);
  if (!tls.ok()) {
    ++state->stats.failed;
    co_return RelayRefused(*state, to.node_id, tls.status().message());
  }
  auto slot = std::make_shared<Slot>(state);

  // Signed as a forwarded request; the headers Sign does not carry (hop-by-hop, or absent)
  // but the owner checks the handshake on, before it verifies the signature.
  const std::string key(request.Header("Sec-WebSocket-Key").value_or(""));
  const std::string version(request.Header("Sec-WebSocket-Version").value_or("13"));
  ServerRequest signed_request = forwarder_.Sign(to, std::move(request), tenant, hops);
  signed_request.headers.emplace_back("Upgrade", "websocket");
  signed_request.headers.emplace_back("Connection", "Upgrade");
  if (!signed_request.Header("Sec-WebSocket-Key")) signed_request.headers.emplace_back("Sec-WebSocket-Key", key);
  if (!signed_request.Header("Sec-WebSocket-Version")) {
    signed_request.headers.emplace_back("Sec-WebSocket-Version", version);
  }
  WebSocketClientOptions client;
  client.tls = *tls;
  client.limits = options.limits;
  client.limits.max_messages_per_second = 0;  // the actor's messages: the owner bounds them
  client.connect_timeout = options.connect_timeout;
  client.handshake_timeout = options.handshake_timeout;
  client.write_timeout = options.write_timeout;
  client.max_answer_body_bytes = options.max_answer_body_bytes;
  auto answer = co_await ConnectWebSocket(env, to.address, std::move(signed_request), std::move(client));
  if (state->stopped) co_return RelayRefused(*state, to.node_id, "this node is stopping");
  if (!answer.ok()) {
    ++state->stats.failed;
    co_return RelayRefused(*state, to.node_id, answer.status().message());
  }

  if (answer->connection == nullptr) {
    ServerResponse r;
    r.status = answer->status;
    for (auto& [n, v] : answer->headers) {
      if (EqualsIgnoreAsciiCase(n, kForwardingRefused) && r.status == 401) {
        // The owner refused what this node signed (clocks apart, another secret, a view of
        // this node not live yet): not the client's fault.
        ++state->stats.failed;
        co_return RelayRefused(*state, to.node_id, "it refused the relayed handshake: " + v);
      }
      if (!Forwarder::IsNeverForwarded(n)) r.headers.emplace_back(std::move(n), std::move(v));
    }
    r.body = std::move(answer->body);
    ++state->stats.answered;
    co_return r;
  }

  std::shared_ptr<WebSocketClientConnection> owner_conn = answer->connection;
  auto upgrade = std::make_shared<WebSocketUpgrade>();
  upgrade->limits = options.limits;
  for (const auto& [n, v] : owner_conn->headers()) {
    if (EqualsIgnoreAsciiCase(n, "Sec-WebSocket-Protocol")) upgrade->headers.emplace_back("Sec-WebSocket-Protocol", v);
  }
  upgrade->attach = [state, owner_conn, owner, slot](std::shared_ptr<WebSocketPeer> client_peer) {
    return Join(state, owner_conn, owner, slot, std::move(client_peer));
  };
  // The client's 101 could not be written: the client is gone, and so is the owner's side.
  upgrade->abandoned = [owner_conn] { owner_conn->Cut(); };
  ServerResponse r;
  r.status = 101;
  r.upgrade = std::move(upgrade);
  co_return r;
}

void PublishSocketRelayMetrics(MetricsRegistry& registry, const SocketRelay& relay) {
  const SocketRelay* r = &relay;
  registry.AddCallbackGauge("wasmkeep_websocket_relayed_open",
                            "WebSockets this node relays to their actor's owner, open now",
                            [r] { return static_cast<double>(r->open()); });
  registry.AddCallbackCounter("wasmkeep_websocket_relayed_total",
                              "WebSockets relayed to their actor's owner (the owner accepted them)",
                              [r] { return static_cast<double>(r->stats().relayed); });
  const std::string messages_help = "Messages of relayed WebSockets passed on, by direction";
  registry.AddCallbackCounter("wasmkeep_websocket_relayed_messages_total", messages_help,
                              [r] { return static_cast<double>(r->stats().messages_to_owner); },
                              {{"direction", "to_owner"}});
  registry.AddCallbackCounter("wasmkeep_websocket_relayed_messages_total", messages_help,
                              [r] { return static_cast<double>(r->stats().messages_to_client); },
                              {{"direction", "to_client"}});
  registry.AddCallbackCounter(
      "wasmkeep_websocket_relay_failed_total",
      "WebSocket handshakes this node could not relay (answered 503: the owner not trusted or not reached)",
      [r] { return static_cast<double>(r->stats().failed); });
  registry.AddCallbackCounter(
      "wasmkeep_websocket_relay_owner_gone_total",
      "Relayed WebSockets closed with 1012 because the owner's connection ended without a close frame",
      [r] { return static_cast<double>(r->stats().owner_gone); });
}

}  // namespace wk
