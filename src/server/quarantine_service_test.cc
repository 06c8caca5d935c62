// QuarantineService over a real ActorRuntime (V8, one worker) and a mem:// bucket: which
// event outcomes are strikes, strikes that quarantine and unload the actor, the journal fed
// by the runtime's hooks, crash strikes from a previous process's journal, and the hold
// source that refuses to start a quarantined actor.
#include "server/quarantine_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "actor/testing/mem_storage.h"
#include "env/real_env.h"
#include "store/mem/mem_store.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<std::uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(QuarantineStrikeTest, OnlyWhatThreatensTheNodeIsAStrike) {
  using engine::CallOutcome;
  EXPECT_TRUE(QuarantineService::IsStrike(CallOutcome::kHeapLimit));
  EXPECT_FALSE(QuarantineService::IsStrike(CallOutcome::kOutOfMemory)) << "the actor's own bound";
  EXPECT_FALSE(QuarantineService::IsStrike(CallOutcome::kTerminated)) << "a slow event is not a crash";
  EXPECT_FALSE(QuarantineService::IsStrike(CallOutcome::kTrapped));
  EXPECT_FALSE(QuarantineService::IsStrike(CallOutcome::kHostError));
  EXPECT_FALSE(QuarantineService::IsStrike(CallOutcome::kEngineError));
  EXPECT_FALSE(QuarantineService::IsStrike(CallOutcome::kReturned));
}

class QuarantineServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wk-quarantine-service-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    journal_path_ = dir_ + "/running-events-n1";
  }
  void TearDown() override {
    TearDownNode();
    std::filesystem::remove_all(dir_);
  }
  // The node's pieces go (a clean stop); the bucket and the cache's store stay.
  void TearDownNode() {
    if (runtime_) env_.RunMain(runtime_->Shutdown(seconds(10)));
    runtime_.reset();
    service_.reset();
    journal_.reset();
  }
  // Builds the node's pieces; left_behind: what the journal held from a "previous process".
  // A worker whose V8 heap a few actors' tables fill: the smallest heap the settings allow,
  // each actor's table up to the largest (8 MB at 1,000,000 elements).
  static actor::RuntimeOptions SmallHeap() {
    actor::RuntimeOptions options;
    options.isolate_heap_limit_bytes = actor::kMinIsolateHeapLimitBytes;
    options.limits.max_table_elements = actor::kMaxTableElementsSetting;
    // Growing a table to the largest size takes about 200 ms of CPU in the ci build (ASan)
    // on a loaded machine: these events end by a trap or the heap limit, not the CPU limit.
    options.limits.max_event_cpu_ms = 5000;
    return options;
  }
  void Start(control::QuarantinePolicy policy = {3, seconds(600), seconds(600)},
             actor::RuntimeOptions options = actor::RuntimeOptions{}) {
    auto opened = RunningEvents::Open(journal_path_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    journal_ = std::move(opened->journal);
    left_behind_ = std::move(opened->left_behind);
    metrics_ = std::make_unique<MetricsRegistry>();  // one per node process
    service_ = std::make_unique<QuarantineService>(env_, store_, cache_,
                                                   QuarantineServiceOptions{NodeId("n1"), policy, CallOptions{seconds(5)}},
                                                   journal_.get());
    PublishQuarantineMetrics(*metrics_, *service_);
    options.workers = 1;
    // Spinning events end quickly (200 ms), unless the test chose a limit of its own.
    if (options.limits.max_event_cpu_ms == actor::ActorLimits{}.max_event_cpu_ms) options.limits.max_event_cpu_ms = 200;
    runtime_ = std::make_unique<actor::ActorRuntime>(env_, engine_, classes_, storage_, options, service_->Hooks());
    service_->set_unload([this](const ActorId& id) {
      ++unloads_;
      runtime_->Unload(id);
    });
    auto module = actor::CompileActorModule(engine_, ReadBytes(std::string(WK_ACTORS_DIR) + "/bad_actors.wasm"),
                                            options.limits);
    ASSERT_TRUE(module.ok()) << module.status().ToString();
    classes_.Set("acme", "bad", *module);
    auto hostile = actor::CompileActorModule(
        engine_, ReadBytes(std::string(WK_ACTORS_DIR) + "/one_page_hostile.wasm"), options.limits);
    ASSERT_TRUE(hostile.ok()) << hostile.status().ToString();
    classes_.Set("acme", "hostile", *hostile);
  }
  actor::EventResult Call(const ActorId& id, const std::string& path, std::string method = "GET") {
    actor::Request r;
    r.method = std::move(method);
    r.path = path;
    return env_.RunMain(runtime_->HandleRequest(id, std::move(r)));
  }
  // Runs the loop until the strikes posted so far are written.
  void SettleStrikes() {
    auto sleep = [](Env& env) -> Task<void> { (void)co_await env.SleepFor(milliseconds(10)); };
    for (int i = 0; i < 500 && (i < 2 || service_->strikes_in_flight() > 0); ++i) env_.RunMain(sleep(env_));
    ASSERT_EQ(service_->strikes_in_flight(), 0);
  }
  // Runs the loop until done() holds (at most 5 s).
  bool RunUntil(const std::function<bool()>& done) {
    auto sleep = [](Env& env) -> Task<void> { (void)co_await env.SleepFor(milliseconds(10)); };
    for (int i = 0; i < 500 && !done(); ++i) env_.RunMain(sleep(env_));
    return done();
  }
  std::optional<control::QuarantineRecord> Record(const ActorId& id) {
    auto r = env_.RunMain(control::ReadQuarantine(store_, id));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::nullopt;
  }

  std::string dir_, journal_path_;
  RealEnv env_;
  std::shared_ptr<MemBucket> bucket_ = std::make_shared<MemBucket>();
  MemStore store_{env_, bucket_};
  std::unique_ptr<MetricsRegistry> metrics_;
  control::QuarantineCache cache_{env_, store_};
  engine::Engine engine_;
  actor::ClassRegistry classes_;
  actor::MemStorageProvider storage_;
  std::unique_ptr<RunningEvents> journal_;
  std::vector<ActorId> left_behind_;
  std::unique_ptr<QuarantineService> service_;
  std::unique_ptr<actor::ActorRuntime> runtime_;
  int unloads_ = 0;
};

