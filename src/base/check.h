// Always-on assertions for programmer errors.
//
// WK_CHECK(cond, message) aborts the process with the message, file and line when cond is
// false, in every build type: a broken invariant must crash loudly, never continue
// (docs/DEVELOPING.md, "Assertions and global state"). Operating errors (a failed request, bad user input) are never checked
// this way; they are Status values.
#pragma once

#include <string_view>

namespace wk::internal {
[[noreturn]] void CheckFailed(const char* expr, std::string_view message, const char* file,
                              int line);
}  // namespace wk::internal

#define WK_CHECK(cond, message)                                           \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::wk::internal::CheckFailed(#cond, (message), __FILE__, __LINE__);  \
  } while (0)
