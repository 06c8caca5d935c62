// The WebSocket client (websocket_client.h) against the real HttpServer, plain and over the
// peer listener's pinned TLS, both on the test's RealEnv loop; and against a raw server
// written here (a blocking socket on a thread of its own) for what HttpServer never does: a
// wrong Sec-WebSocket-Accept, a connection dropped without a close frame, fragments, a
// masked frame, silence.
#include "net/testing/websocket_recording.h"
#include "net/websocket_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "env/real_env.h"
#include "net/http_server.h"
#include "net/tls_identity.h"
#include "net/websocket.h"
#include "net/websocket_frames.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kKey = "dGhlIHNhbXBsZSBub25jZQ==";
constexpr std::string_view kAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";  // RFC 6455 section 1.3

ServerRequest Handshake(std::string target = "/ws") {
  ServerRequest r;
  r.method = "GET";
  r.target = std::move(target);
  r.headers = {{"Upgrade", "websocket"},
               {"Connection", "Upgrade"},
               {"Sec-WebSocket-Version", "13"},
               {"Sec-WebSocket-Key", std::string(kKey)},
               {"Sec-WebSocket-Protocol", "chat, other"}};
  return r;
}

using websocket_test::Recording;
using websocket_test::Seen;

// The server's end: echoes, but "close" sends one message then closes with 4000 "bye", and
// "big" sends 200 bytes.
Task<void> Echo(Seen* seen, std::shared_ptr<WebSocketPeer> peer, bool binary, std::string data) {
  seen->messages.emplace_back(binary, data);
  if (data == "close") {
    peer->Send(false, "before close");
    peer->Close(4000, "bye");
  } else if (data == "big") {
    peer->Send(true, std::string(200, 'b'));
  } else {
    peer->Send(binary, std::move(data));
  }
  co_return;
}

class EchoHandler final : public WebSocketHandler {
 public:
  EchoHandler(Seen* seen, std::shared_ptr<WebSocketPeer> peer) : seen_(seen), peer_(std::move(peer)) {}
  Task<void> OnMessage(bool binary, std::string data) override { return Echo(seen_, peer_, binary, std::move(data)); }
  void OnClosed(int code, std::string reason) override {
    seen_->closed.emplace(code, std::move(reason));
    ++seen_->closed_calls;
    peer_.reset();
  }

 private:
  Seen* seen_;
  std::shared_ptr<WebSocketPeer> peer_;
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

// An HttpServer on 127.0.0.1:0 whose /ws upgrades (answering subprotocol "chat") to an
// EchoHandler, and whose /refuse answers 403.
struct EchoServer {
  explicit EchoServer(RealEnv& env, std::shared_ptr<boost::asio::ssl::context> tls = nullptr) {
    limits.ping_interval = seconds(10);
    limits.close_timeout = milliseconds(500);
    ServerHandler handler = [this](ServerRequest request) {
      if (request.target == "/refuse") {
        ServerResponse r = TextResponse(403, "go away\n");
        r.headers.emplace_back("X-Why", "no");
        return ReadyResponse(std::move(r));
      }
      auto upgrade = std::make_shared<WebSocketUpgrade>();
      upgrade->limits = limits;
      upgrade->headers = {{"Sec-WebSocket-Protocol", "chat"}};
      upgrade->attach = [this](std::shared_ptr<WebSocketPeer> peer) -> std::shared_ptr<WebSocketHandler> {
        peers.push_back(peer);
        return std::make_shared<EchoHandler>(&seen, std::move(peer));
      };
      ServerResponse r;
      r.status = 101;
      r.upgrade = std::move(upgrade);
      return ReadyResponse(std::move(r));
    };
    auto started = HttpServer::Start(env, "127.0.0.1:0", std::move(handler), {}, {}, std::move(tls));
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (started.ok()) server = std::move(*started);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server->bound_port()); }

  WebSocketLimits limits;
  Seen seen;
  std::vector<std::shared_ptr<WebSocketPeer>> peers;
  std::unique_ptr<HttpServer> server;
};

