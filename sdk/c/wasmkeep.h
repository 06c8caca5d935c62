/* wasmkeep.h: the C SDK for WasmKeep actors, ABI v1 (docs/abi.md).
 *
 * Contract:
 * - Declares every host function of the import module "wasmkeep_v1" with the signature
 *   docs/abi.md gives it, under the name wk_<name> (wk_storage_get imports storage_get).
 *   Pointers are wasm32 addresses; lengths are read by the host as unsigned 32-bit numbers.
 * - Adds static inline helpers on top: request fields, headers and stored values copied into
 *   malloc'd buffers, response and log shortcuts for C strings, and a parser for the listing
 *   that storage_list leaves in the result buffer. Nothing here keeps state between calls.
 * - Every *_dup helper returns a buffer the caller frees with free(). It holds the data plus
 *   one NUL byte after it, so text can be used as a C string (binary data may itself contain
 *   NULs: use the returned length). Allocation failure calls abort(), a trap: the event fails
 *   and its writes are discarded, as docs/abi.md says for every trap.
 * - The raw result-buffer calls (request_get, storage_get, ...) replace the buffer: read it
 *   with wk_result_read before the next such call. The helpers do that for you.
 * - An actor runs one event at a time on one thread: nothing here is thread-safe, and
 *   nothing needs to be.
 * - Build for wasm32-wasi only: `scripts/build-actor.sh actor.c` (docs/sdk.md).
 *
 * Usable from C (C99 or later) and C++; wasmkeep.hpp is the C++ layer over this file.
 */
#ifndef WASMKEEP_H_
#define WASMKEEP_H_

#if !defined(__wasm32__)
#error "wasmkeep.h is for actors built with --target=wasm32-wasi (see docs/sdk.md)"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header implements; also the import module's suffix. */
#define WK_ABI_VERSION 1

#define WK_IMPORT(name) __attribute__((import_module("wasmkeep_v1"), import_name(#name)))

/* ---- Host functions (docs/abi.md "Host functions"), one declaration each. ---- */

/* Fields of request_get. */
enum {
  WK_REQUEST_METHOD = 0,  /* "GET", "POST", ... */
  WK_REQUEST_PATH = 1,    /* the part after the actor's name, starting with '/', or empty */
  WK_REQUEST_QUERY = 2,   /* the query string without '?' */
  WK_REQUEST_BODY = 3,    /* the request body */
  WK_REQUEST_HEADERS = 4  /* every header as "name: value\n", names lowercase */
};

/* Log levels of wk_log. */
enum { WK_LOG_DEBUG = 0, WK_LOG_INFO = 1, WK_LOG_WARN = 2, WK_LOG_ERROR = 3 };

/* Flag bits of storage_list. */
enum {
  WK_LIST_REVERSE = 1, /* descending key order */
  WK_LIST_PREFIX = 2   /* keys that begin with start; end is ignored */
};

/* Most bytes random_fill writes in one call. */
#define WK_RANDOM_FILL_MAX_BYTES 65536

/* Copies min(len, size) bytes of the result buffer to dst; returns the number copied. */
WK_IMPORT(result_read) int32_t wk_result_read(void* dst, uint32_t len);

/* Puts request field WK_REQUEST_* in the result buffer; returns its length. */
WK_IMPORT(request_get) int32_t wk_request_get(int32_t field);
/* Puts the value of a request header (case-insensitive name) in the result buffer; returns its length, or -1 if absent. */
WK_IMPORT(request_header) int32_t wk_request_header(const void* name, uint32_t name_len);

/* Sets the response status (200..599; anything else fails the event; it starts as 200). */
WK_IMPORT(response_set_status) void wk_response_set_status(int32_t status);
/* Adds a response header (name an HTTP token; value without CR, LF or NUL). */
WK_IMPORT(response_add_header) void wk_response_add_header(const void* name, uint32_t name_len, const void* value, uint32_t value_len);
/* Appends to the response body (at most actors.max_response_bytes in all). */
WK_IMPORT(response_write) void wk_response_write(const void* data, uint32_t len);

