// OpenStore: turns a bucket URL into an ObjectStore.
//
//   mem://                 a fresh in-memory bucket (tests; gone when the process ends)
//   sqlite://DIR           a local directory holding one SQLite database, writes of many
//                          actors committed together (the embedded default;
//                          store/sqlite/sqlite_store.h)
//   file://DIR             a local directory, one file per object (store/file/file_store.h)
//                          (relative paths, in both, are from the working directory)
//   s3://BUCKET?endpoint=URL&region=R[&if_match_quoted=true|false][&conditional_delete=…]
//                          any S3-compatible service; credentials from AWS_ACCESS_KEY_ID,
//                          AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)
//
// Errors are kInvalidArgument (a malformed URL, an unknown scheme, a missing endpoint or
// credentials), kNotFound (kMustExist: no bucket at that directory) or kFatal (an
// unwritable directory), each with a one-line message naming the problem. Opening sends no request to a remote bucket; the first call does.
//
// Threading: call on env's loop thread (or before the loop runs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/metrics.h"
#include "env/real_env.h"
#include "store/object_store.h"

namespace wk {

using GetEnvFn = std::function<std::optional<std::string>(const char*)>;
// The process environment.
std::optional<std::string> ProcessGetEnv(const char* name);

// Whether opening may create the bucket. Only `serve` and commands that create things
// (tenant add, deploy, bucket put) create an embedded bucket (sqlite://, file://), and a
// log line says so; every other command needs an existing one, so a mistyped path is an
// error (kNotFound naming the path), never a new empty bucket. s3:// never creates a bucket.
enum class BucketOpen : std::uint8_t { kCreateIfMissing, kMustExist };

Result<std::unique_ptr<ObjectStore>> OpenStore(RealEnv& env, std::string_view url,
                                               const GetEnvFn& getenv = ProcessGetEnv,
                                               BucketOpen mode = BucketOpen::kCreateIfMissing);

// The embedded default: a directory beside the working directory, as one SQLite database
// (docs/storage-backends.md says why sqlite:// rather than file://).
inline constexpr std::string_view kDefaultBucketUrl = "sqlite://./wasmkeep-data";

// Registers the metrics of store's backend, where it has any (sqlite://:
// wasmkeep_store_sqlite_*; the others publish none). REQUIRES: store outlives registry's
// scrapes.
void PublishStoreMetrics(MetricsRegistry& registry, const ObjectStore& store);

}  // namespace wk