const ActorId kPoison{"acme", "bad", "poison"};

// examples/testdata/one_page_hostile.wat: GET traps (unreachable), POST overflows the
// stack, PATCH grows tables until the worker's heap or the table bound stops it.
const ActorId kHostile{"acme", "hostile", "h"};

TEST_F(QuarantineServiceTest, TrapsStackOverflowsAndFullLinearMemoryAreNotStrikes) {
  // The finding (issue "Hostile tenants, round two"): a one-page module's trap counted as
  // an out-of-memory strike, so anyone who could make an actor trap three times (bad
  // input) locked it out of the cluster for 10 minutes.
  Start();
  for (int i = 0; i < 3; ++i) {
    actor::EventResult trap = Call(kHostile, "/", "GET");
    ASSERT_EQ(trap.outcome, actor::EventOutcome::kActorFailed);
    EXPECT_NE(trap.error.find("unreachable"), std::string::npos) << trap.error;
    EXPECT_EQ(trap.error.find("out of memory"), std::string::npos) << trap.error;
    actor::EventResult overflow = Call(kHostile, "/", "POST");
    ASSERT_EQ(overflow.outcome, actor::EventOutcome::kActorFailed);
    EXPECT_NE(overflow.error.find("stack overflow"), std::string::npos) << overflow.error;
    // Linear memory grown to its maximum, then a trap: the actor's own bound.
    actor::EventResult full = Call(kPoison, "/grow");
    ASSERT_EQ(full.outcome, actor::EventOutcome::kActorFailed);
    EXPECT_NE(full.error.find("actors.max_memory_bytes"), std::string::npos) << full.error;
    EXPECT_EQ(Call(kPoison, "/trap").outcome, actor::EventOutcome::kActorFailed);
    EXPECT_EQ(Call(kPoison, "/recurse").outcome, actor::EventOutcome::kActorFailed);
    EXPECT_EQ(Call(kPoison, "/loop").outcome, actor::EventOutcome::kActorFailed);
  }
  SettleStrikes();
  EXPECT_EQ(service_->stats().instance_strikes, 0u);
  EXPECT_FALSE(Record(kHostile).has_value());
  EXPECT_FALSE(Record(kPoison).has_value());
  EXPECT_EQ(bucket_->counts().put, 0u);
  EXPECT_EQ(Call(kHostile, "/", "DELETE").outcome, actor::EventOutcome::kOk) << "still served";
  EXPECT_EQ(Call(kPoison, "/ok").outcome, actor::EventOutcome::kOk) << "still served";
  EXPECT_EQ(unloads_, 0);
}

