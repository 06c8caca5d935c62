// wasmkeep.hpp: the C++ layer of the WasmKeep actor SDK, ABI v1 (docs/abi.md, docs/sdk.md).
//
// Contract:
// - A thin, header-only layer over wasmkeep.h: std::string in and out, std::optional for
//   "absent", no host state cached beyond one event. Needs C++17 (C++20 for designated
//   initializers such as `storage::list({.prefix = "msg/"})`); builds with -fno-exceptions.
// - Request reads each field from the host on first use and keeps it for the event;
//   Response passes every call straight to the host (there is no buffering: the host holds
//   the response and sends it only when the handler returns 0 and the event's writes are
//   durable).
// - Errors that are the actor's own bug (a key over max_key_bytes, a bad status code, a body
//   over max_response_bytes) fail the event in the host, as docs/abi.md says; nothing here
//   reports them as values. Allocation failure traps (no exceptions), which fails the event.
// - One event at a time on one thread: nothing here is thread-safe, and nothing needs to be.
//
// A handler:
//
//   #include "wasmkeep.hpp"
//   static void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
//     res.text(200, "hello " + std::string(req.path()) + "\n");
//   }
//   WASMKEEP_REQUEST_HANDLER(Handle)
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "wasmkeep.h"

namespace wasmkeep {

namespace detail {

// Copies `len` bytes of the result buffer (len < 0 is the host's "absent").
inline std::optional<std::string> TakeResult(int32_t len) {
  if (len < 0) return std::nullopt;
  std::string out(static_cast<size_t>(len), '\0');
  if (len > 0) out.resize(static_cast<size_t>(wk_result_read(out.data(), static_cast<uint32_t>(len))));
  return out;
}

inline int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline uint32_t Len(std::string_view s) { return static_cast<uint32_t>(s.size()); }

}  // namespace detail

// Decodes %XX escapes (and '+' as a space, as in form-encoded query strings). A '%' not
// followed by two hex digits is kept as it is.
inline std::string url_decode(std::string_view in, bool plus_as_space = true) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%' && i + 2 < in.size()) {
      int hi = detail::HexDigit(in[i + 1]);
      int lo = detail::HexDigit(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_as_space && c == '+' ? ' ' : c);
  }
  return out;
}

// Parses a whole string as a decimal int64 ("-12", "0"); nullopt for anything else.
inline std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (text.empty() || ec != std::errc() || ptr != last) return std::nullopt;
  return value;
}

// Whether bytes are valid UTF-8 (RFC 3629: shortest forms only, no surrogates, nothing above
// U+10FFFF): what a WebSocket text message must hold (Socket::send), so bytes that fail it
// go out with send_binary.
inline bool is_utf8(std::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    uint32_t c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t need;
    uint32_t min, cp;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1, min = 0x80, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2, min = 0x800, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i <= need) return false;  // cut short
    for (size_t k = 1; k <= need; ++k) {
      uint32_t cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += need + 1;
  }
  return true;
}

// The request of the current event. Only the SDK's handler macro creates one.
class Request {
 public:
  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // "GET", "POST", ...
  const std::string& method() const { return Field(WK_REQUEST_METHOD, method_); }
  // The part of the URL path after the actor's name: "/increment", "/", or "".
  const std::string& path() const { return Field(WK_REQUEST_PATH, path_); }
  // The query string without '?', still encoded ("prefix=a%2Fb&limit=10").
  const std::string& query() const { return Field(WK_REQUEST_QUERY, query_); }
  // The request body (binary-safe).
  const std::string& body() const { return Field(WK_REQUEST_BODY, body_); }

  // The value of a request header (name compared case-insensitively), or nullopt.
  std::optional<std::string> header(std::string_view name) const {
    return detail::TakeResult(wk_request_header(name.data(), detail::Len(name)));
  }

