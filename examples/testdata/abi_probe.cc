// A test actor that drives ABI v1 directly (no SDK helpers), so the host's tests check the raw
// contract of docs/abi.md: the result buffer, request fields, list encoding and flags,
// alarms, sync, and what a module sees of WASI. Paths select the probe.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The raw import declarations are the SDK header's (wk_result_read, ...); none of its
// helpers are used, so what is tested is the host's side of the ABI alone.
#include "wasmkeep.h"

extern "C" {
#define WASI(name) __attribute__((import_module("wasi_snapshot_preview1"), import_name(#name)))
WASI(fd_write) int32_t wasi_fd_write(int32_t fd, const void* iovs, int32_t n, void* nwritten);
WASI(fd_fdstat_get) int32_t wasi_fd_fdstat_get(int32_t fd, void* buf);
WASI(clock_time_get) int32_t wasi_clock_time_get(int32_t id, int64_t precision, void* out);
WASI(clock_res_get) int32_t wasi_clock_res_get(int32_t id, void* out);
WASI(random_get) int32_t wasi_random_get(void* buf, int32_t len);
WASI(environ_sizes_get) int32_t wasi_environ_sizes_get(void* count, void* size);
}

static char* Take(int32_t n) {  // the result buffer as a NUL-terminated string
  char* buf = static_cast<char*>(malloc(n + 1));
  wk_result_read(buf, n);
  buf[n] = 0;
  return buf;
}
static void Say(const char* s) { wk_response_write(s, strlen(s)); }
static void SayNum(long long v) {
  char buf[32];
  int n = 0;
  bool neg = v < 0;
  unsigned long long u = neg ? -v : v;
  do { buf[n++] = '0' + u % 10; u /= 10; } while (u);
  if (neg) buf[n++] = '-';
  for (int i = 0; i < n / 2; ++i) { char t = buf[i]; buf[i] = buf[n - 1 - i]; buf[n - 1 - i] = t; }
  wk_response_write(buf, n);
}
static void Put(const char* k, const char* v) { wk_storage_put(k, strlen(k), v, strlen(v)); }

// Writes the listing in the result buffer as "k=v," pairs.
static void SayListing(int32_t count) {
  int32_t cap = 1 << 16;
  unsigned char* buf = static_cast<unsigned char*>(malloc(cap));
  int32_t n = wk_result_read(buf, cap);
  int32_t pos = 0;
  for (int32_t i = 0; i < count && pos + 4 <= n; ++i) {
    uint32_t kl; memcpy(&kl, buf + pos, 4); pos += 4;
    wk_response_write(buf + pos, kl); pos += kl;
    Say("=");
    uint32_t vl; memcpy(&vl, buf + pos, 4); pos += 4;
    wk_response_write(buf + pos, vl); pos += vl;
    Say(",");
  }
  free(buf);
}

