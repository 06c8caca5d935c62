// Text of the local stores' messages (file://, sqlite://): how a key is quoted, and an
// errno's text. Both are used in every error a local store returns, so its messages read
// the same whichever store wrote them.
//
// Threading: pure functions, callable from the stores' worker threads.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace wk::local_store {

// Keys in messages are cut to this many bytes (keys go up to 1024).
inline constexpr std::size_t kMaxQuotedKeyBytes = 120;

// 'key', or 'first 120 bytes...' (N bytes) for a longer key.
inline std::string Quote(std::string_view key) {
  if (key.size() <= kMaxQuotedKeyBytes) return "'" + std::string(key) + "'";
  return "'" + std::string(key.substr(0, kMaxQuotedKeyBytes)) + "...' (" +
         std::to_string(key.size()) + " bytes)";
}

// The text of errno value err (thread-safe: GNU strerror_r, whose message may not be in buf).
inline std::string ErrnoText(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof(buf));
}

}  // namespace wk::local_store
