// The fixture of the control-plane tests: a mem:// bucket in virtual time
// (store/testing/mem_fixture.h) with the steps the tests share; and the table the format tests
// list refused bodies in (test-only).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "control/tenants.h"
#include "control/tokens.h"
#include "store/testing/mem_fixture.h"

namespace wk::control {

struct ControlTest : ::testing::Test, MemStoreFixture {
  ControlTest() : MemStoreFixture(11, FromUnixMs(1'764'000'000'000)) {}
  using MemStoreFixture::Run;  // not ::testing::Test's


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
