#include "replica/format.h"

#include <charconv>
#include <cstdio>
#include <cstring>

#include "base/crc32c.h"

namespace wk::replica {
namespace {

constexpr std::string_view kSegmentHeader = "wasmkeep-segment 1";
constexpr std::string_view kSnapshotHeader = "wasmkeep-snapshot 1";
constexpr std::string_view kTrailerTag = "crc32c ";
constexpr std::size_t kTrailerSize = 16;  // "crc32c " + 8 hex + "\n"
constexpr int kPadDigits = 20;

Status Corrupt(std::string_view what, std::string_view detail) {
  return Fatal("corrupt " + std::string(what) + ": " + std::string(detail));
}

std::string Padded(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(v));
  return buf;
}

std::optional<std::uint64_t> ParseU64(std::string_view s) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> ParseI64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  std::string_view digits = s[0] == '-' ? s.substr(1) : s;
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0') || (s[0] == '-' && digits == "0")) return std::nullopt;
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<Position> ParsePosition(std::string_view s) {
  const auto dash = s.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto g = ParseU64(s.substr(0, dash));
  auto q = ParseU64(s.substr(dash + 1));
  if (!g || !q) return std::nullopt;
  return Position{*g, *q};
}

void PutU32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string& out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
void PutBytes(std::string& out, std::string_view s) {
  PutU32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

std::string WithTrailer(std::string body) {
  char buf[kTrailerSize + 1];
  std::snprintf(buf, sizeof buf, "crc32c %08x\n", Crc32c(body));
  body.append(buf, kTrailerSize);
  return body;
}

// Reads a body front to back; every accessor fails (returns false) rather than reading
// past the end.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool Line(std::string_view* line) {
    const auto nl = s_.find('\n');
    if (nl == std::string_view::npos) return false;
    *line = s_.substr(0, nl);
    s_.remove_prefix(nl + 1);
    return true;
  }
  // A line "<name> <value>"; value returned.
  bool Field(std::string_view name, std::string_view* value) {
    std::string_view line;
    if (!Line(&line) || !line.starts_with(name) || line.size() <= name.size() || line[name.size()] != ' ') return false;
    *value = line.substr(name.size() + 1);
    return true;
  }
  bool U8(std::uint8_t* v) {
    if (s_.size() < 1) return false;
    *v = static_cast<std::uint8_t>(s_[0]);
    s_.remove_prefix(1);
    return true;
  }
  bool U32(std::uint32_t* v) {
    if (s_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<std::uint32_t>(static_cast<unsigned char>(s_[i])) << (8 * i);
    s_.remove_prefix(4);
    return true;
  }
  bool I64(std::int64_t* v) {
    if (s_.size() < 8) return false;
    std::uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<std::uint64_t>(static_cast<unsigned char>(s_[i])) << (8 * i);
    *v = static_cast<std::int64_t>(u);
    s_.remove_prefix(8);
    return true;
  }
  bool Bytes(std::string* out) {
    std::uint32_t n = 0;
    if (!U32(&n) || s_.size() < n) return false;
    out->assign(s_.substr(0, n));
    s_.remove_prefix(n);
    return true;
  }
  bool empty() const { return s_.empty(); }
  std::size_t remaining() const { return s_.size(); }

 private:
  std::string_view s_;
};

// Checks the trailer and returns the body before it.
Result<std::string_view> CheckTrailer(std::string_view body, std::string_view what) {
  if (body.size() < kTrailerSize) return Corrupt(what, "too short for its checksum");
  const std::string_view trailer = body.substr(body.size() - kTrailerSize);
  const std::string_view content = body.substr(0, body.size() - kTrailerSize);
  if (!trailer.starts_with(kTrailerTag) || trailer.back() != '\n') return Corrupt(what, "no checksum trailer");
  std::uint32_t stored = 0;
  const std::string_view hex = trailer.substr(kTrailerTag.size(), 8);
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return Corrupt(what, "bad checksum digits");
  }
  std::from_chars(hex.data(), hex.data() + hex.size(), stored, 16);
  if (stored != Crc32c(content)) return Corrupt(what, "checksum mismatch");
  return content;
}

Status ReadHead(Reader& r, std::string_view header, std::string_view what, ActorId* actor, Position* p) {
  std::string_view line;
  if (!r.Line(&line) || line != header) return Corrupt(what, "bad header");
  std::string_view v;
  if (!r.Field("actor", &v)) return Corrupt(what, "no actor line");
  auto id = ParseActorId(v);
  if (!id.ok()) return Corrupt(what, "bad actor: " + id.status().message());
  *actor = std::move(*id);
  if (!r.Field("position", &v)) return Corrupt(what, "no position line");
  auto pos = ParsePosition(v);
  if (!pos) return Corrupt(what, "bad position");
  *p = *pos;
  return Status::Ok();
}

