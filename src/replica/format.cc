#include "replica/format.h"

#include <charconv>
#include <cstdio>
#include <cstring>

#include "base/bytes.h"
#include "base/check.h"
#include "base/crc32c.h"
#include "base/line_format.h"

namespace wk::replica {
namespace {

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

std::optional<Position> ParsePosition(std::string_view s) {
  const auto dash = s.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto g = line_format::ParseUint(s.substr(0, dash));
  auto q = line_format::ParseUint(s.substr(dash + 1));
  if (!g || !q) return std::nullopt;
  return Position{Generation{*g}, *q};
}

std::string WithTrailer(std::string body) {
  char buf[kTrailerSize + 1];
  std::snprintf(buf, sizeof buf, "crc32c %08x\n", Crc32c(body));
  body.append(buf, kTrailerSize);
  return body;
}

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

// Checks the trailer of body, opens the text lines before it and reads the actor and
// position lines every segment and snapshot starts with. kind ("segment") names the format
// and, in errors, the object.
Result<line_format::LineReader> ReadHead(std::string_view body, std::string_view kind, ActorId* actor, Position* p,
                                         std::uint64_t* version) {
  auto content = CheckTrailer(body, kind);
  if (!content.ok()) return content.status();
  // Version 2 adds the runtime's system entries; an object without any is written as 1.
  auto head = line_format::PeekHeader(*content);
  *version = head && head->kind == kind && head->version == kSystemVersion ? kSystemVersion : 1;
  auto r = line_format::LineReader::Open(*content, kind, *version, std::string(kind));
  if (!r.ok()) return r.status();
  auto v = r->Field("actor");
  if (!v.ok()) return v.status();
  auto id = ParseActorId(*v);
  if (!id.ok()) return r->Corrupt("bad actor: " + id.status().message());
  *actor = std::move(*id);
  v = r->Field("position");
  if (!v.ok()) return v.status();
  auto pos = ParsePosition(*v);
  if (!pos) return r->Corrupt("bad position");
  *p = *pos;
  return r;
}

Status ReadOptionalPosition(line_format::LineReader& r, std::string_view name, std::optional<Position>* out) {
  auto v = r.Field(name);
  if (!v.ok()) return v.status();
  if (*v == "none") {
    out->reset();
    return Status::Ok();
  }
  auto p = ParsePosition(*v);
  if (!p) return r.Corrupt("bad " + std::string(name) + " position");
  *out = *p;
  return Status::Ok();
}

bool ReadMutations(ByteReader& r, std::uint32_t count, std::uint8_t max_kind, std::vector<actor::Mutation>* out) {
  // Each mutation takes at least 5 bytes: a count beyond that is corrupt, not a huge
  // allocation.
  if (count > r.remaining() / 5) return false;
  out->reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint8_t kind = 0;
    actor::Mutation m;
    if (!r.U8(&kind) || kind > max_kind || !r.Bytes(&m.key)) return false;
    m.kind = static_cast<actor::Mutation::Kind>(kind);
    if (m.kind == actor::Mutation::Kind::kPut && !r.Bytes(&m.value)) return false;
    out->push_back(std::move(m));
  }
  return true;
}

// version: the segment's; only version 2 may carry system entries (kSystemFlag).
bool ReadBatch(ByteReader& r, std::uint64_t version, actor::Batch* b) {
  std::uint32_t count = 0;
  std::uint8_t alarm = 0;
  if (!r.U32(&count) || !r.U8(&alarm)) return false;
  const bool system = (alarm & kSystemFlag) != 0;
  if (system && version < kSystemVersion) return false;
  alarm &= static_cast<std::uint8_t>(~kSystemFlag);
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
  if (!ReadMutations(r, count, 2, &b->mutations)) return false;
  if (!system) return true;
  std::uint32_t system_count = 0;
  // A flagged batch carries at least one system entry (kPut 0 or kDelete 1, never delete_all).
  if (!r.U32(&system_count) || system_count == 0) return false;
  return ReadMutations(r, system_count, 1, &b->system);
}

}  // namespace

std::string Position::ToString() const { return std::to_string(generation.value) + "-" + std::to_string(seq); }

