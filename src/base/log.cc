#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

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

// Quotes a value when it has spaces, quotes or '=' so a line stays machine-splittable.
void AppendValue(std::string& out, std::string_view v) {
  bool plain = !v.empty() && v.find_first_of(" \"=\t\n") == std::string_view::npos;
  if (plain) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
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

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  std::string line(message);
  for (const auto& [key, value] : fields) {
    line += ' ';
    line += key;
    line += '=';
    AppendValue(line, value);
  }
  Logger().log(ToSpd(level), line);
}

}  // namespace wk::log
