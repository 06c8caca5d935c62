#include "base/time_text.h"

#include <charconv>
#include <chrono>
#include <cstdio>

namespace wk {
namespace {

bool Digits(std::string_view s, std::size_t at, std::size_t n, int* out) {
  if (at + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

Result<std::int64_t> ParseTimeMs(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("time '" + std::string(text.substr(0, 64)) +
                           "' is neither RFC 3339 (2026-12-05T10:00:00Z, an offset or fractions allowed) nor Unix "
                           "milliseconds");
  };
  if (text.empty()) return bad();
  if (text.find_first_not_of("0123456789") == std::string_view::npos) {
    std::int64_t v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return bad();
    return v;
  }
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!Digits(text, 0, 4, &y) || text.size() < 20 || text[4] != '-' || !Digits(text, 5, 2, &mo) || text[7] != '-' ||
      !Digits(text, 8, 2, &d) || (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !Digits(text, 11, 2, &h) ||
      text[13] != ':' || !Digits(text, 14, 2, &mi) || text[16] != ':' || !Digits(text, 17, 2, &sec)) {
    return bad();
  }
  const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(static_cast<unsigned>(mo)),
                                        std::chrono::day(static_cast<unsigned>(d))};
  if (!ymd.ok() || h > 23 || mi > 59 || sec > 60) return bad();
  std::size_t i = 19;
  std::int64_t ms = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (digits < 3) ms = ms * 10 + (text[i] - '0');
      ++digits;
      ++i;
    }
    if (digits == 0) return bad();
    for (int k = digits; k < 3; ++k) ms *= 10;
  }
  std::int64_t offset_min = 0;
  if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
    ++i;
  } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    int oh = 0, om = 0;
    if (!Digits(text, i + 1, 2, &oh) || i + 3 >= text.size() || text[i + 3] != ':' || !Digits(text, i + 4, 2, &om) ||
        oh > 23 || om > 59) {
      return bad();
    }
    offset_min = (text[i] == '-' ? -1 : 1) * (oh * 60 + om);
    i += 6;
  } else {
    return bad();
  }
  if (i != text.size()) return bad();
  const std::int64_t days = std::chrono::sys_days(ymd).time_since_epoch().count();
  const std::int64_t secs = days * 86'400 + h * 3'600 + mi * 60 + std::min(sec, 59) - offset_min * 60;
  return secs * 1'000 + ms;
}

std::string FormatTimeMs(std::int64_t unix_ms) {
  const std::int64_t secs = unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
  const std::int64_t ms = unix_ms - secs * 1000;
  const std::int64_t days = secs >= 0 ? secs / 86'400 : (secs - 86'399) / 86'400;
  const std::int64_t rest = secs - days * 86'400;
  const std::chrono::year_month_day ymd{std::chrono::sys_days(std::chrono::days(days))};
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<long long>(rest / 3600), static_cast<long long>(rest / 60 % 60),
                static_cast<long long>(rest % 60), static_cast<long long>(ms));
  return buf;
}

}  // namespace wk
