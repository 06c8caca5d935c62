#include "store/sqlite/sqlite_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/crc32c.h"
#include "store/local/local_text.h"
#include "store/local/random_bytes.h"
#include "store/local/worker_pool.h"

namespace wk {

namespace {

// Limits, with their reasons.
// Versions are this many random bytes (as file://: collisions are out of reach).
constexpr std::size_t kVersionBytes = 16;
// Page cache of the writer's connection, and of each reader's (KiB; SQLite takes a
// negative cache_size as KiB). The writer's holds a whole batch's pages until its commit.
constexpr int kWriterCacheKib = 16 * 1024;
constexpr int kReaderCacheKib = 4 * 1024;
// After a checkpoint the WAL file is truncated back to this size if it grew past it.
constexpr std::int64_t kWalSizeLimitBytes = 64ll << 20;
// The busy handler's sleeps between tries of a lock another process holds: short, because
// a commit holds the write lock for about one fsync (0.2-2 ms on the disks measured).
constexpr auto kBusyFirstSleep = std::chrono::microseconds(50);
constexpr auto kBusyMaxSleep = std::chrono::microseconds(1000);
// How long an open retries the switch to WAL mode while other processes open the file.
constexpr auto kJournalModeRetryLimit = std::chrono::seconds(10);

using local_store::ErrnoText;
using local_store::Quote;
using local_store::RandomBytes;

// What a SQLite result code means to the caller (status.h). Lock contention, a full disk
// and memory pressure can clear by themselves; the rest needs an operator.
Code CodeForSqlite(int rc) {
  if (rc == SQLITE_IOERR_NOMEM) return Code::kRetryable;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_NOMEM:
    case SQLITE_INTERRUPT:
      return Code::kRetryable;
    default:
      return Code::kFatal;  // IOERR, CORRUPT, NOTADB, READONLY, CANTOPEN, PERM, ...
  }
}

std::string SqliteText(sqlite3* db, int rc) {
  std::string text = sqlite3_errstr(rc);
  if (db != nullptr) {
    const char* detail = sqlite3_errmsg(db);
    if (detail != nullptr && text != detail) text += std::string(" (") + detail + ")";
  }
  return text;
}

std::string Hex(const unsigned char* bytes, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

// A blob column as a string_view (SQLite returns null for a zero-length blob).
std::string_view ColumnBytes(sqlite3_stmt* stmt, int column) {
  const void* data = sqlite3_column_blob(stmt, column);
  const int size = sqlite3_column_bytes(stmt, column);
  if (data == nullptr || size <= 0) return {};
  return {static_cast<const char*>(data), static_cast<std::size_t>(size)};
}

// Binds bytes as a BLOB (never TEXT: SQLite orders every TEXT before every BLOB, and keys
// must compare as bytes). The data must outlive the statement's next reset.
int BindBytes(sqlite3_stmt* stmt, int index, std::string_view bytes) {
  // A null pointer would bind NULL; a string's data() never is, but a view's may be.
  const char* data = bytes.data() != nullptr ? bytes.data() : "";
  return sqlite3_bind_blob64(stmt, index, data, bytes.size(), SQLITE_STATIC);
}

// An owned prepared statement; reset (and its bindings cleared) by each Use.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  int Prepare(sqlite3* db, std::string_view sql) {
    return sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  }
  // The statement, reset for new bindings.
  sqlite3_stmt* Use() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return stmt_;
  }
  // Releases the statement's read snapshot and the blobs it bound.
  void Done() { sqlite3_reset(stmt_); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Waits for a lock another process holds (sqlite3_busy_handler), for up to the timeout.
// One per connection; runs on the connection's thread.
struct BusyWait {
  std::chrono::milliseconds timeout{0};
  std::atomic<std::uint64_t>* waits = nullptr;  // counted when set (the writer's)
  std::chrono::steady_clock::time_point started;

  static int Handler(void* arg, int tries) {
    auto* self = static_cast<BusyWait*>(arg);
    const auto now = std::chrono::steady_clock::now();
    if (tries == 0) self->started = now;
    if (now - self->started >= self->timeout) return 0;  // give up: SQLITE_BUSY
    if (self->waits != nullptr) self->waits->fetch_add(1, std::memory_order_relaxed);
    auto sleep = kBusyFirstSleep * (1 << std::min(tries, 5));
    std::this_thread::sleep_for(std::min<std::chrono::microseconds>(sleep, kBusyMaxSleep));
    return 1;
  }
};

// An owned connection, with its busy handler's state.
struct Connection {
  sqlite3* db = nullptr;
  std::unique_ptr<BusyWait> busy = std::make_unique<BusyWait>();

  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (db != nullptr) sqlite3_close_v2(db);
  }
};

// Runs sql (no rows wanted). Returns a SQLite result code.
int Exec(sqlite3* db, const char* sql) { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); }

// Runs a one-value query (a PRAGMA) and returns its first column as an integer or text.
std::optional<std::int64_t> QueryInt(sqlite3* db, const char* sql, int* rc) {
  sqlite3_stmt* stmt = nullptr;
  *rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (*rc != SQLITE_OK) return std::nullopt;
  std::optional<std::int64_t> value;
  *rc = sqlite3_step(stmt);
  if (*rc == SQLITE_ROW) {
    value = sqlite3_column_int64(stmt, 0);
    *rc = SQLITE_OK;
  } else if (*rc == SQLITE_DONE) {
    *rc = SQLITE_OK;
  }
  sqlite3_finalize(stmt);
  return value;
}

