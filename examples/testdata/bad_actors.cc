// bad_actors: a deliberately misbehaving actor for the host's bad-input tests. Not an
// example to copy. One wk_on_request export dispatches on the request path; each path
// breaks one rule of docs/abi.md (or, for /ok and /get, behaves, so a test can show the
// node and the actor's state are fine afterwards).
//
//   /ok               answers "ok"
//   /get              answers the value under "k" (404 if absent): what /write-then-trap left
//   /loop             an infinite loop (the CPU limit must end it)
//   /recurse          unbounded recursion without shadow-stack frames: exhausts the engine's
//                     call stack (a stack-overflow trap)
//   /recurse-shadow   unbounded recursion with 1 KiB frames on the C shadow stack in linear
//                     memory: built with --stack-first, it runs off the bottom of memory (an
//                     out-of-bounds trap) after 64 KiB, before touching static data
//   /grow             malloc 1 MiB blocks (each written) until malloc fails, then abort()
//   /oob              storage_get with a key range outside linear memory
//   /bigvalue         storage_put of a 200,000-byte value (over max_value_bytes, 131,072)
//   /bigkey           storage_put with a 5,000-byte key (over max_key_bytes, 2,048)
//   /emptykey         storage_put with an empty key
//   /exit             exit(3): proc_exit(3)
//   /trap             __builtin_trap(): unreachable
//   /print            printf to stdout and stderr (fd_write to 1 and 2), then answers "printed"
//   /write-then-trap  storage_put("k", "v"), then a trap: the write must be discarded
//   /nonzero          returns 7 from the handler
//   /bad-status       response_set_status(1000)
//   /bad-header       a response header whose value holds a newline
//   /bigresponse      writes 2 MiB of body (over max_response_bytes, 1 MiB)
//   /bad-field        request_get(99)
//   /bad-random       random_fill of 65,537 bytes (over the 65,536 per call)
//   /bad-alarm        alarm_set(-1)
// Any other path: 404.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "wasmkeep.h"

namespace {

void Answer(const char* text) { wk_response_text(200, text); }

// Volatile so the compiler can neither drop the loops nor prove the recursion endless.
volatile uint64_t g_spins = 0;
volatile int g_never = 0;
void* volatile g_blocks = nullptr;

[[noreturn]] void Loop() {
  for (;;) g_spins = g_spins + 1;
}

// No address-taken locals, so no shadow-stack frame; the volatile store after the call keeps
// it from being a tail call or turned into a loop.
__attribute__((noinline)) int Recurse(int depth) {
  if (g_never == 12345) return depth;
  int r = Recurse(depth + 1);
  g_never = r;
  return r ^ depth;
}

__attribute__((noinline)) int RecurseShadow(int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (g_never == 12345) return frame[0];
  int r = RecurseShadow(depth + 1);
  g_never = r;
  return r ^ frame[0];
}

[[noreturn]] void Grow() {
  constexpr size_t kBlockBytes = 1 << 20;
  for (;;) {
    void* block = std::malloc(kBlockBytes);
    if (block == nullptr) std::abort();
    std::memset(block, 0xAB, kBlockBytes);
    *static_cast<void**>(block) = g_blocks;  // keep every block reachable
    g_blocks = block;
  }
}

int Handle() {
  size_t path_len = 0;
  char* path_c = wk_request_dup(WK_REQUEST_PATH, &path_len);
  std::string path(path_c, path_len);
  std::free(path_c);

  if (path == "/ok") {
    Answer("ok");
  } else if (path == "/get") {
    size_t len = 0;
    char* value = wk_storage_get_str("k", &len);
    if (value == nullptr) {
      wk_response_text(404, "absent");
    } else {
      wk_response_write(value, static_cast<uint32_t>(len));
      std::free(value);
    }
  } else if (path == "/loop") {
    Loop();
  } else if (path == "/recurse") {
    return Recurse(0);
  } else if (path == "/recurse-shadow") {
    return RecurseShadow(0);
  } else if (path == "/grow") {
    Grow();
  } else if (path == "/oob") {
    wk_storage_get(reinterpret_cast<const void*>(uintptr_t{0xFFFFFFF0}), 1000);
    Answer("the host let an out-of-bounds key through");
  } else if (path == "/bigvalue") {
    std::string value(200000, 'v');
    wk_storage_put("big", 3, value.data(), static_cast<uint32_t>(value.size()));
    Answer("stored a 200000-byte value");
  } else if (path == "/bigkey") {
    std::string key(5000, 'k');
    wk_storage_put(key.data(), static_cast<uint32_t>(key.size()), "v", 1);
    Answer("stored under a 5000-byte key");
  } else if (path == "/emptykey") {
    wk_storage_put("", 0, "v", 1);
    Answer("stored under an empty key");
  } else if (path == "/exit") {
    std::exit(3);
  } else if (path == "/trap") {
    __builtin_trap();
  } else if (path == "/print") {
    std::printf("to stdout\n");
    std::fflush(stdout);
    std::fprintf(stderr, "to stderr\n");
    Answer("printed");
  } else if (path == "/write-then-trap") {
    wk_storage_put("k", 1, "v", 1);
    __builtin_trap();
  } else if (path == "/nonzero") {
    Answer("about to return 7");
    return 7;
  } else if (path == "/bad-status") {
    wk_response_set_status(1000);
  } else if (path == "/bad-header") {
    wk_response_header("X-Bad", "line\nbreak");
  } else if (path == "/bigresponse") {
    std::string chunk(64 * 1024, 'r');
    for (int i = 0; i < 32; ++i) wk_response_write(chunk.data(), static_cast<uint32_t>(chunk.size()));
  } else if (path == "/bad-field") {
    wk_request_get(99);
  } else if (path == "/bad-random") {
    static char buf[WK_RANDOM_FILL_MAX_BYTES + 1];
    wk_random_fill(buf, sizeof buf);
  } else if (path == "/bad-alarm") {
    wk_alarm_set(-1);
  } else {
    wk_response_text(404, "no such bad behaviour");
  }
  return 0;
}

}  // namespace

WK_ON_REQUEST(Handle)