  // Every header as (lowercase name, value), in the order the host gives them.
  std::vector<std::pair<std::string, std::string>> headers() const {
    std::string all = detail::TakeResult(wk_request_get(WK_REQUEST_HEADERS)).value_or("");
    std::vector<std::pair<std::string, std::string>> out;
    size_t pos = 0;
    while (pos < all.size()) {
      size_t eol = all.find('\n', pos);
      if (eol == std::string::npos) eol = all.size();
      std::string_view line(all.data() + pos, eol - pos);
      size_t colon = line.find(": ");
      if (colon != std::string_view::npos) {
        out.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 2)));
      }
      pos = eol + 1;
    }
    return out;
  }

  // The first query parameter called `name` (names and values URL-decoded); "" for a name
  // without '='; nullopt if absent.
  std::optional<std::string> query_param(std::string_view name) const {
    std::string_view q = query();
    while (!q.empty()) {
      size_t amp = q.find('&');
      std::string_view part = q.substr(0, amp);
      q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
      if (part.empty()) continue;
      size_t eq = part.find('=');
      std::string_view raw_name = part.substr(0, eq);
      if (url_decode(raw_name) != name) continue;
      return eq == std::string_view::npos ? std::string() : url_decode(part.substr(eq + 1));
    }
    return std::nullopt;
  }

 private:
  static const std::string& Field(int32_t field, std::optional<std::string>& cache) {
    if (!cache) cache = detail::TakeResult(wk_request_get(field)).value_or("");
    return *cache;
  }

  mutable std::optional<std::string> method_;
  mutable std::optional<std::string> path_;
  mutable std::optional<std::string> query_;
  mutable std::optional<std::string> body_;
};

// The response of the current event: starts as 200, no headers, empty body. The caller
// gets it only if the handler returns 0 (or void).
class Response {
 public:
  Response() = default;
  Response(const Response&) = delete;
  Response& operator=(const Response&) = delete;

  // Sets the status (200..599; anything else, a 1xx included, fails the event).
  Response& status(int code) {
    wk_response_set_status(code);
    return *this;
  }
  // Adds a header (name an HTTP token; value without CR, LF, NUL, else the event fails).
  Response& header(std::string_view name, std::string_view value) {
    wk_response_add_header(name.data(), detail::Len(name), value.data(), detail::Len(value));
    return *this;
  }
  // Appends to the body (at most actors.max_response_bytes in all).
  Response& write(std::string_view data) {
    wk_response_write(data.data(), detail::Len(data));
    return *this;
  }
  // Status, "Content-Type: text/plain; charset=utf-8" and body in one call.
  Response& text(int code, std::string_view body) {
    return status(code).header("Content-Type", "text/plain; charset=utf-8").write(body);
  }
};

// The actor's storage: a sorted map of byte-string keys (1 to max_key_bytes) to values
// (0 to max_value_bytes). Every call of one event is part of one atomic batch, committed
// when the handler succeeds (docs/abi.md "Storage").
namespace storage {

// What to list. Prefix mode when `prefix` is not empty (start and end are then ignored);
// otherwise range mode: keys >= start and < end, an empty end meaning no upper bound (so
// the default lists every key).
struct ListOptions {
  std::string prefix;
  std::string start;
  std::string end;
  int32_t limit = 0;     // at most this many entries; <= 0: no limit
  bool reverse = false;  // descending key order
};

// The value under key, or nullopt if absent.
inline std::optional<std::string> get(std::string_view key) {
  return detail::TakeResult(wk_storage_get(key.data(), detail::Len(key)));
}

// Sets key to value.
inline void put(std::string_view key, std::string_view value) {
  wk_storage_put(key.data(), detail::Len(key), value.data(), detail::Len(value));
}

// Removes key; true if it existed.
inline bool del(std::string_view key) { return wk_storage_delete(key.data(), detail::Len(key)) == 1; }

// Removes every key of this actor (the alarm is kept).
inline void delete_all() { wk_storage_delete_all(); }

// The entries options selects, in key order (descending if reverse), in one host call. The
// whole listing, values included, is copied into the actor's memory: bound it with limit
// (or use for_each) when values are large or many.
inline std::vector<std::pair<std::string, std::string>> list(const ListOptions& options = {}) {
  wk_list listing;
  const bool prefix_mode = !options.prefix.empty();
  const std::string& start = prefix_mode ? options.prefix : options.start;
  const std::string_view end = prefix_mode ? std::string_view() : std::string_view(options.end);
  int32_t flags = (prefix_mode ? WK_LIST_PREFIX : 0) | (options.reverse ? WK_LIST_REVERSE : 0);
  wk_list_fetch(&listing, start.data(), start.size(), end.data(), end.size(), options.limit, flags);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(static_cast<size_t>(listing.count));
  wk_list_entry entry;
  while (wk_list_next(&listing, &entry)) {
    out.emplace_back(std::string(entry.key, entry.key_len), std::string(entry.value, entry.value_len));
  }
  wk_list_free(&listing);
  return out;
}

// The first key after every key that begins with prefix ("msg/" -> "msg0"), for range
// listings over a prefix; "" (no upper bound) if there is none (prefix empty or all 0xFF).
inline std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xFF) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