std::optional<std::string> QueryText(sqlite3* db, const char* sql, int* rc) {
  sqlite3_stmt* stmt = nullptr;
  *rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (*rc != SQLITE_OK) return std::nullopt;
  std::optional<std::string> value;
  *rc = sqlite3_step(stmt);
  if (*rc == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    value = text != nullptr ? reinterpret_cast<const char*>(text) : "";
    *rc = SQLITE_OK;
  } else if (*rc == SQLITE_DONE) {
    *rc = SQLITE_OK;
  }
  sqlite3_finalize(stmt);
  return value;
}

// This machine's wall clock as Unix milliseconds: the time a write records (the bucket is
// here, so its clock is this one).
std::int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The exclusive upper bound of the keys starting with prefix, or nullopt when there is
// none (every byte 0xff, or an empty prefix).
std::optional<std::string> PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    auto last = static_cast<unsigned char>(prefix.back());
    if (last != 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::nullopt;
}

}  // namespace

namespace sqlite_store_internal {

// ---------------------------------------------------------------------------------------
// The writer: one thread, one read-write connection, one queue of writes, committed in
// batches (group commit).

class Writer {
 public:
  struct Op {
    bool is_delete = false;
    std::string key;
    std::string body;
    Precondition condition = Precondition::None();
    // The caller's name for the write, for messages ("sqlite://DIR: put 'k'").
    std::string where;
    // Hands the result to the caller; called on the loop thread (a Delete ignores the
    // version).
    std::function<void(Result<Version>)> complete;
  };

  // `checkpoint_conn` is a read-write connection of its own for the checkpointer thread.
  Writer(Env& env, std::unique_ptr<Connection> conn, std::unique_ptr<Connection> checkpoint_conn,
         std::shared_ptr<SqliteStoreStats> stats, const SqliteStoreOptions& options)
      : env_(env),
        conn_(std::move(conn)),
        checkpoint_conn_(std::move(checkpoint_conn)),
        stats_(std::move(stats)),
        max_queued_(options.max_queued_ops),
        before_batch_(options.before_batch_for_test),
        before_checkpoint_(options.before_checkpoint_for_test) {}

  // Prepares the statements and starts the thread. Called once, before any Submit.
  Status Start(const std::string& where) {
    sqlite3* db = conn_->db;
    conn_->busy->waits = &stats_->busy_waits;
    sqlite3_wal_hook(
        db,
        [](void* arg, sqlite3*, const char*, int frames) {
          *static_cast<int*>(arg) = frames;
          return SQLITE_OK;
        },
        &wal_frames_);
    struct {
      Stmt* stmt;
      const char* sql;
    } statements[] = {
        {&select_, "SELECT version FROM objects WHERE key = ?1"},
        {&insert_,
         "INSERT OR REPLACE INTO objects(key, version, size, crc, body, modified_ms) "
         "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
        {&delete_, "DELETE FROM objects WHERE key = ?1"},
        {&begin_, "BEGIN IMMEDIATE"},
        {&commit_, "COMMIT"},
    };
    for (auto& s : statements) {
      if (int rc = s.stmt->Prepare(db, s.sql); rc != SQLITE_OK) {
        return Fatal(where + ": preparing '" + s.sql + "': " + SqliteText(db, rc));
      }
    }
    checkpointer_ = std::thread([this] { CheckpointLoop(); });
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  // Lets the batch being committed finish, drops the queued writes (kRetryable: nothing
  // was applied) and joins the thread.
  ~Writer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    {
      std::lock_guard<std::mutex> lock(checkpoint_mu_);
      checkpoint_stopping_ = true;
    }
    checkpoint_cv_.notify_all();
    if (checkpointer_.joinable()) checkpointer_.join();  // lets a checkpoint in progress end
    // Only this thread is left: what is still queued (a batch's writes put back after a
    // failed statement included) never started.
    for (Op& op : queue_) {
      Status closed = Retryable(op.where + ": the sqlite store closed before the write started");
      Answer(op, std::move(closed));
    }
    queue_.clear();
    Flush();
  }

  // False if the queue is full.
  bool Submit(Op op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || queue_.size() >= max_queued_) return false;
      queue_.push_back(std::move(op));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void Loop() {
    std::vector<Op> batch;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        std::size_t bytes = 0;
        while (!queue_.empty() && batch.size() < kMaxSqliteBatchWrites) {
          const std::size_t next = queue_.front().body.size();
          if (!batch.empty() && bytes + next > kMaxSqliteBatchBytes) break;
          bytes += next;
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      RunBatch(batch);
      batch.clear();
      Flush();
      MaybeCheckpoint();
    }
  }

  // Queues op's result for the next Flush.
  void Answer(Op& op, Result<Version> result) {
    answers_.emplace_back(std::move(op.complete), std::move(result));
  }
  // Posts every queued answer to the loop in one closure.
  void Flush() {
    if (answers_.empty()) return;
    env_.PostFromAnyThread([answers = std::move(answers_)]() mutable {
      for (auto& [complete, result] : answers) complete(std::move(result));
    });
    answers_.clear();
  }

  // One transaction for the whole batch. A statement that fails answers its own write
  // with the error and puts the rest back at the head of the queue: they go again in the
  // next transaction, so one bad write cannot fail its neighbours.
  void RunBatch(std::vector<Op>& batch) {
    sqlite3* db = conn_->db;
    if (before_batch_) before_batch_(batch.size());
    const auto started = std::chrono::steady_clock::now();
    int rc = sqlite3_step(begin_.Use());
    begin_.Done();
    if (rc != SQLITE_DONE) {
      stats_->failed_batches.fetch_add(1, std::memory_order_relaxed);
      const Code code = CodeForSqlite(rc);
      const std::string text = SqliteText(db, rc);
      for (Op& op : batch) {
        Status s(code, op.where + ": starting the transaction: " + text +
                           (code == Code::kRetryable ? "; nothing was applied" : ""));
        Answer(op, std::move(s));
      }
      return;
    }

    std::vector<Result<Version>> results;
    results.reserve(batch.size());
    std::size_t applied = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Result<Version> r = Apply(batch[i]);
      if (!r.ok() && r.code() != Code::kPreconditionFailed) {
        // The statement failed: roll back, answer this write, retry the others.
        Exec(db, "ROLLBACK");
        stats_->failed_batches.fetch_add(1, std::memory_order_relaxed);
        Answer(batch[i], std::move(r));
        std::lock_guard<std::mutex> lock(mu_);
        for (std::size_t j = batch.size(); j-- > 0;) {
          if (j != i) queue_.push_front(std::move(batch[j]));
        }
        return;
      }
      if (r.ok()) ++applied;
      results.push_back(std::move(r));
    }

    rc = sqlite3_step(commit_.Use());
    commit_.Done();
    if (rc != SQLITE_DONE) {
      // BUSY, FULL and NOMEM leave nothing committed; an I/O error (a failed fsync of
      // the WAL) can leave the frames written and recovered later: unknown outcome.
      if (!sqlite3_get_autocommit(db)) Exec(db, "ROLLBACK");
      stats_->failed_batches.fetch_add(1, std::memory_order_relaxed);
      const Code code = CodeForSqlite(rc);
      const std::string text = SqliteText(db, rc);
      for (Op& op : batch) {
        Status s = code == Code::kRetryable
                       ? Retryable(op.where + ": commit failed: " + text + "; nothing was applied")
                       : UnknownOutcome(op.where + ": commit failed: " + text +
                                        "; the write may or may not have landed");
        Answer(op, std::move(s));
      }
      return;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    stats_->commits.fetch_add(1, std::memory_order_relaxed);
    stats_->writes_applied.fetch_add(applied, std::memory_order_relaxed);
    stats_->writes_refused.fetch_add(batch.size() - applied, std::memory_order_relaxed);
    stats_->batch_writes.Observe(static_cast<double>(batch.size()));
    stats_->commit_seconds.Observe(seconds);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Answer(batch[i], std::move(results[i]));
    }
  }

