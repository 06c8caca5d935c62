// sqlite:// on its own: opening and refusing directories, group commit (writes waiting
// together share one transaction, each answered with its own outcome), corruption, lock
// contention with another connection, deadlines and closing with writes queued, and the
// metrics. The ObjectStore contract itself is store/conformance_test.cc; several processes
// and kill -9 are store/multiprocess_test.cc.
#include "store/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/metrics.h"
#include "env/real_env.h"
#include "store/testing/local_store_fixture.h"

namespace wk {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;


// Holds the writer before its next batch until opened, counting the batches it saw.
class BatchGate {
 public:
  void Enter(std::size_t writes) {
    std::unique_lock<std::mutex> lock(mu_);
    sizes_.push_back(writes);
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void WaitEntered(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return sizes_.size() >= n; });
  }
  std::vector<std::size_t> sizes() {
    std::lock_guard<std::mutex> lock(mu_);
    return sizes_;
  }
  std::function<void(std::size_t)> Hook() {
    return [this](std::size_t writes) { Enter(writes); };
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::size_t> sizes_;
  bool open_ = false;
};

class SqliteStoreTest : public local_store_testing::LocalStoreTest<SqliteStore, SqliteStoreOptions> {
 protected:
  SqliteStoreTest() : LocalStoreTest("wasmkeep-sqlite-test") {}

  // Runs the writes at once (each its own task) and returns their outcomes in call order.
  struct Write {
    std::string key;
    std::string body;
    Precondition condition = Precondition::None();
    bool is_delete = false;
  };
  std::vector<Status> RunTogether(std::vector<Write> writes, CallOptions call) {
    auto all = [](RealEnv* env, ObjectStore* store, std::vector<Write> ws,
                  CallOptions c) -> Task<std::vector<Status>> {
      std::vector<Status> out(ws.size(), Cancelled("not run"));
      std::vector<TaskHandle> handles;
      for (std::size_t i = 0; i < ws.size(); ++i) {
        handles.push_back(env->Spawn(
            [](ObjectStore* s, Write w, Status* result, CallOptions co) -> Task<void> {
              if (w.is_delete) {
                *result = co_await s->Delete(w.key, w.condition, co);
              } else {
                auto r = co_await s->Put(w.key, w.body, w.condition, co);
                *result = r.ok() ? Status::Ok() : r.status();
              }
            }(store, ws[i], &out[i], c),
            "write"));
      }
      for (auto& h : handles) (void)co_await h.Join();
      co_return out;
    };
    return Run(all(&env_, store_.get(), std::move(writes), call));
  }