// Calls fn(key, value) for each entry options selects, in order, fetching page_size entries
// per host call so memory stays bounded by the page, not the listing. fn returns void, or
// bool (false stops). The views are valid only during the call. options.limit still bounds
// the total.
template <typename Fn>
void for_each(const ListOptions& options, Fn&& fn, int32_t page_size = 32) {
  if (page_size <= 0) page_size = 32;
  // Range bounds: [low, high), high empty = unbounded. A prefix becomes its range.
  std::string low = options.prefix.empty() ? options.start : options.prefix;
  std::string high = options.prefix.empty() ? options.end : prefix_end(options.prefix);
  int64_t remaining = options.limit > 0 ? options.limit : INT64_MAX;
  while (remaining > 0) {
    int32_t want = remaining < page_size ? static_cast<int32_t>(remaining) : page_size;
    wk_list listing;
    int32_t got = wk_list_fetch(&listing, low.data(), low.size(), high.data(), high.size(), want,
                                options.reverse ? WK_LIST_REVERSE : 0);
    wk_list_entry entry;
    std::string last;
    bool stop = false;
    while (!stop && wk_list_next(&listing, &entry)) {
      std::string_view key(entry.key, entry.key_len);
      std::string_view value(entry.value, entry.value_len);
      if constexpr (std::is_same_v<decltype(fn(key, value)), void>) {
        fn(key, value);
      } else {
        stop = !fn(key, value);
      }
      last.assign(key);
    }
    wk_list_free(&listing);
    remaining -= got;
    if (stop || got < want) return;
    if (options.reverse) {
      high = std::move(last);  // exclusive: the next page ends before the last key seen
    } else {
      low = std::move(last);
      low.push_back('\0');  // the smallest key after the last one seen
    }
  }
}

// The int64 stored as decimal text under key; nullopt if absent. A value that is not a
// decimal int64 is this actor's own bug: it is logged and the event traps.
inline std::optional<int64_t> get_int64(std::string_view key) {
  std::optional<std::string> text = get(key);
  if (!text) return std::nullopt;
  std::optional<int64_t> value = parse_int64(*text);
  if (!value) {
    std::string msg = "storage::get_int64: the value under \"" + std::string(key) + "\" is not a decimal int64";
    wk_log(WK_LOG_ERROR, msg.data(), detail::Len(msg));
    __builtin_trap();
  }
  return value;
}

// Stores value as decimal text under key.
inline void put_int64(std::string_view key, int64_t value) { put(key, std::to_string(value)); }

}  // namespace storage

// The actor's one alarm, stored with its state. When it comes due the node runs the
// WASMKEEP_ALARM_HANDLER, at least once (docs/alarms.md).
namespace alarm {
// Sets or replaces the alarm (ms since the Unix epoch, >= 0).
inline void set(int64_t time_ms) { wk_alarm_set(time_ms); }
// The alarm's time, or nullopt if none is set.
inline std::optional<int64_t> get() {
  int64_t t = wk_alarm_get();
  if (t < 0) return std::nullopt;
  return t;
}
// Removes the alarm.
inline void del() { wk_alarm_delete(); }
// In the alarm handler: how many times this alarm's handler failed before this run (0 on
// its first run); -1 outside the alarm handler.
inline int32_t retry_count() { return wk_alarm_retry_count(); }
// In the alarm handler: whether this run is a retry after a failed one.
inline bool is_retry() { return wk_alarm_retry_count() > 0; }
}  // namespace alarm