/* Puts a stored value in the result buffer; returns its length, or -1 if the key is absent. */
WK_IMPORT(storage_get) int32_t wk_storage_get(const void* key, uint32_t key_len);
/* Sets key to value (in this event's atomic batch). */
WK_IMPORT(storage_put) void wk_storage_put(const void* key, uint32_t key_len, const void* value, uint32_t value_len);
/* Removes key; returns 1 if it existed, 0 if not. */
WK_IMPORT(storage_delete) int32_t wk_storage_delete(const void* key, uint32_t key_len);
/* Removes every key of this actor (the alarm is kept). */
WK_IMPORT(storage_delete_all) void wk_storage_delete_all(void);
/* Lists entries into the result buffer (see wk_list_fetch); returns how many. limit <= 0: no limit. */
WK_IMPORT(storage_list) int32_t wk_storage_list(const void* start, uint32_t start_len, const void* end, uint32_t end_len, int32_t limit, int32_t flags);

/* Sets or replaces the actor's alarm (ms since the Unix epoch, >= 0). */
WK_IMPORT(alarm_set) void wk_alarm_set(int64_t time_ms);
/* Returns the alarm's time in ms since the Unix epoch, or -1 if none is set. */
WK_IMPORT(alarm_get) int64_t wk_alarm_get(void);
/* Removes the alarm. */
WK_IMPORT(alarm_delete) void wk_alarm_delete(void);
/* In wk_on_alarm: 0 on the alarm's first run, n on its n-th retry after a failed run (a
 * trap, a limit, a non-zero return; at most [alarms] max_retries); -1 in a request. An
 * addition to wasmkeep_v1: a module that calls it needs a node with alarm delivery. */
WK_IMPORT(alarm_retry_count) int32_t wk_alarm_retry_count(void);

/* Fields of message_get. */
enum {
  WK_MESSAGE_SENDER = 0, /* the sender's full name, "tenant/class/name" */
  WK_MESSAGE_BODY = 1    /* the message's body (binary-safe) */
};

/* Messages between actors (docs/sdk.md "Messages between actors"). Additions to wasmkeep_v1: a module that
 * imports them needs a node that delivers messages, and an older node refuses it. */
/* Queues a message to actor `to` ("class/name" in the sender's tenant, or
 * "tenant/class/name" naming the sender's own tenant) with body `body`. It is part of this
 * event's batch: it exists only if the event commits, and is then delivered at least once and
 * applied exactly once, after every earlier message from this actor to the same receiver.
 * Returns the message's sequence number (> 0, increasing per sender). A bad name, another
 * tenant, a body over actors.max_message_bytes or more than actors.max_messages_per_event
 * sends fail the event. */
WK_IMPORT(message_send) int64_t wk_message_send(const void* to, uint32_t to_len, const void* body, uint32_t body_len);
/* In wk_on_message: puts field WK_MESSAGE_* in the result buffer and returns its length;
 * -1 outside a message event. */
WK_IMPORT(message_get) int32_t wk_message_get(int32_t field);
/* In wk_on_message: the message's sequence number (per sender); 0 outside a message event. */
WK_IMPORT(message_seq) int64_t wk_message_seq(void);
/* In wk_on_message: how many earlier runs of this message failed (0 on the first). */
WK_IMPORT(message_retry_count) int32_t wk_message_retry_count(void);

/* Kinds of a WebSocket message (socket_event_kind in wk_on_socket_message) and of a send. */
enum {
  WK_SOCKET_TEXT = 1,  /* a text message: valid UTF-8 (the node closes a client that sends anything else) */
  WK_SOCKET_BINARY = 2 /* a binary message */
};

