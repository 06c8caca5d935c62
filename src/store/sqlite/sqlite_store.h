// sqlite://DIR: the embedded bucket, every object one row of one SQLite database in WAL mode
// (DIR/wasmkeep.sqlite, format 1, FROZEN), with S3's conditional-write semantics
// (object_store.h). Guarantees: a write is acknowledged only once its transaction is
// committed and the WAL fsynced (one writer thread commits every waiting write in one
// transaction: group commit across actors); conditions are checked inside that transaction,
// so they hold across threads and processes; versions are 128 random bits; bodies carry a
// CRC-32C checked on every Get. Threading: methods on the Env's loop thread; the store owns a
// writer, a checkpointer and reader threads; real runtime only. REQUIRES: the Env outlives the
// store. Details (the schema, errors, threads, sharing DIR): docs/internals.md, "SqliteStore".
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/metrics.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

namespace sqlite_store_internal {
class Writer;   // the writer thread, its connection and its queue (sqlite_store.cc)
class Readers;  // the reader threads and their connections
}  // namespace sqlite_store_internal

// Limits, with their reasons.
// A batch is one transaction; more writes than this wait for the next one, so one commit's
// latency stays bounded while still sharing its fsync among many actors (a node runs at
// most a few thousand events at once).
inline constexpr std::size_t kMaxSqliteBatchWrites = 1024;
// A batch stops growing past this many body bytes (a transaction's pages stay in the
// writer's cache until the commit); a single larger write is a batch of its own.
inline constexpr std::size_t kMaxSqliteBatchBytes = 64u << 20;
// The WAL is checkpointed into the database once it holds this many 4 KiB pages (16 MiB);
// SQLite's own default is 1,000, whose checkpoints would run ten times as often.
inline constexpr int kSqliteCheckpointFrames = 4096;
inline constexpr int kMaxSqliteReadThreads = 64;
// The format the database file records (user_version) and its application id ('WKSQ').
inline constexpr int kSqliteFormatVersion = 1;
inline constexpr std::int32_t kSqliteApplicationId = 0x574B5351;
// The database's file name inside DIR.
inline constexpr std::string_view kSqliteDbFile = "wasmkeep.sqlite";

struct SqliteStoreOptions {
  // Reader threads (and read-only connections), 1..kMaxSqliteReadThreads.
  int read_threads = 4;
  // Operations queued for the writer or the readers beyond which a call fails fast with
  // kRetryable.
  std::size_t max_queued_ops = 16384;
  // How long a transaction waits for another process's write lock before the batch fails
  // kRetryable. Within one process there is one writer, so this only matters when several
  // processes share DIR.
  std::chrono::milliseconds busy_timeout{10'000};
  // false sets synchronous=OFF: only for benchmarks that show the cost of the fsync, and
  // tests whose subject is not durability. Nothing survives power loss (or kill -9 of
  // the machine) then.
  bool fsync = true;
  // Test hook: runs on the writer thread before each batch's transaction, with the number
  // of writes in it. Tests block in it to let a batch build up. Must be thread-safe.
  // Null in production.
  std::function<void(std::size_t writes)> before_batch_for_test;
  // Test hook: runs on the checkpointer thread before each checkpoint. Tests block in it to
  // show that writes go on meanwhile. Must be thread-safe. Null in production.
  std::function<void()> before_checkpoint_for_test;
};

// What the writer did, for the operator (wasmkeep_store_sqlite_*). Written by the writer
// thread, readable from any thread (counters are atomics, histograms are thread-safe).
struct SqliteStoreStats {
  // Transactions committed (each one fsync of the WAL).
  std::atomic<std::uint64_t> commits{0};
  // Writes answered from committed batches: applied, and refused by their condition.
  std::atomic<std::uint64_t> writes_applied{0};
  std::atomic<std::uint64_t> writes_refused{0};
  // Batches that failed as a whole (busy past the timeout, disk full, commit errors).
  std::atomic<std::uint64_t> failed_batches{0};
  // WAL checkpoints run (each fsyncs the WAL and the database file).
  std::atomic<std::uint64_t> checkpoints{0};
  // Times the writer found another process holding the write lock and slept.
  std::atomic<std::uint64_t> busy_waits{0};
  // Writes per committed transaction.
  Histogram batch_writes{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}};
  // From BEGIN to the end of COMMIT (the fsync included), seconds.
  Histogram commit_seconds{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                            0.1, 0.25, 0.5, 1}};
};

class SqliteStore final : public ObjectStore {
 public:
  // Opens (creating with mkdir -p if missing) the bucket directory dir and its database.
  // Errors: kInvalidArgument for an empty dir or bad options; kFatal, with one line naming
  // the path and the reason, if the directory cannot be created, holds something that is
  // not this format's database (a file:// bucket, another SQLite file, other files), or
  // the database cannot be opened for writing. Blocks the calling thread for a few file
  // operations (start-up only; several processes may open one new DIR at once).
  static Result<std::unique_ptr<SqliteStore>> Open(Env& env, std::string dir,
                                                   SqliteStoreOptions options);
  // Whether dir already holds a bucket (its database file), without creating or changing
  // anything: OK, or kNotFound naming the path and what is missing (see FileStore).
  static Status CheckExists(const std::string& dir);
  ~SqliteStore() override;

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override;
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                            CallOptions options) override;
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override;
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override;
  // "sqlite://<absolute directory>".
  std::string Describe() const override;

  // The absolute bucket directory.
  const std::string& dir() const { return dir_; }
  const SqliteStoreStats& stats() const { return *stats_; }

 private:
  SqliteStore(Env& env, std::string dir, std::shared_ptr<SqliteStoreStats> stats,
              std::unique_ptr<sqlite_store_internal::Readers> readers,
              std::unique_ptr<sqlite_store_internal::Writer> writer);

  // "sqlite://DIR: OP 'KEY'", for messages.
  std::string Where(std::string_view op, std::string_view key) const;

  Env& env_;
  const std::string dir_;
  std::shared_ptr<SqliteStoreStats> stats_;
  std::unique_ptr<sqlite_store_internal::Readers> readers_;  // joined first
  std::unique_ptr<sqlite_store_internal::Writer> writer_;
};

// Registers wasmkeep_store_sqlite_* views of stats (base/metrics.h, "How WasmKeep
// publishes"). REQUIRES: stats outlives registry's scrapes.
void PublishSqliteStoreMetrics(MetricsRegistry& registry, const SqliteStoreStats& stats);

}  // namespace wk