WebSocketClientOptions ClientOptions() {
  WebSocketClientOptions o;
  o.limits.ping_interval = seconds(10);
  o.limits.close_timeout = milliseconds(500);
  o.limits.max_messages_per_second = 0;
  return o;
}

// Connects, expects a 101 and starts the connection with a Recording handler; the peer.
Task<std::shared_ptr<WebSocketPeer>> Open(RealEnv* env, std::string address, WebSocketClientOptions options,
                                          Seen* seen, ServerHeaders* headers = nullptr) {
  auto answer = co_await ConnectWebSocket(*env, std::move(address), Handshake(), std::move(options));
  if (!answer.ok()) {
    ADD_FAILURE() << answer.status().ToString();
    co_return nullptr;
  }
  if (!answer->connection) {
    ADD_FAILURE() << "no 101: " << answer->status << " " << answer->body;
    co_return nullptr;
  }
  if (headers != nullptr) *headers = answer->connection->headers();
  std::shared_ptr<WebSocketPeer> peer;
  answer->connection->Start([&peer, seen](std::shared_ptr<WebSocketPeer> p) -> std::shared_ptr<WebSocketHandler> {
    peer = std::move(p);
    return std::make_shared<Recording>(seen);
  });
  co_return peer;
}

// Echo, a client's close, and room in the send queue; over server's listener.
Task<void> EchoThenClose(RealEnv* env, EchoServer* server, WebSocketClientOptions options) {
  Seen seen;
  ServerHeaders headers;
  std::shared_ptr<WebSocketPeer> peer = co_await Open(env, server->address(), std::move(options), &seen, &headers);
  if (!peer) co_return;
  bool protocol = false;
  for (const auto& [n, v] : headers) protocol = protocol || (n == "Sec-WebSocket-Protocol" && v == "chat");
  EXPECT_TRUE(protocol) << "the 101's headers are given";
  EXPECT_TRUE(peer->Send(false, "hello"));
  EXPECT_TRUE(peer->Send(true, std::string("\x00\x01\x02", 3)));
  EXPECT_TRUE(peer->Send(false, std::string(4000, 'x')));
  bool room = false;
  peer->WhenQueueAtMost(0, [&room] { room = true; });
  EXPECT_TRUE(co_await Eventually(env, [&] { return seen.messages.size() == 3; }));
  EXPECT_TRUE(room) << "the queue drained once the messages were written";
  EXPECT_EQ(peer->queued_bytes(), 0u);
  if (seen.messages.size() == 3) {
    EXPECT_EQ(seen.messages[0], std::make_pair(false, std::string("hello")));
    EXPECT_EQ(seen.messages[1], std::make_pair(true, std::string("\x00\x01\x02", 3)));
    EXPECT_EQ(seen.messages[2], std::make_pair(false, std::string(4000, 'x')));
  }
  // The server saw them as a client's (masked) frames.
  EXPECT_EQ(server->seen.messages.size(), 3u);
  peer->Close(1000, "done");
  EXPECT_TRUE(co_await Eventually(env, [&] { return seen.closed && server->seen.closed; }));
  EXPECT_EQ(seen.closed, std::make_pair(1000, std::string()));  // the server's echo
  EXPECT_EQ(server->seen.closed, std::make_pair(1000, std::string("done")));
  EXPECT_EQ(seen.closed_calls, 1);
  EXPECT_FALSE(peer->Send(false, "late")) << "nothing is sent after the close";
  EXPECT_TRUE(co_await Eventually(env, [&] { return server->server->open_websockets() == 0; }));
}

TEST(WebSocketClientTest, EchoAndTheClientsClose) {
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    EchoServer server(*env);
    co_await EchoThenClose(env, &server, ClientOptions());
    server.server->Stop();
  }(&env));
}