/* Close codes (RFC 6455). An actor may close with WK_SOCKET_CLOSE_NORMAL or 3000..4999; the
 * others are what wk_on_socket_close may see. */
enum {
  WK_SOCKET_CLOSE_NORMAL = 1000,
  WK_SOCKET_CLOSE_GOING_AWAY = 1001, /* the client left, or the node stops */
  WK_SOCKET_CLOSE_NO_STATUS = 1005,  /* the close frame had no code */
  WK_SOCKET_CLOSE_ABNORMAL = 1006,   /* the connection ended without a close frame */
  WK_SOCKET_CLOSE_RESTART = 1012     /* the actor's owner changed: the client should reconnect */
};

/* Most bytes of a close reason (a close frame's payload less its code). */
#define WK_SOCKET_MAX_CLOSE_REASON_BYTES 123

/* WebSockets (docs/abi.md "WebSockets", docs/sdk.md "WebSockets"). Additions to wasmkeep_v1: a
 * module that imports them needs a node that holds WebSockets, and an older node refuses it.
 * A connection is an int64_t id. What an event sends (wk_socket_send, wk_socket_broadcast,
 * wk_socket_close) leaves only after the event's writes are durable, in the order the event
 * made the calls, and not at all if the event fails: calls succeed here without sending yet. */
/* The connection of this socket event (wk_on_socket_open, _message, _close); -1 in another event. */
WK_IMPORT(socket_event_id) int64_t wk_socket_event_id(void);
/* In wk_on_socket_message: WK_SOCKET_TEXT or WK_SOCKET_BINARY; in wk_on_socket_close: the
 * close code received (WK_SOCKET_CLOSE_NO_STATUS, WK_SOCKET_CLOSE_ABNORMAL, ...); 0 in
 * wk_on_socket_open; -1 in another event. */
WK_IMPORT(socket_event_kind) int32_t wk_socket_event_kind(void);
/* Puts the message (wk_on_socket_message) or the close reason (wk_on_socket_close) in the
 * result buffer and returns its length; -1 in another event. */
WK_IMPORT(socket_event_data) int32_t wk_socket_event_data(void);
/* Queues a message to connection id: text if binary is 0 (it should be UTF-8), binary
 * otherwise. Returns 1 if queued, 0 if id is not one of the actor's open connections. A
 * message over websockets.max_message_bytes fails the event. */
WK_IMPORT(socket_send) int32_t wk_socket_send(int64_t id, const void* data, uint32_t len, int32_t binary);
/* Queues one message to every open connection of the actor with the tag (tag_len 0: all of
 * them); returns how many. */
WK_IMPORT(socket_broadcast) int32_t wk_socket_broadcast(const void* tag, uint32_t tag_len, const void* data, uint32_t len, int32_t binary);
/* Closes connection id with code (1000, or 3000..4999) and a reason of at most
 * WK_SOCKET_MAX_CLOSE_REASON_BYTES (anything else fails the event), after what this event
 * sent before. Returns 1, or 0 if id is not one of the actor's open connections. */
WK_IMPORT(socket_close) int32_t wk_socket_close(int64_t id, int32_t code, const void* reason, uint32_t reason_len);
/* Adds a tag (1 to 64 bytes, no '\n') to connection id; returns 1, or 0 if id is not one of
 * the actor's open connections. A ninth tag, or a bad one, fails the event. */
WK_IMPORT(socket_tag) int32_t wk_socket_tag(int64_t id, const void* tag, uint32_t tag_len);
/* Puts the ids of the actor's open connections with the tag (tag_len 0: all of them) in the
 * result buffer, 8 bytes each, little-endian, in the order they opened; returns how many
 * (see wk_socket_list_dup). */
WK_IMPORT(socket_list) int32_t wk_socket_list(const void* tag, uint32_t tag_len);
/* Puts the tags of connection id in the result buffer, each followed by '\n', and returns
 * the length; -1 if id is not one of the actor's open connections. */
