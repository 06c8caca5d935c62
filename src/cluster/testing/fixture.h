// The GoogleTest fixture the cluster unit tests share (owners, first generation, hand-over):
// a SimWorld on a fixed seed, the bucket its nodes share, one actor, and the waits every
// such test writes. Test-only, header-only; single-threaded like everything on a SimWorld.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "cluster/owner_record.h"
#include "cluster/testing/harness.h"

namespace wk::cluster_testing {

class ClusterTest : public ::testing::Test {
 protected:
  explicit ClusterTest(std::uint64_t seed) : world(seed) {}

  // Runs t on env to its end; fails the test if it has not ended after `limit` of
  // virtual time.
  template <typename T>
  T Run(Env& env, Task<T> t, Duration limit = std::chrono::seconds(60)) {
    auto out = RunTask(world, env, std::move(t), limit);
    EXPECT_TRUE(out.has_value());
    return std::move(*out);
  }
  // Runs the world until p's node holds a valid lease (at most 30 virtual seconds).
  void Ready(SimNode& p) {
    ASSERT_TRUE(world.RunUntil([&] { return p.node.lease().IsValid(); }, std::chrono::seconds(30)));
  }
  // The owner record of `of` in the bucket (it must be there and decode).
  OwnerRecord Record(const ActorId& of) { return DecodeOwnerRecord(bucket->objects().at(OwnerKey(of)).body).value(); }
  OwnerRecord Record() { return Record(actor); }

  SimWorld world;
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();
  const ActorId actor{"acme", "counter", "x"};
};

}  // namespace wk::cluster_testing
