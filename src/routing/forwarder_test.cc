// Forwarded requests: what Forward hands its PeerTransport (signed, without the client's
// token), what Verify accepts and refuses (tampering, another node or instance, the time
// window, a replayed nonce), and what comes back. Over real TLS between processes:
// tests/cluster/peer_tls_test.sh; over the simulated network: the simulator's `routing`
// scenario.
#include "routing/forwarder.h"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>

#include "env/sim_env.h"

namespace wk {
namespace {

constexpr std::int64_t kStartMs = 1'764'000'000'000;

control::ClusterSecret Secret(std::uint8_t fill) {
  control::ClusterSecret s;
  s.bytes.fill(fill);
  return s;
}

// A transport that records what it was asked to send and answers with a scripted outcome.
class ScriptedTransport final : public PeerTransport {
 public:
  explicit ScriptedTransport(Result<ServerResponse> answer) : answer_(std::move(answer)) {}
  Task<Result<ServerResponse>> Send(PeerTarget to, ServerRequest request, Duration timeout) override {
    sent.push_back(Sent{std::move(to), std::move(request), timeout});
    Result<ServerResponse> answer = answer_;
    co_return answer;
  }
  struct Sent {
    PeerTarget to;
    ServerRequest request;
    Duration timeout;
  };
  std::vector<Sent> sent;

 private:
  Result<ServerResponse> answer_;
};

ServerRequest ClientRequest() {
  ServerRequest r;
  r.method = "POST";
  r.target = "/v1/actors/acme/counter/x/increment?by=2";
  r.body = "payload";
  r.headers.emplace_back("Authorization", "Bearer secret-token");
  r.headers.emplace_back("Proxy-Authorization", "Basic also-secret");
  r.headers.emplace_back("Connection", "keep-alive");
  r.headers.emplace_back("Host", "node-a:8080");
  r.headers.emplace_back("X-Wasmkeep-Hops", "7");  // a client cannot smuggle forwarding headers
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("X-Custom", "kept");
  r.headers.emplace_back("x-custom", "twice");
  return r;
}

const PeerTarget kToB{NodeId("b"), InstanceToken("instance-b"), "10.0.0.2:7443"};

// A sender "a" and a receiver "b" of one cluster on one simulated clock.
class ForwarderTest : public ::testing::Test {
 protected:
  // What a forwards to b for the client's request.
  ServerRequest Forwarded(ServerRequest client = ClientRequest(), PeerTarget to = kToB) {
    ScriptedTransport transport{Result<ServerResponse>(ServerResponse{})};
    Forwarder a(env_, transport, ForwarderIdentity{NodeId("a"), InstanceToken("instance-a")}, Secret(3));
    auto got = RunTask(world_, env_, a.Forward(std::move(to), std::move(client), "acme", 1));
    EXPECT_TRUE(got.has_value() && got->ok());
    EXPECT_EQ(transport.sent.size(), 1u);
    return transport.sent.empty() ? ServerRequest{} : transport.sent[0].request;
  }
  static void SetHeader(ServerRequest& r, std::string_view name, std::string value) {
    for (auto& [n, v] : r.headers) {
      if (EqualsName(n, name)) v = std::move(value);
    }
  }
  static bool EqualsName(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    }
    return true;
  }
  // b's verdict on r (a fresh receiver each time unless one is given).
  Result<std::optional<ForwardedFrom>> VerifyAtB(const ServerRequest& r) {
    ScriptedTransport unused{Result<ServerResponse>(Retryable("unused"))};
    Forwarder b(env_, unused, ForwarderIdentity{NodeId("b"), InstanceToken("instance-b")}, Secret(3));
    return b.Verify(r);
  }

