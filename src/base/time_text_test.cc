#include "base/time_text.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

TEST(TimeTextTest, ParsesRfc3339AndMillisecondsAndPrintsUtc) {
  EXPECT_EQ(ParseTimeMs("1970-01-01T00:00:00Z").value(), 0);
  EXPECT_EQ(ParseTimeMs("2026-12-05T10:00:00Z").value(), 1'796'464'800'000);
  EXPECT_EQ(ParseTimeMs("2026-12-05T11:00:00.25+01:00").value(), 1'796'464'800'250);
  EXPECT_EQ(ParseTimeMs("2026-12-05T09:30:00-00:30").value(), 1'796'464'800'000);
  EXPECT_EQ(ParseTimeMs("1796464800000").value(), 1'796'464'800'000);
  EXPECT_EQ(FormatTimeMs(1'796'464'800'250), "2026-12-05T10:00:00.250Z");
  EXPECT_EQ(FormatTimeMs(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(ParseTimeMs(FormatTimeMs(1'733'392'812'345)).value(), 1'733'392'812'345);
}

TEST(TimeTextTest, RefusesWhatIsNeither) {
  for (const char* bad : {"", "yesterday", "2026-12-05", "2026-12-05T10:00:00", "2026-13-05T10:00:00Z",
                          "2026-02-30T10:00:00Z", "2026-12-05T10:00:00.Z", "2026-12-05T10:00:00Zx", "-5",
                          "2026-12-05T10:00:00+1:00"}) {
    auto r = ParseTimeMs(bad);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseTimeMs("soon").status().message().find("RFC 3339"), std::string::npos);
}

}  // namespace
}  // namespace wk
