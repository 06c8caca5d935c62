#include "actor/abi.h"

#include <openssl/rand.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "base/ascii.h"
#include "base/log.h"

namespace wk::actor {
namespace {

using engine::HostCall;
using engine::HostFunction;
using V = engine::ValType;

constexpr std::size_t kMaxLogMessageBytes = 4096;
// fd_write takes at most this many bytes per call and reports a short write (libc loops);
// a host call cannot be interrupted by the CPU watchdog, so its work must be bounded.
constexpr std::uint64_t kMaxFdWriteBytesPerCall = 64 * 1024;
constexpr std::uint32_t kMaxRandomBytes = 65536;
constexpr std::string_view kWasiModule = "wasi_snapshot_preview1";

// WASI errno values (preview 1).
constexpr std::int32_t kWasiSuccess = 0, kWasiEbadf = 8, kWasiEinval = 28, kWasiEnotsup = 58,
                       kWasiEspipe = 70, kWasiEnotcapable = 76;

EventContext& Ctx(HostCall& c) { return *static_cast<EventContext*>(c.context()); }

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return out;
}

void PutLe32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

Status WriteLe(HostCall& c, std::string_view what, std::uint32_t ptr, std::uint64_t v, std::uint32_t bytes) {
  auto r = c.Range(what, ptr, bytes);
  if (!r.ok()) return r.status();
  for (std::uint32_t i = 0; i < bytes; ++i) (*r)[i] = static_cast<std::uint8_t>((v >> (8 * i)) & 0xff);
  return Status::Ok();
}

// Sets the result buffer and returns its length to the module.
Status ReturnResult(HostCall& c, std::string value) {
  EventContext& ctx = Ctx(c);
  ctx.result = std::move(value);
  c.ReturnI32(static_cast<std::int32_t>(ctx.result.size()));
  return Status::Ok();
}

void LogActor(EventContext& ctx, log::Level level, std::string_view msg) {
  if (msg.size() > kMaxLogMessageBytes) msg = msg.substr(0, kMaxLogMessageBytes);
  if (msg.size() > ctx.log_budget_bytes) {
    if (!ctx.log_truncated) {
      ctx.log_truncated = true;
      log::Write(log::Level::kWarn, "actor log output over its per-event budget; the rest is dropped",
                 {{"actor", ctx.actor}});
    }
    ctx.log_budget_bytes = 0;
    return;
  }
  ctx.log_budget_bytes -= msg.size();
  log::Write(level, "actor log", {{"actor", ctx.actor}, {"msg", std::string(msg)}});
}

// --- wasmkeep_v1 -----------------------------------------------------------------------

Status ResultRead(HostCall& c) {
  EventContext& ctx = Ctx(c);
  const std::uint32_t n = std::min<std::uint64_t>(c.U32(1), ctx.result.size());
  auto dst = c.Range("destination", c.U32(0), n);
  if (!dst.ok()) return dst.status();
  std::memcpy(dst->data(), ctx.result.data(), n);
  c.ReturnI32(static_cast<std::int32_t>(n));
  return Status::Ok();
}

Status RequestGet(HostCall& c) {
  EventContext& ctx = Ctx(c);
  if (ctx.request == nullptr) return InvalidArgument("request_get: this event is not a request (an alarm)");
  const Request& r = *ctx.request;
  switch (c.I32(0)) {
    case 0: return ReturnResult(c, r.method);
    case 1: return ReturnResult(c, r.path);
    case 2: return ReturnResult(c, r.query);
    case 3: return ReturnResult(c, r.body);
    case 4: {
      std::string all;
      for (const auto& [name, value] : r.headers) all += Lower(name) + ": " + value + "\n";
      return ReturnResult(c, std::move(all));
    }
    default: return InvalidArgument(fmt::format("request_get: unknown field {}", c.I32(0)));
  }
}

Status RequestHeader(HostCall& c) {
  EventContext& ctx = Ctx(c);
  if (ctx.request == nullptr) return InvalidArgument("request_header: this event is not a request (an alarm)");
  auto name = c.Text("name", c.U32(0), c.U32(1));
  if (!name.ok()) return name.status();
  const std::string want = Lower(*name);
  for (const auto& [n, v] : ctx.request->headers) {
    if (Lower(n) == want) return ReturnResult(c, v);
  }
  c.ReturnI32(-1);
  return Status::Ok();
}

Status ResponseSetStatus(HostCall& c) {
  const std::int32_t status = c.I32(0);
  // Only final statuses: a 1xx is not an answer (HTTP would wait for another), so the
  // server could only replace it with a 500, and a 500 must mean "nothing committed"
  // (docs/abi.md). Refused here, the event fails and its writes are discarded.
  if (status < kMinResponseStatus || status > kMaxResponseStatus) {
    return InvalidArgument(fmt::format("response_set_status: {} is not an HTTP status an actor may answer ({}..{})",
                                       status, kMinResponseStatus, kMaxResponseStatus));
  }
  Ctx(c).response.status = status;
  return Status::Ok();
}

Status ResponseAddHeader(HostCall& c) {
  EventContext& ctx = Ctx(c);
  auto name = c.Text("name", c.U32(0), c.U32(1));
  if (!name.ok()) return name.status();
  auto value = c.Text("value", c.U32(2), c.U32(3));
  if (!value.ok()) return value.status();
  if (!IsHttpToken(*name)) return InvalidArgument("response_add_header: the header name is not an HTTP token");
  if (value->find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
    return InvalidArgument("response_add_header: the header value contains CR, LF or NUL");
  }
  ctx.response_bytes += name->size() + value->size();
  if (ctx.response_bytes > ctx.limits->max_response_bytes) {
    return InvalidArgument(fmt::format("response_add_header: the response exceeds max_response_bytes = {}",
                                       ctx.limits->max_response_bytes));
  }
  ctx.response.headers.emplace_back(std::string(*name), std::string(*value));
  return Status::Ok();
}

Status ResponseWrite(HostCall& c) {
  EventContext& ctx = Ctx(c);
  auto data = c.Text("data", c.U32(0), c.U32(1));
  if (!data.ok()) return data.status();
  ctx.response_bytes += data->size();
  if (ctx.response_bytes > ctx.limits->max_response_bytes) {
    return InvalidArgument(fmt::format("response_write: the response body exceeds max_response_bytes = {}",
                                       ctx.limits->max_response_bytes));
  }
  ctx.response.body.append(*data);
  return Status::Ok();
}

Status StorageGet(HostCall& c) {
  EventContext& ctx = Ctx(c);
  auto key = c.Text("key", c.U32(0), c.U32(1));
  if (!key.ok()) return key.status();
  if (auto s = ctx.txn->CheckKey("storage_get", *key); !s.ok()) return s;
  auto value = ctx.txn->Get(*key);
  if (!value) {
    c.ReturnI32(-1);
    return Status::Ok();
  }
  return ReturnResult(c, std::move(*value));
}

Status StoragePut(HostCall& c) {
  EventContext& ctx = Ctx(c);
  auto key = c.Text("key", c.U32(0), c.U32(1));
  if (!key.ok()) return key.status();
  auto value = c.Text("value", c.U32(2), c.U32(3));
  if (!value.ok()) return value.status();
  if (auto s = ctx.txn->CheckKey("storage_put", *key); !s.ok()) return s;
  return ctx.txn->Put(*key, *value);
}

Status StorageDelete(HostCall& c) {
  EventContext& ctx = Ctx(c);
  auto key = c.Text("key", c.U32(0), c.U32(1));
  if (!key.ok()) return key.status();
  if (auto s = ctx.txn->CheckKey("storage_delete", *key); !s.ok()) return s;
  c.ReturnI32(ctx.txn->Delete(*key) ? 1 : 0);
  return Status::Ok();
}

Status StorageDeleteAll(HostCall& c) {
  Ctx(c).txn->DeleteAll();
  return Status::Ok();
}

Status StorageList(HostCall& c) {
  EventContext& ctx = Ctx(c);
  auto start = c.Text("start", c.U32(0), c.U32(1));
  if (!start.ok()) return start.status();
  auto end = c.Text("end", c.U32(2), c.U32(3));
  if (!end.ok()) return end.status();
  const std::int32_t limit = c.I32(4);
  const std::int32_t flags = c.I32(5);
  if ((flags & ~3) != 0) return InvalidArgument(fmt::format("storage_list: unknown flags {:#x}", flags));
  ListQuery q;
  q.start = std::string(*start);
  q.prefix = (flags & 2) != 0;
  if (!q.prefix) q.end = std::string(*end);
  q.reverse = (flags & 1) != 0;
  std::string out;
  std::int32_t count = 0;
  ctx.txn->List(q, limit > 0 ? static_cast<std::uint32_t>(limit) : 0, [&](std::string_view k, std::string_view v) {
    PutLe32(out, static_cast<std::uint32_t>(k.size()));
    out.append(k);
    PutLe32(out, static_cast<std::uint32_t>(v.size()));
    out.append(v);
    ++count;
    return true;
  });
  ctx.result = std::move(out);
  c.ReturnI32(count);
  return Status::Ok();
}

Status AlarmSet(HostCall& c) {
  if (c.I64(0) < 0) return InvalidArgument(fmt::format("alarm_set: time {} is negative", c.I64(0)));
  Ctx(c).txn->SetAlarm(c.I64(0));
  return Status::Ok();
}
Status AlarmGet(HostCall& c) {
  auto a = Ctx(c).txn->Alarm();
  c.ReturnI64(a ? *a : -1);
  return Status::Ok();
}
Status AlarmDelete(HostCall& c) {
  Ctx(c).txn->SetAlarm(std::nullopt);
  return Status::Ok();
}
// Added to wasmkeep_v1 with alarm delivery: a module that does not import it is unchanged.
Status AlarmRetryCount(HostCall& c) {
  c.ReturnI32(Ctx(c).alarm_retry_count);
  return Status::Ok();
}

Status MessageSend(HostCall& c) {
  EventContext& ctx = Ctx(c);
  if (ctx.outbox == nullptr || ctx.self == nullptr) {
    return InvalidArgument("message_send: this event cannot send messages");
  }
  auto to = c.Text("receiver", c.U32(0), c.U32(1));
  if (!to.ok()) return to.status();
  auto body = c.Text("body", c.U32(2), c.U32(3));
  if (!body.ok()) return body.status();
  auto seq = ctx.outbox->Send(*ctx.self, *to, *body, ctx.now_ms);
  if (!seq.ok()) return seq.status();
  c.ReturnI64(static_cast<std::int64_t>(*seq));
  return Status::Ok();
}

Status MessageGet(HostCall& c) {
  EventContext& ctx = Ctx(c);
  if (ctx.message == nullptr) {
    c.ReturnI32(-1);
    return Status::Ok();
  }
  switch (c.I32(0)) {
    case 0: return ReturnResult(c, ctx.message->from.ToString());
    case 1: return ReturnResult(c, ctx.message->body);
    default: return InvalidArgument(fmt::format("message_get: unknown field {}", c.I32(0)));
  }
}

Status MessageSeq(HostCall& c) {
  EventContext& ctx = Ctx(c);
  c.ReturnI64(ctx.message == nullptr ? 0 : static_cast<std::int64_t>(ctx.message->seq));
  return Status::Ok();
}

Status MessageRetryCount(HostCall& c) {
  EventContext& ctx = Ctx(c);
  c.ReturnI32(ctx.message == nullptr ? -1 : ctx.message->retry_count);
  return Status::Ok();
}

// --- WebSockets (docs/abi.md, "WebSockets"; the checks are SocketEventState's) ------------

const SocketEvent* CurrentSocketEvent(EventContext& ctx) {
  return ctx.sockets == nullptr ? nullptr : ctx.sockets->event();
}

Status SocketEventId(HostCall& c) {
  const SocketEvent* e = CurrentSocketEvent(Ctx(c));
  c.ReturnI64(e == nullptr ? -1 : e->id);
  return Status::Ok();
}

Status SocketEventKindOf(HostCall& c) {
  const SocketEvent* e = CurrentSocketEvent(Ctx(c));
  std::int32_t kind = -1;
  if (e != nullptr) {
    switch (e->kind) {
      case SocketEventKind::kOpen: kind = 0; break;
      case SocketEventKind::kMessage: kind = e->binary ? 2 : 1; break;
      case SocketEventKind::kClose: kind = e->code; break;
    }
  }
  c.ReturnI32(kind);
  return Status::Ok();
}

Status SocketEventData(HostCall& c) {
  const SocketEvent* e = CurrentSocketEvent(Ctx(c));
  if (e == nullptr || e->kind == SocketEventKind::kOpen) {
    c.ReturnI32(-1);
    return Status::Ok();
  }
  return ReturnResult(c, e->data);
}

// The event's socket state, or an error for a call made outside the runtime.
Result<SocketEventState*> SocketsOf(HostCall& c, std::string_view fn) {
  EventContext& ctx = Ctx(c);
  if (ctx.sockets == nullptr) return InvalidArgument(fmt::format("{}: this event cannot use WebSockets", fn));
  return ctx.sockets;
}

Status SocketSend(HostCall& c) {
  auto sockets = SocketsOf(c, "socket_send");
  if (!sockets.ok()) return sockets.status();
  auto data = c.Text("message", c.U32(1), c.U32(2));
  if (!data.ok()) return data.status();
  auto sent = (*sockets)->Send(c.I64(0), *data, c.I32(3) != 0);
  if (!sent.ok()) return sent.status();
  c.ReturnI32(*sent);
  return Status::Ok();
}

Status SocketBroadcast(HostCall& c) {
  auto sockets = SocketsOf(c, "socket_broadcast");
  if (!sockets.ok()) return sockets.status();
  auto tag = c.Text("tag", c.U32(0), c.U32(1));
  if (!tag.ok()) return tag.status();
  std::string tag_copy(*tag);  // the next Text may reuse nothing, but keep the two apart
  auto data = c.Text("message", c.U32(2), c.U32(3));
  if (!data.ok()) return data.status();
  auto sent = (*sockets)->Broadcast(tag_copy, *data, c.I32(4) != 0);
  if (!sent.ok()) return sent.status();
  c.ReturnI32(*sent);
  return Status::Ok();
}

Status SocketClose(HostCall& c) {
  auto sockets = SocketsOf(c, "socket_close");
  if (!sockets.ok()) return sockets.status();
  auto reason = c.Text("reason", c.U32(2), c.U32(3));
  if (!reason.ok()) return reason.status();
  auto closed = (*sockets)->Close(c.I64(0), c.I32(1), *reason);
  if (!closed.ok()) return closed.status();
  c.ReturnI32(*closed);
  return Status::Ok();
}

Status SocketTag(HostCall& c) {
  auto sockets = SocketsOf(c, "socket_tag");
  if (!sockets.ok()) return sockets.status();
  auto tag = c.Text("tag", c.U32(1), c.U32(2));
  if (!tag.ok()) return tag.status();
  auto tagged = (*sockets)->Tag(c.I64(0), *tag);
  if (!tagged.ok()) return tagged.status();
  c.ReturnI32(*tagged);
  return Status::Ok();
}

Status SocketList(HostCall& c) {
  EventContext& ctx = Ctx(c);
  auto tag = c.Text("tag", c.U32(0), c.U32(1));
  if (!tag.ok()) return tag.status();
  std::vector<std::int64_t> ids;
  if (ctx.sockets != nullptr) {
    auto listed = ctx.sockets->List(*tag);
    if (!listed.ok()) return listed.status();
    ids = std::move(*listed);
  } else if (!tag->empty()) {
    if (Status s = CheckSocketTag(*tag, "socket_list"); !s.ok()) return s;
  }
  std::string out;
  out.reserve(ids.size() * 8);
  for (std::int64_t id : ids) {
    const auto v = static_cast<std::uint64_t>(id);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  if (Status s = ReturnResult(c, std::move(out)); !s.ok()) return s;
  c.ReturnI32(static_cast<std::int32_t>(ids.size()));
  return Status::Ok();
}

Status SocketTags(HostCall& c) {
  EventContext& ctx = Ctx(c);
  std::optional<std::vector<std::string>> tags;
  if (ctx.sockets != nullptr) tags = ctx.sockets->Tags(c.I64(0));
  if (!tags) {
    c.ReturnI32(-1);
    return Status::Ok();
  }
  std::string out;
  for (const std::string& t : *tags) {
    out += t;
    out.push_back('\n');
  }
  return ReturnResult(c, std::move(out));
}

Status NowMs(HostCall& c) {
  c.ReturnI64(Ctx(c).now_ms);
  return Status::Ok();
}

Status FillRandom(HostCall& c, std::string_view fn, std::uint32_t ptr, std::uint32_t len) {
  if (len > kMaxRandomBytes) {
    return InvalidArgument(fmt::format("{}: {} bytes asked, at most {} per call", fn, len, kMaxRandomBytes));
  }
  auto dst = c.Range("destination", ptr, len);
  if (!dst.ok()) return dst.status();
  if (len > 0 && RAND_bytes(dst->data(), static_cast<int>(len)) != 1) return Fatal("random: OpenSSL RAND_bytes failed");
  return Status::Ok();
}

Status RandomFill(HostCall& c) { return FillRandom(c, "random_fill", c.U32(0), c.U32(1)); }

Status Log(HostCall& c) {
  auto msg = c.Text("message", c.U32(1), c.U32(2));
  if (!msg.ok()) return msg.status();
  log::Level level = log::Level::kInfo;
  switch (c.I32(0)) {
    case 0: level = log::Level::kDebug; break;
    case 2: level = log::Level::kWarn; break;
    case 3: level = log::Level::kError; break;
    default: break;
  }
  LogActor(Ctx(c), level, *msg);
  return Status::Ok();
}

Status Sync(HostCall& c) {
  EventContext& ctx = Ctx(c);
  c.ReturnI32(ctx.sync && ctx.sync() ? 0 : 1);
  return Status::Ok();
}

// --- WASI preview 1 --------------------------------------------------------------------

// Linear in the data: scans with an offset and erases the consumed prefix once.
void EmitLines(EventContext& ctx, std::string& buffer, std::string_view data, log::Level level) {
  buffer.append(data);
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = buffer.find('\n', start);
    if (nl != std::string::npos && nl - start <= kMaxLogMessageBytes) {
      LogActor(ctx, level, std::string_view(buffer).substr(start, nl - start));
      start = nl + 1;
    } else if (buffer.size() - start >= kMaxLogMessageBytes) {
      // A very long line is logged in pieces rather than held forever.
      LogActor(ctx, level, std::string_view(buffer).substr(start, kMaxLogMessageBytes));
      start += kMaxLogMessageBytes;
    } else {
      break;
    }
  }
  buffer.erase(0, start);
}

Status FdWrite(HostCall& c) {
  EventContext& ctx = Ctx(c);
  const std::int32_t fd = c.I32(0);
  if (fd != 1 && fd != 2) {
    c.ReturnI32(kWasiEbadf);
    return Status::Ok();
  }
  const std::uint32_t iovs = c.U32(1), count = c.U32(2);
  if (count > 1024) return InvalidArgument("fd_write: more than 1024 iovecs");
  auto vec = c.Range("iovec array", iovs, count * 8);
  if (!vec.ok()) return vec.status();
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < count && total < kMaxFdWriteBytesPerCall; ++i) {
    std::uint32_t ptr, len;
    std::memcpy(&ptr, vec->data() + i * 8, 4);
    std::memcpy(&len, vec->data() + i * 8 + 4, 4);
    len = static_cast<std::uint32_t>(std::min<std::uint64_t>(len, kMaxFdWriteBytesPerCall - total));
    auto data = c.Text("iovec buffer", ptr, len);
    if (!data.ok()) return data.status();
    EmitLines(ctx, fd == 1 ? ctx.stdout_line : ctx.stderr_line, *data,
              fd == 1 ? log::Level::kInfo : log::Level::kWarn);
    total += len;
  }
  if (auto s = WriteLe(c, "nwritten", c.U32(3), total, 4); !s.ok()) return s;
  c.ReturnI32(kWasiSuccess);
  return Status::Ok();
}

