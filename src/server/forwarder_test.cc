// Forwarded requests: what Verify accepts and refuses. (Forward itself is exercised end to
// end by tests/cluster/serve_test.sh, three nodes forwarding to the owner.)
#include "server/forwarder.h"

#include <gtest/gtest.h>

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
};

TEST_F(ForwarderTest, AClientRequestIsNotForwarded) {
  Forwarder f(env_, "b", Secret(1));
  ServerRequest r;
  r.method = "GET";
  r.target = "/v1/actors/acme/counter/x";
  auto v = f.Verify(r);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
}

TEST_F(ForwarderTest, ASignedRequestVerifiesAndNamesItsSenderTenantAndHops) {
  Forwarder f(env_, "b", Secret(1));
  auto v = f.Verify(Signed(f, "body", Now()));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE(v->has_value());
  EXPECT_EQ((*v)->node_id, "a");
  EXPECT_EQ((*v)->tenant, "acme");
  EXPECT_EQ((*v)->hops, 1);
}

TEST_F(ForwarderTest, TamperingAnotherSecretAStaleTimestampOrMissingHeadersAreRefused) {
  Forwarder f(env_, "b", Secret(1));
  ServerRequest body = Signed(f, "body", Now());
  body.body = "other";
  EXPECT_FALSE(f.Verify(body).ok()) << "the body is signed";
  ServerRequest target = Signed(f, "body", Now());
  target.target = "/v1/actors/acme/counter/y/increment";
  EXPECT_FALSE(f.Verify(target).ok()) << "the target is signed";
  ServerRequest tenant = Signed(f, "body", Now());
  tenant.headers[1].second = "other";
  EXPECT_FALSE(f.Verify(tenant).ok()) << "the tenant is signed";
  Forwarder stranger(env_, "c", Secret(2));
  EXPECT_FALSE(f.Verify(Signed(stranger, "body", Now())).ok()) << "another cluster's secret";
  EXPECT_FALSE(f.Verify(Signed(f, "body", Now() - 120'000)).ok()) << "outside the 60 s window";
  ServerRequest partial = Signed(f, "body", Now());
  partial.headers.pop_back();
  EXPECT_FALSE(f.Verify(partial).ok()) << "no signature";
}

}  // namespace
}  // namespace wk
