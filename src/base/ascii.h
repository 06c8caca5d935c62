// ASCII helpers for protocol text (HTTP header names, format keys): locale-free, so the
// same bytes compare the same way on every machine and in the simulator.
#pragma once

#include <string_view>

namespace wk {

inline constexpr char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// True when a and b are equal ignoring ASCII case (HTTP header names, RFC 9110 §5.1).
inline constexpr bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

// True when text is an HTTP token (RFC 9110 §5.6.2): one or more of the visible ASCII
// characters that are not delimiters. Header names must be tokens.
inline constexpr bool IsHttpToken(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

static_assert(EqualsIgnoreAsciiCase("Content-Length", "content-LENGTH"));
static_assert(IsHttpToken("X-Custom_1") && !IsHttpToken("") && !IsHttpToken("a b") && !IsHttpToken("a:b"));
static_assert(!EqualsIgnoreAsciiCase("Host", "Hosts"));
static_assert(!EqualsIgnoreAsciiCase("a", "A\x01"));

}  // namespace wk
