// The WebSocket relay (socket_relay.h) between two HttpServers on 127.0.0.1, on one RealEnv
// loop: a client's listener whose handler relays every request (as the front does for an
// actor another node holds), and a fake owner: a peer listener (TLS, client certificates
// pinned) whose handler checks the handshake and the signature as the front does, then
// upgrades to a small echo actor that greets each connection. Between the relay and the owner
// a TCP proxy can cut the connection (the owner killed with -9, as the relay sees it). The
// client is the WebSocket client (net/websocket_client.h).
#include "server/socket_relay.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/ascii.h"
#include "env/real_env.h"
#include "net/http_server.h"
#include "net/testing/websocket_recording.h"
#include "net/websocket_client.h"
#include "routing/front.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

control::ClusterSecret Secret(std::uint8_t fill) {
  control::ClusterSecret s;
  s.bytes.fill(fill);
  return s;
}

// The relay only signs (Forwarder::Sign): nothing is sent through this transport.
class UnusedTransport final : public PeerTransport {
 public:
  Task<Result<ServerResponse>> Send(PeerTarget, ServerRequest, Duration) override {
    co_return Retryable("the relay test sends nothing through the forwarder's transport");
  }
};

using websocket_test::Recording;
using websocket_test::Seen;

// The owner's actor: echoes, but "close" sends one message then closes with 4000 "bye". Each
// message takes `delay` (a busy actor).
Task<void> OwnerMessage(Env* env, Seen* seen, std::shared_ptr<WebSocketPeer> peer, Duration delay, bool binary,
                        std::string data) {
  if (delay > Duration::zero()) co_await env->SleepFor(delay);
  const bool big = data.size() > 1000;
  seen->messages.emplace_back(binary, big ? std::to_string(data.size()) : data);
  if (data == "close") {
    peer->Send(false, "before close");
    peer->Close(4000, "bye");
  } else if (!big) {
    peer->Send(binary, std::move(data));
  }
}

class OwnerActor final : public WebSocketHandler {
 public:
  OwnerActor(Env* env, Seen* seen, std::shared_ptr<WebSocketPeer> peer, Duration delay)
      : env_(env), seen_(seen), peer_(std::move(peer)), delay_(delay) {}
  Task<void> OnMessage(bool binary, std::string data) override {
    return OwnerMessage(env_, seen_, peer_, delay_, binary, std::move(data));
  }
  void OnClosed(int code, std::string reason) override {
    seen_->closed.emplace(code, std::move(reason));
    peer_.reset();
  }

 private:
  Env* env_;
  Seen* seen_;
  std::shared_ptr<WebSocketPeer> peer_;
  Duration delay_;
};

// A TCP proxy on the loop: each connection to it is joined to `upstream`; Cut ends them all
// at once (no close frame reaches either side).
class Proxy {
 public:
  Proxy(RealEnv& env, tcp::endpoint upstream)
      : upstream_(upstream), acceptor_(env.context(), tcp::endpoint(net::ip::address_v4::loopback(), 0)) {
    Accept();
  }
  ~Proxy() {
    error_code ignored;
    acceptor_.close(ignored);
    Cut();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  void Cut() {
    for (const auto& link : links_) link->Close();
    links_.clear();
  }

 private:
  struct Link : std::enable_shared_from_this<Link> {
    explicit Link(tcp::socket d) : down(std::move(d)), up(down.get_executor()) {}
    void Close() {
      error_code ignored;
      down.close(ignored);
      up.close(ignored);
    }
    // Copies from `from` to `to` until either fails.
    void Pump(tcp::socket& from, tcp::socket& to, std::array<char, 16384>& buffer) {
      from.async_read_some(net::buffer(buffer), [self = shared_from_this(), &from, &to, &buffer](const error_code& ec,
                                                                                               std::size_t n) {
        if (ec) return self->Close();
        net::async_write(to, net::buffer(buffer.data(), n), [self, &from, &to, &buffer](const error_code& wec, std::size_t) {
          if (wec) return self->Close();
          self->Pump(from, to, buffer);
        });
      });
    }
    tcp::socket down;
    tcp::socket up;
    std::array<char, 16384> down_buffer{};
    std::array<char, 16384> up_buffer{};
  };

  void Accept() {
    acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
      if (ec) return;
      auto link = std::make_shared<Link>(std::move(socket));
      links_.push_back(link);
      link->up.async_connect(upstream_, [link](const error_code& cec) {
        if (cec) return link->Close();
        link->Pump(link->down, link->up, link->down_buffer);
        link->Pump(link->up, link->down, link->up_buffer);
      });
      Accept();
    });
  }

  tcp::endpoint upstream_;
  tcp::acceptor acceptor_;
  std::vector<std::shared_ptr<Link>> links_;
};