std::optional<Position> FenceInfo::tip() const {
  if (!run.empty()) return run.back();
  return base;
}

std::string WalPrefix(const ActorId& actor) { return std::string(kWalPrefix) + actor.ToString() + "/"; }
std::string SnapshotPrefix(const ActorId& actor) { return std::string(kSnapshotPrefix) + actor.ToString() + "/"; }
std::string SegmentKey(const ActorId& actor, Position p) {
  return WalPrefix(actor) + Padded(p.generation.value) + "-" + Padded(p.seq);
}
std::string SnapshotKey(const ActorId& actor, Position p) {
  return SnapshotPrefix(actor) + Padded(p.generation.value) + "-" + Padded(p.seq);
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
  return Position{Generation{g}, q};
}

std::size_t AppendBatch(const actor::Batch& b, std::string& out) {
  const std::size_t start = out.size();
  PutU32(out, static_cast<std::uint32_t>(b.mutations.size()));
  const char flag = b.system.empty() ? 0 : static_cast<char>(kSystemFlag);
  if (!b.alarm.has_value()) {
    out.push_back(static_cast<char>(0 | flag));
  } else if (!b.alarm->has_value()) {
    out.push_back(static_cast<char>(1 | flag));
  } else {
    out.push_back(static_cast<char>(2 | flag));
    PutI64(out, **b.alarm);
  }
  auto put_mutations = [&out](const std::vector<actor::Mutation>& mutations) {
    for (const auto& m : mutations) {
      out.push_back(static_cast<char>(m.kind));
      PutBytes(out, m.key);
      if (m.kind == actor::Mutation::Kind::kPut) PutBytes(out, m.value);
    }
  };
  put_mutations(b.mutations);
  if (!b.system.empty()) {
    for (const auto& m : b.system) {
      WK_CHECK(m.kind != actor::Mutation::Kind::kDeleteAll, "a system entry cannot be delete_all");
    }
    PutU32(out, static_cast<std::uint32_t>(b.system.size()));
    put_mutations(b.system);
  }
  return out.size() - start;
}

std::string EncodeDataSegment(const ActorId& actor, Position p, std::size_t count, std::string_view payload,
                              bool system) {
  line_format::LineWriter w("segment", system ? kSystemVersion : 1);
  w.Reserve(payload.size() + 128);
  w.Field("actor", actor.ToString()).Field("position", p.ToString()).Field("batches", count).Payload(payload);
  return WithTrailer(std::move(w).Take());
}

std::string EncodeSegment(const Segment& s) {
  if (s.position.seq > 0) {
    std::string payload;
    bool system = false;
    for (const auto& b : s.batches) {
      AppendBatch(b, payload);
      system = system || !b.system.empty();
    }
    return EncodeDataSegment(s.actor, s.position, s.batches.size(), payload, system);
  }
  line_format::LineWriter w("segment", 1);
  w.Field("actor", s.actor.ToString()).Field("position", s.position.ToString());
  w.Field("base", s.fence.base ? s.fence.base->ToString() : "none");
  const auto tip = s.fence.tip();
  w.Field("tip", tip ? tip->ToString() : "none");
  w.Field("run", s.fence.run.size());
  for (const auto& p : s.fence.run) w.BareLine(p.ToString());
  return WithTrailer(std::move(w).Take());
}

