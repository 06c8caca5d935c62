#include "base/status.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = PreconditionFailed("version moved");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kPreconditionFailed);
  EXPECT_EQ(s.ToString(), "PRECONDITION_FAILED: version moved");
}

TEST(StatusTest, EveryCodeHasAName) {
  for (Code c : {Code::kOk, Code::kPreconditionFailed, Code::kNotFound, Code::kRetryable,
                 Code::kUnknownOutcome, Code::kFatal, Code::kInvalidArgument, Code::kCancelled}) {
    EXPECT_NE(CodeName(c), "INVALID_CODE");
  }
}

TEST(ResultTest, ValueAndError) {
  Result<int> good(7);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  Result<int> bad(NotFound("no such key"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::kNotFound);
}

TEST(ResultDeathTest, ValueOfErrorCrashesLoudly) {
  Result<int> bad(Fatal("x"));
  EXPECT_DEATH((void)bad.value(), "value\\(\\) on an error Result");
}

TEST(ResultDeathTest, OkStatusIsNotAnError) {
  EXPECT_DEATH((void)Result<int>(Status::Ok()), "must carry an error");
}

}  // namespace
}  // namespace wk