WK_IMPORT(socket_tags) int32_t wk_socket_tags(int64_t id);

/* Returns wall-clock time in ms since the Unix epoch. */
WK_IMPORT(now_ms) int64_t wk_now_ms(void);
/* Fills dst with cryptographically strong random bytes (len <= WK_RANDOM_FILL_MAX_BYTES). */
WK_IMPORT(random_fill) void wk_random_fill(void* dst, uint32_t len);
/* Writes one line to the node's log at level WK_LOG_* (cut at 4 KiB). */
WK_IMPORT(log) void wk_log(int32_t level, const void* msg, uint32_t msg_len);
/* Commits this event's writes so far and waits until they are durable; returns 0, or 1 if durability failed (the event then fails). */
WK_IMPORT(sync) int32_t wk_sync(void);

/* ---- Helpers. ---- */

/* malloc that traps instead of returning NULL (an actor out of memory cannot answer). */
static inline void* wk_xmalloc(size_t size) {
  void* p = malloc(size ? size : 1);
  if (p == NULL) abort();
  return p;
}

/* Copies the first len bytes of the result buffer into a new NUL-terminated buffer; NULL if len < 0 (the host's "absent"). */
static inline char* wk_result_dup(int32_t len, size_t* out_len) {
  if (out_len != NULL) *out_len = 0;
  if (len < 0) return NULL;
  char* buf = (char*)wk_xmalloc((size_t)len + 1);
  int32_t got = len > 0 ? wk_result_read(buf, (uint32_t)len) : 0;
  buf[got] = '\0';
  if (out_len != NULL) *out_len = (size_t)got;
  return buf;
}

/* Returns request field WK_REQUEST_* in a new buffer (never NULL). */
static inline char* wk_request_dup(int32_t field, size_t* out_len) {
  return wk_result_dup(wk_request_get(field), out_len);
}

/* Returns the value of request header name in a new buffer, or NULL if the request has none. */
static inline char* wk_request_header_dup(const char* name, size_t* out_len) {
  return wk_result_dup(wk_request_header(name, (uint32_t)strlen(name)), out_len);
}

/* Returns the value stored under key in a new buffer, or NULL if the key is absent. */
static inline char* wk_storage_get_dup(const void* key, size_t key_len, size_t* out_len) {
  return wk_result_dup(wk_storage_get(key, (uint32_t)key_len), out_len);
}

/* wk_storage_get_dup for a C-string key. */
static inline char* wk_storage_get_str(const char* key, size_t* out_len) {
  return wk_storage_get_dup(key, strlen(key), out_len);
}

/* Stores C string value under C-string key. */
static inline void wk_storage_put_str(const char* key, const char* value) {
  wk_storage_put(key, (uint32_t)strlen(key), value, (uint32_t)strlen(value));
}

/* Sends C-string body to the actor named by C string to (see wk_message_send); returns the
 * message's sequence number. */
static inline int64_t wk_message_send_str(const char* to, const char* body) {
  return wk_message_send(to, (uint32_t)strlen(to), body, (uint32_t)strlen(body));
}

/* In wk_on_message: message field WK_MESSAGE_* in a new buffer; NULL outside a message event. */
static inline char* wk_message_dup(int32_t field, size_t* out_len) {
  return wk_result_dup(wk_message_get(field), out_len);
}

/* In wk_on_socket_message: the message in a new buffer (kind: wk_socket_event_kind()); in
 * wk_on_socket_close: the close reason. NULL in another event. */
static inline char* wk_socket_event_data_dup(size_t* out_len) {
  return wk_result_dup(wk_socket_event_data(), out_len);
}

/* Queues C string text as a text message to connection id (see wk_socket_send). */
static inline int32_t wk_socket_send_str(int64_t id, const char* text) {
  return wk_socket_send(id, text, (uint32_t)strlen(text), 0);
}

