#include "cli/common.h"

#include <cstdio>
#include <ctime>

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

std::string IsoUtc(WallTime t) {
  std::time_t secs = static_cast<std::time_t>(ToUnixMs(t) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace wk::cli