// Polls cond every 2 ms for up to `within`.
Task<bool> Eventually(Env* env, std::function<bool()> cond, Duration within = seconds(3)) {
  const MonoTime deadline = env->MonoNow() + within;
  while (!cond()) {
    if (env->MonoNow() > deadline) co_return false;
    co_await env->SleepFor(milliseconds(2));
  }
  co_return true;
}

const NodeId kOwner("owner-node");
const InstanceToken kOwnerInstance("owner-instance");

// The relay node and the owner (see the file's comment).
class Nodes {
 public:
  explicit Nodes(RealEnv& env, std::uint8_t relay_secret = 7)
      : env_(env),
        relay_identity_(std::move(TlsIdentity::Generate("relay")).value()),
        owner_identity_(std::move(TlsIdentity::Generate("owner")).value()),
        relay_forwarder_(env, transport_, ForwarderIdentity{NodeId("relay-node"), InstanceToken("relay-instance")},
                         Secret(relay_secret)),
        owner_forwarder_(env, transport_, ForwarderIdentity{kOwner, kOwnerInstance}, Secret(7)) {
    limits.ping_interval = seconds(10);
    limits.close_timeout = milliseconds(500);
    limits.max_messages_per_second = 0;
    const std::string relay_pin = relay_identity_->pin();
    auto owner_tls = MakePeerServerContext(*owner_identity_, [relay_pin](std::string_view pin) { return pin == relay_pin; });
    EXPECT_TRUE(owner_tls.ok());
    auto owner = HttpServer::Start(
        env, "127.0.0.1:0", [this](ServerRequest request) { return ReadyResponse(OwnerAnswer(std::move(request))); },
        {}, {}, *owner_tls);
    EXPECT_TRUE(owner.ok()) << owner.status().ToString();
    owner_ = std::move(*owner);
    proxy_ = std::make_unique<Proxy>(env, tcp::endpoint(net::ip::address_v4::loopback(), owner_->bound_port()));
    owner_address = proxy_->address();
  }

  // Starts the relay and the client's listener; a test may change the options, the trust
  // and the owner's address first.
  void StartRelay() {
    options.limits = limits;
    trust.Update({TrustedPeer{kOwner, kOwnerInstance, owner_address, owner_identity_->pin()}});
    relay = std::make_unique<SocketRelay>(env_, relay_forwarder_, *relay_identity_, trust, options);
    PublishSocketRelayMetrics(metrics, *relay);
    SocketRelay* r = relay.get();
    const PeerTarget to{kOwner, kOwnerInstance, owner_address};
    auto front = HttpServer::Start(env_, "127.0.0.1:0", [r, to](ServerRequest request) {
      return r->Relay(to, std::move(request), "acme", 1);
    });
    EXPECT_TRUE(front.ok()) << front.status().ToString();
    front_ = std::move(*front);
  }

  std::string front_address() const { return "127.0.0.1:" + std::to_string(front_->bound_port()); }
  std::string owner_pin() const { return owner_identity_->pin(); }
  void CutOwner() { proxy_->Cut(); }
  void Stop() {
    front_->Stop();
    owner_->Stop();
  }