/* Queues C string text as a text message to every connection tagged tag ("" for all). */
static inline int32_t wk_socket_broadcast_str(const char* tag, const char* text) {
  return wk_socket_broadcast(tag, (uint32_t)strlen(tag), text, (uint32_t)strlen(text), 0);
}

/* Closes connection id with code and C-string reason (see wk_socket_close). */
static inline int32_t wk_socket_close_str(int64_t id, int32_t code, const char* reason) {
  return wk_socket_close(id, code, reason, (uint32_t)strlen(reason));
}

/* Adds C-string tag to connection id (see wk_socket_tag). */
static inline int32_t wk_socket_tag_str(int64_t id, const char* tag) {
  return wk_socket_tag(id, tag, (uint32_t)strlen(tag));
}

/* The ids of the actor's open connections tagged tag (tag_len 0: all), in the order they
 * opened, in a new array of *out_count ids (free it; never NULL). */
static inline int64_t* wk_socket_list_dup(const void* tag, size_t tag_len, size_t* out_count) {
  int32_t count = wk_socket_list(tag, (uint32_t)tag_len);
  size_t n = count > 0 ? (size_t)count : 0;
  uint8_t* raw = (uint8_t*)wk_xmalloc(n * 8);
  size_t got = n > 0 ? (size_t)wk_result_read(raw, (uint32_t)(n * 8)) : 0;
  if (got < n * 8) abort(); /* the host broke the encoding of docs/abi.md */
  int64_t* ids = (int64_t*)wk_xmalloc(n * sizeof(int64_t));
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | raw[i * 8 + (size_t)b];
    ids[i] = (int64_t)v;
  }
  free(raw);
  if (out_count != NULL) *out_count = n;
  return ids;
}

/* The tags of connection id in a new buffer, each followed by '\n'; NULL if id is not one
 * of the actor's open connections. */
static inline char* wk_socket_tags_dup(int64_t id, size_t* out_len) {
  return wk_result_dup(wk_socket_tags(id), out_len);
}

/* Removes C-string key; returns 1 if it existed, 0 if not. */
static inline int32_t wk_storage_delete_str(const char* key) {
  return wk_storage_delete(key, (uint32_t)strlen(key));
}

/* Adds a response header from two C strings. */
static inline void wk_response_header(const char* name, const char* value) {
  wk_response_add_header(name, (uint32_t)strlen(name), value, (uint32_t)strlen(value));
}

/* Appends a C string to the response body. */
static inline void wk_response_write_str(const char* text) {
  wk_response_write(text, (uint32_t)strlen(text));
}

/* Sets status, Content-Type text/plain and the body text in one call. */
static inline void wk_response_text(int32_t status, const char* text) {
  wk_response_set_status(status);
  wk_response_header("Content-Type", "text/plain; charset=utf-8");
  wk_response_write_str(text);
}

/* Logs a C string at level WK_LOG_*. */
static inline void wk_log_str(int32_t level, const char* msg) { wk_log(level, msg, (uint32_t)strlen(msg)); }
/* Logs a C string at debug level. */
static inline void wk_log_debug(const char* msg) { wk_log_str(WK_LOG_DEBUG, msg); }
/* Logs a C string at info level. */
static inline void wk_log_info(const char* msg) { wk_log_str(WK_LOG_INFO, msg); }
/* Logs a C string at warn level. */
static inline void wk_log_warn(const char* msg) { wk_log_str(WK_LOG_WARN, msg); }
/* Logs a C string at error level. */
static inline void wk_log_error(const char* msg) { wk_log_str(WK_LOG_ERROR, msg); }

/* ---- Listings. ----
 * storage_list leaves `count` entries in the result buffer, each as a 4-byte little-endian
 * key length, the key, a 4-byte little-endian value length, the value. It returns the count,
 * not the byte size, and result_read always copies from the buffer's start, so wk_list_fetch
 * reads with a growing buffer until every entry is inside it. Usage:
 *
 *   wk_list list;
 *   wk_list_fetch(&list, "msg/", 4, NULL, 0, 100, WK_LIST_PREFIX);
 *   wk_list_entry e;
 *   while (wk_list_next(&list, &e)) { ... e.key, e.key_len, e.value, e.value_len ... }
 *   wk_list_free(&list);
 */

