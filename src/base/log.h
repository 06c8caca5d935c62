// Logging: one line per event, "key=value" fields after a short message, to stderr.
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

}  // namespace wk::log

#define WK_LOG_DEBUG(...) ::wk::log::Write(::wk::log::Level::kDebug, __VA_ARGS__)
#define WK_LOG_INFO(...) ::wk::log::Write(::wk::log::Level::kInfo, __VA_ARGS__)
#define WK_LOG_WARN(...) ::wk::log::Write(::wk::log::Level::kWarn, __VA_ARGS__)
#define WK_LOG_ERROR(...) ::wk::log::Write(::wk::log::Level::kError, __VA_ARGS__)