TEST(WebSocketClientTest, EchoOverThePeerListenersPinnedTls) {
  std::signal(SIGPIPE, SIG_IGN);
  auto server_identity = TlsIdentity::Generate("server");
  auto client_identity = TlsIdentity::Generate("client");
  ASSERT_TRUE(server_identity.ok() && client_identity.ok());
  const std::string client_pin = (*client_identity)->pin();
  auto server_tls = MakePeerServerContext(**server_identity, [client_pin](std::string_view pin) { return pin == client_pin; });
  auto client_tls = MakePinnedClientContext(**client_identity, (*server_identity)->pin());
  ASSERT_TRUE(server_tls.ok() && client_tls.ok());
  RealEnv env;
  env.RunMain([](RealEnv* env, std::shared_ptr<boost::asio::ssl::context> server_tls,
                 std::shared_ptr<boost::asio::ssl::context> client_tls) -> Task<void> {
    EchoServer server(*env, server_tls);
    WebSocketClientOptions options = ClientOptions();
    options.tls = client_tls;
    co_await EchoThenClose(env, &server, options);
    server.server->Stop();
  }(&env, *server_tls, *client_tls));
}

TEST(WebSocketClientTest, AServerWhosePinIsNotTheExpectedOneIsRefusedBeforeAnythingIsSent) {
  std::signal(SIGPIPE, SIG_IGN);
  auto server_identity = TlsIdentity::Generate("server");
  auto client_identity = TlsIdentity::Generate("client");
  auto other = TlsIdentity::Generate("other");
  ASSERT_TRUE(server_identity.ok() && client_identity.ok() && other.ok());
  auto server_tls = MakePeerServerContext(**server_identity, [](std::string_view) { return true; });
  auto client_tls = MakePinnedClientContext(**client_identity, (*other)->pin());
  ASSERT_TRUE(server_tls.ok() && client_tls.ok());
  RealEnv env;
  env.RunMain([](RealEnv* env, std::shared_ptr<boost::asio::ssl::context> server_tls,
                 std::shared_ptr<boost::asio::ssl::context> client_tls) -> Task<void> {
    EchoServer server(*env, server_tls);
    WebSocketClientOptions options = ClientOptions();
    options.tls = client_tls;
    auto answer = co_await ConnectWebSocket(*env, server.address(), Handshake(), options);
    EXPECT_EQ(answer.code(), Code::kRetryable) << answer.status().ToString();
    EXPECT_NE(answer.status().message().find("TLS handshake"), std::string::npos) << answer.status().ToString();
    EXPECT_TRUE(server.seen.messages.empty());
    server.server->Stop();
  }(&env, *server_tls, *client_tls));
}

TEST(WebSocketClientTest, CloseCodesGoBothWays) {
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    EchoServer server(*env);
    // The server closes: what it queued first, then its code and reason.
    Seen seen;
    std::shared_ptr<WebSocketPeer> peer = co_await Open(env, server.address(), ClientOptions(), &seen);
    if (!peer) co_return;
    peer->Send(false, "close");
    EXPECT_TRUE(co_await Eventually(env, [&] { return seen.closed && server.seen.closed; }));
    EXPECT_EQ(seen.messages.size(), 1u);
    if (!seen.messages.empty()) {
      EXPECT_EQ(seen.messages[0].second, "before close");
    }
    EXPECT_EQ(seen.closed, std::make_pair(4000, std::string("bye")));
    EXPECT_EQ(server.seen.closed->first, 4000) << "the client echoes the server's code";
    // The client closes with a code of its own.
    Seen second;
    server.seen = Seen();
    peer = co_await Open(env, server.address(), ClientOptions(), &second);
    if (!peer) co_return;
    peer->Close(4321, "client's reason");
    EXPECT_TRUE(co_await Eventually(env, [&] { return second.closed && server.seen.closed; }));
    EXPECT_EQ(server.seen.closed, std::make_pair(4321, std::string("client's reason")));
    EXPECT_EQ(second.closed->first, 4321);
    server.server->Stop();
  }(&env));
}