  // What the relay's client's listener got, as the front hands it on: the token is gone.
  static ServerRequest Handshake(std::string target = "/v1/actors/acme/chat/lobby/ws") {
    ServerRequest r;
    r.method = "GET";
    r.target = std::move(target);
    r.headers = {{"Upgrade", "websocket"},
                 {"Connection", "Upgrade"},
                 {"Sec-WebSocket-Version", "13"},
                 {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                 {"Sec-WebSocket-Protocol", "wasmkeep"},
                 {"X-Custom", "kept"},
                 // Never sent on: the front removes it, and Forwarder::Sign drops credentials.
                 {"Authorization", "Bearer secret-token"}};
    return r;
  }

  WebSocketLimits limits;
  SocketRelayOptions options;
  PeerTrust trust;
  std::string owner_address;
  std::unique_ptr<SocketRelay> relay;
  MetricsRegistry metrics;
  Duration owner_delay{0};
  // The owner's side.
  Seen owner_seen;
  std::vector<ServerRequest> owner_requests;     // as received
  std::vector<ForwardedFrom> owner_verified;     // what their signatures said
  int owner_opened = 0;

 private:
  // The owner's front: the raw handshake first, then the signature (routing/front.h), then
  // its actor's answer: /refuse is 403, anything else upgrades.
  ServerResponse OwnerAnswer(ServerRequest request) {
    owner_requests.push_back(request);
    const std::optional<std::string> handshake = CheckWebSocketHandshake(request);
    if (!handshake || !handshake->empty()) return TextResponse(400, handshake ? *handshake : "not a handshake");
    auto verified = owner_forwarder_.Verify(request);
    if (!verified.ok() || !verified->has_value()) {
      ServerResponse r = TextResponse(401, "refused\n");
      r.headers.emplace_back(std::string(kForwardingRefused), verified.ok() ? "unsigned" : verified.status().message());
      return r;
    }
    owner_verified.push_back(**verified);
    if (request.target.ends_with("/refuse")) {
      ServerResponse r = TextResponse(403, "the actor refuses\n");
      r.headers.emplace_back("X-Why", "no");
      return r;
    }
    auto upgrade = std::make_shared<WebSocketUpgrade>();
    upgrade->limits = limits;
    upgrade->headers = {{"Sec-WebSocket-Protocol", "wasmkeep"}};
    upgrade->attach = [this](std::shared_ptr<WebSocketPeer> peer) -> std::shared_ptr<WebSocketHandler> {
      ++owner_opened;
      peer->Send(false, "welcome");  // what an open event sends goes right after the 101
      return std::make_shared<OwnerActor>(&env_, &owner_seen, std::move(peer), owner_delay);
    };
    ServerResponse r;
    r.status = 101;
    r.upgrade = std::move(upgrade);
    return r;
  }

  RealEnv& env_;
  UnusedTransport transport_;
  std::unique_ptr<TlsIdentity> relay_identity_;
  std::unique_ptr<TlsIdentity> owner_identity_;
  Forwarder relay_forwarder_;
  Forwarder owner_forwarder_;
  std::unique_ptr<HttpServer> owner_;
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<HttpServer> front_;
};

WebSocketClientOptions ClientOptions() {
  WebSocketClientOptions o;
  o.limits.ping_interval = seconds(10);
  o.limits.close_timeout = milliseconds(500);
  o.limits.max_messages_per_second = 0;
  o.limits.max_send_queue_bytes = 64 << 20;
  return o;
}

// A client through the relay: connected, started with a Recording handler.
struct Client {
  std::shared_ptr<WebSocketClientConnection> connection;
  std::shared_ptr<WebSocketPeer> peer;
  Seen seen;
};

Task<bool> Connect(RealEnv* env, Nodes* nodes, Client* client) {
  auto answer = co_await ConnectWebSocket(*env, nodes->front_address(), Nodes::Handshake(), ClientOptions());
  if (!answer.ok() || !answer->connection) {
    ADD_FAILURE() << (answer.ok() ? "status " + std::to_string(answer->status) + ": " + answer->body
                                  : answer.status().ToString());
    co_return false;
  }
  client->connection = answer->connection;
  Seen* seen = &client->seen;
  client->connection->Start([client, seen](std::shared_ptr<WebSocketPeer> peer) -> std::shared_ptr<WebSocketHandler> {
    client->peer = std::move(peer);
    return std::make_shared<Recording>(seen);
  });
  co_return true;
}

// Runs body(env, nodes, client) with the relay started (configure, if given, sets the nodes
// up first) and a client connected through it; the nodes are stopped after.
using RelayBody = std::function<Task<void>(RealEnv*, Nodes&, Client&)>;
void RunThroughRelay(RelayBody body, std::function<void(Nodes&)> configure = {}) {
  std::signal(SIGPIPE, SIG_IGN);
  RealEnv env;
  env.RunMain([](RealEnv* env, RelayBody body, std::function<void(Nodes&)> configure) -> Task<void> {
    Nodes nodes(*env);
    if (configure) configure(nodes);
    nodes.StartRelay();
    Client client;
    if (co_await Connect(env, &nodes, &client)) co_await body(env, nodes, client);
    nodes.Stop();
  }(&env, std::move(body), std::move(configure)));
}

std::string Header(const ServerHeaders& headers, std::string_view name) {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreAsciiCase(n, name)) return v;
  }
  return {};
}

bool Has(const std::string& text, std::string_view line) { return text.find(line) != std::string::npos; }