  SimWorld world_{1};
  SimEnv env_{world_, FromUnixMs(kStartMs)};
};

TEST_F(ForwarderTest, AClientRequestIsNotForwarded) {
  ServerRequest r;
  r.method = "GET";
  r.target = "/v1/actors/acme/counter/x";
  r.headers.emplace_back("Authorization", "Bearer t");
  auto v = VerifyAtB(r);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
}

TEST_F(ForwarderTest, ForwardSignsTheRequestForItsReceiverWithoutTheClientsToken) {
  const ServerRequest sent = Forwarded();
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(sent.target, "/v1/actors/acme/counter/x/increment?by=2");
  EXPECT_EQ(sent.body, "payload");
  EXPECT_FALSE(sent.Header("Authorization").has_value()) << "the bearer token never leaves the node that checked it";
  EXPECT_FALSE(sent.Header("Proxy-Authorization").has_value());
  for (const auto& [n, v] : sent.headers) EXPECT_EQ(v.find("secret"), std::string::npos) << n << ": " << v;
  EXPECT_FALSE(sent.Header("Connection").has_value());
  EXPECT_FALSE(sent.Header("Host").has_value());
  EXPECT_EQ(sent.Header("X-Custom").value_or(""), "kept, twice") << "repeated headers are joined, signed once";
  EXPECT_EQ(sent.Header("X-Wasmkeep-Hops").value_or(""), "1") << "the client's own hop header is replaced";
  EXPECT_EQ(sent.Header("X-Wasmkeep-Forwarded-By").value_or(""), "a");
  EXPECT_EQ(sent.Header("X-Wasmkeep-Forwarded-To").value_or(""), "b instance-b");
  EXPECT_EQ(sent.Header("X-Wasmkeep-Signed-Headers").value_or(""), "content-type,x-custom");
  EXPECT_EQ(sent.Header("X-Wasmkeep-Nonce").value_or("").size(), 32u);

  auto verified = VerifyAtB(sent);
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  ASSERT_TRUE(verified->has_value());
  const ForwardedFrom& from = **verified;
  EXPECT_EQ(from.node_id, NodeId("a"));
  EXPECT_EQ(from.tenant, "acme");
  EXPECT_EQ(from.hops, 1);
  ServerHeaders want{{"Content-Type", "application/json"}, {"X-Custom", "kept, twice"}};
  EXPECT_EQ(from.headers, want) << "the actor sees the signed client headers and nothing else";
}

TEST_F(ForwarderTest, TwoForwardsOfOneRequestCarryDifferentNonces) {
  EXPECT_NE(Forwarded().Header("X-Wasmkeep-Nonce"), Forwarded().Header("X-Wasmkeep-Nonce"));
}

TEST_F(ForwarderTest, ASecondUseOfTheSameForwardedRequestIsRefused) {
  const ServerRequest sent = Forwarded();
  ScriptedTransport unused{Result<ServerResponse>(Retryable("unused"))};
  Forwarder b(env_, unused, ForwarderIdentity{NodeId("b"), InstanceToken("instance-b")}, Secret(3));
  auto first = b.Verify(sent);
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status().ToString();
  auto replayed = b.Verify(sent);
  ASSERT_FALSE(replayed.ok()) << "a replay of a captured request must be refused";
  EXPECT_NE(replayed.status().message().find("replayed"), std::string::npos) << replayed.status().ToString();
  EXPECT_EQ(b.stats().replays, 1u);
  EXPECT_EQ(b.stats().verified, 1u);
  // Still refused later in the window, and past it (then by the window itself).
  world_.RunFor(std::chrono::seconds(30));
  EXPECT_FALSE(b.Verify(sent).ok());
  world_.RunFor(std::chrono::seconds(40));
  auto late = b.Verify(sent);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("time window"), std::string::npos) << late.status().ToString();
  // A fresh forward of the same client request is a new request.
  EXPECT_TRUE(b.Verify(Forwarded()).ok());
}

TEST_F(ForwarderTest, AnythingChangedInASignedRequestIsRefused) {
  struct Case {
    const char* what;
    std::function<void(ServerRequest&)> change;
  };
  const std::vector<Case> cases = {
      {"the body", [](ServerRequest& r) { r.body = "other"; }},
      {"the target", [](ServerRequest& r) { r.target = "/v1/actors/acme/counter/y/increment?by=2"; }},
      {"the query", [](ServerRequest& r) { r.target = "/v1/actors/acme/counter/x/increment?by=3"; }},
      {"the method", [](ServerRequest& r) { r.method = "PUT"; }},
      {"the tenant", [](ServerRequest& r) { SetHeader(r, "X-Wasmkeep-Tenant", "other"); }},
      {"the hops", [](ServerRequest& r) { SetHeader(r, "X-Wasmkeep-Hops", "2"); }},
      {"the sender", [](ServerRequest& r) { SetHeader(r, "X-Wasmkeep-Forwarded-By", "c"); }},
      {"the nonce", [](ServerRequest& r) { SetHeader(r, "X-Wasmkeep-Nonce", std::string(32, 'a')); }},
      {"the timestamp", [](ServerRequest& r) { SetHeader(r, "X-Wasmkeep-Timestamp", std::to_string(kStartMs + 1)); }},
      {"a signed header's value", [](ServerRequest& r) { SetHeader(r, "Content-Type", "text/plain"); }},
      {"a signed header removed",
       [](ServerRequest& r) { std::erase_if(r.headers, [](const auto& h) { return h.first == "X-Custom"; }); }},
      {"a signed header sent twice", [](ServerRequest& r) { r.headers.emplace_back("content-type", "text/plain"); }},
      {"the list of signed headers", [](ServerRequest& r) { SetHeader(r, "X-Wasmkeep-Signed-Headers", "content-type"); }},
      {"the list with a trailing comma",
       [](ServerRequest& r) { SetHeader(r, "X-Wasmkeep-Signed-Headers", "content-type,x-custom,"); }},
      {"the token listed as signed",
       [](ServerRequest& r) {
         r.headers.emplace_back("Authorization", "Bearer x");
         SetHeader(r, "X-Wasmkeep-Signed-Headers", "content-type,x-custom,authorization");
       }},
      {"a forwarding header repeated", [](ServerRequest& r) { r.headers.emplace_back("X-Wasmkeep-Tenant", "acme"); }},
      {"a forwarding header missing",
       [](ServerRequest& r) {
         std::erase_if(r.headers, [](const auto& h) { return h.first == "X-Wasmkeep-Nonce"; });
       }},
  };
  for (const Case& c : cases) {
    ServerRequest r = Forwarded();
    c.change(r);
    auto v = VerifyAtB(r);
    EXPECT_FALSE(v.ok()) << c.what << " changed, yet the request verified";
  }
  // The unchanged request verifies (so the refusals above are the changes' doing).
  EXPECT_TRUE(VerifyAtB(Forwarded()).ok());
}