TEST(WebSocketClientTest, AMessageOverTheBoundIsClosedWith1009) {
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    EchoServer server(*env);
    WebSocketClientOptions options = ClientOptions();
    options.limits.max_message_bytes = 100;
    Seen seen;
    std::shared_ptr<WebSocketPeer> peer = co_await Open(env, server.address(), options, &seen);
    if (!peer) co_return;
    peer->Send(false, "big");  // 200 bytes back
    EXPECT_TRUE(co_await Eventually(env, [&] { return seen.closed && server.seen.closed; }));
    EXPECT_TRUE(seen.messages.empty());
    EXPECT_EQ(seen.closed->first, 1006) << "a connection this end failed reports no code of the other's";
    EXPECT_EQ(server.seen.closed->first, kCloseTooBig);
    EXPECT_NE(server.seen.closed->second.find("100 bytes"), std::string::npos) << server.seen.closed->second;
    server.server->Stop();
  }(&env));
}

TEST(WebSocketClientTest, TheSendQueuesBoundIsClosedWith1008) {
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    EchoServer server(*env);
    WebSocketClientOptions options = ClientOptions();
    options.limits.max_send_queue_bytes = 1000;
    Seen seen;
    std::shared_ptr<WebSocketPeer> peer = co_await Open(env, server.address(), options, &seen);
    if (!peer) co_return;
    EXPECT_FALSE(peer->Send(true, std::string(2000, 'q')));
    EXPECT_TRUE(co_await Eventually(env, [&] { return seen.closed && server.seen.closed; }));
    EXPECT_EQ(server.seen.closed->first, kClosePolicy);
    EXPECT_TRUE(server.seen.messages.empty());
    server.server->Stop();
  }(&env));
}

TEST(WebSocketClientTest, ARefusalIsReturnedWithItsStatusHeadersAndBody) {
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    EchoServer server(*env);
    auto answer = co_await ConnectWebSocket(*env, server.address(), Handshake("/refuse"), ClientOptions());
    if (!answer.ok()) {
      ADD_FAILURE() << answer.status().ToString();
      co_return;
    }
    EXPECT_FALSE(answer->connection);
    EXPECT_EQ(answer->status, 403);
    EXPECT_EQ(answer->body, "go away\n");
    bool why = false;
    for (const auto& [n, v] : answer->headers) why = why || (n == "X-Why" && v == "no");
    EXPECT_TRUE(why);
    server.server->Stop();
  }(&env));
}

TEST(WebSocketClientTest, BadArgumentsAreRefusedBeforeConnecting) {
  RealEnv env;
  env.RunMain([](RealEnv* env) -> Task<void> {
    auto answer = co_await ConnectWebSocket(*env, "127.0.0.1", Handshake(), ClientOptions());
    EXPECT_EQ(answer.code(), Code::kInvalidArgument);
    ServerRequest no_key = Handshake();
    no_key.headers.erase(no_key.headers.begin() + 3);
    answer = co_await ConnectWebSocket(*env, "127.0.0.1:1", no_key, ClientOptions());
    EXPECT_EQ(answer.code(), Code::kInvalidArgument);
    EXPECT_NE(answer.status().message().find("Sec-WebSocket-Key"), std::string::npos);
    ServerRequest bad_header = Handshake();
    bad_header.headers.emplace_back("X-Split", "a\r\nInjected: yes");
    answer = co_await ConnectWebSocket(*env, "127.0.0.1:1", bad_header, ClientOptions());
    EXPECT_EQ(answer.code(), Code::kInvalidArgument);
  }(&env));
}

// ---- A raw server on a thread: one connection, driven by a script.

class RawServer {
 public:
  explicit RawServer(std::function<void(int fd)> script) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, script = std::move(script)] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      timeval tv{2, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      script(fd);
      ::close(fd);
    });
  }
  ~RawServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const long n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads up to the end of the request's head (the client sends nothing more before the 101).
std::string ReadHead(int fd) {
  std::string in;
  char c;
  while (in.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1) in.push_back(c);
  return in;
}

std::string Answer101(std::string_view accept, std::string_view extra = {}) {
  return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
         std::string(accept) + "\r\n" + std::string(extra) + "\r\n";
}

// A frame as the client sent it: its mask bit and key, the payload unmasked.
struct RawFrame {
  std::uint8_t opcode = 0;
  bool masked = false;
  std::array<std::uint8_t, 4> mask{};
  std::string payload;
};

