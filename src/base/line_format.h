// The line format: one strict reader and one canonical writer shared by every frozen text
// format of WasmKeep (node and owner records, drain requests, the text heads of segments
// and snapshots, the tenant record, ...). One codec, so every format has the same idea of
// a number, a line ending and a bad line.
//
//   wasmkeep-<kind> <version>\n       the header line
//   <key> <value>\n                   fields, in the order the format fixes, each once
//   <bare line>\n                     list entries where a format has them (a run of positions)
//   <binary payload>                  where a format has one (segments, snapshots)
//
// The rules, all checked by the reader:
//   - lines end in exactly '\n': no '\r', no missing final newline, no empty lines;
//   - a key is 1..32 of [a-z0-9_], starting with a letter; exactly one space follows it;
//   - a value is 1..kMaxValueBytes printable ASCII bytes (0x20..0x7E), neither starting nor
//     ending with a space (values may hold inner spaces: `lease live <instance>`);
//   - a number is decimal digits only: no sign, no spaces, no leading zero except "0"
//     itself, at most the bound the caller gives (ParseUint). The one signed field kind
//     (an alarm time, which may be before 1970) allows a leading '-' but never "-0";
//   - a wall time (`created_at`, `written_at`, ...) is Unix milliseconds: a number from 0
//     to INT64_MAX (ParseUnixMs), never before 1970;
//   - a value of several parts (`token <id> <hash> <ms>`) holds exactly the parts its
//     format fixes, one space between each (FieldParts);
//   - a field that is not the one expected is refused with a message naming the line
//     number and saying whether it is unknown, out of order, repeated or missing;
//   - after the last field nothing may follow unless the format says a payload does.
// The writer emits exactly this canonical form, so Encode(Decode(x)) == x for every body
// the reader accepts.
//
// Errors are kFatal("corrupt <what>: line N: ..."): a body we cannot read is never taken for
// an empty or absent value (the callers treat kFatal as "stop, do not guess").
//
// Threading: pure functions and value types; a LineReader views the body it was given,
// which must outlive it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"

namespace wk::line_format {

inline constexpr std::size_t kMaxKeyBytes = 32;
// Values are ids, instances, addresses, versions, pins, counts: all far below this. A
// bound so a corrupt body cannot make a line the size of the object.
inline constexpr std::size_t kMaxValueBytes = 1024;
inline constexpr std::uint64_t kMaxUint = std::numeric_limits<std::uint64_t>::max();

// A strict unsigned decimal (see the rules above), at most max; nullopt for anything else.
std::optional<std::uint64_t> ParseUint(std::string_view text, std::uint64_t max = kMaxUint);
// A strict signed decimal: ParseUint's rules with an optional leading '-', never "-0".
std::optional<std::int64_t> ParseInt(std::string_view text);
// A wall time as the formats store it: Unix milliseconds, ParseUint's rules, at most
// INT64_MAX (so never before 1970).
std::optional<WallTime> ParseUnixMs(std::string_view text);

// The header line's parts, for a format that recognises several versions.
struct Header {
  std::string_view kind;  // "node" for "wasmkeep-node 3"
  std::uint64_t version = 0;
};
// The first line of body as a header, or nullopt when it is not "wasmkeep-<kind> <n>"
// (the newline is not required here: it only identifies the format).
std::optional<Header> PeekHeader(std::string_view body);

class LineReader {
 public:
  // Reads the header line, which must be exactly "wasmkeep-<kind> <version>\n".
  // what: how errors name the body ("wasmkeep-node 3 object").
  static Result<LineReader> Open(std::string_view body, std::string_view kind, std::uint64_t version,
                                 std::string what);

  // The next line must be "<key> <value>"; returns the value. Errors name the line and
  // say whether the key found is unknown, repeated, or the expected one is missing.
  Result<std::string_view> Field(std::string_view key);
  // Field, whose value is a strict number at most max.
  Result<std::uint64_t> UintField(std::string_view key, std::uint64_t max = kMaxUint);
  Result<std::int64_t> IntField(std::string_view key);
  // Field, whose value is a wall time (ParseUnixMs).
  Result<WallTime> UnixMsField(std::string_view key);
  // Field, whose value is exactly `parts` non-empty parts with one space between each
  // ("token <id> <hash> <ms>": 3 parts); the caller checks each part.
  Result<std::vector<std::string_view>> FieldParts(std::string_view key, std::size_t parts);
  // The next line, whole (a list entry); the same line rules apply, it may not be empty.
  Result<std::string_view> BareLine();

  // Whether every line has been read: a format that ends in a run of lines of one key
  // (a tenant's tokens) reads them until this.
  bool AtEnd() const { return rest_.empty(); }
  // Everything not yet read (a binary payload).
  std::string_view rest() const { return rest_; }
  // Consumes n bytes of the payload (the caller parsed them from rest()).
  void Skip(std::size_t n);
  // OK iff nothing is left; else the error naming the first left-over line.
  Status Finish() const;

  // An error in this body's words: kFatal("corrupt <what>: line N: <detail>") for the last
  // line read (for a value the caller found bad: "line 3: bad generation").
  Status Corrupt(std::string_view detail) const;
  // kFatal("corrupt <what>: <detail>"), not naming a line.
  Status CorruptBody(std::string_view detail) const;
  int line_number() const { return line_; }

 private:
  LineReader(std::string_view rest, std::string what) : rest_(rest), what_(std::move(what)) {}
  Result<std::string_view> NextLine();

  std::string_view rest_;
  std::string what_;
  int line_ = 1;  // the header is line 1
  std::vector<std::string> seen_keys_;
};

// Builds the canonical form. REQUIRES (checked): keys and values obey the rules above, so a
// writer never produces a body its reader refuses.
class LineWriter {
 public:
  LineWriter(std::string_view kind, std::uint64_t version);

  LineWriter& Field(std::string_view key, std::string_view value);
  LineWriter& Field(std::string_view key, std::uint64_t value);
  // Signed (alarm times only; see ParseInt).
  LineWriter& IntField(std::string_view key, std::int64_t value);
  // REQUIRES (checked): t is not before 1970.
  LineWriter& UnixMsField(std::string_view key, WallTime t);
  // REQUIRES (checked): every part non-empty and without spaces.
  LineWriter& FieldParts(std::string_view key, std::initializer_list<std::string_view> parts);
  LineWriter& BareLine(std::string_view line);
  // Appends bytes after the lines (a binary payload); no line rule applies.
  LineWriter& Payload(std::string_view bytes);

  void Reserve(std::size_t bytes) { out_.reserve(bytes); }
  const std::string& str() const { return out_; }
  std::string Take() && { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace wk::line_format
