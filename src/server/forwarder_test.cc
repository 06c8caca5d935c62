// Forwarded requests: what Verify accepts and refuses, and what Forward hands its
// PeerTransport and passes back. (Forward over real HTTP is exercised end to end by
// tests/cluster/serve_test.sh, three nodes forwarding to the owner; over the simulated
// network by the simulator's `routing` scenario.)
#include "server/forwarder.h"

#include <gtest/gtest.h>

#include "env/sim_env.h"
#include "net/http_peer_transport.h"

namespace wk {
namespace {

control::ClusterSecret Secret(std::uint8_t fill) {
  control::ClusterSecret s;
  s.bytes.fill(fill);
  return s;
}

class ForwarderTest : public ::testing::Test {
 protected:
  // A request as node "a" would send it: signed with secret at timestamp (ms).
  ServerRequest Signed(const Forwarder& f, std::string body, std::int64_t timestamp_ms) {
    ServerRequest r;
    r.method = "POST";
    r.target = "/v1/actors/acme/counter/x/increment";
    r.body = std::move(body);
    r.headers.emplace_back("X-Wasmkeep-Forwarded-By", "a");
    r.headers.emplace_back("X-Wasmkeep-Tenant", "acme");
    r.headers.emplace_back("X-Wasmkeep-Hops", "1");
    r.headers.emplace_back("X-Wasmkeep-Timestamp", std::to_string(timestamp_ms));
    r.headers.emplace_back("X-Wasmkeep-Signature", f.SignForTest(r.method, r.target, "acme", 1, timestamp_ms, r.body));
    return r;
  }
  std::int64_t Now() { return ToUnixMs(env_.WallNow()); }
  RealEnv env_;
  HttpPeerTransport peers_{env_};
};

TEST_F(ForwarderTest, AClientRequestIsNotForwarded) {
  Forwarder f(env_, peers_, NodeId("b"), Secret(1));
  ServerRequest r;
  r.method = "GET";
  r.target = "/v1/actors/acme/counter/x";
  auto v = f.Verify(r);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
}

TEST_F(ForwarderTest, ASignedRequestVerifiesAndNamesItsSenderTenantAndHops) {
  Forwarder f(env_, peers_, NodeId("b"), Secret(1));
  auto v = f.Verify(Signed(f, "body", Now()));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE(v->has_value());
  EXPECT_EQ((*v)->node_id, NodeId("a"));
  EXPECT_EQ((*v)->tenant, "acme");
  EXPECT_EQ((*v)->hops, 1);
}

TEST_F(ForwarderTest, TamperingAnotherSecretAStaleTimestampOrMissingHeadersAreRefused) {
  Forwarder f(env_, peers_, NodeId("b"), Secret(1));
  ServerRequest body = Signed(f, "body", Now());
  body.body = "other";
  EXPECT_FALSE(f.Verify(body).ok()) << "the body is signed";
  ServerRequest target = Signed(f, "body", Now());
  target.target = "/v1/actors/acme/counter/y/increment";
  EXPECT_FALSE(f.Verify(target).ok()) << "the target is signed";
  ServerRequest tenant = Signed(f, "body", Now());
  tenant.headers[1].second = "other";
  EXPECT_FALSE(f.Verify(tenant).ok()) << "the tenant is signed";
  Forwarder stranger(env_, peers_, NodeId("c"), Secret(2));
  EXPECT_FALSE(f.Verify(Signed(stranger, "body", Now())).ok()) << "another cluster's secret";
  EXPECT_FALSE(f.Verify(Signed(f, "body", Now() - 120'000)).ok()) << "outside the 60 s window";
  ServerRequest partial = Signed(f, "body", Now());
  partial.headers.pop_back();
  EXPECT_FALSE(f.Verify(partial).ok()) << "no signature";
}

// A transport that records what it was asked to send and answers with a scripted outcome.
class ScriptedTransport final : public PeerTransport {
 public:
  explicit ScriptedTransport(Result<ServerResponse> answer) : answer_(std::move(answer)) {}
  Task<Result<ServerResponse>> Send(std::string address, ServerRequest request, Duration timeout) override {
    sent.push_back(Sent{std::move(address), std::move(request), timeout});
    Result<ServerResponse> answer = answer_;
    co_return answer;
  }
  struct Sent {
    std::string address;
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
  r.target = "/v1/actors/acme/counter/x/increment";
  r.body = "payload";
  r.headers.emplace_back("Authorization", "Bearer secret-token");
  r.headers.emplace_back("Connection", "keep-alive");
  r.headers.emplace_back("X-Wasmkeep-Hops", "7");  // a client cannot smuggle forwarding headers
  r.headers.emplace_back("X-Custom", "kept");
  return r;
}

TEST(ForwarderTransportTest, ForwardSignsTheRequestAndTheReceiverVerifiesIt) {
  SimWorld world(1);
  SimEnv env(world, FromUnixMs(1'764'000'000'000));
  ServerResponse reply;
  reply.status = 201;
  reply.headers.emplace_back("Connection", "close");
  reply.headers.emplace_back("X-Answer", "yes");
  reply.body = "done";
  ScriptedTransport transport{Result<ServerResponse>(reply)};
  ForwarderOptions options;
  options.timeout = std::chrono::seconds(7);
  Forwarder sender(env, transport, NodeId("a"), Secret(3), options);
  auto got = RunTask(world, env, sender.Forward("10.0.0.2:7000", ClientRequest(), "acme", 1));
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok()) << got->status().ToString();
  EXPECT_EQ((*got)->status, 201);
  EXPECT_EQ((*got)->body, "done");
  ASSERT_EQ((*got)->headers.size(), 1u) << "hop-by-hop headers of the reply are dropped";
  EXPECT_EQ((*got)->headers[0].first, "X-Answer");

  ASSERT_EQ(transport.sent.size(), 1u);
  const auto& sent = transport.sent[0];
  EXPECT_EQ(sent.address, "10.0.0.2:7000");
  EXPECT_EQ(sent.timeout, std::chrono::seconds(7));
  EXPECT_EQ(sent.request.body, "payload");
  EXPECT_FALSE(sent.request.Header("Connection").has_value());
  EXPECT_EQ(sent.request.Header("X-Custom").value_or(""), "kept");
  EXPECT_EQ(sent.request.Header("X-Wasmkeep-Hops").value_or(""), "1") << "the client's own hop header is replaced";
  // The receiving node (same cluster secret) accepts it and learns who sent it.
  ScriptedTransport unused{Result<ServerResponse>(Retryable("unused"))};
  Forwarder receiver(env, unused, NodeId("b"), Secret(3));
  auto verified = receiver.Verify(sent.request);
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  ASSERT_TRUE(verified->has_value());
  EXPECT_EQ((*verified)->node_id, NodeId("a"));
  EXPECT_EQ((*verified)->tenant, "acme");
  EXPECT_EQ((*verified)->hops, 1);
  // Another cluster's node does not.
  Forwarder stranger(env, unused, NodeId("c"), Secret(4));
  EXPECT_FALSE(stranger.Verify(sent.request).ok());
}

TEST(ForwarderTransportTest, TheTransportsOutcomeComesBackUnchanged) {
  SimWorld world(2);
  SimEnv env(world, FromUnixMs(1'764'000'000'000));
  for (Code code : {Code::kRetryable, Code::kUnknownOutcome, Code::kInvalidArgument}) {
    ScriptedTransport transport{Result<ServerResponse>(Status(code, "scripted"))};
    Forwarder f(env, transport, NodeId("a"), Secret(3));
    auto got = RunTask(world, env, f.Forward("10.0.0.2:7000", ClientRequest(), "acme", 2));
    ASSERT_TRUE(got.has_value());
    ASSERT_FALSE(got->ok());
    EXPECT_EQ(got->code(), code) << "a retryable failure must stay retryable, an unknown outcome unknown";
  }
}

TEST(ForwarderTransportTest, TheHttpTransportRefusesAMethodHttpCannotCarryAndAnUnreachablePeerIsRetryable) {
  RealEnv env;
  HttpPeerTransport transport(env);
  ServerRequest bad = ClientRequest();
  bad.method = "NOT A METHOD";
  auto refused = env.RunMain(transport.Send("127.0.0.1:1", std::move(bad), std::chrono::seconds(2)));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  // Port 1 on loopback: nobody listens, the connection is refused before anything is sent.
  auto unreachable = env.RunMain(transport.Send("127.0.0.1:1", ClientRequest(), std::chrono::seconds(2)));
  ASSERT_FALSE(unreachable.ok());
  EXPECT_EQ(unreachable.code(), Code::kRetryable) << unreachable.status().ToString();
}

}  // namespace
}  // namespace wk
