// The on-disk format of a file:// bucket, FROZEN as format 1 ("wasmkeep-file-store 1" in
// DIR/FORMAT; processes of different releases share a directory, so a change is a new
// format): the injective, path-safe mapping of a key to its object file under objects/,
// the lock stripes, and the object file's header (magic, version, sizes, CRC-32Cs, the key).
// Threading: pure functions, no I/O; safe from any thread. Details (the layout, why this
// mapping, the header's bytes): docs/internals.md, "The file:// format".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/object_store.h"

namespace wk::file_layout {

// Longest key segment stored in one path component; 1 + this must fit NAME_MAX (255)
// with room to spare for file systems with shorter limits.
inline constexpr std::size_t kSegmentChunkBytes = 200;
static_assert(1 + kSegmentChunkBytes <= 255, "a path component must fit NAME_MAX");
// Worst relative object path: a key of kMaxKeyBytes '/' is 1025 two-byte components.
inline constexpr std::size_t kMaxObjectPathBytes = 8 + 2 * (kMaxKeyBytes + 1);
static_assert(kMaxObjectPathBytes < 4096, "object paths must fit PATH_MAX");

// Lock files a key hashes to (FNV-1a 64 of the key, modulo this). Conditional writes of
// keys on one stripe serialize; 256 makes that rare for a node's few concurrent writes
// while keeping the lock directory small.
inline constexpr std::uint32_t kLockStripes = 256;

inline constexpr std::string_view kFormatLine = "wasmkeep-file-store 1\n";
inline constexpr std::string_view kObjectsDir = "objects";
inline constexpr std::string_view kLocksDir = "locks";
inline constexpr std::string_view kTmpDir = "tmp";
inline constexpr std::string_view kFormatFile = "FORMAT";

inline constexpr char kDirTag = 'd';
inline constexpr char kObjectTag = 'o';
inline constexpr char kChunkTag = 'c';

inline constexpr std::string_view kObjectMagic = "wkobj01\n";
inline constexpr std::size_t kVersionBytes = 16;
inline constexpr std::size_t kFixedHeaderBytes = 40;  // magic .. body CRC
inline constexpr std::size_t kHeaderCrcBytes = 4;
// The longest header: fixed part, a key of kMaxKeyBytes, its checksum.
inline constexpr std::size_t kMaxHeaderBytes = kFixedHeaderBytes + kMaxKeyBytes + kHeaderCrcBytes;

using VersionBytes = std::array<unsigned char, kVersionBytes>;

// The encoded path components of key, "objects" not included (the last one is the
// object file). REQUIRES: ValidateKey(key) is ok.
std::vector<std::string> KeyComponents(std::string_view key);
// "objects/<components joined by '/'>", relative to DIR.
std::string ObjectPath(std::string_view key);
// The lock stripe of key, in [0, kLockStripes).
std::uint32_t LockStripe(std::string_view key);
// "locks/NNN" (three digits) relative to DIR.
std::string LockPath(std::uint32_t stripe);

// The version token of version bytes: 32 lowercase hex digits.
std::string VersionToken(const VersionBytes& bytes);

// The header of an object file whose body is body: everything before the body.
std::string EncodeHeader(std::string_view key, const VersionBytes& version, std::string_view body);

struct ObjectHeader {
  std::string key;
  Version version;
  std::uint64_t body_size = 0;
  std::uint32_t body_crc = 0;
  std::size_t header_bytes = 0;  // where the body starts
};

// Decodes the header at the start of prefix, the first bytes of a file of file_size bytes.
// prefix must hold the whole header (min(file_size, kMaxHeaderBytes) bytes suffice).
// Returns a message saying what is wrong if the header is malformed, its checksum fails,
// or file_size disagrees with it.
Result<ObjectHeader> DecodeHeader(std::string_view prefix, std::uint64_t file_size);

}  // namespace wk::file_layout