extern "C" __attribute__((export_name("wk_on_request"))) int32_t on_request(void) {
  char* path = Take(wk_request_get(1));
  if (strcmp(path, "/echo") == 0) {
    // method|path|query|body|x-probe header|all headers
    Say(Take(wk_request_get(0))); Say("|");
    Say(path); Say("|");
    Say(Take(wk_request_get(2))); Say("|");
    Say(Take(wk_request_get(3))); Say("|");
    int32_t h = wk_request_header("X-Probe", 7);
    Say(h < 0 ? "(none)" : Take(h)); Say("|");
    int32_t m = wk_request_header("x-missing", 9);
    Say(m < 0 ? "(none)" : Take(m)); Say("|");
    Say(Take(wk_request_get(4)));
    wk_response_set_status(201);
    wk_response_add_header("x-answer", 8, "42", 2);
  } else if (strcmp(path, "/list") == 0) {
    wk_storage_delete_all();
    Put("a", "1"); Put("b", "2"); Put("ba", "3"); Put("c", "4");
    SayListing(wk_storage_list("", 0, "", 0, 0, 0)); Say("|");
    SayListing(wk_storage_list("b", 1, "", 0, 0, 2)); Say("|");        // prefix b
    SayListing(wk_storage_list("", 0, "", 0, 2, 1)); Say("|");         // reverse, limit 2
    SayListing(wk_storage_list("a", 1, "c", 1, 0, 0)); Say("|");       // [a, c)
    SayNum(wk_storage_delete("ba", 2)); SayNum(wk_storage_delete("zz", 2)); Say("|");
    int32_t g = wk_storage_get("ba", 2);
    SayNum(g);
  } else if (strcmp(path, "/alarm") == 0) {
    SayNum(wk_alarm_get()); Say("|");
    wk_alarm_set(wk_now_ms() + 5000);
    SayNum(wk_alarm_get() - wk_now_ms()); Say("|");
    wk_alarm_delete();
    SayNum(wk_alarm_get()); Say("|");
    wk_alarm_set(12345);
    SayNum(wk_alarm_get());
  } else if (strcmp(path, "/time") == 0) {
    SayNum(wk_now_ms()); Say("|");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    SayNum(static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000);
    Say("|");
    unsigned char r[32] = {0};
    wk_random_fill(r, sizeof r);
    int nonzero = 0;
    for (unsigned char b : r) nonzero += b != 0;
    SayNum(nonzero > 8 ? 1 : 0);
  } else if (strcmp(path, "/sync") == 0) {
    Put("before-sync", "1");
    SayNum(wk_sync());
    Put("after-sync", "1");
    if (wk_storage_get("fail", 4) >= 0) __builtin_trap();  // the part after sync is discarded
  } else if (strcmp(path, "/count") == 0) {
    int32_t n = wk_storage_get("count", 5);
    long long v = 0;
    if (n >= 0) v = atoll(Take(n));
    v += 1;
    char buf[32];
    int len = 0;
    long long t = v;
    char tmp[32];
    do { tmp[len++] = '0' + t % 10; t /= 10; } while (t);
    for (int i = 0; i < len; ++i) buf[i] = tmp[len - 1 - i];
    wk_storage_put("count", 5, buf, len);
    wk_response_write(buf, len);
  } else if (strcmp(path, "/get") == 0) {
    char* key = Take(wk_request_get(2));
    int32_t n = wk_storage_get(key, strlen(key));
    if (n < 0) { wk_response_set_status(404); return 0; }
    Say(Take(n));
  } else if (strcmp(path, "/put") == 0) {
    char* key = Take(wk_request_get(2));
    char* body = Take(wk_request_get(3));
    Put(key, body);
  } else if (strcmp(path, "/set-alarm") == 0) {
    wk_alarm_set(atoll(Take(wk_request_get(2))));
  } else if (strcmp(path, "/bad-status") == 0) {
    wk_response_set_status(42);
  } else if (strcmp(path, "/status") == 0) {
    // Query N: writes, then answers status N (a 1xx must fail the event, writes and all).
    char* q = Take(wk_request_get(2));
    Put("status-write", q);
    wk_response_set_status(atoi(q));
    Say("answered");
  } else if (strcmp(path, "/log-controls") == 0) {
    // Bytes a log line must never carry as themselves: CR LF (a forged record), ESC (a
    // terminal sequence), NUL, BEL, invalid UTF-8.
    static const char msg[] = "forged\r\nERROR fake record\x1b[2J\x07nul:\0:bad\xff";
    wk_log(2, msg, sizeof msg - 1);
    static const char out[] = "stdout\x1b]0;owned\x07 line\r\n";
    const uint32_t iov[2] = {static_cast<uint32_t>(reinterpret_cast<uintptr_t>(out)), sizeof out - 1};
    uint32_t written = 0;
    wasi_fd_write(1, iov, 1, &written);
  } else if (strcmp(path, "/bad-header") == 0) {
    wk_response_add_header("x", 1, "a\r\nb", 4);
  } else if (strcmp(path, "/big-response") == 0) {
    static char chunk[65536];
    for (int i = 0; i < 64; ++i) wk_response_write(chunk, sizeof chunk);  // 4 MiB
  } else if (strcmp(path, "/bad-field") == 0) {
    wk_request_get(99);
  } else if (strcmp(path, "/oob-read") == 0) {
    wk_result_read(reinterpret_cast<void*>(0xfffffff0u), 1000);
  } else if (strcmp(path, "/oob-response") == 0) {
    wk_response_write(reinterpret_cast<void*>(0x7ffffff0u), 64);
  } else if (strcmp(path, "/oob-log") == 0) {
    wk_log(1, reinterpret_cast<void*>(0xffffff00u), 0x1000);
  } else if (strcmp(path, "/oob-list") == 0) {
    wk_storage_list(reinterpret_cast<void*>(0xffffff00u), 0x1000, "", 0, 0, 0);
  } else if (strcmp(path, "/oob-random") == 0) {
    wk_random_fill(reinterpret_cast<void*>(0xffffff00u), 0x1000);
  } else if (strcmp(path, "/oob-each") == 0) {
    // Query N: call host function number N with one pointer outside linear memory.
    void* bad = reinterpret_cast<void*>(0xfffff000u);
    char* q = Take(wk_request_get(2));
    static char ok[8];
    static uint32_t iov[2] = {0xfffff000u, 16};
    switch (atoi(q)) {
      case 0: wk_result_read(bad, 16); break;
      case 1: wk_request_header(bad, 16); break;
      case 2: wk_response_add_header(bad, 16, ok, 1); break;
      case 3: wk_response_add_header("x", 1, bad, 16); break;
      case 4: wk_response_write(bad, 16); break;
      case 5: wk_storage_get(bad, 16); break;
      case 6: wk_storage_put(bad, 16, ok, 1); break;
      case 7: wk_storage_put("k", 1, bad, 16); break;
      case 8: wk_storage_delete(bad, 16); break;
      case 9: wk_storage_list("", 0, bad, 16, 0, 0); break;
      case 10: wk_random_fill(bad, 16); break;
      case 11: wk_log(1, bad, 16); break;
      case 12: wasi_fd_write(1, bad, 1, ok); break;
      case 13: wasi_fd_write(1, iov, 1, ok); break;
      case 14: wasi_fd_write(1, ok, 0, bad); break;
      case 15: wasi_fd_fdstat_get(1, bad); break;
      case 16: wasi_clock_time_get(0, 1, bad); break;
      case 17: wasi_clock_res_get(0, bad); break;
      case 18: wasi_random_get(bad, 16); break;
      case 19: wasi_environ_sizes_get(bad, ok); break;
      default: return 0;  // past the last case: the test's end marker
    }
    Say("survived");  // never reached: each case fails the event
  } else if (strcmp(path, "/return-7") == 0) {
    return 7;
  } else {
    wk_response_set_status(404);
  }
  return 0;
}

// The alarm handler records its retry count and what alarm_get says as it starts; an
// actor whose "alarm-fail" key is set fails (to exercise retries), and one whose
// "alarm-rearm" key holds a time re-arms to it.
extern "C" __attribute__((export_name("wk_on_alarm"))) int32_t on_alarm(void) {
  char buf[64];
  int32_t retry = wk_alarm_retry_count();
  int64_t seen = wk_alarm_get();
  int n = snprintf(buf, sizeof buf, "yes %d %lld", (int)retry, (long long)seen);
  wk_storage_put("alarm-ran", 9, buf, (uint32_t)n);
  if (wk_storage_get("alarm-fail", 10) >= 0) {
    wk_storage_put("alarm-failed-write", 18, "x", 1);
    return 3;
  }
  int32_t len = wk_storage_get("alarm-rearm", 11);
  if (len > 0 && len < 32) {
    char t[32] = {0};
    wk_result_read(t, (uint32_t)len);
    wk_alarm_set(atoll(t));
  }
  return 0;
}
