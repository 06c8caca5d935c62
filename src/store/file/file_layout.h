// The on-disk format of a file:// bucket: where a key's object lives, and what an object
// file holds. Pure functions (no I/O), so they are tested on their own and shared by the
// store and its tests.
//
// FROZEN. Several processes, possibly of different WasmKeep releases, share one directory,
// so everything here is format version 1 ("wasmkeep-file-store 1" in DIR/FORMAT). A change
// to the path mapping, the lock striping or the object header is a new format version.
//
// Layout of DIR:
//   FORMAT          "wasmkeep-file-store 1\n"; Open refuses any other content
//   objects/        the object tree (below)
//   locks/NNN       kLockStripes lock files (created on first use, never deleted)
//   tmp/            temp files of writes in flight (and of crashed writers)
//
// Object tree. A key is split at '/' into segments; every segment but the last is a
// directory, the last one the object file. Each path component starts with a tag byte:
//   'd' + segment   a directory: the keys below it continue with segment + '/'
//   'o' + segment   an object file: the key ends with segment
//   'c' + chunk     a continuation directory: a segment longer than kSegmentChunkBytes
//                   is cut into chunks of exactly kSegmentChunkBytes bytes, each a 'c'
//                   directory, the rest (1..kSegmentChunkBytes bytes) tagged 'd' or 'o'
// So "wal/t/a-1" is objects/dwal/dt/oa-1, "/x" is objects/d/ox, "a/./.." is
// objects/da/d./o.., and a 450-byte segment S is cS[0,200)/cS[200,400)/oS[400,450).
//
// Why this mapping:
//   - Injective and reversible: the tags say where separators were, and the chunking is
//     deterministic, so every key has exactly one path and every path decodes to at most
//     one key. No escaping is needed: the tag keeps every component non-empty and never
//     "." or "..", and a segment holds neither '/' nor NUL (ValidateKey forbids NUL).
//   - Path-safe: every component is a tag plus bytes without '/', so no key can name a
//     path outside objects/, and internal files live outside objects/.
//   - Within NAME_MAX (255 bytes): a component is at most 1 + kSegmentChunkBytes bytes,
//     though keys go up to 1024 bytes. The worst relative path (a key of 1024 '/') is
//     2 * 1024 + 10 bytes, under PATH_MAX.
//   - Listing a prefix reads only the directories under it: WasmKeep's keys are
//     hierarchical (wal/<tenant>/<class>/<name>/<gen>-<seq>), so listing one actor's
//     segments reads one directory, not the bucket.
//   - Readable by operators: ls shows the keys.
// Directory order is not S3's byte order of full keys ("a-c" < "a/b" but 'a-c' is a file
// beside directory 'a'), so List merges lazily with a min-heap (file_store.cc).
// File names are raw key bytes, so the file system must be case-sensitive and accept any
// bytes in names (ext4, xfs, btrfs, tmpfs do); Open checks case sensitivity.
//
// Object file: a fixed header, the key, a header checksum, then the body.
//   offset      size  field
//   0           8     magic "wkobj01\n"
//   8           16    version: 128 random bits from the kernel's CSPRNG, unique per write
//   24          8     body size, little-endian
//   32          4     key size, little-endian (1..kMaxKeyBytes)
//   36          4     CRC32C of the body, little-endian
//   40          k     the key (must equal the key the path decodes to)
//   40+k        4     CRC32C of bytes [0, 40+k), little-endian
//   44+k        n     the body; the file is exactly 44 + k + n bytes
// Object files are written once (to tmp/, fsynced, renamed into place) and never modified,
// so a reader that opened one reads a complete, unchanging file.
//
// Threading: pure functions; safe from any thread.
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
