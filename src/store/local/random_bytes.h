// Random bytes from the kernel's CSPRNG (getrandom(2)) for the local stores' version
// tokens. Thread-safe; blocks only until the kernel's pool is first seeded.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>

namespace wk::local_store {

// Fills all n bytes at buf. Returns 0 or an errno.
inline int RandomBytes(void* buf, std::size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    const ssize_t got = ::getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return 0;
}

}  // namespace wk::local_store
