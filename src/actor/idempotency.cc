#include "actor/idempotency.h"

#include <algorithm>
#include <vector>

#include "base/bytes.h"
#include "base/ascii.h"
#include "base/digest.h"

namespace wk::actor {
namespace {

constexpr std::uint8_t kRecordVersion = 1;

std::string RecordKey(std::string_view key) { return std::string(kIdempotencyRecordPrefix) + std::string(key); }

std::string TimeKey(std::int64_t created_ms, std::string_view key) {
  std::string digits = std::to_string(created_ms < 0 ? 0 : created_ms);
  std::string out(kIdempotencyTimePrefix);
  out.append(20 - std::min<std::size_t>(20, digits.size()), '0').append(digits).append("/").append(key);
  return out;
}

}  // namespace

Result<std::optional<std::string>> IdempotencyKeyOf(const Request& request) {
  std::optional<std::string_view> raw;
  for (const auto& [name, value] : request.headers) {
    if (!EqualsIgnoreAsciiCase(name, kIdempotencyHeader)) continue;
    if (raw) return InvalidArgument("the Idempotency-Key header appears more than once");
    raw = value;
  }
  if (!raw) return std::optional<std::string>();
  std::string_view v = *raw;
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  std::string key;
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    // A structured-field string: visible ASCII and spaces, with \" and \\ escaped.
    for (std::size_t i = 1; i + 1 < v.size(); ++i) {
      char c = v[i];
      if (c == '\\') {
        if (i + 2 >= v.size() || (v[i + 1] != '"' && v[i + 1] != '\\')) {
          return InvalidArgument("the Idempotency-Key header is not a valid string (a backslash escapes only \" and \\)");
        }
        c = v[++i];
      } else if (c == '"' || c < 0x20 || c > 0x7e) {
        return InvalidArgument("the Idempotency-Key header is not a valid string (visible ASCII only)");
      }
      key.push_back(c);
    }
  } else {
    for (char c : v) {
      if (c < 0x21 || c > 0x7e) {
        return InvalidArgument("the Idempotency-Key header must be visible ASCII (a quoted string may hold spaces)");
      }
    }
    key.assign(v);
  }
  if (key.empty()) return InvalidArgument("the Idempotency-Key header is empty");
  if (key.size() > kMaxIdempotencyKeyBytes) {
    return InvalidArgument("the Idempotency-Key header is " + std::to_string(key.size()) + " bytes, over the limit of " +
                           std::to_string(kMaxIdempotencyKeyBytes));
  }
  return std::optional<std::string>(std::move(key));
}

std::string RequestFingerprint(const Request& request) {
  std::string in;
  in.reserve(request.method.size() + request.path.size() + request.query.size() + request.body.size() + 16);
  PutBytes(in, request.method);
  PutBytes(in, request.path);
  PutBytes(in, request.query);
  PutBytes(in, request.body);
  return Sha256(in);
}

std::string EncodeIdempotencyRecord(const IdempotencyRecord& record) {
  std::string out;
  out.push_back(static_cast<char>(kRecordVersion));
  PutBytes(out, record.fingerprint);
  PutI64(out, record.created_ms);
  PutU32(out, static_cast<std::uint32_t>(record.response.status));
  PutU32(out, static_cast<std::uint32_t>(record.response.headers.size()));
  for (const auto& [name, value] : record.response.headers) {
    PutBytes(out, name);
    PutBytes(out, value);
  }
  out.push_back(record.body_kept ? 1 : 0);
  PutBytes(out, record.body_kept ? std::string_view(record.response.body) : std::string_view());
  return out;
}

Result<IdempotencyRecord> DecodeIdempotencyRecord(std::string_view bytes) {
  auto corrupt = [](std::string_view what) { return Fatal("corrupt idempotency record: " + std::string(what)); };
  ByteReader r(bytes);
  IdempotencyRecord rec;
  std::uint8_t version = 0;
  if (!r.U8(&version) || version != kRecordVersion) return corrupt("unknown version");
  std::uint32_t status = 0, headers = 0;
  if (!r.Bytes(&rec.fingerprint) || rec.fingerprint.size() != kSha256Bytes) return corrupt("bad fingerprint");
  if (!r.I64(&rec.created_ms) || !r.U32(&status) || status < 100 || status > 999) return corrupt("bad status");
  rec.response.status = static_cast<int>(status);
  // Each header takes at least 8 bytes: a count beyond that is corrupt, not an allocation.
  if (!r.U32(&headers) || headers > r.remaining() / 8) return corrupt("bad header count");
  for (std::uint32_t i = 0; i < headers; ++i) {
    std::string name, value;
    if (!r.Bytes(&name) || !r.Bytes(&value)) return corrupt("bad header");
    rec.response.headers.emplace_back(std::move(name), std::move(value));
  }
  std::uint8_t kept = 0;
  if (!r.U8(&kept) || kept > 1 || !r.Bytes(&rec.response.body)) return corrupt("bad body");
  rec.body_kept = kept == 1;
  if (!rec.body_kept && !rec.response.body.empty()) return corrupt("a body that was not kept");
  if (!r.empty()) return corrupt("bytes after the body");
  return rec;
}

