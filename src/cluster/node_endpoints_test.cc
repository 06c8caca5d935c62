// The endpoints object (control/endpoints/<node>): exact bytes, a strict decoder, and the
// write that `wasmkeep serve` makes once per process.
#include "cluster/node_endpoints.h"

#include <gtest/gtest.h>

#include <random>

#include "store/counting_store.h"
#include "store/testing/mem_fixture.h"

namespace wk {
namespace {

const NodeEndpoints kEndpoints{NodeId("node-a"), InstanceToken("3f9a0c1d"), "http://10.0.0.5:9090/metrics"};

TEST(NodeEndpointsTest, RoundTripAndExactEncoding) {
  EXPECT_EQ(EncodeNodeEndpoints(kEndpoints),
            "wasmkeep-endpoints 1\nnode node-a\ninstance 3f9a0c1d\nmetrics http://10.0.0.5:9090/metrics\n");
  EXPECT_EQ(DecodeNodeEndpoints(EncodeNodeEndpoints(kEndpoints)).value(), kEndpoints);
  EXPECT_EQ(EndpointsKey(NodeId("node-a")), "control/endpoints/node-a");
}

TEST(NodeEndpointsTest, StrictDecoderAndValidation) {
  for (std::string_view bad : {"", "wasmkeep-endpoints 2\nnode a1\ninstance i\nmetrics http://x/metrics\n",
                               "wasmkeep-endpoints 1\nnode a1\ninstance i\nmetrics http://x/metrics",
                               "wasmkeep-endpoints 1\nnode a1\ninstance i\nmetrics ftp://x/metrics\n",
                               "wasmkeep-endpoints 1\nnode ../x\ninstance i\nmetrics http://x/metrics\n",
                               "wasmkeep-endpoints 1\ninstance i\nnode a1\nmetrics http://x/metrics\n",
                               "wasmkeep-endpoints 1\nnode a1\ninstance i\nmetrics http://x/metrics\nextra 1\n"}) {
    auto d = DecodeNodeEndpoints(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_EQ(d.code(), Code::kFatal) << bad;
    }
  }
  NodeEndpoints e = kEndpoints;
  e.metrics_url = "http://a b/metrics";
  EXPECT_EQ(ValidateNodeEndpoints(e).code(), Code::kInvalidArgument);
  e.metrics_url = "http://" + std::string(300, 'a');
  EXPECT_EQ(ValidateNodeEndpoints(e).code(), Code::kInvalidArgument);
}

TEST(NodeEndpointsTest, MutationsNeverCrashAndAcceptedBodiesRoundTrip) {
  std::mt19937_64 rng(5);
  const std::string good = EncodeNodeEndpoints(kEndpoints);
  for (int i = 0; i < 20'000; ++i) {
    std::string body = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) body[rng() % body.size()] = static_cast<char>(rng() % 256);
    auto d = DecodeNodeEndpoints(body);
    if (d.ok()) {
      EXPECT_EQ(EncodeNodeEndpoints(*d), body);
    }
  }
}

TEST(NodeEndpointsTest, PublishWritesOnceUnderControlAndRetriesAFailure) {
  MemStoreFixture f;
  int failures_left = 2;
  MemStore flaky(f.env, f.bucket, [&](const OpInfo&) {
    OpFault fault;
    if (failures_left > 0) {
      --failures_left;
      fault.fail_before_apply = Retryable("SlowDown");
    }
    return fault;
  });
  CountingStore counting(flaky);
  Status s = f.Run(PublishNodeEndpoints(f.env, counting, kEndpoints, 5, std::chrono::milliseconds(100)));
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(DecodeNodeEndpoints(f.bucket->objects().at("control/endpoints/node-a").body).value(), kEndpoints);
  EXPECT_EQ(counting.stats().Requests(BucketOp::kPut, BucketPurpose::kControl, BucketOutcome::kError), 2u);
  EXPECT_EQ(counting.stats().Requests(BucketOp::kPut, BucketPurpose::kControl, BucketOutcome::kOk), 1u);
}

}  // namespace
}  // namespace wk