Result<Segment> DecodeSegment(std::string_view body) {
  Segment s;
  std::uint64_t version = 1;
  auto lines = ReadHead(body, "segment", &s.actor, &s.position, &version);
  if (!lines.ok()) return lines.status();
  if (s.position.seq == 0) {
    if (version != 1) return lines->Corrupt("an owner fence is version 1");
    std::optional<Position> tip;
    if (Status st = ReadOptionalPosition(*lines, "base", &s.fence.base); !st.ok()) return st;
    if (Status st = ReadOptionalPosition(*lines, "tip", &tip); !st.ok()) return st;
    // Each entry is at least 4 bytes ("0-0\n").
    auto n = lines->UintField("run");
    if (!n.ok()) return n.status();
    if (*n > lines->rest().size() / 4) return lines->Corrupt("bad run count");
    for (std::uint64_t i = 0; i < *n; ++i) {
      auto line = lines->BareLine();
      if (!line.ok()) return line.status();
      auto p = ParsePosition(*line);
      if (!p) return lines->Corrupt("bad run entry");
      if (!s.fence.run.empty() && !(s.fence.run.back() < *p)) return lines->Corrupt("run not ascending");
      if (s.fence.base && !(*s.fence.base < *p)) return lines->Corrupt("run entry not after the base");
      if (!(*p < s.position)) return lines->Corrupt("run entry not before the fence");
      s.fence.run.push_back(*p);
    }
    if (tip != s.fence.tip()) return lines->CorruptBody("tip does not match the run");
    if (Status st = lines->Finish(); !st.ok()) return st;
    return s;
  }
  auto n = lines->UintField("batches");
  if (!n.ok()) return n.status();
  ByteReader r(lines->rest());
  if (*n == 0 || *n > r.remaining() / 5) return lines->Corrupt("bad batch count");
  s.batches.resize(*n);
  bool system = false;
  for (auto& b : s.batches) {
    if (!ReadBatch(r, version, &b)) return lines->CorruptBody("bad batch");
    system = system || !b.system.empty();
  }
  if (!r.empty()) return lines->CorruptBody("bytes after the last field");
  // One encoding per content: version 2 only when a batch carries system entries.
  if (version == kSystemVersion && !system) return lines->CorruptBody("version 2 without system entries");
  return s;
}

std::string EncodeSnapshot(const ActorId& actor, Position p, const actor::StateMap& state) {
  const bool system = !state.system_entries().empty();
  line_format::LineWriter w("snapshot", system ? kSystemVersion : 1);
  w.Reserve(state.bytes() + state.system_bytes() + 8 * (state.entries().size() + state.system_entries().size()) + 128);
  w.Field("actor", actor.ToString()).Field("position", p.ToString());
  if (state.alarm()) {
    w.IntField("alarm", *state.alarm());
  } else {
    w.Field("alarm", "none");
  }
  w.Field("entries", state.entries().size());
  if (system) w.Field("system", state.system_entries().size());
  std::string out = std::move(w).Take();
  for (const auto& [k, v] : state.entries()) {
    PutBytes(out, k);
    PutBytes(out, v);
  }
  for (const auto& [k, v] : state.system_entries()) {
    PutBytes(out, k);
    PutBytes(out, v);
  }
  return WithTrailer(std::move(out));
}

Result<Snapshot> DecodeSnapshot(std::string_view body) {
  Snapshot s;
  std::uint64_t version = 1;
  auto lines = ReadHead(body, "snapshot", &s.actor, &s.position, &version);
  if (!lines.ok()) return lines.status();
  auto alarm = lines->Field("alarm");
  if (!alarm.ok()) return alarm.status();
  if (*alarm != "none") {
    auto ms = line_format::ParseInt(*alarm);
    if (!ms) return lines->Corrupt("bad alarm");
    s.state.set_alarm(*ms);
  }
  auto n = lines->UintField("entries");
  if (!n.ok()) return n.status();
  std::uint64_t system = 0;
  if (version == kSystemVersion) {
    auto m = lines->UintField("system");
    if (!m.ok()) return m.status();
    if (*m == 0) return lines->Corrupt("version 2 without system entries");
    system = *m;
  }
  ByteReader r(lines->rest());
  if (*n > r.remaining() / 8 || system > r.remaining() / 8) return lines->Corrupt("bad entry count");
  for (int part = 0; part < 2; ++part) {
    std::string last;
    const std::uint64_t count = part == 0 ? *n : system;
    for (std::uint64_t i = 0; i < count; ++i) {
      std::string k, val;
      if (!r.Bytes(&k) || !r.Bytes(&val)) return lines->CorruptBody("bad entry");
      if (i > 0 && !(last < k)) return lines->CorruptBody("entries not ascending");
      last = k;
      if (part == 0) {
        s.state.Put(std::move(k), std::move(val));
      } else {
        s.state.PutSystem(std::move(k), std::move(val));
      }
    }
  }
  if (!r.empty()) return lines->CorruptBody("bytes after the last entry");
  return s;
}

}  // namespace wk::replica
