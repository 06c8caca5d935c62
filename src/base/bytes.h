// Little-endian binary fields for the runtime's stored formats (segment and snapshot
// payloads, replica/format.h; the system entries of idempotency records,
// actor/idempotency.h): fixed-width integers and length-prefixed byte strings. ByteReader
// never reads past its input: every accessor returns false instead, so a decoder turns a
// short or damaged input into an error, never into a crash or an oversized allocation.
//
// Threading: pure functions and values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace wk {

inline void PutU32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void PutI64(std::string& out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
// A u32 length, then the bytes. REQUIRES: b.size() < 2^32.
inline void PutBytes(std::string& out, std::string_view b) {
  PutU32(out, static_cast<std::uint32_t>(b.size()));
  out.append(b);
}

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  bool U8(std::uint8_t* v) {
    if (in_.empty()) return false;
    *v = static_cast<std::uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool U32(std::uint32_t* v) {
    if (in_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(in_[i])) << (8 * i);
    in_.remove_prefix(4);
    return true;
  }
  bool I64(std::int64_t* v) {
    if (in_.size() < 8) return false;
    std::uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in_[i])) << (8 * i);
    *v = static_cast<std::int64_t>(u);
    in_.remove_prefix(8);
    return true;
  }
  // A length-prefixed string (PutBytes); false if the length runs past the input.
  bool Bytes(std::string* out) {
    std::uint32_t n = 0;
    if (!U32(&n) || n > in_.size()) return false;
    out->assign(in_.substr(0, n));
    in_.remove_prefix(n);
    return true;
  }
  bool empty() const { return in_.empty(); }
  std::size_t remaining() const { return in_.size(); }

 private:
  std::string_view in_;
};

}  // namespace wk
