#include "base/crc32c.h"

#include <array>

namespace wk {
namespace {

// The reflected polynomial 0x1EDC6F41, one table of 256 entries built at compile time.
constexpr std::array<std::uint32_t, 256> MakeTable() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = MakeTable();

}  // namespace

std::uint32_t Crc32c(std::string_view data, std::uint32_t crc) {
  crc = ~crc;
  for (unsigned char b : data) crc = kTable[(crc ^ b) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace wk