// Sends a message to another actor of this tenant: `to` is "class/name" or
// "tenant/class/name" (the tenant must be this actor's own). The message is part of this
// event's batch: it exists only if the event succeeds, and is then delivered at least once
// and applied exactly once by the receiver's WASMKEEP_MESSAGE_HANDLER, after every earlier
// message from this actor to the same receiver. Returns its sequence number (> 0, increasing
// per sender). A bad name, another tenant, a body over actors.max_message_bytes (64 KiB by
// default) or more than actors.max_messages_per_event sends (64) fail the event. A reply is
// a message back: send(msg.sender(), ...).
inline int64_t send(std::string_view to, std::string_view body) {
  return wk_message_send(to.data(), detail::Len(to), body.data(), detail::Len(body));
}

// The message of the current message event. Only the SDK's message handler macro creates
// one; each field is read from the host on first use and kept for the event.
class Message {
 public:
  Message() = default;
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;

  // The sender's full name, "tenant/class/name".
  const std::string& sender() const { return Field(WK_MESSAGE_SENDER, sender_); }
  // The body (binary-safe).
  const std::string& body() const { return Field(WK_MESSAGE_BODY, body_); }
  // The sequence number the sender's send() returned (per sender: 1, 2, 3, ... in the
  // order it sent them, with gaps for messages of its events that failed).
  int64_t seq() const { return wk_message_seq(); }
  // How many earlier runs of this message failed (0 on its first run).
  int32_t retry_count() const { return wk_message_retry_count(); }
  // Whether this run is a retry after a failed one.
  bool is_retry() const { return retry_count() > 0; }

 private:
  static const std::string& Field(int32_t field, std::optional<std::string>& cache) {
    if (!cache) cache = detail::TakeResult(wk_message_get(field)).value_or("");
    return *cache;
  }

  mutable std::optional<std::string> sender_;
  mutable std::optional<std::string> body_;
};

// ---- WebSockets (docs/sdk.md "WebSockets", docs/abi.md "WebSockets").
// Clients open WebSockets to the actor's paths; the node holds the connections, not the
// instance, so they stay open while the actor leaves memory (hibernation): keep what a
// connection needs in its tags or in storage, never in globals. What an event sends
// (send, send_binary, close, sockets::broadcast) leaves only after the event's writes are
// durable, in the order the event made the calls, and not at all if the event fails. A
// module that uses any of it imports the socket_* additions to wasmkeep_v1: a node without
// WebSockets refuses it.

// One of the actor's WebSocket connections: a value (its id), cheap to copy and to keep in
// storage (id() as decimal text). The calls on a connection that is no longer open do
// nothing and say so (false, nullopt).
class Socket {
 public:
  explicit constexpr Socket(int64_t id) : id_(id) {}

  // The connection of the current socket event (open, message or close); nullopt in
  // another event.
  static std::optional<Socket> current() {
    int64_t id = wk_socket_event_id();
    if (id == -1) return std::nullopt;
    return Socket(id);
  }

  // The connection's id: unique on the node, across its restarts too.
  constexpr int64_t id() const { return id_; }

  // Queues a text message: it should be UTF-8 (is_utf8), as clients close a connection on
  // anything else. False if the connection is not open (nothing queued). A message over
  // websockets.max_message_bytes fails the event.
  bool send(std::string_view text) const { return Send(text, false); }
  // Queues a binary message; as send otherwise.
  bool send_binary(std::string_view data) const { return Send(data, true); }

