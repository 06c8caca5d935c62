// file://DIR — the embedded default bucket: a local directory standing in for S3.
//
// Concept. A FileStore gives a directory the semantics of an S3 bucket with conditional
// writes (object_store.h), so that one node, or several `wasmkeep serve` processes on one
// machine sharing DIR, run exactly the code they run against S3. The on-disk format (the
// key-to-path mapping, the object file header, the lock stripes) is in file_layout.h,
// FROZEN as format 1; read it first.
//
// Guarantees.
//   - Atomic visibility. A write goes to tmp/, is fsynced, and is renamed over its target:
//     a reader opens either the old or the new file, never a partial one, and object files
//     are never modified after the rename.
//   - Durability. A Put or Delete is acknowledged only after the object file (fdatasync),
//     the directory holding it, and every directory the write had to create (fsync of each
//     parent up to objects/) are on disk. One window is left to the file system: a
//     directory that another writer created a moment ago and has not yet fsynced into its
//     parent. Ext4 and xfs commit metadata in order through one journal, so the fsync of
//     the object's own directory persists that earlier mkdir too.
//   - Conditional writes are atomic across threads and processes. Every write of a key
//     (conditional or not: an unconditional write must not slip between another writer's
//     check and its rename) takes an exclusive flock(2) on the key's lock stripe
//     (locks/NNN) around check-and-rename. Each acquisition opens the lock file anew, so
//     threads of one process exclude each other too (flock locks belong to the open file
//     description). A process stopped (SIGSTOP) while holding a stripe blocks writers of
//     that stripe until it resumes or dies; their calls then time out as kUnknownOutcome.
//   - Versions are 128 random bits from getrandom(2) per write, stored in the object's
//     header: never reused, even after delete and re-create, by any process.
//   - Readers take no lock. A reader can see a write that is renamed but whose directory
//     fsync has not finished; the writer has not acknowledged it yet. Only power loss can
//     take such a write back, and it takes the reader's memory with it.
//   - Crash leftovers: temp files in tmp/ are invisible to Get and List. Open removes those
//     older than a minute whose flock it can take (a live writer holds its temp file's lock
//     from creation to rename). Empty directories left by a crash are harmless; a Delete
//     removes the directories it empties.
//   - Errors: ENOSPC, EDQUOT, EMFILE, ENOMEM and the like are kRetryable (nothing was
//     applied, space may be freed); EIO, EACCES, EROFS and anything unexpected are kFatal.
//     A failure after the rename (the directory fsync) is kUnknownOutcome: the write is
//     visible but may not survive a crash. An unreadable or corrupt object file (bad
//     magic, checksum, size, or a key that does not match its path) is kFatal naming the
//     file. Messages name the store, the operation, the key and the errno text.
//
// Listing cost. List reads the directories under the prefix (the deepest directory the
// prefix's complete segments name, and the subdirectories it must enter), merging their
// entries lazily in byte order with a min-heap, and reads the header of each returned
// object plus one. Per page that is O(entries of the directories it enters + page size
// header reads); paging through a directory of M keys costs O(M) directory reads per page
// (O(M^2 / page size) for all of it) and holds up to M entries in memory while it runs.
// WasmKeep's listings are per actor or per node (wal/<tenant>/<class>/<name>/, nodes/), so
// M stays small; a bucket with one huge flat directory would list slowly. Each directory
// is opened by its path from DIR, so a listing that walks down a key of many '/' pays
// O(depth^2) path resolution: about 80 ms for the 1024-level key of a 1024-byte "////...".
//
// Local file systems only: flock(2) does not exclude processes on different NFS clients,
// and the names are raw key bytes (the file system must be case-sensitive; Open checks).
//
// Threading. Every method is called on the Env's loop thread (object_store.h). File I/O
// runs on the store's own worker threads (FileStoreOptions::io_threads), which hand results
// back with Env::PostFromAnyThread into a Latch, so the loop never blocks on a disk. A call
// past its deadline returns kUnknownOutcome and its late result is dropped; a cancelled read
// returns kCancelled, a cancelled write kUnknownOutcome (it may still land).
// Real runtime only: SimEnv has no other threads (use mem:// there).
//
// Lifetime. REQUIRES: the Env outlives the FileStore. Destroying the FileStore waits for
// the operations running on its workers (bounded by their I/O) and drops the queued ones,
// whose callers get kRetryable (nothing was applied). Completions already posted to the loop
// hold only their Latch, so they run safely after the store is gone.
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