  // Checks op's condition against the transaction's view and applies it. Returns the new
  // version (a Put), an empty version (a Delete), kPreconditionFailed, or the error of a
  // failed statement.
  Result<Version> Apply(const Op& op) {
    sqlite3* db = conn_->db;
    auto failed = [&](const char* doing, int rc) {
      return Status(CodeForSqlite(rc), op.where + ": " + doing + ": " + SqliteText(db, rc));
    };

    std::optional<std::string> current;  // hex version
    sqlite3_stmt* select = select_.Use();
    BindBytes(select, 1, op.key);
    int rc = sqlite3_step(select);
    if (rc == SQLITE_ROW) {
      std::string_view v = ColumnBytes(select, 0);
      current = Hex(reinterpret_cast<const unsigned char*>(v.data()), v.size());
    } else if (rc != SQLITE_DONE) {
      select_.Done();
      return failed("reading the current version", rc);
    }
    select_.Done();

    switch (op.condition.kind()) {
      case Precondition::Kind::kNone:
        break;
      case Precondition::Kind::kIfNoneMatchAny:
        if (current) return PreconditionFailed(op.where + ": exists (If-None-Match: *)");
        break;
      case Precondition::Kind::kIfMatch:
        if (!current) {
          return PreconditionFailed(op.where + ": missing (If-Match: " +
                                    op.condition.version().token() + ")");
        }
        if (*current != op.condition.version().token()) {
          return PreconditionFailed(op.where + ": at version " + *current + ", not " +
                                    op.condition.version().token());
        }
        break;
    }

    if (op.is_delete) {
      if (!current) return Version();  // an unconditional delete of a missing key
      sqlite3_stmt* del = delete_.Use();
      BindBytes(del, 1, op.key);
      rc = sqlite3_step(del);
      delete_.Done();
      if (rc != SQLITE_DONE) return failed("deleting", rc);
      return Version();
    }

    unsigned char version[kVersionBytes];
    if (int err = RandomBytes(version, sizeof(version)); err != 0) {
      return Retryable(op.where + ": getrandom: " + ErrnoText(err));
    }
    sqlite3_stmt* insert = insert_.Use();
    BindBytes(insert, 1, op.key);
    sqlite3_bind_blob(insert, 2, version, sizeof(version), SQLITE_STATIC);
    sqlite3_bind_int64(insert, 3, static_cast<sqlite3_int64>(op.body.size()));
    sqlite3_bind_int64(insert, 4, static_cast<sqlite3_int64>(Crc32c(op.body)));
    BindBytes(insert, 5, op.body);
    sqlite3_bind_int64(insert, 6, NowUnixMs());
    rc = sqlite3_step(insert);
    insert_.Done();
    if (rc != SQLITE_DONE) return failed("writing", rc);
    return Version(Hex(version, sizeof(version)));
  }

