// The fixture of the control-plane tests: one SimEnv in a SimWorld and a MemStore on
// one bucket, in virtual time; and the table the format tests list refused bodies in
// (test-only).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

// A body a control format's decoder must refuse, and a piece of the message it must give
// (the line and the field it names).
struct Refused {
  std::string body;
  std::string message;
};

// Checks that decode (body -> Result<T>) refuses every case as kFatal with its message.
template <typename Decode>
void ExpectRefused(Decode decode, const std::vector<Refused>& cases) {
  for (const Refused& c : cases) {
    auto d = decode(c.body);
    EXPECT_FALSE(d.ok()) << "accepted: " << c.body;
    if (d.ok()) continue;
    EXPECT_EQ(d.code(), Code::kFatal) << c.body;
    EXPECT_NE(d.status().message().find(c.message), std::string::npos)
        << "refused with '" << d.status().message() << "', expected '" << c.message << "', body: " << c.body;
  }
}

}  // namespace wk::control