/* A fetched listing: the copied result buffer and a read position. */
typedef struct wk_list {
  uint8_t* data;   /* the entries, as the host encoded them (malloc'd) */
  size_t size;     /* bytes in data */
  int32_t count;   /* entries in data */
  int32_t next;    /* index of the entry wk_list_next returns next */
  size_t offset;   /* byte offset of that entry */
} wk_list;

/* One entry of a listing; points into the wk_list's buffer (valid until wk_list_free). */
typedef struct wk_list_entry {
  const char* key;
  size_t key_len;
  const char* value;
  size_t value_len;
} wk_list_entry;

/* Reads a 4-byte little-endian length. */
static inline uint32_t wk_read_le32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Bytes that count entries take if all lie within data[0, size); else a number > size: how far we must read to see more. */
static inline uint64_t wk_list_extent(const uint8_t* data, size_t size, int32_t count) {
  uint64_t pos = 0;
  for (int32_t i = 0; i < count; ++i) {
    for (int part = 0; part < 2; ++part) { /* key, then value */
      if (pos + 4 > size) return pos + 4;
      uint64_t len = wk_read_le32(data + pos);
      pos += 4 + len;
      if (pos > size) return pos;
    }
  }
  return pos;
}

/* Runs storage_list (arguments as in docs/abi.md) and copies its answer into list; returns the entry count. */
static inline int32_t wk_list_fetch(wk_list* list, const void* start, size_t start_len, const void* end,
                                    size_t end_len, int32_t limit, int32_t flags) {
  int32_t count = wk_storage_list(start, (uint32_t)start_len, end, (uint32_t)end_len, limit, flags);
  list->data = NULL;
  list->size = 0;
  list->count = count > 0 ? count : 0;
  list->next = 0;
  list->offset = 0;
  if (count <= 0) return list->count;
  /* A first guess that fits short keys and values in one read; then grow to what the
   * entries read so far show is needed (at least doubling, so few rereads). */
  uint64_t capacity = 256 + (uint64_t)count * 64;
  for (;;) {
    if (capacity > UINT32_MAX) abort();
    free(list->data);
    list->data = (uint8_t*)wk_xmalloc((size_t)capacity);
    size_t got = (size_t)wk_result_read(list->data, (uint32_t)capacity);
    uint64_t extent = wk_list_extent(list->data, got, count);
    if (extent <= got) {
      list->size = (size_t)extent;
      return count;
    }
    /* The host gave us less than we asked for, yet the entries are incomplete: it broke
     * the encoding of docs/abi.md. Trap rather than read garbage. */
    if (got < capacity) abort();
    uint64_t doubled = capacity * 2;
    capacity = extent + 8 > doubled ? extent + 8 : doubled;
  }
}

/* Moves to the next entry of list; returns 1 and fills *entry, or 0 after the last one. */
static inline int wk_list_next(wk_list* list, wk_list_entry* entry) {
  if (list->next >= list->count) return 0;
  const uint8_t* p = list->data + list->offset;
  entry->key_len = wk_read_le32(p);
  entry->key = (const char*)p + 4;
  p += 4 + entry->key_len;
  entry->value_len = wk_read_le32(p);
  entry->value = (const char*)p + 4;
  list->offset += 8 + entry->key_len + entry->value_len;
  list->next++;
  return 1;
}

/* Frees the listing's buffer (entries from it are invalid after this). */
static inline void wk_list_free(wk_list* list) {
  free(list->data);
  list->data = NULL;
  list->size = 0;
  list->count = 0;
  list->next = 0;
  list->offset = 0;
}