  // Once the WAL has grown past kSqliteCheckpointFrames, asks the checkpointer thread to
  // move it into the database, unless one is already pending (asked for or running: then
  // the next batch asks again). The writer does not run it itself: a checkpoint copies
  // thousands of pages and fsyncs the database file, and every write queued meanwhile
  // would wait for it (with 16 clients writing to counters one comes about every 400
  // events: docs/benchmarks.md, "Density"). WAL mode lets commits go on while another
  // connection checkpoints.
  void MaybeCheckpoint() {
    if (wal_frames_ < kSqliteCheckpointFrames) return;
    {
      std::lock_guard<std::mutex> lock(checkpoint_mu_);
      if (checkpoint_pending_) return;
      checkpoint_pending_ = true;
    }
    checkpoint_cv_.notify_one();
    wal_frames_ = 0;
  }

  // The checkpointer thread: one PASSIVE checkpoint per request. PASSIVE never waits for
  // readers or the writer; frames a reader still needs are copied by a later one.
  void CheckpointLoop() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(checkpoint_mu_);
        checkpoint_cv_.wait(lock, [this] { return checkpoint_stopping_ || checkpoint_pending_; });
        if (checkpoint_stopping_) return;
      }
      if (before_checkpoint_) before_checkpoint_();
      int log = 0, done = 0;
      sqlite3_wal_checkpoint_v2(checkpoint_conn_->db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
      stats_->checkpoints.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(checkpoint_mu_);
      checkpoint_pending_ = false;
    }
  }

  Env& env_;
  std::unique_ptr<Connection> conn_;
  std::unique_ptr<Connection> checkpoint_conn_;  // the checkpointer thread's
  std::shared_ptr<SqliteStoreStats> stats_;
  const std::size_t max_queued_;
  const std::function<void(std::size_t)> before_batch_;
  const std::function<void()> before_checkpoint_;
  // The writer thread's own (no lock): prepared statements, WAL size, pending answers.
  Stmt select_, insert_, delete_, begin_, commit_;
  int wal_frames_ = 0;
  std::vector<std::pair<std::function<void(Result<Version>)>, Result<Version>>> answers_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stopping_ = false;

  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_pending_ = false;  // asked for and not yet done (set by the writer)
  bool checkpoint_stopping_ = false;
  std::thread checkpointer_;
  std::thread thread_;  // last: started after everything above exists
};

// ---------------------------------------------------------------------------------------
// The readers: a fixed set of threads, each with its own connection and statements, taking
// jobs in FIFO order from one bounded queue.

// One reader's connection and its prepared statements.
struct ReaderConn {
  std::unique_ptr<Connection> conn;
  Stmt get, head;
  // List by the lower bound's kind (> start_after, or >= prefix) and whether the prefix
  // gives an upper bound: four statements, so each is one index range scan.
  Stmt list[2][2];
};

class Readers : public local_store::WorkerPool<ReaderConn> {
 public:
  using Conn = ReaderConn;
  using WorkerPool::WorkerPool;