bool ReadOptionalPosition(Reader& r, std::string_view name, std::optional<Position>* out) {
  std::string_view v;
  if (!r.Field(name, &v)) return false;
  if (v == "none") {
    out->reset();
    return true;
  }
  auto p = ParsePosition(v);
  if (!p) return false;
  *out = *p;
  return true;
}

bool ReadBatch(Reader& r, actor::Batch* b) {
  std::uint32_t count = 0;
  std::uint8_t alarm = 0;
  if (!r.U32(&count) || !r.U8(&alarm)) return false;
  // Each mutation takes at least 5 bytes: a count beyond that is corrupt, not a huge
  // allocation.
  if (count > r.remaining() / 5) return false;
  switch (alarm) {
    case 0: break;
    case 1: b->alarm.emplace(std::nullopt); break;
    case 2: {
      std::int64_t ms = 0;
      if (!r.I64(&ms)) return false;
      b->alarm.emplace(ms);
      break;
    }
    default: return false;
  }
  b->mutations.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint8_t kind = 0;
    actor::Mutation m;
    if (!r.U8(&kind) || kind > 2 || !r.Bytes(&m.key)) return false;
    m.kind = static_cast<actor::Mutation::Kind>(kind);
    if (m.kind == actor::Mutation::Kind::kPut && !r.Bytes(&m.value)) return false;
    b->mutations.push_back(std::move(m));
  }
  return true;
}

}  // namespace

std::string Position::ToString() const { return std::to_string(generation) + "-" + std::to_string(seq); }

std::optional<Position> FenceInfo::tip() const {
  if (!run.empty()) return run.back();
  return base;
}

std::string WalPrefix(const ActorId& actor) { return std::string(kWalPrefix) + actor.ToString() + "/"; }
std::string SnapshotPrefix(const ActorId& actor) { return std::string(kSnapshotPrefix) + actor.ToString() + "/"; }
std::string SegmentKey(const ActorId& actor, Position p) {
  return WalPrefix(actor) + Padded(p.generation) + "-" + Padded(p.seq);
}
std::string SnapshotKey(const ActorId& actor, Position p) {
  return SnapshotPrefix(actor) + Padded(p.generation) + "-" + Padded(p.seq);
}

Result<Position> ParseKeyPosition(std::string_view prefix, std::string_view key) {
  auto bad = [&] { return Fatal("unexpected object " + std::string(key) + " in an actor's log (not <gen>-<seq>)"); };
  if (!key.starts_with(prefix)) return bad();
  const std::string_view rest = key.substr(prefix.size());
  if (rest.size() != 2 * kPadDigits + 1 || rest[kPadDigits] != '-') return bad();
  std::uint64_t g = 0, q = 0;
  for (int i = 0; i < kPadDigits; ++i) {
    if (rest[i] < '0' || rest[i] > '9' || rest[kPadDigits + 1 + i] < '0' || rest[kPadDigits + 1 + i] > '9') return bad();
  }
  auto r1 = std::from_chars(rest.data(), rest.data() + kPadDigits, g);
  auto r2 = std::from_chars(rest.data() + kPadDigits + 1, rest.data() + rest.size(), q);
  if (r1.ec != std::errc() || r2.ec != std::errc()) return bad();
  return Position{g, q};
}

std::size_t AppendBatch(const actor::Batch& b, std::string& out) {
  const std::size_t start = out.size();
  PutU32(out, static_cast<std::uint32_t>(b.mutations.size()));
  if (!b.alarm.has_value()) {
    out.push_back(0);
  } else if (!b.alarm->has_value()) {
    out.push_back(1);
  } else {
    out.push_back(2);
    PutI64(out, **b.alarm);
  }
  for (const auto& m : b.mutations) {
    out.push_back(static_cast<char>(m.kind));
    PutBytes(out, m.key);
    if (m.kind == actor::Mutation::Kind::kPut) PutBytes(out, m.value);
  }
  return out.size() - start;
}

std::string EncodeDataSegment(const ActorId& actor, Position p, std::size_t count, std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 128);
  out.append(kSegmentHeader).append("\nactor ").append(actor.ToString());
  out.append("\nposition ").append(p.ToString());
  out.append("\nbatches ").append(std::to_string(count)).append("\n");
  out.append(payload);
  return WithTrailer(std::move(out));
}

