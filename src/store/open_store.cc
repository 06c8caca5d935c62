#include "store/open_store.h"

#include <cstdlib>

#include "base/log.h"

#include "store/file/file_store.h"
#include "store/mem/mem_store.h"
#include "store/s3/s3_config.h"
#include "store/s3/s3_store.h"
#include "store/sqlite/sqlite_store.h"

namespace wk {

std::optional<std::string> ProcessGetEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Result<std::unique_ptr<ObjectStore>> OpenStore(RealEnv& env, std::string_view url,
                                               const GetEnvFn& getenv, BucketOpen mode) {
  if (url.starts_with("mem://")) {
    if (url.size() > 6) return InvalidArgument("mem:// takes no path (got '" + std::string(url) + "')");
    return std::unique_ptr<ObjectStore>(
        std::make_unique<MemStore>(env, std::make_shared<MemBucket>()));
  }
  if (url.starts_with("file://")) {
    std::string dir(url.substr(7));
    if (dir.empty()) return InvalidArgument("file:// needs a directory, e.g. file://./wasmkeep-data");
    const Status existing = FileStore::CheckExists(dir);
    if (!existing.ok() && mode == BucketOpen::kMustExist) return existing;
    auto store = FileStore::Open(env, dir, FileStoreOptions{});
    if (!store.ok()) return store.status();
    if (!existing.ok()) WK_LOG_INFO("created a new bucket", {{"bucket", (*store)->Describe()}});
    return std::unique_ptr<ObjectStore>(std::move(store).value());
  }
  if (url.starts_with("sqlite://")) {
    std::string dir(url.substr(9));
    if (dir.empty()) return InvalidArgument("sqlite:// needs a directory, e.g. sqlite://./wasmkeep-data");
    const Status existing = SqliteStore::CheckExists(dir);
    if (!existing.ok() && mode == BucketOpen::kMustExist) return existing;
    auto store = SqliteStore::Open(env, dir, SqliteStoreOptions{});
    if (!store.ok()) return store.status();
    if (!existing.ok()) WK_LOG_INFO("created a new bucket", {{"bucket", (*store)->Describe()}});
    return std::unique_ptr<ObjectStore>(std::move(store).value());
  }
  if (url.starts_with("s3://")) {
    auto config = ParseS3Url(url, getenv);
    if (!config.ok()) return config.status();
    if (!config->settings_from.empty()) {
      WK_LOG_DEBUG("s3 settings", {{"bucket", DescribeS3Config(*config)}, {"from", config->settings_from}});
    }
    auto store = S3Store::Create(env, std::move(config).value());
    if (!store.ok()) return store.status();
    return std::unique_ptr<ObjectStore>(std::move(store).value());
  }
  auto colon = url.find("://");
  std::string scheme = colon == std::string_view::npos ? std::string(url)
                                                       : std::string(url.substr(0, colon));
  return InvalidArgument("unknown bucket URL scheme '" + scheme +
                         "' (expected mem://, sqlite://DIR, file://DIR or s3://BUCKET?endpoint=URL)");
}

void PublishStoreMetrics(MetricsRegistry& registry, const ObjectStore& store) {
  if (const auto* sqlite = dynamic_cast<const SqliteStore*>(&store)) {
    PublishSqliteStoreMetrics(registry, sqlite->stats());
  }
  if (const auto* s3 = dynamic_cast<const S3Store*>(&store)) PublishS3StoreMetrics(registry, *s3);
}

}  // namespace wk
