// The line format: the one strict reader and canonical writer of every frozen text format
// (node and owner records, drain requests, tenant records, the text heads of segments and
// snapshots...): a header line `wasmkeep-<kind> <version>`, then `<key> <value>` fields in
// the format's order, bare list lines, an optional binary payload. Guarantees: the reader
// refuses anything but the canonical form with kFatal("corrupt <what>: line N: ..."), never
// an empty or absent value; Encode(Decode(x)) == x for every accepted body. Threading: pure
// functions and value types; a LineReader's body must outlive it. The rules:
// docs/internals.md, "The line format".
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
