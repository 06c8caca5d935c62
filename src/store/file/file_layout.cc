#include "store/file/file_layout.h"

#include <bit>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace wk::file_layout {

namespace {

void PutLe32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void PutLe64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
std::uint32_t GetLe32(std::string_view in, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}
std::uint64_t GetLe64(std::string_view in, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

// Field offsets of the object header (file_layout.h).
constexpr std::size_t kVersionAt = 8;
constexpr std::size_t kBodySizeAt = 24;
constexpr std::size_t kKeySizeAt = 32;
constexpr std::size_t kBodyCrcAt = 36;
static_assert(kObjectMagic.size() == kVersionAt);
static_assert(kVersionAt + kVersionBytes == kBodySizeAt);
static_assert(kBodyCrcAt + 4 == kFixedHeaderBytes);

// ---- CRC32C. Reflected polynomial 0x82F63B78; slicing-by-8 tables in software, the
// SSE4.2 instruction where the CPU has it.
constexpr std::uint32_t kCrc32cPoly = 0x82F63B78u;

using CrcTables = std::array<std::array<std::uint32_t, 256>, 8>;
constexpr CrcTables MakeCrcTables() {
  CrcTables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t s = 1; s < 8; ++s) {
    for (std::size_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
  return t;
}
constexpr CrcTables kCrcTables = MakeCrcTables();

std::uint32_t Crc32cSoftware(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  std::uint32_t c = ~crc;
  if constexpr (std::endian::native == std::endian::little) {
    while (n >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      w ^= c;
      c = kCrcTables[7][w & 0xFF] ^ kCrcTables[6][(w >> 8) & 0xFF] ^
          kCrcTables[5][(w >> 16) & 0xFF] ^ kCrcTables[4][(w >> 24) & 0xFF] ^
          kCrcTables[3][(w >> 32) & 0xFF] ^ kCrcTables[2][(w >> 40) & 0xFF] ^
          kCrcTables[1][(w >> 48) & 0xFF] ^ kCrcTables[0][w >> 56];
      p += 8;
      n -= 8;
    }
  }
  while (n-- > 0) c = (c >> 8) ^ kCrcTables[0][(c ^ *p++) & 0xFF];
  return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t Crc32cSse42(std::uint32_t crc,
                                                            const unsigned char* p, std::size_t n) {
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

std::uint32_t Crc32c(std::uint32_t crc, std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__x86_64__)
  static const bool have_sse42 = __builtin_cpu_supports("sse4.2");
  if (have_sse42) return Crc32cSse42(crc, p, data.size());
#endif
  return Crc32cSoftware(crc, p, data.size());
}

std::uint32_t Crc32cPortable(std::uint32_t crc, std::string_view data) {
  return Crc32cSoftware(crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

std::vector<std::string> KeyComponents(std::string_view key) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = key.find('/', start);
    const bool last = slash == std::string_view::npos;
    std::string_view segment = key.substr(start, last ? std::string_view::npos : slash - start);
    while (segment.size() > kSegmentChunkBytes) {
      out.push_back(kChunkTag + std::string(segment.substr(0, kSegmentChunkBytes)));
      segment.remove_prefix(kSegmentChunkBytes);
    }
    out.push_back((last ? kObjectTag : kDirTag) + std::string(segment));
    if (last) break;
    start = slash + 1;
  }
  return out;
}

std::string ObjectPath(std::string_view key) {
  std::string path(kObjectsDir);
  for (const std::string& c : KeyComponents(key)) {
    path += '/';
    path += c;
  }
  return path;
}

std::uint32_t LockStripe(std::string_view key) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (char ch : key) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;  // FNV-1a 64 prime
  }
  return static_cast<std::uint32_t>(h % kLockStripes);
}

std::string LockPath(std::uint32_t stripe) {
  WK_CHECK(stripe < kLockStripes, "lock stripe out of range");
  char name[8];
  std::snprintf(name, sizeof(name), "%03u", stripe);
  return std::string(kLocksDir) + "/" + name;
}

std::string VersionToken(const VersionBytes& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xF]);
  }
  return out;
}

std::string EncodeHeader(std::string_view key, const VersionBytes& version, std::string_view body) {
  WK_CHECK(!key.empty() && key.size() <= kMaxKeyBytes, "EncodeHeader: key size out of range");
  std::string out;
  out.reserve(kFixedHeaderBytes + key.size() + kHeaderCrcBytes);
  out.append(kObjectMagic);
  out.append(reinterpret_cast<const char*>(version.data()), version.size());
  PutLe64(out, body.size());
  PutLe32(out, static_cast<std::uint32_t>(key.size()));
  PutLe32(out, Crc32c(0, body));
  out.append(key);
  PutLe32(out, Crc32c(0, out));
  return out;
}

Result<ObjectHeader> DecodeHeader(std::string_view prefix, std::uint64_t file_size) {
  if (prefix.size() < kFixedHeaderBytes + kHeaderCrcBytes) {
    return Fatal("object file is " + std::to_string(file_size) + " bytes, shorter than a header");
  }
  if (prefix.substr(0, kObjectMagic.size()) != kObjectMagic) {
    return Fatal(
        "object file does not start with the magic \"wkobj01\" (not an object file, "
        "or a newer format)");
  }
  const std::uint64_t body_size = GetLe64(prefix, kBodySizeAt);
  const std::uint32_t key_size = GetLe32(prefix, kKeySizeAt);
  if (key_size == 0 || key_size > kMaxKeyBytes) {
    return Fatal("object header has a key size of " + std::to_string(key_size));
  }
  const std::size_t header_bytes = kFixedHeaderBytes + key_size + kHeaderCrcBytes;
  if (prefix.size() < header_bytes) {
    return Fatal("object file is " + std::to_string(file_size) +
                 " bytes, shorter than its header says");
  }
  const std::uint32_t stored_crc = GetLe32(prefix, kFixedHeaderBytes + key_size);
  if (Crc32c(0, prefix.substr(0, kFixedHeaderBytes + key_size)) != stored_crc) {
    return Fatal("object header checksum mismatch");
  }
  if (body_size > file_size || file_size - body_size != header_bytes) {
    return Fatal("object file is " + std::to_string(file_size) + " bytes but its header says " +
                 std::to_string(header_bytes) + " + " + std::to_string(body_size));
  }
  ObjectHeader h;
  VersionBytes v;
  std::memcpy(v.data(), prefix.data() + kVersionAt, v.size());
  h.version = Version(VersionToken(v));
  h.body_size = body_size;
  h.body_crc = GetLe32(prefix, kBodyCrcAt);
  h.key = std::string(prefix.substr(kFixedHeaderBytes, key_size));
  h.header_bytes = header_bytes;
  return h;
}

}  // namespace wk::file_layout
