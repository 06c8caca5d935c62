// The CLI's time display (common.h): every time an alarm may hold prints as its true date.
#include "cli/common.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace wk::cli {
namespace {

TEST(UtcFromUnixMsTest, TheLargestAlarmTimePrintsItsTrueYear) {
  // The finding (issue "Hostile tenants, round two"): `actor alarm` printed an alarm at the
  // largest time (alarm_set takes any time >= 0) as a year before the epoch.
  EXPECT_EQ(UtcFromUnixMs(std::numeric_limits<std::int64_t>::max()), "+292278994-08-17T07:12:55.807Z");
  EXPECT_EQ(IsoUtc(FromUnixMs(std::numeric_limits<std::int64_t>::max())), "+292278994-08-17T07:12:55Z");
}

TEST(UtcFromUnixMsTest, DatesAroundTheEdgesOfTheCalendar) {
  EXPECT_EQ(UtcFromUnixMs(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(UtcFromUnixMs(1'764'686'884'123), "2025-12-02T14:48:04.123Z");
  EXPECT_EQ(UtcFromUnixMs(951'782'400'000), "2000-02-29T00:00:00.000Z");  // a leap day of a 400th year
  EXPECT_EQ(UtcFromUnixMs(4'107'542'400'000), "2100-03-01T00:00:00.000Z");  // 2100 has no leap day
  EXPECT_EQ(UtcFromUnixMs(253'402'300'799'999), "9999-12-31T23:59:59.999Z");
  EXPECT_EQ(UtcFromUnixMs(253'402'300'800'000), "+10000-01-01T00:00:00.000Z");
  EXPECT_EQ(UtcFromUnixMs(1'000'000'000'000'000), "+33658-09-27T01:46:40.000Z");
  EXPECT_EQ(UtcFromUnixMs(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(UtcFromUnixMs(-62'167'219'200'000), "0000-01-01T00:00:00.000Z");
  EXPECT_EQ(UtcFromUnixMs(-62'167'219'200'001), "-0001-12-31T23:59:59.999Z");
  EXPECT_EQ(UtcFromUnixMs(std::numeric_limits<std::int64_t>::min()), "-292275055-05-16T16:47:04.192Z");
  EXPECT_EQ(IsoUtc(FromUnixMs(1'764'686'884'999)), "2025-12-02T14:48:04Z");
}

}  // namespace
}  // namespace wk::cli