std::string EncodeSegment(const Segment& s) {
  if (s.position.seq > 0) {
    std::string payload;
    for (const auto& b : s.batches) AppendBatch(b, payload);
    return EncodeDataSegment(s.actor, s.position, s.batches.size(), payload);
  }
  std::string out;
  out.append(kSegmentHeader).append("\nactor ").append(s.actor.ToString());
  out.append("\nposition ").append(s.position.ToString());
  out.append("\nbase ").append(s.fence.base ? s.fence.base->ToString() : "none");
  const auto tip = s.fence.tip();
  out.append("\ntip ").append(tip ? tip->ToString() : "none");
  out.append("\nrun ").append(std::to_string(s.fence.run.size())).append("\n");
  for (const auto& p : s.fence.run) out.append(p.ToString()).append("\n");
  return WithTrailer(std::move(out));
}

Result<Segment> DecodeSegment(std::string_view body) {
  constexpr std::string_view what = "segment";
  auto content = CheckTrailer(body, what);
  if (!content.ok()) return content.status();
  Reader r(*content);
  Segment s;
  if (Status st = ReadHead(r, kSegmentHeader, what, &s.actor, &s.position); !st.ok()) return st;
  std::string_view v;
  if (s.position.seq == 0) {
    std::optional<Position> tip;
    if (!ReadOptionalPosition(r, "base", &s.fence.base)) return Corrupt(what, "bad base line");
    if (!ReadOptionalPosition(r, "tip", &tip)) return Corrupt(what, "bad tip line");
    if (!r.Field("run", &v)) return Corrupt(what, "no run line");
    auto n = ParseU64(v);
    // Each entry is at least 4 bytes ("0-0\n").
    if (!n || *n > r.remaining() / 4) return Corrupt(what, "bad run count");
    for (std::uint64_t i = 0; i < *n; ++i) {
      std::string_view line;
      auto p = r.Line(&line) ? ParsePosition(line) : std::nullopt;
      if (!p) return Corrupt(what, "bad run entry");
      if (!s.fence.run.empty() && !(s.fence.run.back() < *p)) return Corrupt(what, "run not ascending");
      if (s.fence.base && !(*s.fence.base < *p)) return Corrupt(what, "run entry not after the base");
      if (!(*p < s.position)) return Corrupt(what, "run entry not before the fence");
      s.fence.run.push_back(*p);
    }
    if (tip != s.fence.tip()) return Corrupt(what, "tip does not match the run");
  } else {
    if (!r.Field("batches", &v)) return Corrupt(what, "no batches line");
    auto n = ParseU64(v);
    if (!n || *n == 0 || *n > r.remaining() / 5) return Corrupt(what, "bad batch count");
    s.batches.resize(*n);
    for (auto& b : s.batches) {
      if (!ReadBatch(r, &b)) return Corrupt(what, "bad batch");
    }
  }
  if (!r.empty()) return Corrupt(what, "bytes after the last field");
  return s;
}

std::string EncodeSnapshot(const ActorId& actor, Position p, const actor::StateMap& state) {
  std::string out;
  out.reserve(state.bytes() + 8 * state.entries().size() + 128);
  out.append(kSnapshotHeader).append("\nactor ").append(actor.ToString());
  out.append("\nposition ").append(p.ToString());
  out.append("\nalarm ").append(state.alarm() ? std::to_string(*state.alarm()) : "none");
  out.append("\nentries ").append(std::to_string(state.entries().size())).append("\n");
  for (const auto& [k, v] : state.entries()) {
    PutBytes(out, k);
    PutBytes(out, v);
  }
  return WithTrailer(std::move(out));
}

Result<Snapshot> DecodeSnapshot(std::string_view body) {
  constexpr std::string_view what = "snapshot";
  auto content = CheckTrailer(body, what);
  if (!content.ok()) return content.status();
  Reader r(*content);
  Snapshot s;
  if (Status st = ReadHead(r, kSnapshotHeader, what, &s.actor, &s.position); !st.ok()) return st;
  std::string_view v;
  if (!r.Field("alarm", &v)) return Corrupt(what, "no alarm line");
  if (v != "none") {
    auto ms = ParseI64(v);
    if (!ms) return Corrupt(what, "bad alarm");
    s.state.set_alarm(*ms);
  }
  if (!r.Field("entries", &v)) return Corrupt(what, "no entries line");
  auto n = ParseU64(v);
  if (!n || *n > r.remaining() / 8) return Corrupt(what, "bad entry count");
  std::string last;
  for (std::uint64_t i = 0; i < *n; ++i) {
    std::string k, val;
    if (!r.Bytes(&k) || !r.Bytes(&val)) return Corrupt(what, "bad entry");
    if (i > 0 && !(last < k)) return Corrupt(what, "entries not ascending");
    last = k;
    s.state.Put(std::move(k), std::move(val));
  }
  if (!r.empty()) return Corrupt(what, "bytes after the last entry");
  return s;
}

}  // namespace wk::replica