Status Errno(HostCall& c, std::int32_t e) {
  c.ReturnI32(e);
  return Status::Ok();
}
bool IsStdio(std::int32_t fd) { return fd >= 0 && fd <= 2; }

Status FdBadf(HostCall& c) { return Errno(c, kWasiEbadf); }
Status FdStdioOrBadf(HostCall& c) { return Errno(c, IsStdio(c.I32(0)) ? kWasiSuccess : kWasiEbadf); }
Status FdSeek(HostCall& c) { return Errno(c, IsStdio(c.I32(0)) ? kWasiEspipe : kWasiEbadf); }
Status FdFilestatGet(HostCall& c) { return Errno(c, IsStdio(c.I32(0)) ? kWasiEnotsup : kWasiEbadf); }

Status FdFdstatGet(HostCall& c) {
  if (!IsStdio(c.I32(0))) return Errno(c, kWasiEbadf);
  auto buf = c.Range("fdstat", c.U32(1), 24);
  if (!buf.ok()) return buf.status();
  std::memset(buf->data(), 0, 24);
  (*buf)[0] = 2;  // character device
  // rights_base: fd_write (1 << 6) for stdout/stderr, fd_read (1 << 1) for stdin.
  const std::uint64_t rights = c.I32(0) == 0 ? (1u << 1) : (1u << 6);
  std::memcpy(buf->data() + 8, &rights, 8);
  return Errno(c, kWasiSuccess);
}

