#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace wk {
namespace {

TEST(Crc32cTest, StandardCheckValueOnBothPaths) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32cPortable(""), 0u);
  // RFC 3720 B.4: 32 bytes of zeros and of 0xFF.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  EXPECT_EQ(Crc32cPortable(std::string(32, '\xFF')), 0x62A8AB43u);
}

// The hardware and the table path agree at every alignment and length around the 8-byte
// step (on a machine without SSE4.2 both are the table; the test says which ran).
TEST(Crc32cTest, HardwareAndTableAgreeOnRandomData) {
  std::mt19937_64 rng(42);
  std::string data(70000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (std::size_t offset : {0, 1, 3, 7, 8}) {
    for (std::size_t len : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 4096, 65536}) {
      std::string_view part(data.data() + offset, len);
      EXPECT_EQ(Crc32c(part), Crc32cPortable(part)) << offset << "+" << len;
    }
  }
  for (int i = 0; i < 200; ++i) {
    std::size_t offset = rng() % 1000, len = rng() % 5000;
    std::string_view part(data.data() + offset, len);
    std::uint32_t seed = static_cast<std::uint32_t>(rng());
    EXPECT_EQ(Crc32c(part, seed), Crc32cPortable(part, seed)) << offset << "+" << len;
  }
  RecordProperty("hardware", Crc32cUsesHardware() ? "sse4.2" : "none");
}

TEST(Crc32cTest, RunningForm) {
  EXPECT_EQ(Crc32c("6789", Crc32c("12345")), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable("6789", Crc32cPortable("12345")), 0xE3069283u);
}

}  // namespace
}  // namespace wk