TEST_F(QuarantineServiceTest, EventsThatExhaustTheWorkersHeapQuarantineTheActorAndUnloadIt) {
  // One actor's tables fit any heap the settings allow; the heap is the worker's, shared by
  // every actor on it: actors holding large tables fill it, and the event that reaches its
  // limit is the strike.
  Start(control::QuarantinePolicy{3, seconds(600), seconds(600)}, SmallHeap());
  std::vector<std::string> seen;
  int fillers = 0;
  int heap_limits = 0;
  for (int attempt = 0; attempt < 40 && heap_limits < 3; ++attempt) {
    // Grows its tables on a new instance, then traps (a trap: no strike).
    actor::EventResult r = Call(kHostile, "/", "OPTIONS");
    seen.push_back(r.error);
    ASSERT_EQ(r.outcome, actor::EventOutcome::kActorFailed) << r.error;
    if (r.error.find("V8 heap limit") == std::string::npos) {
      ASSERT_NE(r.error.find("unreachable"), std::string::npos) << r.error;
      // Its tables fit beside the others': one more actor keeps large tables. (Its own event
      // may reach the limit instead: its strike is its own.)
      const ActorId filler{"acme", "hostile", "filler" + std::to_string(fillers++)};
      actor::EventResult f = Call(filler, "/", "PATCH");
      seen.push_back(filler.name + ": " + (f.error.empty() ? "ok" : f.error.substr(0, 30)));
      continue;
    }
    ++heap_limits;
    SettleStrikes();
    auto record = Record(kHostile);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->strikes.size(), static_cast<std::size_t>(heap_limits));
    EXPECT_EQ(record->QuarantinedAt(env_.WallNow()), heap_limits == 3);
  }
  ASSERT_EQ(heap_limits, 3) << ::testing::PrintToString(seen);
  SettleStrikes();
  EXPECT_GE(service_->stats().quarantines, 1u);
  auto record = Record(kHostile);
  ASSERT_TRUE(record);
  EXPECT_TRUE(record->QuarantinedAt(env_.WallNow()));
  EXPECT_EQ(record->strikes.size(), 3u);
  EXPECT_NE(record->reason.find("exhausted the worker's V8 heap"), std::string::npos) << record->reason;
  EXPECT_NE(record->reason.find("(actors.isolate_heap_limit_bytes)"), std::string::npos) << "names the setting";
  EXPECT_TRUE(cache_.Peek(kHostile).has_value()) << "remembered without a read";
  EXPECT_GE(unloads_, 1);
  EXPECT_TRUE(RunUntil([&] { return !runtime_->IsResident(kHostile); })) << "unloaded";
  EXPECT_NE(metrics_->RenderText().find("wasmkeep_quarantines_total"), std::string::npos);
}

// The runtime's hooks wrote the journal: the event's start put the actor in worker 0's
// slot, its end put a NUL over the slot's first byte.
TEST_F(QuarantineServiceTest, TheRuntimesHooksKeepTheJournal) {
  Start();
  ASSERT_EQ(Call(kPoison, "/ok").outcome, actor::EventOutcome::kOk);
  std::ifstream in(journal_path_, std::ios::binary);
  const std::string contents{std::istreambuf_iterator<char>(in), {}};
  ASSERT_GE(contents.size(), RunningEvents::kSlotBytes + 16);
  EXPECT_EQ(contents[RunningEvents::kSlotBytes], '\0');
  EXPECT_EQ(contents.substr(RunningEvents::kSlotBytes + 1, 15), "cme/bad/poison\n");
}