Status NotCapable(HostCall& c) { return Errno(c, kWasiEnotcapable); }
Status NotSupported(HostCall& c) { return Errno(c, kWasiEnotsup); }
Status Success(HostCall& c) { return Errno(c, kWasiSuccess); }

Status ZeroSizes(HostCall& c) {
  if (auto s = WriteLe(c, "count", c.U32(0), 0, 4); !s.ok()) return s;
  if (auto s = WriteLe(c, "size", c.U32(1), 0, 4); !s.ok()) return s;
  return Errno(c, kWasiSuccess);
}

std::int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status ClockTimeGet(HostCall& c) {
  std::int64_t ns;
  switch (c.I32(0)) {
    // The realtime clock is the event's frozen wall time, like now_ms (runtime.h).
    case 0: ns = Ctx(c).now_ms * 1'000'000; break;
    case 1: ns = MonotonicNs(); break;
    default: return Errno(c, kWasiEinval);
  }
  if (auto s = WriteLe(c, "time", c.U32(2), static_cast<std::uint64_t>(ns), 8); !s.ok()) return s;
  return Errno(c, kWasiSuccess);
}

Status ClockResGet(HostCall& c) {
  const std::int32_t id = c.I32(0);
  if (id != 0 && id != 1) return Errno(c, kWasiEinval);
  if (auto s = WriteLe(c, "resolution", c.U32(1), id == 0 ? 1'000'000 : 1, 8); !s.ok()) return s;
  return Errno(c, kWasiSuccess);
}