/* ---- Exports. ----
 * WK_ON_REQUEST(fn) defines the wk_on_request export as a call of `int fn(void)`: return 0
 * to send the response built with wk_response_*, anything else to fail the event (its
 * storage writes are discarded). WK_ON_ALARM(fn) does the same for wk_on_alarm, which runs at or after the alarm's
 * time, at least once (docs/alarms.md): the alarm is cleared as it starts (set it again to
 * re-arm), and a failure discards its writes and retries it with back-off.
 * WK_ON_MESSAGE(fn) defines wk_on_message, which handles one message from another actor
 * (read it with wk_message_get, wk_message_seq, wk_message_retry_count): 0 applies it, its
 * writes committed together with the record that it was applied, exactly once; anything else
 * (or a trap) discards its writes and the message is retried with back-off, then parked as
 * dead after a bound. Messages from one sender take effect in the order it sent them. A
 * module without it cannot receive messages. Use each at most once per module, at file
 * scope (the socket ones too).
 *
 * WebSockets (docs/sdk.md "WebSockets"); wk_socket_event_id() is the connection in all three:
 * WK_ON_SOCKET_OPEN(fn) defines wk_on_socket_open, run when a client opens a WebSocket to the
 * actor; the request calls read the handshake (method GET, path, query, headers). Return 0
 * and the connection is accepted, unless fn set a response status of 400..599: then it is
 * refused with that response (status, headers, body). Anything else refuses it with 500.
 * WK_ON_SOCKET_MESSAGE(fn) defines wk_on_socket_message, one message on one connection
 * (wk_socket_event_kind, wk_socket_event_data_dup): 0 commits its writes and releases what
 * it sent; anything else discards both and closes that connection with 1011. A module
 * without it takes no WebSockets. WK_ON_SOCKET_CLOSE(fn) defines wk_on_socket_close, run
 * once a connection has ended (the code in wk_socket_event_kind, the reason in
 * wk_socket_event_data_dup): sends to it are dropped.
 */
#define WK_ON_REQUEST(fn) \
  __attribute__((export_name("wk_on_request"))) int32_t wk_export_on_request(void) { return (int32_t)(fn)(); }
#define WK_ON_ALARM(fn) \
  __attribute__((export_name("wk_on_alarm"))) int32_t wk_export_on_alarm(void) { return (int32_t)(fn)(); }
#define WK_ON_MESSAGE(fn) \
  __attribute__((export_name("wk_on_message"))) int32_t wk_export_on_message(void) { return (int32_t)(fn)(); }
/* WK_ON_UPGRADE(fn) defines wk_on_upgrade as a call of `int fn(int32_t from_version)`
 * (docs/sdk.md "Class versions"): run once for an actor whose state an older version of the
 * class committed (from_version: that version's deploy number), before its first event on
 * this one, in a batch of its own: 0 keeps what it wrote and the actor runs this version;
 * anything else (or a trap) discards it and the actor stays on from_version. Only storage
 * calls: no messages, WebSockets or sync. */
#define WK_ON_UPGRADE(fn) \
  __attribute__((export_name("wk_on_upgrade"))) int32_t wk_export_on_upgrade(int32_t from_version) { \
    return (int32_t)(fn)(from_version);                                                              \
  }

#define WK_ON_SOCKET_OPEN(fn) \
  __attribute__((export_name("wk_on_socket_open"))) int32_t wk_export_on_socket_open(void) { return (int32_t)(fn)(); }
#define WK_ON_SOCKET_MESSAGE(fn) \
  __attribute__((export_name("wk_on_socket_message"))) int32_t wk_export_on_socket_message(void) { return (int32_t)(fn)(); }
#define WK_ON_SOCKET_CLOSE(fn) \
  __attribute__((export_name("wk_on_socket_close"))) int32_t wk_export_on_socket_close(void) { return (int32_t)(fn)(); }

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* WASMKEEP_H_ */
