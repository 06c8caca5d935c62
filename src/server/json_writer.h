// JsonWriter: builds the JSON text of the admin routes' answers (server/actor_admin.h). The
// server layer keeps no JSON library (src/layers.txt); its answers are small and flat, so a
// writer that puts the commas in is all it needs.
//
// Strings must be UTF-8: a byte sequence that is not is written with each bad byte as
// U+FFFD, so the output is always valid JSON. Binary data goes through Hex() first (and
// IsText() says which).
//
// Threading: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wk {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // In an object: the next member's name; its value follows.
  JsonWriter& Key(std::string_view name);
  JsonWriter& String(std::string_view s);
  JsonWriter& Int(std::int64_t v);
  JsonWriter& Uint(std::uint64_t v);
  JsonWriter& Double(double v);  // NaN and infinities as null
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // A complete JSON value written elsewhere (another node's answer), as is.
  JsonWriter& Raw(std::string_view json);

  // Key + value, the common case.
  JsonWriter& Member(std::string_view name, std::string_view s) { return Key(name).String(s); }
  JsonWriter& Member(std::string_view name, const char* s) { return Key(name).String(s); }
  JsonWriter& Member(std::string_view name, std::int64_t v) { return Key(name).Int(v); }
  JsonWriter& Member(std::string_view name, std::uint64_t v) { return Key(name).Uint(v); }
  JsonWriter& Member(std::string_view name, int v) { return Key(name).Int(v); }
  JsonWriter& Member(std::string_view name, double v) { return Key(name).Double(v); }
  JsonWriter& Member(std::string_view name, bool v) { return Key(name).Bool(v); }

  const std::string& str() const { return out_; }
  std::string Take() && { return std::move(out_); }

 private:
  void BeforeValue();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

// Whether s is UTF-8 text without control characters (tab, LF and CR allowed): shown as
// text, else as hex.
bool IsText(std::string_view s);
// Lowercase hex of the bytes.
std::string Hex(std::string_view bytes);
// The bytes of lowercase or uppercase hex; false if s is not hex of whole bytes.
bool FromHex(std::string_view s, std::string* out);

}  // namespace wk
