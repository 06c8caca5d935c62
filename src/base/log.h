// Logging: one line per event, "key=value" fields after a short message, to stderr
// (control characters and invalid UTF-8 escaped: FormatLine).
//
// A thin layer over spdlog so the rest of the code never includes it, and so every line
// has the same shape for operators' tools: timestamp, level, message, fields.
//   WK_LOG_INFO("lease written", {{"node", id}, {"version", v}});
//
// Threading: safe from any thread (spdlog's stderr sink is mutex-protected).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace wk::log {

enum class Level { kDebug, kInfo, kWarn, kError, kOff };

using Field = std::pair<std::string_view, std::string>;

// Sets the minimum level printed (default kInfo). Call once at start.
void SetLevel(Level level);
// Parses "debug", "info", "warn", "error", "off"; false if unknown.
bool ParseLevel(std::string_view text, Level* out);
bool Enabled(Level level);
void Write(Level level, std::string_view message, std::initializer_list<Field> fields = {});

// The line Write prints after its timestamp and level: the message, then ` key=value` per
// field. Text from outside the node may be anywhere in it, so nothing reaches the line as
// itself that a terminal or a log shipper would act on: control characters (C0 but for
// the escapes below, DEL, C1), Unicode line separators and bidi controls, and bytes that
// are not valid UTF-8 are written as \n \r \t \xNN or \u{NNNN}. A value that is empty,
// or holds a space, '"', '=', '\\', a byte >= 0x80 or anything escaped, is quoted (with \"
// and \\ inside). One record is always one line.
std::string FormatLine(std::string_view message, std::initializer_list<Field> fields);

}  // namespace wk::log

#define WK_LOG_DEBUG(...) ::wk::log::Write(::wk::log::Level::kDebug, __VA_ARGS__)
#define WK_LOG_INFO(...) ::wk::log::Write(::wk::log::Level::kInfo, __VA_ARGS__)
#define WK_LOG_WARN(...) ::wk::log::Write(::wk::log::Level::kWarn, __VA_ARGS__)
#define WK_LOG_ERROR(...) ::wk::log::Write(::wk::log::Level::kError, __VA_ARGS__)