  // Closes the connection with code (1000, or 3000..4999) and a reason of at most 123 bytes
  // (anything else fails the event), after what this event sent to it before. False if it
  // is not open.
  bool close(int32_t code = WK_SOCKET_CLOSE_NORMAL, std::string_view reason = {}) const {
    return wk_socket_close(id_, code, reason.data(), detail::Len(reason)) == 1;
  }

  // Adds a tag (1 to 64 bytes, no '\n'; at most 8 per connection, else the event fails),
  // seen by the rest of the event at once and kept if it succeeds. False if not open.
  bool tag(std::string_view tag) const { return wk_socket_tag(id_, tag.data(), detail::Len(tag)) == 1; }

  // The connection's tags, as the host lists them; nullopt if it is not open.
  std::optional<std::vector<std::string>> tags() const {
    std::optional<std::string> all = detail::TakeResult(wk_socket_tags(id_));
    if (!all) return std::nullopt;
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < all->size()) {
      size_t eol = all->find('\n', pos);
      if (eol == std::string::npos) eol = all->size();
      out.emplace_back(all->substr(pos, eol - pos));
      pos = eol + 1;
    }
    return out;
  }

  // Whether the connection is open and has the tag.
  bool has_tag(std::string_view tag) const {
    std::optional<std::vector<std::string>> all = tags();
    if (!all) return false;
    for (const std::string& t : *all) {
      if (t == tag) return true;
    }
    return false;
  }

  friend bool operator==(const Socket& a, const Socket& b) { return a.id_ == b.id_; }
  friend bool operator!=(const Socket& a, const Socket& b) { return a.id_ != b.id_; }

 private:
  bool Send(std::string_view data, bool binary) const {
    return wk_socket_send(id_, data.data(), detail::Len(data), binary ? 1 : 0) == 1;
  }

  int64_t id_;
};

namespace sockets {

// The actor's open connections with the tag (empty: all of them), in the order they opened:
// those open when the event started, plus the one it opens.
inline std::vector<Socket> list(std::string_view tag = {}) {
  int32_t count = wk_socket_list(tag.data(), detail::Len(tag));
  std::vector<Socket> out;
  if (count <= 0) return out;
  std::string raw(static_cast<size_t>(count) * 8, '\0');
  size_t got = static_cast<size_t>(wk_result_read(raw.data(), static_cast<uint32_t>(raw.size())));
  if (got < raw.size()) __builtin_trap();  // the host broke the encoding of docs/abi.md
  out.reserve(static_cast<size_t>(count));
  for (size_t i = 0; i < raw.size(); i += 8) {
    uint64_t v = 0;
    for (size_t b = 8; b-- > 0;) v = (v << 8) | static_cast<unsigned char>(raw[i + b]);
    out.emplace_back(static_cast<int64_t>(v));
  }
  return out;
}

// Queues one message to every open connection with the tag (empty: all of them), text
// unless binary; returns how many. The message's bytes are held once, whatever the count.
inline int32_t broadcast(std::string_view tag, std::string_view data, bool binary = false) {
  return wk_socket_broadcast(tag.data(), detail::Len(tag), data.data(), detail::Len(data), binary ? 1 : 0);
}

}  // namespace sockets

// The message of the current wk_on_socket_message event. Only the SDK's handler macro
// creates one; the data is read from the host on first use and kept for the event.
class SocketMessage {
 public:
  SocketMessage() = default;
  SocketMessage(const SocketMessage&) = delete;
  SocketMessage& operator=(const SocketMessage&) = delete;

  // WK_SOCKET_TEXT or WK_SOCKET_BINARY.
  int32_t kind() const { return wk_socket_event_kind(); }
  bool is_text() const { return kind() == WK_SOCKET_TEXT; }
  bool is_binary() const { return kind() == WK_SOCKET_BINARY; }
  // The message's bytes (a text message is valid UTF-8: the node closes a client that sends
  // anything else, with 1007).
  const std::string& data() const {
    if (!data_) data_ = detail::TakeResult(wk_socket_event_data()).value_or("");
    return *data_;
  }

 private:
  mutable std::optional<std::string> data_;
};