struct FakeHolds final : replica::HoldSource {
  int acquires = 0;
  Task<Result<replica::Replica::Hold>> Acquire(ActorId) override {
    ++acquires;
    co_return replica::Replica::Hold{Generation{1}, [] { return true; }};
  }
  Task<void> Release(ActorId, Generation) override { co_return; }
};

TEST_F(QuarantineServiceTest, AQuarantinedActorIsNotStartedAgainOnThisNode) {
  Start();
  for (int i = 0; i < 3; ++i) service_->Strike(kPoison, "a test's strike", false);
  SettleStrikes();
  FakeHolds inner;
  QuarantineHoldSource holds(inner, &cache_);
  auto refused = env_.RunMain(holds.Acquire(kPoison));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Code::kRetryable);
  EXPECT_NE(refused.status().message().find("is quarantined until"), std::string::npos) << refused.status().message();
  EXPECT_EQ(inner.acquires, 0) << "refused before any acquisition";
  EXPECT_TRUE(env_.RunMain(holds.Acquire(ActorId{"acme", "bad", "fine"})).ok());
  EXPECT_EQ(inner.acquires, 1);
}

// A crash staged by leaving the journal behind: the next start records one strike for each
// actor listed, and three such starts quarantine it.
TEST_F(QuarantineServiceTest, ACrashDuringAnEventIsAStrikeAtTheNextStart) {
  for (int crash = 1; crash <= 3; ++crash) {
    {
      auto opened = RunningEvents::Open(journal_path_);
      ASSERT_TRUE(opened.ok());
      opened->journal->Started(0, kPoison);
    }  // the "process" dies with the event running
    Start();
    ASSERT_EQ(left_behind_, std::vector<ActorId>{kPoison});
    service_->RecordCrashStrikes(left_behind_);
    SettleStrikes();
    EXPECT_EQ(service_->stats().crash_strikes, 1u);
    auto record = Record(kPoison);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->strikes.size(), static_cast<std::size_t>(crash));
    EXPECT_NE(record->reason.find("node process ended"), std::string::npos);
    EXPECT_EQ(record->QuarantinedAt(env_.WallNow()), crash == 3);
    TearDownNode();
  }
}

// Every start reads the record when the node remembers nothing fresh of it (broken model
// start-skips-quarantine-read): another node quarantined the actor, this one never heard;
// a start that did not come through the front (the runtime restarting an actor whose
// storage failed while events were queued) must not take it. One read per cache ttl.
TEST_F(QuarantineServiceTest, AStartReadsTheRecordWhenTheNodeRemembersNothing) {
  Start();
  auto broken = BrokenModels::FromEnvironment();
  ASSERT_TRUE(broken.ok());
  control::QuarantineRecord record;
  record.actor = kPoison;
  record.until = env_.WallNow() + std::chrono::minutes(10);
  record.reason = "strikes on another node";
  record.strikes.push_back(control::Strike{env_.WallNow(), "n2", "00000000000000aa"});
  ASSERT_TRUE(bucket_->ApplyPut(control::QuarantineKey(kPoison), control::EncodeQuarantineRecord(record),
                                Precondition::None())
                  .ok());
  FakeHolds inner;
  QuarantineHoldSource holds(inner, &cache_, *broken);
  auto refused = env_.RunMain(holds.Acquire(kPoison));
  EXPECT_FALSE(refused.ok()) << "a quarantined actor started on a node that remembered nothing of it";
  EXPECT_EQ(inner.acquires, 0);
  const auto gets = bucket_->counts().get;
  EXPECT_FALSE(env_.RunMain(holds.Acquire(kPoison)).ok());
  EXPECT_EQ(bucket_->counts().get, gets) << "within the cache's ttl the answer is remembered";
}

}  // namespace
}  // namespace wk
