// The console's traffic rows: one per deployed class, one for every class nobody deployed,
// however many names clients make up (routing/class_traffic.h).
#include "routing/class_traffic.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace wk {
namespace {

constexpr Duration kTook = std::chrono::milliseconds(2);

TEST(ClassTrafficTest, ClassOfReadsTheTenantAndClassOfAnActorTarget) {
  auto c = ClassTrafficTable::ClassOf("/v1/actors/acme/counter/a1/increment?x=1");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->first, "acme");
  EXPECT_EQ(c->second, "counter");
  EXPECT_TRUE(ClassTrafficTable::ClassOf("/v1/actors/acme/counter/a1").has_value());
  EXPECT_FALSE(ClassTrafficTable::ClassOf("/v1/actors/acme/counter").has_value());  // no actor name
  EXPECT_FALSE(ClassTrafficTable::ClassOf("/v1/actors/acme/counter/").has_value());
  EXPECT_FALSE(ClassTrafficTable::ClassOf("/v1/classes/acme/counter/actors").has_value());
  EXPECT_FALSE(ClassTrafficTable::ClassOf("/v1/actors/Not Valid/counter/a1").has_value());
}

TEST(ClassTrafficTest, MadeUpClassNamesShareOneRowAndDeployedClassesHaveTheirOwn) {
  const std::set<std::string> deployed{"acme/counter", "acme/chat", "zeta/counter"};
  int asked = 0;
  ClassTrafficTable::Deployed is_deployed = [&](const std::string& t, const std::string& c) {
    ++asked;
    return deployed.count(t + "/" + c) > 0;
  };
  ClassTrafficTable table;
  // A client calling random classes, of its own tenant and of tenants that do not exist:
  // far more names than the table would ever keep rows for.
  for (int i = 0; i < 5'000; ++i) {
    table.Record("/v1/actors/acme/random" + std::to_string(i) + "/a", 404, kTook, is_deployed);
    table.Record("/v1/actors/t" + std::to_string(i) + "/c/a", 401, kTook, is_deployed);
  }
  table.Record("/v1/actors/acme/counter/a/increment", 200, kTook, is_deployed);
  table.Record("/v1/actors/acme/counter/b", 500, kTook, is_deployed);
  table.Record("/v1/actors/zeta/counter/a", 403, kTook, is_deployed);

  // Without the bound this was a row per made-up name (up to kMaxTrafficClasses).
  ASSERT_EQ(table.rows().size(), 3u);
  const ClassTraffic& unknown = table.rows().at(std::string(kUnknownClassRow));
  EXPECT_EQ(unknown.requests, 10'000u);
  EXPECT_EQ(unknown.client_errors, 10'000u);
  EXPECT_EQ(unknown.errors, 0u);
  const ClassTraffic& counter = table.rows().at("acme/counter");
  EXPECT_EQ(counter.requests, 2u);
  EXPECT_EQ(counter.errors, 1u);
  EXPECT_EQ(counter.client_errors, 0u);
  EXPECT_NEAR(counter.seconds, 0.004, 1e-9);
  EXPECT_EQ(table.rows().at("zeta/counter").client_errors, 1u);
  // A class with a row is not asked about again.
  asked = 0;
  table.Record("/v1/actors/acme/counter/a", 200, kTook, is_deployed);
  EXPECT_EQ(asked, 0);
}

TEST(ClassTrafficTest, AClassDeployedLaterGetsItsRowFromThenOn) {
  bool deployed = false;
  ClassTrafficTable::Deployed is_deployed = [&](const std::string&, const std::string&) { return deployed; };
  ClassTrafficTable table;
  table.Record("/v1/actors/acme/late/a", 404, kTook, is_deployed);
  deployed = true;
  table.Record("/v1/actors/acme/late/a", 200, kTook, is_deployed);
  EXPECT_EQ(table.rows().at(std::string(kUnknownClassRow)).requests, 1u);
  EXPECT_EQ(table.rows().at("acme/late").requests, 1u);
}

TEST(ClassTrafficTest, DeployedClassesPastTheBoundShareTheOtherRow) {
  ClassTrafficTable::Deployed all = [](const std::string&, const std::string&) { return true; };
  ClassTrafficTable table;
  for (std::size_t i = 0; i < kMaxTrafficClasses + 10; ++i) {
    table.Record("/v1/actors/acme/c" + std::to_string(i) + "/a", 200, kTook, all);
  }
  table.Record("/v1/actors/acme/unknown/a", 404, kTook, [](const std::string&, const std::string&) { return false; });
  EXPECT_EQ(table.rows().size(), kMaxTrafficClasses + 2);
  EXPECT_EQ(table.rows().at(std::string(kOtherClassesRow)).requests, 10u);
  EXPECT_EQ(table.rows().at(std::string(kUnknownClassRow)).requests, 1u);
}

}  // namespace
}  // namespace wk