// How a connection ended, in the wk_on_socket_close event. Only the SDK's handler macro
// creates one.
class SocketClose {
 public:
  SocketClose() = default;
  SocketClose(const SocketClose&) = delete;
  SocketClose& operator=(const SocketClose&) = delete;

  // The close code received: the client's, WK_SOCKET_CLOSE_NO_STATUS (1005) when its close
  // frame had none, WK_SOCKET_CLOSE_ABNORMAL (1006) when the connection ended without one.
  int32_t code() const { return wk_socket_event_kind(); }
  // The close reason received ("" if none).
  const std::string& reason() const {
    if (!reason_) reason_ = detail::TakeResult(wk_socket_event_data()).value_or("");
    return *reason_;
  }

 private:
  mutable std::optional<std::string> reason_;
};

// Wall-clock time, ms since the Unix epoch.
inline int64_t now_ms() { return wk_now_ms(); }

// n cryptographically strong random bytes.
inline std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  for (size_t done = 0; done < n;) {
    size_t chunk = n - done < WK_RANDOM_FILL_MAX_BYTES ? n - done : WK_RANDOM_FILL_MAX_BYTES;
    wk_random_fill(out.data() + done, static_cast<uint32_t>(chunk));
    done += chunk;
  }
  return out;
}

// Commits this event's writes so far and waits until they are durable (exec-durable).
// False if durability failed; the event then fails as a whole whatever the handler does.
inline bool sync() { return wk_sync() == 0; }

// One line each in the node's log, attributed to the actor (cut at 4 KiB).
namespace log {
inline void debug(std::string_view msg) { wk_log(WK_LOG_DEBUG, msg.data(), detail::Len(msg)); }
inline void info(std::string_view msg) { wk_log(WK_LOG_INFO, msg.data(), detail::Len(msg)); }
inline void warn(std::string_view msg) { wk_log(WK_LOG_WARN, msg.data(), detail::Len(msg)); }
inline void error(std::string_view msg) { wk_log(WK_LOG_ERROR, msg.data(), detail::Len(msg)); }
}  // namespace log

namespace detail {
// Runs a handler returning void (success) or an int (0 success, else the event fails).
template <typename Fn, typename... Args>
int32_t RunHandler(Fn&& fn, Args&&... args) {
  if constexpr (std::is_void_v<decltype(fn(std::forward<Args>(args)...))>) {
    fn(std::forward<Args>(args)...);
    return 0;
  } else {
    return static_cast<int32_t>(fn(std::forward<Args>(args)...));
  }
}
}  // namespace detail

}  // namespace wasmkeep

// Defines the wk_on_request export as a call of fn, which is
//   void fn(const wasmkeep::Request&, wasmkeep::Response&)   (always succeeds), or
//   int  fn(const wasmkeep::Request&, wasmkeep::Response&)   (0 succeeds; anything else
//        fails the event: the caller gets an error and the event's writes are discarded).
// Use once per module, at file scope.
#define WASMKEEP_REQUEST_HANDLER(fn)                                 \
  __attribute__((export_name("wk_on_request"))) int32_t wk_export_on_request() { \
    wasmkeep::Request wasmkeep_request;                               \
    wasmkeep::Response wasmkeep_response;                             \
    return wasmkeep::detail::RunHandler(fn, wasmkeep_request, wasmkeep_response); \
  }

// Defines the wk_on_alarm export as a call of `void fn()` or `int fn()` (0 succeeds). It
// runs at or after the alarm's time, at least once; the alarm is cleared as it starts
// (alarm::set re-arms it), and a failure discards its writes and is retried with back-off
// (alarm::retry_count()).
#define WASMKEEP_ALARM_HANDLER(fn) \
  __attribute__((export_name("wk_on_alarm"))) int32_t wk_export_on_alarm() { return wasmkeep::detail::RunHandler(fn); }