TEST(SocketRelayTest, MessagesGoBothWaysSignedAndWithoutTheToken) {
  std::signal(SIGPIPE, SIG_IGN);
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    Nodes nodes(*env);
    nodes.StartRelay();
    Client client;
    auto answer = co_await ConnectWebSocket(*env, nodes.front_address(), Nodes::Handshake(), ClientOptions());
    if (!answer.ok() || !answer->connection) {
      ADD_FAILURE() << "no 101";
      co_return;
    }
    EXPECT_EQ(Header(answer->connection->headers(), "Sec-WebSocket-Protocol"), "wasmkeep");
    client.connection = answer->connection;
    client.connection->Start([&client](std::shared_ptr<WebSocketPeer> peer) -> std::shared_ptr<WebSocketHandler> {
      client.peer = std::move(peer);
      return std::make_shared<Recording>(&client.seen);
    });
    EXPECT_TRUE(co_await Eventually(env, [&] { return client.seen.messages.size() == 1; }));
    client.peer->Send(false, "hello");
    client.peer->Send(true, std::string("\x00\xff", 2));
    EXPECT_TRUE(co_await Eventually(env, [&] { return client.seen.messages.size() == 3; }));
    if (client.seen.messages.size() == 3) {
      EXPECT_EQ(client.seen.messages[0], std::make_pair(false, std::string("welcome")));
      EXPECT_EQ(client.seen.messages[1], std::make_pair(false, std::string("hello")));
      EXPECT_EQ(client.seen.messages[2], std::make_pair(true, std::string("\x00\xff", 2)));
    }
    // The owner got a signed handshake for the tenant, one hop, without the token.
    EXPECT_EQ(nodes.owner_opened, 1);
    if (nodes.owner_verified.size() == 1 && nodes.owner_requests.size() == 1) {
      const ForwardedFrom& from = nodes.owner_verified[0];
      EXPECT_EQ(from.node_id, NodeId("relay-node"));
      EXPECT_EQ(from.tenant, "acme");
      EXPECT_EQ(from.hops, 1);
      EXPECT_EQ(Header(from.headers, "X-Custom"), "kept");
      EXPECT_EQ(Header(from.headers, "Sec-WebSocket-Protocol"), "wasmkeep");
      for (const auto& [n, v] : nodes.owner_requests[0].headers) {
        EXPECT_FALSE(EqualsIgnoreAsciiCase(n, "Authorization")) << "the token never leaves the first node";
        EXPECT_EQ(v.find("secret-token"), std::string::npos) << n;
      }
    } else {
      ADD_FAILURE() << "the owner verified " << nodes.owner_verified.size() << " handshakes";
    }
    std::string text = nodes.metrics.RenderText();
    EXPECT_TRUE(Has(text, "wasmkeep_websocket_relayed_open 1\n")) << text;
    EXPECT_TRUE(Has(text, "wasmkeep_websocket_relayed_total 1\n")) << text;
    EXPECT_TRUE(Has(text, "wasmkeep_websocket_relayed_messages_total{direction=\"to_owner\"} 2\n")) << text;
    EXPECT_TRUE(Has(text, "wasmkeep_websocket_relayed_messages_total{direction=\"to_client\"} 3\n")) << text;

    // The client's close reaches the owner with its code and reason, and its echo comes back.
    client.peer->Close(4001, "leaving");
    EXPECT_TRUE(co_await Eventually(env, [&] { return client.seen.closed && nodes.owner_seen.closed; }));
    EXPECT_EQ(nodes.owner_seen.closed, std::make_pair(4001, std::string("leaving")));
    EXPECT_EQ(client.seen.closed->first, 4001);
    EXPECT_TRUE(co_await Eventually(env, [&] { return nodes.relay->open() == 0; }));
    text = nodes.metrics.RenderText();
    EXPECT_TRUE(Has(text, "wasmkeep_websocket_relayed_open 0\n")) << text;
    nodes.Stop();
  }(&env));
}

TEST(SocketRelayTest, TheOwnersCloseReachesTheClientWithItsCode) {
  RunThroughRelay([](RealEnv* env, Nodes& nodes, Client& client) -> Task<void> {
    EXPECT_TRUE(co_await Eventually(env, [&] { return !client.seen.messages.empty(); }));
    client.peer->Send(false, "close");
    EXPECT_TRUE(co_await Eventually(env, [&] { return client.seen.closed && nodes.owner_seen.closed; }));
    EXPECT_EQ(client.seen.messages.size(), 2u);
    if (client.seen.messages.size() == 2) {
      EXPECT_EQ(client.seen.messages[1].second, "before close");
    }
    EXPECT_EQ(client.seen.closed, std::make_pair(4000, std::string("bye")));
    EXPECT_EQ(nodes.owner_seen.closed->first, 4000) << "the client's echo, relayed";
    EXPECT_TRUE(co_await Eventually(env, [&] { return nodes.relay->open() == 0; }));
  });
}