bool ReadExactly(int fd, std::size_t n, std::string* out) {
  out->clear();
  while (out->size() < n) {
    char buffer[4096];
    const long got = ::recv(fd, buffer, std::min(sizeof buffer, n - out->size()), 0);
    if (got <= 0) return false;
    out->append(buffer, static_cast<std::size_t>(got));
  }
  return true;
}

std::optional<RawFrame> ReadClientFrame(int fd) {
  std::string head;
  if (!ReadExactly(fd, 2, &head)) return std::nullopt;
  RawFrame f;
  f.opcode = static_cast<std::uint8_t>(head[0]) & 0x0F;
  f.masked = (static_cast<std::uint8_t>(head[1]) & 0x80) != 0;
  std::uint64_t length = static_cast<std::uint8_t>(head[1]) & 0x7F;
  std::string more;
  if (length >= 126) {
    const std::size_t extended = length == 126 ? 2 : 8;
    if (!ReadExactly(fd, extended, &more)) return std::nullopt;
    length = 0;
    for (char c : more) length = (length << 8) | static_cast<std::uint8_t>(c);
  }
  if (f.masked) {
    if (!ReadExactly(fd, 4, &more)) return std::nullopt;
    for (int i = 0; i < 4; ++i) f.mask[i] = static_cast<std::uint8_t>(more[i]);
  }
  if (!ReadExactly(fd, length, &f.payload)) return std::nullopt;
  if (f.masked) ApplyWebSocketMask(f.mask, f.payload.data(), f.payload.size());
  return f;
}

TEST(WebSocketClientTest, AServerThatGoesAwayWithoutACloseFrameIs1006) {
  RawServer raw([](int fd) {
    ReadHead(fd);
    WriteAll(fd, Answer101(kAccept) + EncodeWebSocketFrame(WebSocketOpcode::kText, "hi"));
    std::this_thread::sleep_for(milliseconds(50));
    ::shutdown(fd, SHUT_RDWR);  // as a node killed with -9: no close frame
  });
  RealEnv env;
  env.RunMain([](RealEnv* env, std::string address) -> Task<void> {
    Seen seen;
    std::shared_ptr<WebSocketPeer> peer = co_await Open(env, address, ClientOptions(), &seen);
    if (!peer) co_return;
    EXPECT_TRUE(co_await Eventually(env, [&] { return seen.closed.has_value(); }));
    EXPECT_EQ(seen.messages.size(), 1u);
    if (!seen.messages.empty()) {
      EXPECT_EQ(seen.messages[0].second, "hi");
    }
    EXPECT_EQ(seen.closed, std::make_pair(1006, std::string()));
  }(&env, raw.address()));
}

TEST(WebSocketClientTest, ABadUpgradeIsRefused) {
  struct Case {
    std::string answer;
    std::string_view names;
  };
  const std::vector<Case> cases = {
      {Answer101("AAAAAAAAAAAAAAAAAAAAAAAAAAA="), "Sec-WebSocket-Accept"},
      {"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + std::string(kAccept) +
           "\r\n\r\n",
       "Upgrade: websocket"},
      {Answer101(kAccept, "Sec-WebSocket-Protocol: unoffered\r\n"), "unoffered"},
      {Answer101(kAccept, "Sec-WebSocket-Extensions: permessage-deflate\r\n"), "extension"},
  };
  for (const Case& c : cases) {
    RawServer raw([&c](int fd) {
      ReadHead(fd);
      WriteAll(fd, c.answer);
      std::string rest;
      ReadExactly(fd, 1, &rest);  // until the client hangs up
    });
    RealEnv env;
    env.RunMain([](RealEnv* env, std::string address, std::string_view names) -> Task<void> {
      auto answer = co_await ConnectWebSocket(*env, address, Handshake(), ClientOptions());
      EXPECT_EQ(answer.code(), Code::kUnknownOutcome) << answer.status().ToString();
      EXPECT_NE(answer.status().message().find(names), std::string::npos) << answer.status().ToString();
    }(&env, raw.address(), c.names));
  }
}

