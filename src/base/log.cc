#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <cstdint>

#include "base/utf8.h"

namespace wk::log {
namespace {

spdlog::logger& Logger() {
  static auto logger = [] {
    auto l = spdlog::stderr_logger_mt("wasmkeep");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
    l->set_level(spdlog::level::info);
    return l;
  }();
  return *logger;
}

spdlog::level::level_enum ToSpd(Level level) {
  switch (level) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

// Log lines carry text from outside the node (an actor's log messages, header names, an
// error a peer sent): a byte that a terminal or a log shipper would act on must not reach
// the line as itself. Control characters (C0, DEL, C1), Unicode line separators and bidi
// overrides are escaped, and so is every byte that is not part of valid UTF-8, so one
// record is one line, and what it shows is what it holds.


// A code point that must not appear as itself in a line (besides C0 and DEL).
bool IsInvisibleControl(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) ||      // C1 controls (0x9B is a CSI on some terminals)
         cp == 0x2028 || cp == 0x2029 ||    // line and paragraph separators
         (cp >= 0x202A && cp <= 0x202E) ||  // bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069);    // bidi isolates
}

// Appends text with \n, \r, \t, \\, \" (when quoted), \xNN for other control bytes
// and bytes outside valid UTF-8, and \u{NNNN} for the code points above.
void AppendEscaped(std::string& out, std::string_view text, bool quoted) {
  static constexpr char kHex[] = "0123456789abcdef";
  while (!text.empty()) {
    char32_t cp = 0;
    const std::size_t length = Utf8SequenceLength(text, &cp);
    if (length == 0 || (length == 1 && (cp < 0x20 || cp == 0x7F))) {
      const auto b = static_cast<unsigned char>(text[0]);
      if (b == '\n') {
        out += "\\n";
      } else if (b == '\r') {
        out += "\\r";
      } else if (b == '\t') {
        out += "\\t";
      } else {
        out += "\\x";
        out += kHex[b >> 4];
        out += kHex[b & 0xF];
      }
      text.remove_prefix(1);
      continue;
    }
    if (IsInvisibleControl(cp)) {
      out += fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(cp));
    } else if (length == 1 && (cp == '\\' || (quoted && cp == '"'))) {
      out += '\\';
      out += static_cast<char>(cp);
    } else {
      out.append(text.substr(0, length));
    }
    text.remove_prefix(length);
  }
}

// Whether a value can be written as it is: not empty, and nothing AppendEscaped would
// change, and no space, quote or '=' that would make the line ambiguous to split.
bool IsPlain(std::string_view v) {
  if (v.empty()) return false;
  for (const char c : v) {
    const auto b = static_cast<unsigned char>(c);
    if (b <= 0x20 || b == 0x7F || b >= 0x80 || c == '"' || c == '=' || c == '\\') return false;
  }
  return true;
}

// Quotes a value when it has spaces, quotes, '=' or anything escaped, so a line stays
// machine-splittable.
void AppendValue(std::string& out, std::string_view v) {
  if (IsPlain(v)) {
    out += v;
    return;
  }
  out += '"';
  AppendEscaped(out, v, /*quoted=*/true);
  out += '"';
}

}  // namespace

void SetLevel(Level level) { Logger().set_level(ToSpd(level)); }

bool ParseLevel(std::string_view text, Level* out) {
  if (text == "debug") *out = Level::kDebug;
  else if (text == "info") *out = Level::kInfo;
  else if (text == "warn") *out = Level::kWarn;
  else if (text == "error") *out = Level::kError;
  else if (text == "off") *out = Level::kOff;
  else return false;
  return true;
}

bool Enabled(Level level) { return Logger().should_log(ToSpd(level)); }

std::string FormatLine(std::string_view message, std::initializer_list<Field> fields) {
  std::string line;
  AppendEscaped(line, message, /*quoted=*/false);
  for (const auto& [key, value] : fields) {
    line += ' ';
    AppendEscaped(line, key, /*quoted=*/false);
    line += '=';
    AppendValue(line, value);
  }
  return line;
}

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  Logger().log(ToSpd(level), FormatLine(message, fields));
}

}  // namespace wk::log
