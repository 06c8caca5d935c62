#include "base/broken_models.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

namespace wk {
namespace {

TEST(BrokenModelsTest, NoneIsTheDesign) {
  BrokenModels none;
  for (std::size_t i = 0; i < static_cast<std::size_t>(BrokenModel::kCount); ++i) {
    EXPECT_FALSE(none.on(static_cast<BrokenModel>(i)));
  }
  EXPECT_FALSE(none.any());
  EXPECT_EQ(none.ToString(), "");
  auto empty = BrokenModels::Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->any());
}

TEST(BrokenModelsTest, NamesAreUniqueAndRoundTrip) {
  std::set<std::string_view> seen;
  for (std::string_view name : BrokenModels::AllNames()) {
    EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
    if (!BrokenModels::kBuilt) continue;
    auto one = BrokenModels::Parse(name);
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    EXPECT_EQ(one->ToString(), name);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(BrokenModel::kCount));
}

TEST(BrokenModelsTest, ParseTurnsOnExactlyTheNamedSwitches) {
  if (!BrokenModels::kBuilt) GTEST_SKIP() << "built with WK_BROKEN_MODELS=OFF";
  auto two = BrokenModels::Parse("unconditional-fence,,free-on-view");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_TRUE(two->on(BrokenModel::kUnconditionalFence));
  EXPECT_TRUE(two->on(BrokenModel::kFreeOnView));
  EXPECT_FALSE(two->on(BrokenModel::kNoWatchWait));
  EXPECT_EQ(two->ToString(), "unconditional-fence,free-on-view");
  EXPECT_EQ(BrokenModels::Of({BrokenModel::kFreeOnView}).ToString(), "free-on-view");
}

TEST(BrokenModelsTest, UnknownNamesAreRefusedNamingThem) {
  auto bad = BrokenModels::Parse("free-on-view,free-on-everything");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(BrokenModels::kBuilt ? "free-on-everything" : "free-on-view"), std::string::npos)
      << bad.status().message();
}

// A build configured with WK_BROKEN_MODELS=OFF (the release preset) can turn nothing on:
// every name is refused, so `wasmkeep serve` refuses to start with WASMKEEP_BROKEN_MODELS.
TEST(BrokenModelsTest, ABuildWithoutBrokenModelsRefusesEveryName) {
  if (BrokenModels::kBuilt) GTEST_SKIP() << "this build has broken models (WK_BROKEN_MODELS=ON)";
  auto refused = BrokenModels::Parse("validity-from-reply");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("WK_BROKEN_MODELS=OFF"), std::string::npos);
}

TEST(BrokenModelsTest, TheEnvironmentVariableIsRead) {
  const char* saved = std::getenv("WASMKEEP_BROKEN_MODELS");
  const std::string keep = saved ? saved : "";
  ::unsetenv("WASMKEEP_BROKEN_MODELS");
  auto none = BrokenModels::FromEnvironment();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->any());
  ::setenv("WASMKEEP_BROKEN_MODELS", "not-a-model", 1);
  auto bad = BrokenModels::FromEnvironment();
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("WASMKEEP_BROKEN_MODELS"), std::string::npos);
  if (saved) {
    ::setenv("WASMKEEP_BROKEN_MODELS", keep.c_str(), 1);
  } else {
    ::unsetenv("WASMKEEP_BROKEN_MODELS");
  }
}

}  // namespace
}  // namespace wk