TEST(SocketRelayTest, AnOwnerThatGoesAwayWithoutACloseIs1012ForTheClient) {
  RunThroughRelay([](RealEnv* env, Nodes& nodes, Client& client) -> Task<void> {
    EXPECT_TRUE(co_await Eventually(env, [&] { return !client.seen.messages.empty(); }));
    nodes.CutOwner();  // as the relay sees a node killed with -9
    EXPECT_TRUE(co_await Eventually(env, [&] { return client.seen.closed && nodes.owner_seen.closed; }));
    EXPECT_EQ(client.seen.closed, std::make_pair(kCloseRestart, std::string("the actor's owner went away: reconnect")));
    EXPECT_EQ(nodes.owner_seen.closed->first, 1006);
    EXPECT_EQ(nodes.relay->stats().owner_gone, 1u);
    EXPECT_TRUE(co_await Eventually(env, [&] { return nodes.relay->open() == 0; }));
  });
}

TEST(SocketRelayTest, AClientThatVanishesIsCutOnTheOwnersSide) {
  RunThroughRelay([](RealEnv* env, Nodes& nodes, Client& client) -> Task<void> {
    EXPECT_TRUE(co_await Eventually(env, [&] { return !client.seen.messages.empty(); }));
    client.connection->Cut();
    EXPECT_TRUE(co_await Eventually(env, [&] { return nodes.owner_seen.closed.has_value(); }));
    EXPECT_EQ(nodes.owner_seen.closed->first, 1006) << "what a direct client's drop would show the actor";
    EXPECT_TRUE(co_await Eventually(env, [&] { return nodes.relay->open() == 0; }));
  });
}

TEST(SocketRelayTest, AnOwnerNoLongerTrustedAndStopCloseTheClients) {
  std::signal(SIGPIPE, SIG_IGN);
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    Nodes nodes(*env);
    nodes.StartRelay();
    Client first;
    if (!co_await Connect(env, &nodes, &first)) co_return;
    EXPECT_TRUE(co_await Eventually(env, [&] { return !first.seen.messages.empty(); }));
    nodes.trust.Update({});  // the owner was fenced, say
    nodes.relay->DropUntrusted();
    EXPECT_TRUE(co_await Eventually(env, [&] { return first.seen.closed && nodes.owner_seen.closed; }));
    EXPECT_EQ(first.seen.closed->first, kCloseRestart);
    EXPECT_EQ(nodes.owner_seen.closed->first, 1006);

    nodes.owner_seen = Seen();
    nodes.trust.Update({TrustedPeer{kOwner, kOwnerInstance, nodes.owner_address, nodes.owner_pin()}});
    Client second;
    if (!co_await Connect(env, &nodes, &second)) co_return;
    EXPECT_TRUE(co_await Eventually(env, [&] { return !second.seen.messages.empty(); }));
    nodes.relay->Stop(kCloseRestart, "the node is stopping: reconnect");
    EXPECT_TRUE(co_await Eventually(env, [&] { return second.seen.closed && nodes.owner_seen.closed; }));
    EXPECT_EQ(second.seen.closed, std::make_pair(kCloseRestart, std::string("the node is stopping: reconnect")));
    EXPECT_EQ(nodes.owner_seen.closed, std::make_pair(kCloseGoingAway, std::string("the relaying node is stopping")));
    // And nothing more is relayed.
    auto answer = co_await ConnectWebSocket(*env, nodes.front_address(), Nodes::Handshake(), ClientOptions());
    EXPECT_TRUE(answer.ok() && answer->status == 503) << (answer.ok() ? answer->body : answer.status().ToString());
    nodes.Stop();
  }(&env));
}

TEST(SocketRelayTest, TheOwnersRefusalIsGivenToTheClient) {
  std::signal(SIGPIPE, SIG_IGN);
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    Nodes nodes(*env);
    nodes.StartRelay();
    auto answer = co_await ConnectWebSocket(*env, nodes.front_address(),
                                            Nodes::Handshake("/v1/actors/acme/chat/lobby/refuse"), ClientOptions());
    if (!answer.ok()) {
      ADD_FAILURE() << answer.status().ToString();
      co_return;
    }
    EXPECT_FALSE(answer->connection);
    EXPECT_EQ(answer->status, 403);
    EXPECT_EQ(answer->body, "the actor refuses\n");
    EXPECT_EQ(Header(answer->headers, "X-Why"), "no");
    EXPECT_EQ(nodes.relay->stats().answered, 1u);
    EXPECT_EQ(nodes.relay->open(), 0u);
    nodes.Stop();
  }(&env));
}

