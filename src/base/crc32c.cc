#include "base/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace wk {
namespace {

// The reflected polynomial 0x1EDC6F41.
constexpr std::uint32_t kPoly = 0x82F63B78u;

// Slicing-by-8: table[s][b] is the CRC of byte b followed by s zero bytes, so eight input
// bytes take eight lookups instead of eight dependent steps. Built at compile time.
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;
constexpr Tables MakeTables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t s = 1; s < 8; ++s) {
    for (std::size_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
  return t;
}
constexpr Tables kTables = MakeTables();

std::uint32_t Software(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  std::uint32_t c = ~crc;
  if constexpr (std::endian::native == std::endian::little) {
    while (n >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      w ^= c;
      c = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
          kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^ kTables[2][(w >> 40) & 0xFF] ^
          kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
      p += 8;
      n -= 8;
    }
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFF];
  return ~c;
}

#if defined(__x86_64__)
// Compiled for SSE4.2 whatever the build's target; only called after the run-time check.
__attribute__((target("sse4.2"))) std::uint32_t Sse42(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  std::uint64_t c = ~crc;
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<std::uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}
#endif

}  // namespace

bool Crc32cUsesHardware() {
#if defined(__x86_64__)
  static const bool have_sse42 = __builtin_cpu_supports("sse4.2");
  return have_sse42;
#else
  return false;
#endif
}

std::uint32_t Crc32c(std::string_view data, std::uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__x86_64__)
  if (Crc32cUsesHardware()) return Sse42(crc, p, data.size());
#endif
  return Software(crc, p, data.size());
}

std::uint32_t Crc32cPortable(std::string_view data, std::uint32_t crc) {
  return Software(crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

}  // namespace wk