Status RandomGet(HostCall& c) {
  if (auto s = FillRandom(c, "random_get", c.U32(0), c.U32(1)); !s.ok()) return s;
  return Errno(c, kWasiSuccess);
}

Status ProcExit(HostCall& c) {
  return InvalidArgument(fmt::format("the actor called proc_exit({})", c.I32(0)));
}

}  // namespace

void EventContext::FlushOutput() {
  if (!stdout_line.empty()) LogActor(*this, log::Level::kInfo, stdout_line);
  if (!stderr_line.empty()) LogActor(*this, log::Level::kWarn, stderr_line);
  stdout_line.clear();
  stderr_line.clear();
}

std::shared_ptr<const engine::HostInterface> AbiHostInterface() {
  static const auto host = [] {
    const std::string abi(kAbiModule), wasi(kWasiModule);
    auto f = [](const std::string& m, const char* n, std::vector<V> params, std::vector<V> results,
                Status (*fn)(HostCall&)) {
      return HostFunction{m, n, {std::move(params), std::move(results)}, fn};
    };
    const V i32 = V::kI32, i64 = V::kI64;
    return std::make_shared<const engine::HostInterface>(std::vector<HostFunction>{
        f(abi, "result_read", {i32, i32}, {i32}, &ResultRead),
        f(abi, "request_get", {i32}, {i32}, &RequestGet),
        f(abi, "request_header", {i32, i32}, {i32}, &RequestHeader),
        f(abi, "response_set_status", {i32}, {}, &ResponseSetStatus),
        f(abi, "response_add_header", {i32, i32, i32, i32}, {}, &ResponseAddHeader),
        f(abi, "response_write", {i32, i32}, {}, &ResponseWrite),
        f(abi, "storage_get", {i32, i32}, {i32}, &StorageGet),
        f(abi, "storage_put", {i32, i32, i32, i32}, {}, &StoragePut),
        f(abi, "storage_delete", {i32, i32}, {i32}, &StorageDelete),
        f(abi, "storage_delete_all", {}, {}, &StorageDeleteAll),
        f(abi, "storage_list", {i32, i32, i32, i32, i32, i32}, {i32}, &StorageList),
        f(abi, "alarm_set", {i64}, {}, &AlarmSet),
        f(abi, "alarm_get", {}, {i64}, &AlarmGet),
        f(abi, "alarm_delete", {}, {}, &AlarmDelete),
        f(abi, "alarm_retry_count", {}, {i32}, &AlarmRetryCount),
        f(abi, "message_send", {i32, i32, i32, i32}, {i64}, &MessageSend),
        f(abi, "message_get", {i32}, {i32}, &MessageGet),
        f(abi, "message_seq", {}, {i64}, &MessageSeq),
        f(abi, "message_retry_count", {}, {i32}, &MessageRetryCount),
        f(abi, "socket_event_id", {}, {i64}, &SocketEventId),
        f(abi, "socket_event_kind", {}, {i32}, &SocketEventKindOf),
        f(abi, "socket_event_data", {}, {i32}, &SocketEventData),
        f(abi, "socket_send", {i64, i32, i32, i32}, {i32}, &SocketSend),
        f(abi, "socket_broadcast", {i32, i32, i32, i32, i32}, {i32}, &SocketBroadcast),
        f(abi, "socket_close", {i64, i32, i32, i32}, {i32}, &SocketClose),
        f(abi, "socket_tag", {i64, i32, i32}, {i32}, &SocketTag),
        f(abi, "socket_list", {i32, i32}, {i32}, &SocketList),
        f(abi, "socket_tags", {i64}, {i32}, &SocketTags),
        f(abi, "now_ms", {}, {i64}, &NowMs),
        f(abi, "random_fill", {i32, i32}, {}, &RandomFill),
        f(abi, "log", {i32, i32, i32}, {}, &Log),
        f(abi, "sync", {}, {i32}, &Sync),
        // WASI preview 1: what wasi-libc needs, nothing that reaches outside the actor.
        f(wasi, "fd_write", {i32, i32, i32, i32}, {i32}, &FdWrite),
        f(wasi, "fd_read", {i32, i32, i32, i32}, {i32}, &FdBadf),
        f(wasi, "fd_pread", {i32, i32, i32, i64, i32}, {i32}, &FdBadf),
        f(wasi, "fd_pwrite", {i32, i32, i32, i64, i32}, {i32}, &FdBadf),
        f(wasi, "fd_close", {i32}, {i32}, &FdStdioOrBadf),
        f(wasi, "fd_sync", {i32}, {i32}, &FdStdioOrBadf),
        f(wasi, "fd_fdstat_set_flags", {i32, i32}, {i32}, &FdStdioOrBadf),
        f(wasi, "fd_seek", {i32, i64, i32, i32}, {i32}, &FdSeek),
        f(wasi, "fd_filestat_get", {i32, i32}, {i32}, &FdFilestatGet),
        f(wasi, "fd_fdstat_get", {i32, i32}, {i32}, &FdFdstatGet),
        f(wasi, "fd_prestat_get", {i32, i32}, {i32}, &FdBadf),
        f(wasi, "fd_prestat_dir_name", {i32, i32, i32}, {i32}, &FdBadf),
        f(wasi, "path_open", {i32, i32, i32, i32, i32, i64, i64, i32, i32}, {i32}, &NotCapable),
        f(wasi, "path_filestat_get", {i32, i32, i32, i32, i32}, {i32}, &NotCapable),
        f(wasi, "args_sizes_get", {i32, i32}, {i32}, &ZeroSizes),
        f(wasi, "args_get", {i32, i32}, {i32}, &Success),
        f(wasi, "environ_sizes_get", {i32, i32}, {i32}, &ZeroSizes),
        f(wasi, "environ_get", {i32, i32}, {i32}, &Success),
        f(wasi, "clock_time_get", {i32, i64, i32}, {i32}, &ClockTimeGet),
        f(wasi, "clock_res_get", {i32, i32}, {i32}, &ClockResGet),
        f(wasi, "random_get", {i32, i32}, {i32}, &RandomGet),
        f(wasi, "poll_oneoff", {i32, i32, i32, i32}, {i32}, &NotSupported),
        f(wasi, "sched_yield", {}, {i32}, &Success),
        f(wasi, "proc_exit", {i32}, {}, &ProcExit),
    });
  }();
  return host;
}

const std::vector<engine::ExportSpec>& AbiExports() {
  static const std::vector<engine::ExportSpec> exports = {
      {std::string(kRequestExport), {{}, {V::kI32}}, true},
      {std::string(kAlarmExport), {{}, {V::kI32}}, false},
      {std::string(kMessageExport), {{}, {V::kI32}}, false},
      {std::string(kSocketOpenExport), {{}, {V::kI32}}, false},
      {std::string(kSocketMessageExport), {{}, {V::kI32}}, false},
      {std::string(kSocketCloseExport), {{}, {V::kI32}}, false},
      {std::string(kUpgradeExport), {{V::kI32}, {V::kI32}}, false},
      {"_initialize", {{}, {}}, false},
  };
  return exports;
}

}  // namespace wk::actor