// The 503 the relay answers itself: Retry-After, the owner named.
void ExpectRelayRefused(const Result<WebSocketClientAnswer>& answer, std::string_view why) {
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_FALSE(answer->connection);
  EXPECT_EQ(answer->status, 503);
  EXPECT_EQ(Header(answer->headers, "Retry-After"), "1");
  EXPECT_NE(answer->body.find("owner-node"), std::string::npos) << answer->body;
  EXPECT_NE(answer->body.find(why), std::string::npos) << answer->body;
}

TEST(SocketRelayTest, ARefusedSignatureIs503) {
  std::signal(SIGPIPE, SIG_IGN);
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    Nodes nodes(*env, /*relay_secret=*/9);  // another cluster's secret
    nodes.StartRelay();
    auto answer = co_await ConnectWebSocket(*env, nodes.front_address(), Nodes::Handshake(), ClientOptions());
    ExpectRelayRefused(answer, "bad forwarding signature");
    EXPECT_EQ(nodes.owner_opened, 0);
    EXPECT_EQ(nodes.relay->stats().failed, 1u);
    nodes.Stop();
  }(&env));
}

TEST(SocketRelayTest, AnOwnerNotTrustedOrNotReachedIs503) {
  std::signal(SIGPIPE, SIG_IGN);
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    {
      Nodes nodes(*env);
      nodes.StartRelay();
      nodes.trust.Update({});
      auto answer = co_await ConnectWebSocket(*env, nodes.front_address(), Nodes::Handshake(), ClientOptions());
      ExpectRelayRefused(answer, "not a live peer");
      EXPECT_TRUE(nodes.owner_requests.empty()) << "nothing is sent to a node not trusted";
      nodes.Stop();
    }
    {
      Nodes nodes(*env);
      nodes.owner_address = "127.0.0.1:1";  // nobody listens there
      nodes.StartRelay();
      auto answer = co_await ConnectWebSocket(*env, nodes.front_address(), Nodes::Handshake(), ClientOptions());
      ExpectRelayRefused(answer, "connecting to 127.0.0.1:1");
      EXPECT_EQ(nodes.relay->stats().failed, 1u);
      EXPECT_EQ(nodes.relay->open(), 0u);
      nodes.Stop();
    }
  }(&env));
}

TEST(SocketRelayTest, ABusyOwnerSlowsTheClientDownInsteadOfFillingTheRelay) {
  RunThroughRelay(
      [](RealEnv* env, Nodes& nodes, Client& client) -> Task<void> {
        constexpr int kMessages = 150;
        const std::string payload(60 * 1024, 'p');
        for (int i = 0; i < kMessages; ++i) {
          // The client's own queue is large; what it sends waits in the relay or TCP.
          if (!client.peer->Send(true, payload)) {
            ADD_FAILURE() << "the client's send " << i << " was refused";
            break;
          }
        }
        EXPECT_TRUE(co_await Eventually(
            env,
            [&] { return nodes.owner_seen.messages.size() == kMessages || client.seen.closed || nodes.owner_seen.closed; },
            seconds(20)));
        EXPECT_FALSE(client.seen.closed) << client.seen.closed->first << " " << client.seen.closed->second;
        EXPECT_FALSE(nodes.owner_seen.closed);
        EXPECT_EQ(nodes.relay->stats().messages_to_owner, static_cast<std::uint64_t>(kMessages));
        client.peer->Close(1000, "");
        EXPECT_TRUE(co_await Eventually(env, [&] { return nodes.owner_seen.closed.has_value(); }));
        EXPECT_TRUE(co_await Eventually(env, [&] { return nodes.relay->open() == 0; }));
      },
      [](Nodes& n) {
        // Small queues and an owner that takes 2 ms a message: 150 messages of 60 KiB (9 MB,
        // more than the sockets between the nodes buffer) would take the relay's queue to the
        // owner past its 128 KiB bound (1008) if it read the client as fast as it sends.
        n.limits.max_send_queue_bytes = 128 * 1024;
        n.owner_delay = milliseconds(2);
      });
}

}  // namespace
}  // namespace wk