TEST(WebSocketClientTest, TheClientMasksEveryFrameReadsFragmentsAndAnswersPings) {
  std::vector<RawFrame> got;
  {
  RawServer raw([&got](int fd) {
    ReadHead(fd);
    // A fragmented text message with a ping between its fragments.
    WriteAll(fd, Answer101(kAccept) + EncodeWebSocketFrame(WebSocketOpcode::kText, "hel", false) +
                     EncodeWebSocketFrame(WebSocketOpcode::kPing, "p1") +
                     EncodeWebSocketFrame(WebSocketOpcode::kContinuation, "lo", true));
    for (int i = 0; i < 3; ++i) {  // the pong, and the client's two messages
      if (auto f = ReadClientFrame(fd)) got.push_back(std::move(*f));
    }
    // A masked frame from a server breaks the protocol: the client closes with 1002.
    const WebSocketMask mask{1, 2, 3, 4};
    WriteAll(fd, EncodeWebSocketFrame(WebSocketOpcode::kText, "masked", true, &mask));
    if (auto f = ReadClientFrame(fd)) got.push_back(std::move(*f));
  });
  RealEnv env;
  env.RunMain([](RealEnv* env, std::string address) -> Task<void> {
    Seen seen;
    std::shared_ptr<WebSocketPeer> peer = co_await Open(env, address, ClientOptions(), &seen);
    if (!peer) co_return;
    EXPECT_TRUE(co_await Eventually(env, [&] { return seen.messages.size() == 1; }));
    if (!seen.messages.empty()) {
      EXPECT_EQ(seen.messages[0].second, "hello");
    }
    peer->Send(false, "one");
    peer->Send(false, "two");
    EXPECT_TRUE(co_await Eventually(env, [&] { return seen.closed.has_value(); }));
    EXPECT_EQ(seen.closed->first, 1006);
  }(&env, raw.address()));
  }  // the raw server's thread has ended
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].opcode, 0xA);
  EXPECT_EQ(got[0].payload, "p1");
  EXPECT_EQ(got[1].payload, "one");
  EXPECT_EQ(got[2].payload, "two");
  for (const RawFrame& f : got) EXPECT_TRUE(f.masked);
  EXPECT_NE(got[1].mask, got[2].mask) << "a fresh mask for every frame";
  EXPECT_EQ(got[3].opcode, 0x8);
  ASSERT_GE(got[3].payload.size(), 2u);
  EXPECT_EQ((static_cast<std::uint8_t>(got[3].payload[0]) << 8) | static_cast<std::uint8_t>(got[3].payload[1]),
            kCloseProtocolError);
}

TEST(WebSocketClientTest, ASilentServerTimesTheHandshakeOut) {
  RawServer raw([](int fd) {
    ReadHead(fd);
    std::string rest;
    ReadExactly(fd, 1, &rest);  // never answers; until the client hangs up
  });
  RealEnv env;
  env.RunMain([](RealEnv* env, std::string address) -> Task<void> {
    WebSocketClientOptions options = ClientOptions();
    options.handshake_timeout = milliseconds(200);
    const MonoTime start = env->MonoNow();
    auto answer = co_await ConnectWebSocket(*env, address, Handshake(), options);
    EXPECT_EQ(answer.code(), Code::kUnknownOutcome) << answer.status().ToString();
    EXPECT_NE(answer.status().message().find("timed out"), std::string::npos) << answer.status().ToString();
    EXPECT_LT(env->MonoNow() - start, seconds(2));
  }(&env, raw.address()));
}

TEST(WebSocketClientTest, NobodyListeningIsRetryable) {
  // A port that was just free.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  RealEnv env;
  env.RunMain([](RealEnv* env, std::string address) -> Task<void> {
    auto answer = co_await ConnectWebSocket(*env, address, Handshake(), ClientOptions());
    EXPECT_EQ(answer.code(), Code::kRetryable) << answer.status().ToString();
    EXPECT_NE(answer.status().message().find("connecting to"), std::string::npos) << answer.status().ToString();
  }(&env, "127.0.0.1:" + std::to_string(ntohs(addr.sin_port))));
}

}  // namespace
}  // namespace wk
