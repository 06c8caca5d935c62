// The fixture of the control-plane tests: one SimEnv in a SimWorld and a MemStore on
// one bucket, in virtual time (test-only).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "control/tenants.h"
#include "control/tokens.h"
#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk::control {

struct ControlTest : ::testing::Test {
  SimWorld world{11};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();
  SimEnv env{world, FromUnixMs(1'764'000'000'000)};
  MemStore store{env, bucket};

  template <typename T>
  T Run(Task<T> t) {
    auto out = RunTask(world, env, std::move(t), std::chrono::seconds(600));
    EXPECT_TRUE(out.has_value()) << "the task did not finish";
    return std::move(*out);
  }
  NewToken Create(const std::string& tenant) {
    auto r = Run(CreateTenant(store, env, tenant));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : NewToken{};
  }
  Result<std::string> Auth(TenantAuth& auth, const std::string& header) { return Run(auth.Authenticate(header)); }
  void Corrupt(const std::string& key, std::string body) {
    ASSERT_TRUE(bucket->ApplyPut(key, std::move(body), Precondition::None()).ok());
  }
};

}  // namespace wk::control