TEST_F(ForwarderTest, AnUnsignedHeaderAddedOnTheWayNeverReachesTheActor) {
  ServerRequest r = Forwarded();
  r.headers.emplace_back("User-Agent", "the transport's");
  r.headers.emplace_back("X-Injected", "evil");
  auto v = VerifyAtB(r);
  ASSERT_TRUE(v.ok() && v->has_value()) << v.status().ToString();
  for (const auto& [n, value] : (*v)->headers) {
    EXPECT_NE(n, "X-Injected");
    EXPECT_NE(n, "User-Agent");
  }
}

TEST_F(ForwarderTest, ARequestForAnotherNodeOrAnotherInstanceOrCluster) {
  // Signed for b's previous process: refused by b's current one (a replay across restarts).
  auto old_instance = VerifyAtB(Forwarded(ClientRequest(), PeerTarget{NodeId("b"), InstanceToken("instance-b-before"), "10.0.0.2:7443"}));
  ASSERT_FALSE(old_instance.ok());
  EXPECT_NE(old_instance.status().message().find("addressed to"), std::string::npos);
  // Signed for c: refused by b (a request captured on its way to c replayed to b).
  EXPECT_FALSE(VerifyAtB(Forwarded(ClientRequest(), PeerTarget{NodeId("c"), InstanceToken("instance-b"), "10.0.0.3:7443"})).ok());
  // Another cluster's secret.
  ScriptedTransport unused{Result<ServerResponse>(Retryable("unused"))};
  Forwarder stranger(env_, unused, ForwarderIdentity{NodeId("b"), InstanceToken("instance-b")}, Secret(4));
  auto v = stranger.Verify(Forwarded());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("signature"), std::string::npos);
}

TEST_F(ForwarderTest, ATimestampOutsideTheWindowIsRefused) {
  ServerRequest sent = Forwarded();
  world_.RunFor(std::chrono::seconds(61));
  auto v = VerifyAtB(sent);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("time window"), std::string::npos);
}

TEST_F(ForwarderTest, TheRepliesHopByHopHeadersAreDroppedAndTheTimeoutPassed) {
  ServerResponse reply;
  reply.status = 201;
  reply.headers.emplace_back("Connection", "close");
  reply.headers.emplace_back("X-Answer", "yes");
  reply.body = "done";
  ScriptedTransport transport{Result<ServerResponse>(reply)};
  ForwarderOptions options;
  options.timeout = std::chrono::seconds(7);
  Forwarder sender(env_, transport, ForwarderIdentity{NodeId("a"), InstanceToken("instance-a")}, Secret(3), options);
  auto got = RunTask(world_, env_, sender.Forward(kToB, ClientRequest(), "acme", 1));
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok()) << got->status().ToString();
  EXPECT_EQ((*got)->status, 201);
  EXPECT_EQ((*got)->body, "done");
  ASSERT_EQ((*got)->headers.size(), 1u) << "hop-by-hop headers of the reply are dropped";
  EXPECT_EQ((*got)->headers[0].first, "X-Answer");
  ASSERT_EQ(transport.sent.size(), 1u);
  EXPECT_EQ(transport.sent[0].to.node_id, NodeId("b"));
  EXPECT_EQ(transport.sent[0].to.instance, InstanceToken("instance-b"));
  EXPECT_EQ(transport.sent[0].to.address, "10.0.0.2:7443");
  EXPECT_EQ(transport.sent[0].timeout, std::chrono::seconds(7));
}

TEST_F(ForwarderTest, TheTransportsOutcomeComesBackUnchanged) {
  for (Code code : {Code::kRetryable, Code::kUnknownOutcome, Code::kInvalidArgument}) {
    ScriptedTransport transport{Result<ServerResponse>(Status(code, "scripted"))};
    Forwarder f(env_, transport, ForwarderIdentity{NodeId("a"), InstanceToken("instance-a")}, Secret(3));
    auto got = RunTask(world_, env_, f.Forward(kToB, ClientRequest(), "acme", 2));
    ASSERT_TRUE(got.has_value());
    ASSERT_FALSE(got->ok());
    EXPECT_EQ(got->code(), code) << "a retryable failure must stay retryable, an unknown outcome unknown";
  }
}

}  // namespace
}  // namespace wk