// Defines the wk_on_upgrade export as a call of `void fn(int from_version)` or
// `int fn(int from_version)` (0 succeeds): it converts the state an older version of the
// class committed (from_version: that version's deploy number) once, before the actor's first
// event on this version, in a batch of its own. A failure (non-zero, a trap) discards its
// writes and the actor stays on from_version, answering as before. Storage calls only: no
// messages, WebSockets or sync. Use once per module, at file scope.
#define WASMKEEP_UPGRADE_HANDLER(fn)                                                            \
  __attribute__((export_name("wk_on_upgrade"))) int32_t wk_export_on_upgrade(int32_t from_version) { \
    return wasmkeep::detail::RunHandler(fn, static_cast<int>(from_version));                   \
  }

// Defines the wk_on_message export as a call of `void fn(const wasmkeep::Message&)` or
// `int fn(const wasmkeep::Message&)` (0 succeeds). It handles one message from another
// actor: on success its writes commit together with the record that the message was
// applied, so it takes effect exactly once; a failure (non-zero, a trap) discards its writes
// and the message is retried with back-off (Message::retry_count()), then parked as dead
// after a bound. Use once per module, at file scope.
#define WASMKEEP_MESSAGE_HANDLER(fn)                                                  \
  __attribute__((export_name("wk_on_message"))) int32_t wk_export_on_message() {      \
    wasmkeep::Message wasmkeep_message;                                              \
    return wasmkeep::detail::RunHandler(fn, wasmkeep_message);                       \
  }

// The WebSocket handlers (docs/sdk.md "WebSockets"). Each is a call of a function returning
// void (success) or int (0 succeeds); use each once per module, at file scope.
//
// WASMKEEP_SOCKET_OPEN_HANDLER(fn), fn(wasmkeep::Socket, const wasmkeep::Request&,
// wasmkeep::Response&): a client opens a WebSocket to the actor; the request is its
// handshake (method GET, path, query, headers, no body). On success the connection is
// accepted, unless fn set a status of 400..599 on the response: then the client gets that
// response instead (a refusal). A failure refuses it with 500 and discards the writes.
// Without this handler every handshake is accepted.
#define WASMKEEP_SOCKET_OPEN_HANDLER(fn)                                                       \
  __attribute__((export_name("wk_on_socket_open"))) int32_t wk_export_on_socket_open() {       \
    wasmkeep::Request wasmkeep_request;                                                        \
    wasmkeep::Response wasmkeep_response;                                                      \
    return wasmkeep::detail::RunHandler(fn, wasmkeep::Socket(wk_socket_event_id()), wasmkeep_request, \
                                        wasmkeep_response);                                    \
  }

// WASMKEEP_SOCKET_MESSAGE_HANDLER(fn), fn(wasmkeep::Socket, const wasmkeep::SocketMessage&):
// one message on one connection. Success commits its writes and releases what it sent; a
// failure discards both and closes that connection with 1011. A module without it takes no
// WebSockets (a handshake is answered 404).
#define WASMKEEP_SOCKET_MESSAGE_HANDLER(fn)                                                    \
  __attribute__((export_name("wk_on_socket_message"))) int32_t wk_export_on_socket_message() { \
    wasmkeep::SocketMessage wasmkeep_socket_message;                                           \
    return wasmkeep::detail::RunHandler(fn, wasmkeep::Socket(wk_socket_event_id()),            \
                                        wasmkeep_socket_message);                              \
  }

// WASMKEEP_SOCKET_CLOSE_HANDLER(fn), fn(wasmkeep::Socket, const wasmkeep::SocketClose&): the
// connection has ended (closed by the client, a bound, the actor, or lost); it is no longer
// in sockets::list and sends to it are dropped. A failure discards its writes.
#define WASMKEEP_SOCKET_CLOSE_HANDLER(fn)                                                      \
  __attribute__((export_name("wk_on_socket_close"))) int32_t wk_export_on_socket_close() {     \
    wasmkeep::SocketClose wasmkeep_socket_close;                                               \
    return wasmkeep::detail::RunHandler(fn, wasmkeep::Socket(wk_socket_event_id()),            \
                                        wasmkeep_socket_close);                                \
  }
