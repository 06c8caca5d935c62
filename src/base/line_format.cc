#include "base/line_format.h"

#include <algorithm>

#include "base/check.h"

namespace wk::line_format {
namespace {

constexpr std::string_view kHeaderPrefix = "wasmkeep-";
// The longest line the reader looks for a newline in: a key, its space and a value.
constexpr std::size_t kMaxLineBytes = kMaxKeyBytes + 1 + kMaxValueBytes;

bool IsKey(std::string_view s) {
  if (s.empty() || s.size() > kMaxKeyBytes || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

bool IsPrintable(char c) { return c >= 0x20 && c <= 0x7E; }

// A value or bare line: printable, non-empty, no space at either end.
bool IsValue(std::string_view s) {
  if (s.empty() || s.size() > kMaxValueBytes || s.front() == ' ' || s.back() == ' ') return false;
  return std::all_of(s.begin(), s.end(), IsPrintable);
}

// A short, printable quote of untrusted bytes for an error message.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) out += IsPrintable(c) ? c : '?';
  if (s.size() > 40) out += "...";
  return out + "'";
}

}  // namespace

std::optional<std::uint64_t> ParseUint(std::string_view text, std::uint64_t max) {
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (kMaxUint - d) / 10) return std::nullopt;  // would overflow
    v = v * 10 + d;
  }
  if (v > max) return std::nullopt;
  return v;
}

std::optional<std::int64_t> ParseInt(std::string_view text) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (text.starts_with('-')) {
    auto magnitude = ParseUint(text.substr(1), kMax + 1);
    if (!magnitude || *magnitude == 0) return std::nullopt;  // "-0" is not canonical
    // -(2^63) is representable; compute without overflowing.
    return static_cast<std::int64_t>(~*magnitude + 1);
  }
  auto v = ParseUint(text, kMax);
  if (!v) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

