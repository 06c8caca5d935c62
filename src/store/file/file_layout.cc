#include "store/file/file_layout.h"

#include <bit>
#include <cstdio>
#include <cstring>

#include "base/crc32c.h"
#include "base/digest.h"

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

}  // namespace

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
  return ToHex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string EncodeHeader(std::string_view key, const VersionBytes& version, std::string_view body) {
  WK_CHECK(!key.empty() && key.size() <= kMaxKeyBytes, "EncodeHeader: key size out of range");
  std::string out;
  out.reserve(kFixedHeaderBytes + key.size() + kHeaderCrcBytes);
  out.append(kObjectMagic);
  out.append(reinterpret_cast<const char*>(version.data()), version.size());
  PutLe64(out, body.size());
  PutLe32(out, static_cast<std::uint32_t>(key.size()));
  PutLe32(out, Crc32c(body));
  out.append(key);
  PutLe32(out, Crc32c(out));
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
  if (Crc32c(prefix.substr(0, kFixedHeaderBytes + key_size)) != stored_crc) {
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