Result<std::optional<IdempotencyRecord>> FindIdempotencyRecord(const ActorStorage& storage, std::string_view key,
                                                               std::int64_t now_ms, std::int64_t ttl_ms) {
  auto stored = storage.GetSystem(RecordKey(key));
  if (!stored) return std::optional<IdempotencyRecord>();
  auto rec = DecodeIdempotencyRecord(*stored);
  if (!rec.ok()) return rec.status();
  if (rec->created_ms + ttl_ms <= now_ms) return std::optional<IdempotencyRecord>();  // expired: absent
  return std::optional<IdempotencyRecord>(std::move(*rec));
}

EventResult ReplayedResult(const IdempotencyRecord& record) {
  EventResult r;
  r.response = record.response;
  r.replayed = record.body_kept ? "1" : "body-omitted";
  return r;
}

std::size_t AddIdempotencyRecord(const IdempotentRequest& request, const Response& response, std::int64_t now_ms,
                                 const ActorStorage& storage, Batch& batch) {
  IdempotencyRecord rec;
  rec.fingerprint = request.fingerprint;
  rec.created_ms = now_ms;
  rec.response = response;
  if (rec.response.body.size() > request.max_answer_bytes) {
    rec.body_kept = false;
    rec.response.body.clear();
  }
  std::string encoded = EncodeIdempotencyRecord(rec);
  const std::string record_key = RecordKey(request.key);
  const std::string time_key = TimeKey(now_ms, request.key);
  auto del = [&batch](std::string key) { batch.system.push_back({Mutation::Kind::kDelete, std::move(key), {}}); };
  // What the records will take once this batch applies: each deleted pair is subtracted.
  std::uint64_t bytes = storage.SystemBytes() + record_key.size() + encoded.size() + time_key.size();
  // The key's own expired record (absent: not found or expired, else the core answered).
  if (auto old = storage.GetSystem(record_key)) {
    bytes -= record_key.size() + old->size();
    if (auto r = DecodeIdempotencyRecord(*old); r.ok()) {
      const std::string old_time = TimeKey(r->created_ms, request.key);
      del(old_time);
      bytes -= old_time.size();
    }
  }
  // The oldest records first (the time index lists them in order): every expired one, and
  // then as many as keep the rest within max_bytes, at most kIdempotencyPrunePerEvent. The
  // listing collects candidates only: a visitor must not call back into the storage (it
  // holds the storage's lock), so their sizes are read after it.
  const std::string expired_end = TimeKey(now_ms - request.ttl_ms + 1, "");
  std::vector<std::string> candidates;
  ListQuery oldest;
  oldest.start = std::string(kIdempotencyTimePrefix);
  oldest.prefix = true;
  storage.ListSystem(oldest, [&](std::string_view time_key_of, std::string_view) {
    if (candidates.size() == kIdempotencyPrunePerEvent + 1) return false;
    candidates.emplace_back(time_key_of);
    return true;
  });
  std::size_t pruned = 0, early = 0;
  for (const std::string& time_key_of : candidates) {
    if (pruned == kIdempotencyPrunePerEvent) break;
    const bool expired = time_key_of < expired_end;
    if (!expired && bytes <= request.max_bytes) break;
    // "idem-at/<20 digits>/<key>"
    const std::string_view key = std::string_view(time_key_of).substr(kIdempotencyTimePrefix.size() + 21);
    if (key == request.key) continue;  // its own old entry, deleted above
    const std::string rk = RecordKey(key);
    const auto old = storage.GetSystem(rk);
    del(time_key_of);
    del(rk);
    bytes -= time_key_of.size() + (old ? rk.size() + old->size() : 0);
    ++pruned;
    if (!expired) ++early;
  }
  batch.system.push_back({Mutation::Kind::kPut, record_key, std::move(encoded)});
  batch.system.push_back({Mutation::Kind::kPut, time_key, {}});
  return early;
}

}  // namespace wk::actor
