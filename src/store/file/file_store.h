// file://DIR: a local directory as the bucket, one file per object (format 1, FROZEN:
// file_layout.h), with S3's conditional-write semantics (object_store.h). Guarantees: a
// write becomes visible whole (written to tmp/, fsynced, renamed) and is acknowledged only
// once it and the directories it needed are on disk; a key's writes take an flock(2) stripe
// around check-and-rename, so conditions hold across threads and processes sharing DIR;
// versions are 128 random bits. Local, case-sensitive file systems only. Threading: methods
// on the Env's loop thread, file I/O on the store's worker threads; real runtime only.
// REQUIRES: the Env outlives the store. Details (errors, crash leftovers, listing cost,
// lifetime): docs/internals.md, "FileStore".
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "env/env.h"
#include "store/object_store.h"

namespace wk {

struct FileStoreOptions {
  // Worker threads doing the file I/O, 1..kMaxFileStoreIoThreads. Each in-flight
  // operation (mostly waiting on fsync) holds one.
  int io_threads = 4;
  // Operations queued for the workers beyond which a call fails fast with kRetryable.
  std::size_t max_queued_ops = 4096;
  // false skips every fsync: only for benchmarks that show its cost, and tests whose
  // subject is not durability. Nothing survives power loss then.
  bool fsync = true;
  // Test hook: runs on a worker thread as each operation starts its I/O ("get", "head",
  // "put", "delete", "list"; key or list prefix). Tests block in it to hold an operation
  // in flight. Must be thread-safe. Null in production.
  std::function<void(std::string_view op, std::string_view key)> before_io_for_test;
};

inline constexpr int kMaxFileStoreIoThreads = 64;

class FileStore final : public ObjectStore {
 public:
  // Opens (creating with mkdir -p if missing) the bucket directory dir, relative to the
  // working directory or absolute. Errors: kInvalidArgument for an empty dir or bad
  // options; kFatal, with one line naming the path and the errno text, if the directory
  // cannot be created or written, is a file, is a non-empty directory that is not a
  // bucket, holds a FORMAT this build does not read, or is on a case-insensitive file
  // system. Blocks the calling thread for a few file operations (start-up only).
  static Result<std::unique_ptr<FileStore>> Open(Env& env, std::string dir,
                                                 FileStoreOptions options);
  // Whether dir already holds a bucket (its FORMAT file), without creating or changing
  // anything: OK, or kNotFound naming the path and what is missing. Commands that only
  // read call it first, so a mistyped path is an error, not a new empty bucket.
  static Status CheckExists(const std::string& dir);
  ~FileStore() override;

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override;
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                            CallOptions options) override;
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override;
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override;
  // "file://<absolute directory>".
  std::string Describe() const override;
  // This machine's clock: the bucket is a directory here.
  Task<Result<BucketClock>> BucketTime(CallOptions options) override;

  // The absolute bucket directory.
  const std::string& dir() const;
  // How many crash-leftover temp files Open removed.
  std::size_t stale_temps_removed() const { return stale_temps_removed_; }

 private:
  // The blocking operations and the open directory, shared with the worker threads.
  struct Core;
  class Pool;  // the worker threads (store/local/worker_pool.h)

  FileStore(Env& env, std::shared_ptr<Core> core, const FileStoreOptions& options,
            std::size_t stale_temps_removed);

  // Runs work on a worker and delivers its result on the loop, honouring the deadline
  // and cancellation (is_write decides what a cancellation means).
  template <typename R>
  Task<R> Run(const char* op, std::string key, bool is_write, CallOptions options,
              std::function<R(Core&)> work);

  Env& env_;
  std::shared_ptr<Core> core_;
  std::size_t stale_temps_removed_ = 0;
  std::unique_ptr<Pool> pool_;  // last: destroyed (joined) first
};

}  // namespace wk
