#include "cli/common.h"

#include <cstdio>

#include "base/log.h"
#include "cli/test_hooks.h"
#include "store/open_store.h"

namespace wk::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Code::kOk: return kExitOk;
    case Code::kPreconditionFailed: return kExitPreconditionFailed;
    case Code::kNotFound: return kExitNotFound;
    case Code::kInvalidArgument: return kExitUsage;
    case Code::kUnknownOutcome: return kExitUnknownOutcome;
    case Code::kRetryable:
    case Code::kFatal:
    case Code::kCancelled: return kExitError;
  }
  return kExitError;
}

int Fail(const Status& status) {
  std::fprintf(stderr, "wasmkeep: %s\n", status.ToString().c_str());
  return ExitCodeFor(status);
}

Result<Config> LoadConfigFromOptions(const GlobalOptions& g) {
  Config config;
  if (!g.config_path.empty()) {
    auto loaded = LoadConfig(g.config_path);
    if (!loaded.ok()) return loaded.status();
    config = std::move(loaded).value();
  }
  if (config.log_level) {
    log::Level level;
    if (!log::ParseLevel(*config.log_level, &level)) {
      return InvalidArgument("log.level must be debug, info, warn, error or off (got '" + *config.log_level + "')");
    }
    log::SetLevel(level);
  }
  return config;
}

int FailOpen(const Status& status) {
  if (status.code() != Code::kNotFound) return Fail(status);
  std::fprintf(stderr, "wasmkeep: %s\n", status.ToString().c_str());
  return kExitNoBucket;
}

Result<std::unique_ptr<ObjectStore>> OpenBucket(RealEnv& env, const GlobalOptions& g, const Config& config,
                                                BucketOpen mode) {
  std::string url = !g.bucket_url.empty() ? g.bucket_url
                    : config.bucket_url   ? *config.bucket_url
                                          : std::string(kDefaultBucketUrl);
  auto store = OpenStore(env, url, EnvWithConfig(config), mode);
  if (!store.ok()) return store.status();
  return WrapBucketForTests(env, std::move(store).value());
}

Result<CallOptions> CallOptionsFrom(const GlobalOptions& g) {
  if (!(g.timeout_seconds > 0) || g.timeout_seconds > 3600) {
    return InvalidArgument("--timeout must be in (0, 3600] seconds");
  }
  return CallOptions{std::chrono::duration_cast<Duration>(std::chrono::duration<double>(g.timeout_seconds))};
}

namespace {

// Rounds toward minus infinity (C++'s / rounds toward zero): a time before the epoch falls
// on the day before, not on day 0.
std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

struct CivilDate {
  std::int64_t year;
  unsigned month;  // 1..12
  unsigned day;    // 1..31
};

// The proleptic Gregorian date `days` after 1970-01-01, in 64-bit arithmetic throughout.
// The calendar repeats every 400 years (146,097 days); counting from 0000-03-01 puts the
// leap day at the end of each counted year, so a year's days are a fixed pattern of month
// lengths (153 days every 5 months from March).
CivilDate CivilFromDays(std::int64_t days) {
  constexpr std::int64_t kDaysPer400Years = 146'097;
  constexpr std::int64_t kEpochFromMarch0000 = 719'468;  // 0000-03-01 to 1970-01-01
  const std::int64_t z = days + kEpochFromMarch0000;
  const std::int64_t era = FloorDiv(z, kDaysPer400Years);
  const std::int64_t day_of_era = z - era * kDaysPer400Years;  // 0..146096
  const std::int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36'524 - day_of_era / 146'096) / 365;  // 0..399
  const std::int64_t day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const std::int64_t month_from_march = (5 * day_of_year + 2) / 153;  // 0..11
  const auto day = static_cast<unsigned>(day_of_year - (153 * month_from_march + 2) / 5 + 1);
  const auto month = static_cast<unsigned>(month_from_march < 10 ? month_from_march + 3 : month_from_march - 9);
  const std::int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  return {year, month, day};
}

}  // namespace

std::string UtcFromUnixMs(std::int64_t ms, bool with_ms) {
  constexpr std::int64_t kMsPerDay = 86'400'000;
  const std::int64_t days = FloorDiv(ms, kMsPerDay);
  // Not ms - days * kMsPerDay: for the earliest times that product is below int64's range.
  std::int64_t in_day = ms % kMsPerDay;
  if (in_day < 0) in_day += kMsPerDay;  // 0..kMsPerDay - 1
  const CivilDate date = CivilFromDays(days);
  std::string year = std::to_string(date.year < 0 ? -date.year : date.year);
  if (year.size() < 4) year.insert(0, 4 - year.size(), '0');
  if (date.year < 0) {
    year.insert(0, 1, '-');
  } else if (date.year > 9999) {
    year.insert(0, 1, '+');
  }
  char rest[40];
  const long long secs = in_day / 1000;
  std::snprintf(rest, sizeof rest, "-%02u-%02uT%02lld:%02lld:%02lld", date.month, date.day, secs / 3600,
                secs / 60 % 60, secs % 60);
  std::string out = year + rest;
  if (with_ms) {
    char millis[8];
    std::snprintf(millis, sizeof millis, ".%03lld", static_cast<long long>(in_day % 1000));
    out += millis;
  }
  return out + "Z";
}

std::string IsoUtc(WallTime t) { return UtcFromUnixMs(ToUnixMs(t), /*with_ms=*/false); }

}  // namespace wk::cli
