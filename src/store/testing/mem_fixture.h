// Test-only: a mem:// bucket in virtual time, the setting of the unit tests of the store
// and of what runs on it (the control plane): one SimWorld, a SimEnv on it, a MemBucket
// and a MemStore over that bucket, and Run, which drives a coroutine to its end. (The
// cluster and replica tests build whole simulated nodes instead: cluster/testing/harness.h.)
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "base/check.h"
#include "base/time.h"
#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk {

struct MemStoreFixture {
  explicit MemStoreFixture(std::uint64_t seed = 42, WallTime wall_origin = FromUnixMs(1'700'000'000'000))
      : world(seed), env(world, wall_origin) {}

  // Runs task on env until it ends and returns its value. REQUIRES (checked): it ends
  // within limit of virtual time (a test whose task hangs crashes, naming no value).
  template <typename T>
  T Run(Task<T> task, Duration limit = std::chrono::hours(1)) {
    auto out = RunTask(world, env, std::move(task), limit);
    WK_CHECK(out.has_value(), "the task did not end in virtual time");
    return std::move(*out);
  }

  SimWorld world;
  SimEnv env;
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();
  MemStore store{env, bucket};
};

}  // namespace wk