  std::string DbPath() const { return dir_ + "/" + std::string(kSqliteDbFile); }
};

TEST_F(SqliteStoreTest, OpenCreatesTheDatabaseAndReopensIt) {
  const std::string nested = dir_ + "/new/../bucket/deeper";
  {
    auto store = SqliteStore::Open(env_, nested, {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->Describe(), "sqlite://" + fs::canonical(dir_).string() + "/bucket/deeper");
    ASSERT_TRUE(Run((*store)->Put("kept", "across opens", Precondition::None(), call_)).ok());
  }
  EXPECT_TRUE(fs::exists(dir_ + "/bucket/deeper/wasmkeep.sqlite"));
  auto again = SqliteStore::Open(env_, dir_ + "/bucket/deeper", {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto g = Run((*again)->Get("kept", call_));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->body, "across opens");
}

TEST_F(SqliteStoreTest, OpenRefusesWhatIsNotItsBucketWithOneLine) {
  EXPECT_EQ(SqliteStore::Open(env_, "", {}).code(), Code::kInvalidArgument);
  SqliteStoreOptions bad;
  bad.read_threads = 0;
  EXPECT_EQ(SqliteStore::Open(env_, dir_, bad).code(), Code::kInvalidArgument);

  // A file:// bucket: named as such, with the URL that opens it.
  fs::create_directories(dir_ + "/filebucket/objects");
  std::ofstream(dir_ + "/filebucket/FORMAT") << "wasmkeep-file-store 1\n";
  auto file_bucket = SqliteStore::Open(env_, dir_ + "/filebucket", {});
  EXPECT_EQ(file_bucket.code(), Code::kFatal);
  EXPECT_NE(file_bucket.status().message().find("file://" + fs::canonical(dir_).string() + "/filebucket"),
            std::string::npos)
      << file_bucket.status().message();

  // Someone's files.
  fs::create_directories(dir_ + "/home");
  std::ofstream(dir_ + "/home/notes.txt") << "mine";
  auto foreign = SqliteStore::Open(env_, dir_ + "/home", {});
  EXPECT_EQ(foreign.code(), Code::kFatal);
  EXPECT_NE(foreign.status().message().find("notes.txt"), std::string::npos);

  // A file that is not a database, and another program's database.
  fs::create_directories(dir_ + "/junk");
  std::ofstream(dir_ + "/junk/wasmkeep.sqlite") << std::string(8192, 'j');
  auto junk = SqliteStore::Open(env_, dir_ + "/junk", {});
  EXPECT_EQ(junk.code(), Code::kFatal) << junk.status().ToString();
  fs::create_directories(dir_ + "/other");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/other/wasmkeep.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto other = SqliteStore::Open(env_, dir_ + "/other", {});
  EXPECT_EQ(other.code(), Code::kFatal);
  EXPECT_NE(other.status().message().find("something else"), std::string::npos)
      << other.status().message();

  // A newer format.
  fs::create_directories(dir_ + "/newer");
  {
    auto store = SqliteStore::Open(env_, dir_ + "/newer", {});
    ASSERT_TRUE(store.ok());
  }
  ASSERT_EQ(sqlite3_open((dir_ + "/newer/wasmkeep.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=2", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto newer = SqliteStore::Open(env_, dir_ + "/newer", {});
  EXPECT_EQ(newer.code(), Code::kFatal);
  EXPECT_NE(newer.status().message().find("format 2"), std::string::npos)
      << newer.status().message();
}

// A database made before the column modified_ms existed (format 1 as first released): Open
// adds the column, its old rows list with 0 ("cannot tell") and still read, new writes
// record the time, a build from before the column still writes (its rows list with 0), and
// the next Open finds the column in place.
TEST_F(SqliteStoreTest, AnOlderTableGainsModifiedMsAtOpen) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(DbPath().c_str(), &db), SQLITE_OK);
  const std::string old_schema =
      "PRAGMA journal_mode=WAL; BEGIN; "
      "CREATE TABLE objects(key BLOB PRIMARY KEY NOT NULL, version BLOB NOT NULL, "
      "size INTEGER NOT NULL, crc INTEGER NOT NULL, body BLOB NOT NULL) WITHOUT ROWID; "
      "PRAGMA application_id=" + std::to_string(kSqliteApplicationId) +
      "; PRAGMA user_version=1; "
      "INSERT INTO objects VALUES (CAST('old' AS BLOB), zeroblob(16), 0, 0, CAST('' AS BLOB)); "
      "COMMIT;";
  ASSERT_EQ(sqlite3_exec(db, old_schema.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);

  Open();
  auto old_get = Get("old");
  ASSERT_TRUE(old_get.ok()) << old_get.status().ToString();
  EXPECT_EQ(old_get->body, "");
  const std::int64_t before = ToUnixMs(env_.WallNow());
  ASSERT_TRUE(Put("new", "x").ok());
  const std::int64_t after = ToUnixMs(env_.WallNow());
  ASSERT_EQ(sqlite3_open(DbPath().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,  // the older build's insert names the columns it knows
                         "INSERT OR REPLACE INTO objects(key, version, size, crc, body) "
                         "VALUES (CAST('older' AS BLOB), zeroblob(16), 0, 0, CAST('' AS BLOB))",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  for (int opens = 0; opens < 2; ++opens) {
    auto page = List({});
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_EQ(page->entries.size(), 3u);
    EXPECT_EQ(page->entries[0].key, "new");
    EXPECT_GE(page->entries[0].modified_ms, before);
    EXPECT_LE(page->entries[0].modified_ms, after);
    EXPECT_EQ(page->entries[1].key, "old");
    EXPECT_EQ(page->entries[1].modified_ms, 0);
    EXPECT_EQ(page->entries[2].key, "older");
    EXPECT_EQ(page->entries[2].modified_ms, 0);
    Open();  // the column is in place now: nothing to add
  }
}

using local_store_testing::GetEventually;

// The writer is held in its first batch (one put) while 40 more writes queue; they commit
// together in one transaction, each answered with its own outcome, checked in call order:
// of four create-only writes of one key the first wins, a delete after a put of the same
// key sees it, and a failed condition refuses that write only.
TEST_F(SqliteStoreTest, WritesWaitingTogetherShareOneCommitEachWithItsOwnOutcome) {
  BatchGate gate;
  SqliteStoreOptions options;
  options.before_batch_for_test = gate.Hook();
  Open(options);

  std::vector<Write> writes;
  for (int i = 0; i < 4; ++i) {
    writes.push_back({"one", "c" + std::to_string(i), Precondition::IfNoneMatchAny()});
  }
  writes.push_back({"gone", "briefly"});
  writes.push_back({"gone", "", Precondition::None(), /*is_delete=*/true});
  writes.push_back({"existing", "new", Precondition::IfMatch(Version("00"))});
  writes.push_back({"existing", "", Precondition::IfMatch(Version("00")), /*is_delete=*/true});
  for (int i = 0; i < 32; ++i) writes.push_back({"many/" + std::to_string(i), "x"});

  auto scenario = [](RealEnv* env, SqliteStore* store, BatchGate* g, std::vector<Write> ws,
                     CallOptions call) -> Task<std::vector<Status>> {
    auto one = [](ObjectStore* s, Write w, Status* result, CallOptions c) -> Task<void> {
      if (w.is_delete) {
        *result = co_await s->Delete(w.key, w.condition, c);
      } else {
        auto r = co_await s->Put(w.key, w.body, w.condition, c);
        *result = r.ok() ? Status::Ok() : r.status();
      }
    };
    Status first = Cancelled("not run");
    TaskHandle blocker = env->Spawn(one(store, {"existing", "old"}, &first, call), "blocker");
    co_await env->SleepFor(milliseconds(1));
    g->WaitEntered(1);  // the writer holds the blocker's batch (it needs no loop for that)
    std::vector<Status> out(ws.size(), Cancelled("not run"));
    std::vector<TaskHandle> handles;
    for (std::size_t i = 0; i < ws.size(); ++i) {
      handles.push_back(env->Spawn(one(store, ws[i], &out[i], call), "write"));
    }
    co_await env->SleepFor(milliseconds(5));  // every write has queued
    g->Open();
    (void)co_await blocker.Join();
    for (auto& h : handles) (void)co_await h.Join();
    out.insert(out.begin(), first);
    co_return out;
  };
  auto out = Run(scenario(&env_, store_.get(), &gate, writes, call_));
  ASSERT_EQ(out.size(), writes.size() + 1);
  EXPECT_TRUE(out[0].ok()) << out[0].ToString();
  EXPECT_EQ(gate.sizes(), (std::vector<std::size_t>{1, writes.size()}));

  const std::vector<Code> expected_first = {Code::kOk, Code::kPreconditionFailed,
                                            Code::kPreconditionFailed, Code::kPreconditionFailed,
                                            Code::kOk, Code::kOk,
                                            Code::kPreconditionFailed, Code::kPreconditionFailed};
  for (std::size_t i = 0; i < expected_first.size(); ++i) {
    EXPECT_EQ(out[i + 1].code(), expected_first[i]) << i << ": " << out[i + 1].ToString();
  }
  for (std::size_t i = expected_first.size() + 1; i < out.size(); ++i) {
    EXPECT_TRUE(out[i].ok()) << out[i].ToString();
  }
  EXPECT_EQ(Get("one")->body, "c0");
  EXPECT_EQ(Get("gone").code(), Code::kNotFound);
  EXPECT_EQ(Get("existing")->body, "old");

  const SqliteStoreStats& stats = store_->stats();
  EXPECT_EQ(stats.commits.load(), 2u);
  EXPECT_EQ(stats.writes_applied.load(), 1u + 1u + 2u + 32u);
  EXPECT_EQ(stats.writes_refused.load(), 3u + 2u);
  EXPECT_EQ(stats.failed_batches.load(), 0u);
  EXPECT_EQ(stats.batch_writes.count(), 2u);
  EXPECT_EQ(stats.batch_writes.CumulativeCount(0), 1u);  // le=1: the blocker alone
  EXPECT_EQ(stats.batch_writes.CumulativeCount(5), 1u);  // le=32
  EXPECT_EQ(stats.batch_writes.CumulativeCount(6), 2u);  // le=64: the 40 together
  EXPECT_EQ(stats.batch_writes.sum(), 41.0);

  MetricsRegistry registry;
  PublishSqliteStoreMetrics(registry, stats);
  const std::string text = registry.RenderText();
  for (const char* line :
       {"wasmkeep_store_sqlite_commits_total 2\n", "wasmkeep_store_sqlite_writes_applied_total 36\n",
        "wasmkeep_store_sqlite_writes_refused_total 5\n",
        "wasmkeep_store_sqlite_batch_writes_bucket{le=\"64\"} 2\n",
        "wasmkeep_store_sqlite_batch_writes_count 2\n", "wasmkeep_store_sqlite_commit_seconds_count 2\n",
        "wasmkeep_store_sqlite_busy_waits_total 0\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

// Many writers at once without a gate: commits are fewer than writes (they group by
// themselves while a commit's fsync runs), and every write is answered.
TEST_F(SqliteStoreTest, ConcurrentWritersGroupByThemselves) {
  Open();
  std::vector<Write> writes;
  for (int round = 0; round < 4; ++round) {
    writes.clear();
    for (int i = 0; i < 64; ++i) {
      writes.push_back({"g/" + std::to_string(round) + "/" + std::to_string(i), "v"});
    }
    for (const Status& s : RunTogether(writes, call_)) EXPECT_TRUE(s.ok()) << s.ToString();
  }
  const SqliteStoreStats& stats = store_->stats();
  EXPECT_EQ(stats.writes_applied.load(), 256u);
  EXPECT_LT(stats.commits.load(), 256u);
  std::printf("256 writes, 64 at a time: %llu commits\n",
              static_cast<unsigned long long>(stats.commits.load()));
}

TEST_F(SqliteStoreTest, CorruptBodyIsFatalNamingTheDatabaseAndKey) {
  Open();
  ASSERT_TRUE(Put("victim", "hello").ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(DbPath().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE objects SET body = CAST('jello' AS BLOB) "
                         "WHERE key = CAST('victim' AS BLOB)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  auto g = Get("victim");
  EXPECT_EQ(g.code(), Code::kFatal);
  EXPECT_NE(g.status().message().find("checksum"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("'victim'"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find(DbPath()), std::string::npos) << g.status().message();
  // Head reads no body, so it still answers.
  EXPECT_TRUE(Run(store_->Head("victim", call_)).ok());
}

// Another connection (another process, in real life) holding the write lock: the writer
// waits for it up to busy_timeout, then fails the batch kRetryable with nothing applied.
TEST_F(SqliteStoreTest, AnotherWriterHoldingTheLockIsWaitedForThenRetryable) {
  SqliteStoreOptions options;
  options.busy_timeout = milliseconds(300);
  Open(options);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(DbPath().c_str(), &db), SQLITE_OK);

  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::thread release([db] {
    std::this_thread::sleep_for(milliseconds(100));
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  });
  auto waited = Put("after-wait", "x");
  release.join();
  EXPECT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_GT(store_->stats().busy_waits.load(), 0u);

  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto refused = Put("never", "x");
  EXPECT_EQ(refused.code(), Code::kRetryable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("nothing was applied"), std::string::npos)
      << refused.status().message();
  ASSERT_EQ(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(Get("never").code(), Code::kNotFound);
  EXPECT_EQ(store_->stats().failed_batches.load(), 1u);
  EXPECT_TRUE(Put("later", "x").ok());
}

TEST_F(SqliteStoreTest, PastTheDeadlineIsUnknownOutcomeAndTheWriteMayStillLand) {
  BatchGate gate;
  SqliteStoreOptions options;
  options.before_batch_for_test = gate.Hook();
  Open(options);
  auto late = Run(store_->Put("late", "body", Precondition::None(), CallOptions{milliseconds(50)}));
  EXPECT_EQ(late.code(), Code::kUnknownOutcome) << late.status().ToString();
  gate.Open();
  auto g = Run(GetEventually(env_, *store_, "late"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->body, "body");
}

// Closing while the writer commits one batch and two more writes wait: the batch is
// answered as usual, the waiting writes kRetryable (nothing applied).
TEST_F(SqliteStoreTest, ClosingAnswersTheBatchInFlightAndRefusesTheQueuedWrites) {
  BatchGate gate;
  SqliteStoreOptions options;
  options.before_batch_for_test = gate.Hook();
  Open(options);
  auto scenario = [](RealEnv* env, std::unique_ptr<SqliteStore>* store, BatchGate* g,
                     CallOptions call) -> Task<std::vector<Status>> {
    auto one = [](ObjectStore* s, std::string key, Status* result, CallOptions c) -> Task<void> {
      auto r = co_await s->Put(key, "v", Precondition::None(), c);
      *result = r.ok() ? Status::Ok() : r.status();
    };
    std::vector<Status> out(3, Cancelled("not run"));
    std::vector<TaskHandle> handles;
    handles.push_back(env->Spawn(one(store->get(), "in-flight", &out[0], call), "w"));
    co_await env->SleepFor(milliseconds(1));
    g->WaitEntered(1);
    handles.push_back(env->Spawn(one(store->get(), "queued-1", &out[1], call), "w"));
    handles.push_back(env->Spawn(one(store->get(), "queued-2", &out[2], call), "w"));
    co_await env->SleepFor(milliseconds(5));
    std::thread opener([g] {
      std::this_thread::sleep_for(milliseconds(100));
      g->Open();
    });
    store->reset();  // waits for the batch in flight
    opener.join();
    for (auto& h : handles) (void)co_await h.Join();
    co_return out;
  };
  auto out = Run(scenario(&env_, &store_, &gate, call_));
  EXPECT_TRUE(out[0].ok()) << out[0].ToString();
  EXPECT_EQ(out[1].code(), Code::kRetryable) << out[1].ToString();
  EXPECT_EQ(out[2].code(), Code::kRetryable) << out[2].ToString();
  Open();
  EXPECT_TRUE(Get("in-flight").ok());
  EXPECT_EQ(Get("queued-1").code(), Code::kNotFound);
}

// A checkpoint runs beside the writer: with the checkpointer held in its first checkpoint
// (the WAL past kSqliteCheckpointFrames after about 20 MiB of writes), writes still commit
// and answer well within their deadline. With the checkpoint back on the writer's thread,
// as it was, they would wait for it and come back kUnknownOutcome at 2 s.
TEST_F(SqliteStoreTest, ACheckpointRunsBesideTheWriterAndNoWriteWaitsForIt) {
  BatchGate gate;
  SqliteStoreOptions options;
  auto hook = gate.Hook();
  options.before_checkpoint_for_test = [hook] { hook(0); };
  Open(options);
  const std::string mib(1 << 20, 'x');
  for (int i = 0; i < 24 && gate.sizes().empty(); ++i) ASSERT_TRUE(Put("big/" + std::to_string(i), mib).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (gate.sizes().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(gate.sizes().size(), 1u) << "the WAL passed the checkpoint threshold";
  EXPECT_EQ(store_->stats().checkpoints.load(), 0u) << "held before it ran";
  const CallOptions short_call{milliseconds(2000)};
  for (int i = 0; i < 20; ++i) {
    auto put = Run(store_->Put("during/" + std::to_string(i), "v", Precondition::None(), short_call));
    ASSERT_TRUE(put.ok()) << i << ": " << put.status().ToString();
  }
  gate.Open();
  while (store_->stats().checkpoints.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_GE(store_->stats().checkpoints.load(), 1u);
  auto big = Get("big/0");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->body, mib);
  EXPECT_EQ(Get("during/19")->body, "v");
}

// Listing reads the page from the key index: a page under a small prefix beside 20,000
// other keys, and a page deep into them, come back in the same short time as an empty
// bucket's (checked loosely: well under the cost of reading every key).
TEST_F(SqliteStoreTest, ListingAPageReadsThePageNotTheBucket) {
  SqliteStoreOptions options;
  options.fsync = false;  // the subject is listing, not durability
  Open(options);
  std::vector<Write> writes;
  for (int i = 0; i < 20'000; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "wal/big/%06d", i);
    writes.push_back({name, "v"});
  }
  for (const Status& s : RunTogether(writes, call_)) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Put("wal/small/" + std::to_string(i), "v").ok());
  ListOptions small;
  small.prefix = "wal/small/";
  small.page_size = 2;
  auto page = Run(store_->List(small, call_));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[0].key, "wal/small/0");
  ASSERT_TRUE(page->next_continuation.has_value());
  small.continuation = *page->next_continuation;
  page = Run(store_->List(small, call_));
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_FALSE(page->next_continuation.has_value());

  ListOptions deep;
  deep.prefix = "wal/big/";
  deep.start_after = "wal/big/019990";
  deep.page_size = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    page = Run(store_->List(deep, call_));
    ASSERT_TRUE(page.ok());
    ASSERT_EQ(page->entries.size(), 9u);
  }
  const double per_page_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 100;
  std::printf("a 9-entry page after 19,990 keys: %.3f ms\n", per_page_ms);
  EXPECT_LT(per_page_ms, 20.0);
}

}  // namespace
}  // namespace wk