  // Prepares c's statements.
  static Status Prepare(Conn& c, const std::string& where) {
    sqlite3* db = c.conn->db;
    auto prepare = [&](Stmt& stmt, const std::string& sql) -> Status {
      if (int rc = stmt.Prepare(db, sql); rc != SQLITE_OK) {
        return Fatal(where + ": preparing '" + sql + "': " + SqliteText(db, rc));
      }
      return Status::Ok();
    };
    if (Status s = prepare(c.get, "SELECT version, size, crc, body FROM objects WHERE key = ?1");
        !s.ok())
      return s;
    if (Status s = prepare(c.head, "SELECT version, size FROM objects WHERE key = ?1"); !s.ok())
      return s;
    for (int after = 0; after < 2; ++after) {
      for (int bounded = 0; bounded < 2; ++bounded) {
        std::string sql = "SELECT key, version, size, modified_ms FROM objects WHERE key ";
        sql += after ? ">" : ">=";
        sql += " ?1";
        if (bounded) sql += " AND key < ?2";
        sql += " ORDER BY key LIMIT ?3";
        if (Status s = prepare(c.list[after][bounded], sql); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }
};

}  // namespace sqlite_store_internal

using sqlite_store_internal::Readers;
using sqlite_store_internal::Writer;

// ---------------------------------------------------------------------------------------
// Open.

namespace {

// Opens one connection to path with the settings every connection shares.
Result<std::unique_ptr<Connection>> OpenConnection(const std::string& where,
                                                   const std::string& path,
                                                   const SqliteStoreOptions& options,
                                                   bool create, int cache_kib) {
  auto conn = std::make_unique<Connection>();
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  if (create) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &conn->db, flags, nullptr);
  if (rc != SQLITE_OK) {
    return Fatal(where + ": cannot open " + path + ": " + SqliteText(conn->db, rc));
  }
  conn->busy->timeout = options.busy_timeout;
  sqlite3_busy_handler(conn->db, &BusyWait::Handler, conn->busy.get());
  const std::string pragmas = "PRAGMA synchronous=" + std::string(options.fsync ? "FULL" : "OFF") +
                              "; PRAGMA cache_size=-" + std::to_string(cache_kib) +
                              "; PRAGMA journal_size_limit=" + std::to_string(kWalSizeLimitBytes) +
                              "; PRAGMA foreign_keys=OFF; PRAGMA trusted_schema=OFF;";
  rc = Exec(conn->db, pragmas.c_str());
  if (rc != SQLITE_OK) {
    return Status(CodeForSqlite(rc), where + ": setting up " + path + ": " + SqliteText(conn->db, rc));
  }
  return conn;
}

// Sets up the database: WAL mode, and on a new file the schema and the format's ids. Several
// processes may do this at once; the write lock orders them, and the later ones find the
// schema in place. Checks that an existing file is this format's, and adds the column
// modified_ms to a table made before it existed (its rows keep 0: "cannot tell").
Status SetUpDatabase(sqlite3* db, const std::string& where, const std::string& path) {
  auto fail = [&](const std::string& doing, int rc) {
    return Status(CodeForSqlite(rc), where + ": " + doing + " " + path + ": " + SqliteText(db, rc));
  };
  int rc = SQLITE_OK;
  // Switching to WAL can answer SQLITE_BUSY without calling the busy handler while another
  // process opens the same new file (SQLite does not wait there, to avoid a deadlock
  // between two connections that each hold a lock): retry, bounded like a busy wait.
  // Seen with eight processes opening a new bucket at once.
  const auto give_up = std::chrono::steady_clock::now() + kJournalModeRetryLimit;
  auto mode = QueryText(db, "PRAGMA journal_mode=WAL", &rc);
  while (((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(kBusyMaxSleep);
    mode = QueryText(db, "PRAGMA journal_mode=WAL", &rc);
  }
  if (rc != SQLITE_OK) {
    if ((rc & 0xff) == SQLITE_NOTADB) {
      return Fatal(where + ": " + path + " is not a SQLite database (a WasmKeep sqlite:// bucket " +
                   "keeps its objects in it)");
    }
    return fail("switching to WAL mode", rc);
  }
  if (!mode || *mode != "wal") {
    return Fatal(where + ": " + path + " refused WAL mode (journal_mode is '" + mode.value_or("") +
                 "'); a local file system is needed");
  }
  rc = Exec(db, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK) return fail("locking", rc);
  struct Rollback {
    sqlite3* db;
    bool done = false;
    ~Rollback() {
      if (!done) Exec(db, "ROLLBACK");
    }
  } guard{db};
  auto app = QueryInt(db, "PRAGMA application_id", &rc);
  if (rc != SQLITE_OK) return fail("reading the application id of", rc);
  auto version = QueryInt(db, "PRAGMA user_version", &rc);
  if (rc != SQLITE_OK) return fail("reading the format of", rc);
  auto tables = QueryInt(db, "SELECT count(*) FROM sqlite_schema", &rc);
  if (rc != SQLITE_OK) return fail("reading the schema of", rc);
  if (app.value_or(0) == kSqliteApplicationId) {
    if (version.value_or(0) != kSqliteFormatVersion) {
      return Fatal(where + ": " + path + " is format " + std::to_string(version.value_or(0)) +
                   "; this build reads format " + std::to_string(kSqliteFormatVersion));
    }
    // A compatible addition within format 1: every statement names its columns, so a build
    // from before it still reads this table and writes rows into it (with modified_ms 0).
    auto has_modified = QueryInt(
        db, "SELECT count(*) FROM pragma_table_info('objects') WHERE name = 'modified_ms'", &rc);
    if (rc != SQLITE_OK) return fail("reading the columns of", rc);
    if (has_modified.value_or(0) == 0) {
      rc = Exec(db, "ALTER TABLE objects ADD COLUMN modified_ms INTEGER NOT NULL DEFAULT 0");
      if (rc != SQLITE_OK) return fail("adding the column modified_ms to", rc);
    }
    rc = Exec(db, "COMMIT");
    guard.done = rc == SQLITE_OK;
    return rc == SQLITE_OK ? Status::Ok() : fail("reading", rc);
  }
  if (app.value_or(0) != 0 || tables.value_or(0) != 0) {
    return Fatal(where + ": " + path + " is a SQLite database of something else (application id " +
                 std::to_string(app.value_or(0)) + ", " + std::to_string(tables.value_or(0)) +
                 " schema entries); use a new or empty directory");
  }
  const std::string create =
      "CREATE TABLE objects(key BLOB PRIMARY KEY NOT NULL, version BLOB NOT NULL, "
      "size INTEGER NOT NULL, crc INTEGER NOT NULL, body BLOB NOT NULL, "
      "modified_ms INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID; "
      "PRAGMA application_id=" + std::to_string(kSqliteApplicationId) +
      "; PRAGMA user_version=" + std::to_string(kSqliteFormatVersion) + "; COMMIT;";
  rc = Exec(db, create.c_str());
  if (rc != SQLITE_OK) return fail("creating the schema of", rc);
  guard.done = true;
  return Status::Ok();
}

// Whether name is one of the files SQLite keeps beside the database.
bool IsDatabaseFile(std::string_view name) {
  if (!name.starts_with(kSqliteDbFile)) return false;
  std::string_view suffix = name.substr(kSqliteDbFile.size());
  return suffix.empty() || suffix == "-wal" || suffix == "-shm" || suffix == "-journal";
}

// Refuses a directory that holds anything but the database: a file:// bucket (named by
// its FORMAT file), or someone's files (a mistyped path must never become a bucket).
Status CheckDirectory(const std::string& where, const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    const int e = errno;
    return Fatal(where + ": cannot list the bucket directory: " + ErrnoText(e));
  }
  std::string foreign;
  bool file_bucket = false;
  while (struct dirent* entry = ::readdir(d)) {
    std::string_view name(entry->d_name);
    if (name == "." || name == ".." || name == "lost+found" || IsDatabaseFile(name)) continue;
    if (name == "FORMAT") file_bucket = true;
    if (foreign.empty()) foreign = name;
  }
  ::closedir(d);
  if (file_bucket) {
    return Fatal(where + ": " + dir + " is a file:// bucket (one file per object, FORMAT); open it " +
                 "as file://" + dir + ", or give sqlite:// a new directory");
  }
  if (!foreign.empty()) {
    return Fatal(where + ": the directory is not empty and is not a WasmKeep sqlite:// bucket (it " +
                 "holds '" + foreign + "'); use a new or empty directory");
  }
  return Status::Ok();
}

// mkdir -p dir, syncing the parent of each level it creates (a created directory is
// durable only once its parent is synced, and the database's durability rests on it).
Status MakeDirectory(const std::string& dir, bool sync) {
  std::error_code ec;
  std::vector<std::filesystem::path> created;
  for (auto p = std::filesystem::absolute(dir, ec).lexically_normal();
       !ec && p.has_relative_path(); p = p.parent_path()) {
    if (std::filesystem::exists(std::filesystem::symlink_status(p, ec))) break;
    if (p.filename().empty()) continue;  // a trailing '/'
    created.push_back(p);
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fatal("sqlite://" + dir + ": cannot create the bucket directory: " + ec.message());
  if (!sync) return Status::Ok();
  for (const auto& level : created) {
    const int fd = ::open(level.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int rc = fd >= 0 ? ::fsync(fd) : -1;
    const int e = errno;
    if (fd >= 0) ::close(fd);
    if (rc != 0) {
      return Fatal("sqlite://" + dir + ": fsync of " + level.parent_path().string() + ": " +
                   ErrnoText(e));
    }
  }
  return Status::Ok();
}

}  // namespace

Status SqliteStore::CheckExists(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return NotFound("sqlite://" + dir + ": no bucket there: the directory does not exist");
  }
  if (!std::filesystem::exists(std::filesystem::path(dir) / std::string(kSqliteDbFile), ec)) {
    return NotFound("sqlite://" + dir + ": no bucket there: the directory holds no WasmKeep bucket (no " +
                    std::string(kSqliteDbFile) + ")");
  }
  return Status::Ok();
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(Env& env, std::string dir,
                                                       SqliteStoreOptions options) {
  if (dir.empty()) return InvalidArgument("sqlite:// needs a directory");
  if (options.read_threads < 1 || options.read_threads > kMaxSqliteReadThreads) {
    return InvalidArgument("sqlite://" + dir + ": read_threads " +
                           std::to_string(options.read_threads) + " is outside 1.." +
                           std::to_string(kMaxSqliteReadThreads));
  }
  if (options.max_queued_ops < 1) {
    return InvalidArgument("sqlite://" + dir + ": max_queued_ops must be at least 1");
  }
  if (options.busy_timeout.count() < 0) {
    return InvalidArgument("sqlite://" + dir + ": busy_timeout must not be negative");
  }
  if (sqlite3_threadsafe() == 0) {
    return Fatal("sqlite://" + dir + ": this SQLite library was built without thread support");
  }
  if (Status s = MakeDirectory(dir, options.fsync); !s.ok()) return s;
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) {
    const int e = errno;
    return Fatal("sqlite://" + dir + ": cannot resolve the bucket directory: " + ErrnoText(e));
  }
  const std::string abs = resolved;
  const std::string where = "sqlite://" + abs;
  if (Status s = CheckDirectory(where, abs); !s.ok()) return s;
  const std::string path = abs + "/" + std::string(kSqliteDbFile);

  auto writer_conn = OpenConnection(where, path, options, /*create=*/true, kWriterCacheKib);
  if (!writer_conn.ok()) return writer_conn.status();
  if (Status s = SetUpDatabase((*writer_conn)->db, where, path); !s.ok()) return s;
  if (options.fsync) {  // the database's and the WAL's directory entries
    const int fd = ::open(abs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int rc = fd >= 0 ? ::fsync(fd) : -1;
    const int e = errno;
    if (fd >= 0) ::close(fd);
    if (rc != 0) return Fatal(where + ": fsync of the bucket directory: " + ErrnoText(e));
  }

  std::vector<std::unique_ptr<Readers::Conn>> reader_conns;
  for (int i = 0; i < options.read_threads; ++i) {
    auto conn = OpenConnection(where, path, options, /*create=*/false, kReaderCacheKib);
    if (!conn.ok()) return conn.status();
    if (int rc = Exec((*conn)->db, "PRAGMA query_only=ON"); rc != SQLITE_OK) {
      return Fatal(where + ": setting up a reader: " + SqliteText((*conn)->db, rc));
    }
    auto reader = std::make_unique<Readers::Conn>();
    reader->conn = std::move(conn).value();
    if (Status s = Readers::Prepare(*reader, where); !s.ok()) return s;
    reader_conns.push_back(std::move(reader));
  }

  auto checkpoint_conn = OpenConnection(where, path, options, /*create=*/false, kReaderCacheKib);
  if (!checkpoint_conn.ok()) return checkpoint_conn.status();

  auto stats = std::make_shared<SqliteStoreStats>();
  auto writer = std::make_unique<Writer>(env, std::move(writer_conn).value(), std::move(checkpoint_conn).value(),
                                         stats, options);
  if (Status s = writer->Start(where); !s.ok()) return s;
  auto readers = std::make_unique<Readers>(std::move(reader_conns), options.max_queued_ops);
  return std::unique_ptr<SqliteStore>(
      new SqliteStore(env, abs, std::move(stats), std::move(readers), std::move(writer)));
}

SqliteStore::SqliteStore(Env& env, std::string dir, std::shared_ptr<SqliteStoreStats> stats,
                         std::unique_ptr<Readers> readers, std::unique_ptr<Writer> writer)
    : env_(env),
      dir_(std::move(dir)),
      stats_(std::move(stats)),
      readers_(std::move(readers)),
      writer_(std::move(writer)) {}

SqliteStore::~SqliteStore() {
  readers_.reset();
  writer_.reset();
}

std::string SqliteStore::Describe() const { return "sqlite://" + dir_; }

std::string SqliteStore::Where(std::string_view op, std::string_view key) const {
  return "sqlite://" + dir_ + ": " + std::string(op) + " " + Quote(key);
}

// ---------------------------------------------------------------------------------------
// The calls. Each builds its work as named locals before awaiting (GCC 12 mishandles some
// temporaries inside a co_await operand; see mem_store.cc).

namespace {

// Runs work on a reader and awaits its result on the loop.
template <typename R>
Task<R> RunRead(Env& env, Readers& readers, std::string where, CallOptions options,
                std::function<R(Readers::Conn&)> work) {
  Latch<R> latch(env, [where]() -> R { return R(Cancelled(where + ": cancelled")); });
  Readers::Job job;
  job.run = [work = std::move(work), latch, &env](Readers::Conn& conn) {
    local_store::DeliverToLoop<R>(env, latch, work(conn));
  };
  job.abandon = [latch, &env, where] {
    local_store::DeliverToLoop<R>(env, latch, R(Retryable(where + ": the sqlite store closed before the read started")));
  };
  if (!readers.Submit(std::move(job))) {
    co_return R(Retryable(where + ": too many reads queued for the sqlite store's readers"));
  }
  co_return co_await local_store::AwaitOnLoop<R>(env, latch, options.timeout, where, /*is_write=*/false);
}

// Reads one row of key (get: version, size, crc, body; head: version, size) and checks it.
struct Row {
  Version version;
  std::uint64_t size = 0;
  std::string body;
};
Result<Row> ReadRow(Readers::Conn& c, Stmt& stmt, const std::string& where,
                    const std::string& path, const std::string& key, bool want_body) {
  sqlite3* db = c.conn->db;
  sqlite3_stmt* s = stmt.Use();
  BindBytes(s, 1, key);
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) {
    stmt.Done();
    return NotFound(where + ": no such object");
  }
  if (rc != SQLITE_ROW) {
    Status err(CodeForSqlite(rc), where + ": reading " + path + ": " + SqliteText(db, rc));
    stmt.Done();
    return err;
  }
  auto corrupt = [&](const std::string& what) {
    return Fatal(where + ": corrupt row in " + path + ": " + what);
  };
  std::string_view version = ColumnBytes(s, 0);
  const sqlite3_int64 size = sqlite3_column_int64(s, 1);
  Row row;
  if (version.size() != kVersionBytes) {
    stmt.Done();
    return corrupt("a version of " + std::to_string(version.size()) + " bytes");
  }
  row.version = Version(Hex(reinterpret_cast<const unsigned char*>(version.data()), version.size()));
  if (size < 0) {
    stmt.Done();
    return corrupt("a negative size");
  }
  row.size = static_cast<std::uint64_t>(size);
  if (want_body) {
    const auto crc = static_cast<std::uint32_t>(sqlite3_column_int64(s, 2));
    std::string_view body = ColumnBytes(s, 3);
    if (body.size() != row.size) {
      stmt.Done();
      return corrupt("a body of " + std::to_string(body.size()) + " bytes where the size says " +
                     std::to_string(row.size));
    }
    if (Crc32c(body) != crc) {
      stmt.Done();
      return corrupt("body checksum mismatch");
    }
    row.body.assign(body);
  }
  stmt.Done();
  return row;
}

}  // namespace

Task<Result<GetOutput>> SqliteStore::Get(std::string key, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  const std::string where = Where("get", key);
  std::function<Result<GetOutput>(Readers::Conn&)> work =
      [where, path = dir_ + "/" + std::string(kSqliteDbFile), key](Readers::Conn& c)
      -> Result<GetOutput> {
    auto row = ReadRow(c, c.get, where, path, key, /*want_body=*/true);
    if (!row.ok()) return row.status();
    return GetOutput{std::move(row->body), std::move(row->version)};
  };
  co_return co_await RunRead<Result<GetOutput>>(env_, *readers_, where, options, std::move(work));
}

Task<Result<ObjectMeta>> SqliteStore::Head(std::string key, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  const std::string where = Where("head", key);
  std::function<Result<ObjectMeta>(Readers::Conn&)> work =
      [where, path = dir_ + "/" + std::string(kSqliteDbFile), key](Readers::Conn& c)
      -> Result<ObjectMeta> {
    auto row = ReadRow(c, c.head, where, path, key, /*want_body=*/false);
    if (!row.ok()) return row.status();
    return ObjectMeta{std::move(row->version), row->size};
  };
  co_return co_await RunRead<Result<ObjectMeta>>(env_, *readers_, where, options, std::move(work));
}

Task<Result<ListPage>> SqliteStore::List(ListOptions options, CallOptions call) {
  if (Status s = ValidateListOptions(options); !s.ok()) co_return s;
  const std::string where = Where("list", options.prefix);
  std::function<Result<ListPage>(Readers::Conn&)> work =
      [where, path = dir_ + "/" + std::string(kSqliteDbFile), options](Readers::Conn& c)
      -> Result<ListPage> {
    const std::string& after =
        options.continuation.empty() ? options.start_after : options.continuation;
    // One lower bound, so the scan starts at the first wanted key: after it when it is at
    // or past the prefix, else at the prefix.
    const bool use_after = !after.empty() && after >= options.prefix;
    const std::optional<std::string> end = PrefixEnd(options.prefix);
    Stmt& stmt = c.list[use_after ? 1 : 0][end ? 1 : 0];
    sqlite3_stmt* s = stmt.Use();
    BindBytes(s, 1, use_after ? after : options.prefix);
    if (end) BindBytes(s, 2, *end);
    sqlite3_bind_int(s, 3, options.page_size + 1);
    ListPage page;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      std::string_view key = ColumnBytes(s, 0);
      std::string_view version = ColumnBytes(s, 1);
      if (static_cast<int>(page.entries.size()) == options.page_size) {
        page.next_continuation = page.entries.back().key;
        break;
      }
      if (version.size() != kVersionBytes) {
        stmt.Done();
        return Fatal(where + ": corrupt row in " + path + ": key " + Quote(key) + " has a version of " +
                     std::to_string(version.size()) + " bytes");
      }
      page.entries.push_back(ListEntry{
          std::string(key),
          Version(Hex(reinterpret_cast<const unsigned char*>(version.data()), version.size())),
          static_cast<std::uint64_t>(std::max<sqlite3_int64>(0, sqlite3_column_int64(s, 2))),
          sqlite3_column_int64(s, 3)});
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      Status err(CodeForSqlite(rc), where + ": reading " + path + ": " + SqliteText(c.conn->db, rc));
      stmt.Done();
      return err;
    }
    stmt.Done();
    return page;
  };
  co_return co_await RunRead<Result<ListPage>>(env_, *readers_, where, call, std::move(work));
}

Task<Result<Version>> SqliteStore::Put(std::string key, std::string body, Precondition condition,
                                       CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  Env& env = env_;
  const std::string where = Where("put", key);
  Latch<Result<Version>> latch(env, [where]() -> Result<Version> {
    return UnknownOutcome(where + ": cancelled in flight; it may still land");
  });
  Writer::Op op;
  op.key = std::move(key);
  op.body = std::move(body);
  op.condition = std::move(condition);
  op.where = where;
  op.complete = [latch](Result<Version> r) { latch.Set(std::move(r)); };
  if (!writer_->Submit(std::move(op))) {
    co_return Retryable(where + ": too many writes queued for the sqlite store's writer");
  }
  co_return co_await local_store::AwaitOnLoop<Result<Version>>(env, latch, options.timeout, where,
                                                  /*is_write=*/true);
}

Task<Status> SqliteStore::Delete(std::string key, Precondition condition, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  if (condition.kind() == Precondition::Kind::kIfNoneMatchAny) {
    co_return InvalidArgument("a delete takes no condition or If-Match");
  }
  Env& env = env_;
  const std::string where = Where("delete", key);
  Latch<Status> latch(env, [where]() -> Status {
    return UnknownOutcome(where + ": cancelled in flight; it may still land");
  });
  Writer::Op op;
  op.is_delete = true;
  op.key = std::move(key);
  op.condition = std::move(condition);
  op.where = where;
  op.complete = [latch](Result<Version> r) { latch.Set(r.ok() ? Status::Ok() : r.status()); };
  if (!writer_->Submit(std::move(op))) {
    co_return Retryable(where + ": too many writes queued for the sqlite store's writer");
  }
  co_return co_await local_store::AwaitOnLoop<Status>(env, latch, options.timeout, where, /*is_write=*/true);
}

// ---------------------------------------------------------------------------------------
// Metrics.

void PublishSqliteStoreMetrics(MetricsRegistry& r, const SqliteStoreStats& stats) {
  auto counter = [&r](const char* name, const char* help, const std::atomic<std::uint64_t>& field) {
    r.AddCallbackCounter(name, help, [&field] {
      return static_cast<double>(field.load(std::memory_order_relaxed));
    });
  };
  counter("wasmkeep_store_sqlite_commits_total",
          "Transactions the sqlite:// writer committed; each is one fsync of the WAL, shared by "
          "every write in it.",
          stats.commits);
  counter("wasmkeep_store_sqlite_writes_applied_total",
          "Puts and deletes applied by committed transactions.", stats.writes_applied);
  counter("wasmkeep_store_sqlite_writes_refused_total",
          "Conditional puts and deletes whose condition did not hold (answered 412).",
          stats.writes_refused);
  counter("wasmkeep_store_sqlite_failed_batches_total",
          "Transactions that failed (lock held past busy_timeout, disk full, I/O errors).",
          stats.failed_batches);
  counter("wasmkeep_store_sqlite_checkpoints_total",
          "WAL checkpoints (each fsyncs the WAL and the database file).", stats.checkpoints);
  counter("wasmkeep_store_sqlite_busy_waits_total",
          "Sleeps of the writer waiting for another process's write lock on the database.",
          stats.busy_waits);
  r.AddHistogramView("wasmkeep_store_sqlite_batch_writes",
                     "Writes per committed transaction (group commit across actors).",
                     stats.batch_writes);
  r.AddHistogramView("wasmkeep_store_sqlite_commit_seconds",
                     "From BEGIN to the end of COMMIT, the fsync included.", stats.commit_seconds);
}

}  // namespace wk