std::optional<WallTime> ParseUnixMs(std::string_view text) {
  auto ms = ParseUint(text, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  if (!ms) return std::nullopt;
  return FromUnixMs(static_cast<std::int64_t>(*ms));
}

std::optional<Header> PeekHeader(std::string_view body) {
  const std::string_view first = body.substr(0, body.find('\n'));
  if (!first.starts_with(kHeaderPrefix)) return std::nullopt;
  const std::string_view rest = first.substr(kHeaderPrefix.size());
  const auto sp = rest.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  Header h{rest.substr(0, sp), 0};
  if (!IsKey(h.kind)) return std::nullopt;
  auto v = ParseUint(rest.substr(sp + 1));
  if (!v) return std::nullopt;
  h.version = *v;
  return h;
}

// ---- LineReader

Result<LineReader> LineReader::Open(std::string_view body, std::string_view kind, std::uint64_t version,
                                    std::string what) {
  const std::string header = std::string(kHeaderPrefix) + std::string(kind) + " " + std::to_string(version);
  const auto nl = body.find('\n');
  if (nl == std::string_view::npos || body.substr(0, nl) != header) {
    return Fatal("corrupt " + what + ": line 1: expected the header '" + header + "', found " +
                 Quote(body.substr(0, std::min(nl, body.size()))));
  }
  return LineReader(body.substr(nl + 1), std::move(what));
}

Result<std::string_view> LineReader::NextLine() {
  if (rest_.empty()) return Corrupt("body ends here");
  const auto nl = rest_.substr(0, kMaxLineBytes + 1).find('\n');
  ++line_;
  if (nl == std::string_view::npos) {
    return Corrupt(rest_.size() <= kMaxLineBytes ? "not newline-terminated" : "line too long");
  }
  const std::string_view line = rest_.substr(0, nl);
  if (line.ends_with('\r')) return Corrupt("ends in CR LF (only LF is allowed)");
  if (line.empty()) return Corrupt("empty line");
  if (!std::all_of(line.begin(), line.end(), IsPrintable)) return Corrupt("holds a byte that is not printable ASCII");
  rest_.remove_prefix(nl + 1);
  return line;
}

Result<std::string_view> LineReader::Field(std::string_view key) {
  WK_CHECK(IsKey(key), "line_format: bad key");
  if (rest_.empty()) {
    ++line_;
    return Corrupt("missing '" + std::string(key) + "' line (the body ends)");
  }
  auto line = NextLine();
  if (!line.ok()) return line.status();
  const auto sp = line->find(' ');
  const std::string_view found = line->substr(0, sp);
  if (found != key) {
    if (std::find(seen_keys_.begin(), seen_keys_.end(), found) != seen_keys_.end()) {
      return Corrupt("repeated '" + std::string(found) + "' line");
    }
    return Corrupt("expected the '" + std::string(key) + "' line, found " + Quote(found) +
                   " (an unknown, misplaced or missing line)");
  }
  seen_keys_.emplace_back(key);
  if (sp == std::string_view::npos) return Corrupt("'" + std::string(key) + "' has no value");
  const std::string_view value = line->substr(sp + 1);
  if (!IsValue(value)) return Corrupt("bad '" + std::string(key) + "' value " + Quote(value));
  return value;
}

Result<std::uint64_t> LineReader::UintField(std::string_view key, std::uint64_t max) {
  auto value = Field(key);
  if (!value.ok()) return value.status();
  auto n = ParseUint(*value, max);
  if (!n) {
    return Corrupt("'" + std::string(key) + "' is not a number from 0 to " + std::to_string(max) +
                   " without leading zeros (found " + Quote(*value) + ")");
  }
  return *n;
}

Result<std::int64_t> LineReader::IntField(std::string_view key) {
  auto value = Field(key);
  if (!value.ok()) return value.status();
  auto n = ParseInt(*value);
  if (!n) return Corrupt("'" + std::string(key) + "' is not a canonical signed 64-bit number (found " + Quote(*value) + ")");
  return *n;
}

Result<WallTime> LineReader::UnixMsField(std::string_view key) {
  auto value = Field(key);
  if (!value.ok()) return value.status();
  auto t = ParseUnixMs(*value);
  if (!t) {
    return Corrupt("'" + std::string(key) + "' is not Unix milliseconds from 0 to " +
                   std::to_string(std::numeric_limits<std::int64_t>::max()) + " without leading zeros (found " +
                   Quote(*value) + ")");
  }
  return *t;
}

Result<std::vector<std::string_view>> LineReader::FieldParts(std::string_view key, std::size_t parts) {
  WK_CHECK(parts >= 1, "line_format: a field of no parts");
  auto value = Field(key);
  if (!value.ok()) return value.status();
  std::vector<std::string_view> out;
  std::string_view rest = *value;
  while (out.size() <= parts) {  // one part more than wanted is enough to refuse
    const auto sp = rest.find(' ');
    out.push_back(rest.substr(0, sp));
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  if (out.size() != parts || std::any_of(out.begin(), out.end(), [](std::string_view p) { return p.empty(); })) {
    return Corrupt("'" + std::string(key) + "' needs exactly " + std::to_string(parts) +
                   " parts separated by single spaces (found " + Quote(*value) + ")");
  }
  return out;
}

Result<std::string_view> LineReader::BareLine() {
  auto line = NextLine();
  if (!line.ok()) return line.status();
  if (!IsValue(*line)) return Corrupt("bad line " + Quote(*line));
  return line;
}

void LineReader::Skip(std::size_t n) {
  WK_CHECK(n <= rest_.size(), "line_format: skipping past the end");
  rest_.remove_prefix(n);
}

Status LineReader::Finish() const {
  if (rest_.empty()) return Status::Ok();
  const std::string_view next = rest_.substr(0, rest_.find('\n'));
  return Fatal("corrupt " + what_ + ": line " + std::to_string(line_ + 1) + ": unexpected " + Quote(next) +
               " after the last line");
}

Status LineReader::Corrupt(std::string_view detail) const {
  return Fatal("corrupt " + what_ + ": line " + std::to_string(line_) + ": " + std::string(detail));
}

Status LineReader::CorruptBody(std::string_view detail) const { return Fatal("corrupt " + what_ + ": " + std::string(detail)); }

// ---- LineWriter

LineWriter::LineWriter(std::string_view kind, std::uint64_t version) {
  WK_CHECK(IsKey(kind), "line_format: bad kind");
  out_.append(kHeaderPrefix).append(kind).append(" ").append(std::to_string(version)).append("\n");
}

LineWriter& LineWriter::Field(std::string_view key, std::string_view value) {
  WK_CHECK(IsKey(key), "line_format: bad key");
  WK_CHECK(IsValue(value), "line_format: bad value for key " + std::string(key));
  out_.append(key).append(" ").append(value).append("\n");
  return *this;
}

LineWriter& LineWriter::Field(std::string_view key, std::uint64_t value) { return Field(key, std::to_string(value)); }

LineWriter& LineWriter::IntField(std::string_view key, std::int64_t value) { return Field(key, std::to_string(value)); }

LineWriter& LineWriter::UnixMsField(std::string_view key, WallTime t) {
  WK_CHECK(ToUnixMs(t) >= 0, "line_format: a time before 1970 for key " + std::string(key));
  return Field(key, static_cast<std::uint64_t>(ToUnixMs(t)));
}

LineWriter& LineWriter::FieldParts(std::string_view key, std::initializer_list<std::string_view> parts) {
  std::string value;
  for (std::string_view part : parts) {
    WK_CHECK(!part.empty() && part.find(' ') == std::string_view::npos, "line_format: bad part for key " + std::string(key));
    if (!value.empty()) value += ' ';
    value.append(part);
  }
  return Field(key, value);
}

LineWriter& LineWriter::BareLine(std::string_view line) {
  WK_CHECK(IsValue(line), "line_format: bad bare line");
  out_.append(line).append("\n");
  return *this;
}

LineWriter& LineWriter::Payload(std::string_view bytes) {
  out_.append(bytes);
  return *this;
}

}  // namespace wk::line_format
