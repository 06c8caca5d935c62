// The actor runtime against real modules (examples/testdata, built by clang for wasm32):
// the ABI's raw contract, every bad-input case of docs/abi.md, the input and output gates, and
// the lifecycle (hibernation, eviction, durability failure).
#include "actor/runtime.h"

#include <gtest/gtest.h>

#include "actor/state_map.h"
#include "actor/testing/harness.h"
#include "base/metrics.h"
#include "engine/testing/module_builder_test_util.h"

#include <fstream>
#include <map>

namespace wk::actor {
namespace {

using testing::Harness;
using testing::MakeRequest;
using testing::TestRequest;

std::string Actors(const std::string& name) { return std::string(WK_ACTORS_DIR) + "/" + name + ".wasm"; }


std::string ErrorOf(const EventResult& r) { return std::string(EventOutcomeName(r.outcome)) + ": " + r.error; }

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.Deploy("probe", Actors("abi_probe"));
    h_.Deploy("bad", Actors("bad_actors"));
  }
  RuntimeOptions Options() {
    RuntimeOptions o = testing::DefaultHarnessOptions();
    o.limits.max_event_cpu_ms = 200;
    return o;
  }
  Harness h_{Options()};
};

TEST_F(RuntimeTest, RequestFieldsAndResponseCrossTheAbi) {
  TestRequest r = MakeRequest("POST", "/echo", "a=1&b=2", "hello body");
  r.headers = {{"X-Probe", "yes"}, {"Content-Type", "text/plain"}};
  auto resp = h_.Call("t/probe/one", r);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 201);
  EXPECT_EQ(resp->header("x-answer"), "42");
  EXPECT_EQ(resp->body, "POST|/echo|a=1&b=2|hello body|yes|(none)|x-probe: yes\ncontent-type: text/plain\n");
}

TEST_F(RuntimeTest, ListingEncodingFlagsAndOwnWrites) {
  auto resp = h_.Call("t/probe/list", MakeRequest("POST", "/list"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->body, "a=1,b=2,ba=3,c=4,|b=2,ba=3,|c=4,ba=3,|a=1,b=2,ba=3,|10|-1");
}

TEST_F(RuntimeTest, AlarmValueIsStoredWithTheBatch) {
  auto resp = h_.Call("t/probe/al", MakeRequest("POST", "/alarm"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->body, "-1|5000|-1|12345");
  auto state = h_.storage().State(ActorId{"t", "probe", "al"});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->map.alarm(), 12345);
  auto alarm = h_.Alarm("t/probe/al");
  EXPECT_TRUE(alarm.ok()) << ErrorOf(alarm);
  EXPECT_TRUE(alarm.alarm_fired);
  EXPECT_FALSE(alarm.alarm_after.has_value()) << "cleared as the handler starts";
  EXPECT_EQ(state->data().at("alarm-ran"), "yes 0 -1") << "retry 0; alarm_get sees it cleared";
  EXPECT_FALSE(state->map.alarm().has_value());
}

// docs/alarms.md, rule 3: an alarm event runs the handler only for a due alarm of the state.
TEST_F(RuntimeTest, AnAlarmEventRunsNothingUnlessTheStatesAlarmIsDue) {
  auto none = h_.Alarm("t/probe/none");
  ASSERT_TRUE(none.ok()) << ErrorOf(none);
  EXPECT_FALSE(none.alarm_fired);
  EXPECT_FALSE(none.alarm_after.has_value());
  auto state = h_.storage().State(ActorId{"t", "probe", "none"});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->data().count("alarm-ran"), 0u) << "no alarm: nothing ran";

  ASSERT_TRUE(h_.Call("t/probe/later", MakeRequest("POST", "/set-alarm", "1800000005000")).ok());
  auto later = h_.storage().State(ActorId{"t", "probe", "later"});
  auto early = h_.Alarm("t/probe/later");
  ASSERT_TRUE(early.ok()) << ErrorOf(early);
  EXPECT_FALSE(early.alarm_fired) << "not due on this node's clock";
  EXPECT_EQ(early.alarm_after, std::optional<std::int64_t>(1800000005000));
  EXPECT_EQ(later->data().count("alarm-ran"), 0u);
  h_.AdvanceClock(5000);
  auto due = h_.Alarm("t/probe/later");
  EXPECT_TRUE(due.alarm_fired) << ErrorOf(due);
  EXPECT_EQ(later->data().count("alarm-ran"), 1u);
}

TEST_F(RuntimeTest, AFailedAlarmKeepsItsAlarmUntilTheLastAttemptClearsIt) {
  ASSERT_TRUE(h_.Call("t/probe/f", MakeRequest("PUT", "/put", "alarm-fail", "1")).ok());
  ASSERT_TRUE(h_.Call("t/probe/f", MakeRequest("POST", "/alarm")).ok());
  auto state = h_.storage().State(ActorId{"t", "probe", "f"});
  auto first = h_.Alarm("t/probe/f", AlarmEvent{0, false});
  EXPECT_EQ(first.outcome, EventOutcome::kActorFailed) << ErrorOf(first);
  EXPECT_EQ(first.alarm_after, std::optional<std::int64_t>(12345)) << "kept for a retry";
  EXPECT_EQ(state->data().count("alarm-failed-write"), 0u) << "the failed run's writes are discarded";
  auto last = h_.Alarm("t/probe/f", AlarmEvent{6, true});
  EXPECT_EQ(last.outcome, EventOutcome::kActorFailed);
  EXPECT_FALSE(last.alarm_after.has_value()) << "the retries are used up: cleared";
  EXPECT_FALSE(state->map.alarm().has_value());
  EXPECT_EQ(state->data().count("alarm-failed-write"), 0u);
}

TEST_F(RuntimeTest, AnAlarmHandlerReadsItsRetryCountAndReArms) {
  ASSERT_TRUE(h_.Call("t/probe/r", MakeRequest("PUT", "/put", "alarm-rearm", "1900000000000")).ok());
  ASSERT_TRUE(h_.Call("t/probe/r", MakeRequest("POST", "/alarm")).ok());
  auto r = h_.Alarm("t/probe/r", AlarmEvent{2, false});
  ASSERT_TRUE(r.ok()) << ErrorOf(r);
  EXPECT_TRUE(r.alarm_fired);
  EXPECT_EQ(r.alarm_after, std::optional<std::int64_t>(1900000000000)) << "re-armed in the same batch";
  auto state = h_.storage().State(ActorId{"t", "probe", "r"});
  EXPECT_EQ(state->data().at("alarm-ran"), "yes 2 -1");
  EXPECT_EQ(state->map.alarm(), std::optional<std::int64_t>(1900000000000));
}

TEST_F(RuntimeTest, AClassWithoutAnAlarmHandlerHasItsDueAlarmCleared) {
  auto none = h_.Alarm("t/bad/x");
  EXPECT_TRUE(none.ok()) << ErrorOf(none);
  EXPECT_FALSE(none.alarm_fired);
}

TEST_F(RuntimeTest, TimeIsFrozenPerEventAndRandomIsFilled) {
  auto first = h_.Call("t/probe/time", MakeRequest("GET", "/time"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->body, "1800000000000|1800000000000|1");
  h_.AdvanceClock(1500);
  auto second = h_.Call("t/probe/time", MakeRequest("GET", "/time"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->body, "1800000001500|1800000001500|1");
}

TEST_F(RuntimeTest, SyncMakesThePartBeforeItDurableOnItsOwn) {
  ASSERT_TRUE(h_.Call("t/probe/s", MakeRequest("PUT", "/put", "fail", "1")).ok());
  auto r = h_.CallRaw("t/probe/s", MakeRequest("POST", "/sync"));
  EXPECT_EQ(r.outcome, EventOutcome::kActorFailed);
  auto state = h_.storage().State(ActorId{"t", "probe", "s"});
  EXPECT_EQ(state->data().count("before-sync"), 1u) << "synced before the trap";
  EXPECT_EQ(state->data().count("after-sync"), 0u) << "written after the sync, then trapped: discarded";
}

TEST_F(RuntimeTest, AFailedSyncNeverReleasesTheAnswer) {
  ASSERT_TRUE(h_.Call("t/probe/sf", MakeRequest("POST", "/count")).ok());
  h_.storage().FailDurability(true);
  auto r = h_.CallRaw("t/probe/sf", MakeRequest("POST", "/sync"));
  EXPECT_EQ(r.outcome, EventOutcome::kUnavailable) << ErrorOf(r);
  EXPECT_NE(r.error.find("durable"), std::string::npos) << r.error;
  h_.storage().FailDurability(false);
  auto again = h_.Call("t/probe/sf", MakeRequest("POST", "/sync"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->body, "0") << "sync returned 0 once durable";
}

TEST_F(RuntimeTest, ATrapDiscardsTheBatchAndTheNextEventGetsAFreshInstance) {
  auto r = h_.CallRaw("t/bad/w", MakeRequest("POST", "/write-then-trap"));
  ASSERT_EQ(r.outcome, EventOutcome::kActorFailed);
  EXPECT_NE(r.error.find("trap"), std::string::npos) << r.error;
  auto state = h_.storage().State(ActorId{"t", "bad", "w"});
  ASSERT_NE(state, nullptr);
  EXPECT_TRUE(state->data().empty()) << "the trapped event's write was discarded";
  const auto before = h_.runtime().stats().instantiations;
  auto ok = h_.Call("t/bad/w", MakeRequest("GET", "/ok"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->body, "ok");
  EXPECT_EQ(h_.runtime().stats().instantiations, before + 1) << "re-created after the trap";
  auto again = h_.Call("t/bad/w", MakeRequest("GET", "/ok"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(h_.runtime().stats().instantiations, before + 1) << "a clean event keeps its instance";
}

// Issue 5, "Bad input": each case fails its own event with an error naming the cause; the
// node keeps running and other actors are unaffected.
TEST_F(RuntimeTest, BadActorsFailTheirOwnEventNamingTheCause) {
  struct Case {
    const char* cls;
    const char* path;
    const char* text;
  };
  const Case cases[] = {
      {"bad", "/loop", "CPU time limit of 200 ms"},
      {"bad", "/loop", "actors.max_event_cpu_ms"},
      {"bad", "/recurse", "stack overflow"},
      {"bad", "/grow", "actors.max_memory_bytes"},
      {"bad", "/oob", "outside linear memory"},
      {"bad", "/bigvalue", "max_value_bytes = 131072"},
      {"bad", "/bigkey", "max_key_bytes = 2048"},
      {"bad", "/exit", "proc_exit(3)"},
      {"bad", "/trap", "trap: unreachable"},
      {"probe", "/bad-status", "not an HTTP status"},
      {"probe", "/bad-header", "contains CR, LF or NUL"},
      {"probe", "/big-response", "max_response_bytes"},
      {"probe", "/bad-field", "unknown field 99"},
      {"probe", "/oob-read", "result_read: destination range"},
      {"probe", "/oob-response", "response_write: data range"},
      {"probe", "/oob-log", "log: message range"},
      {"probe", "/oob-list", "storage_list: start range"},
      {"probe", "/oob-random", "random_fill"},
      {"probe", "/return-7", "returned 7"},
  };
  ASSERT_TRUE(h_.Call("t/probe/bystander", MakeRequest("POST", "/count")).ok());
  for (const Case& c : cases) {
    auto r = h_.CallRaw(std::string("t/") + c.cls + "/victim", MakeRequest("POST", c.path));
    EXPECT_EQ(r.outcome, EventOutcome::kActorFailed) << c.path << ": " << ErrorOf(r);
    EXPECT_NE(r.error.find(c.text), std::string::npos) << c.path << ": " << r.error;
    // The same actor serves again, and so does a bystander.
    auto ok = h_.Call(std::string("t/") + c.cls + "/victim", MakeRequest("GET", c.cls == std::string("bad") ? "/ok" : "/echo"));
    EXPECT_TRUE(ok.ok()) << c.path << " then: " << ok.status().ToString();
  }
  auto bystander = h_.Call("t/probe/bystander", MakeRequest("POST", "/count"));
  ASSERT_TRUE(bystander.ok());
  EXPECT_EQ(bystander->body, "2");
}

// The finding: response_set_status took 100..599, so an event could commit its writes and
// answer 101, which the server replaces with a 500, documented as "nothing was committed".
TEST_F(RuntimeTest, AStatusThatIsNotFinalFailsTheEventAndCommitsNothing) {
  const ActorId id{"t", "probe", "st"};
  for (int status : {100, 101, 103, 199, 600, 0, -1}) {
    auto r = h_.CallRaw("t/probe/st", MakeRequest("POST", "/status", std::to_string(status)));
    EXPECT_EQ(r.outcome, EventOutcome::kActorFailed) << status << ": " << ErrorOf(r);
    EXPECT_NE(r.error.find("200..599"), std::string::npos) << r.error;
    auto state = h_.storage().State(id);
    EXPECT_TRUE(state == nullptr || state->data().count("status-write") == 0)
        << status << ": the failed event's write was committed";
  }
  for (int status : {200, 204, 404, 599}) {
    auto r = h_.Call("t/probe/st", MakeRequest("POST", "/status", std::to_string(status)));
    ASSERT_TRUE(r.ok()) << status << ": " << r.status().ToString();
    EXPECT_EQ(r->status, status);
    auto state = h_.storage().State(id);
    ASSERT_NE(state, nullptr);
    EXPECT_EQ(state->data().at("status-write"), std::to_string(status));
  }
}

// The finding: an actor's log message reached the node's log as it was, so CR LF forged
// records, terminal escapes acted on an operator's screen and NUL cut lines.
TEST_F(RuntimeTest, AnActorsLogLinesCarryNoControlCharacters) {
  ::testing::internal::CaptureStderr();
  auto r = h_.CallRaw("t/probe/logs", MakeRequest("POST", "/log-controls"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(r.ok()) << ErrorOf(r);
  EXPECT_NE(err.find("msg=\"forged\\r\\nERROR fake record\\x1b[2J\\x07nul:\\x00:bad\\xff\""), std::string::npos)
      << err;
  EXPECT_NE(err.find("msg=\"stdout\\x1b]0;owned\\x07 line\\r\""), std::string::npos) << err;
  for (const char c : {'\r', '\x1b', '\x07', '\0', '\xff'}) {
    EXPECT_EQ(err.find(c), std::string::npos) << "byte " << static_cast<int>(static_cast<unsigned char>(c));
  }
  // Each message is one record: the forged "record" is inside the actor's line.
  std::size_t records = 0;
  std::size_t start = 0;
  while (start < err.size()) {
    const std::size_t end = err.find('\n', start);
    const std::string line = err.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.find("fake record") != std::string::npos) {
      ++records;
      EXPECT_NE(line.find("actor log actor=t/probe/logs"), std::string::npos) << line;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  EXPECT_EQ(records, 1u) << err;
}

// Host calls cannot be interrupted by the CPU watchdog, so each bounds its own work:
// fd_write takes at most 64 KiB per call (a short write), and log output has a budget.
TEST_F(RuntimeTest, AHugeWriteToStdoutIsAShortWrite) {
  h_.Deploy("fdw", Actors("big_fd_write"));
  auto r = h_.CallRaw("t/fdw/a", MakeRequest("POST", "/"));
  EXPECT_TRUE(r.ok()) << "nwritten must be 65536: " << ErrorOf(r);
}

// Issue 5: out-of-range pointers and lengths in every host call that takes one.
TEST_F(RuntimeTest, EveryHostCallChecksItsPointers) {
  int cases = 0;
  for (int n = 0;; ++n) {
    auto r = h_.CallRaw("t/probe/oob", MakeRequest("POST", "/oob-each", std::to_string(n)));
    if (r.ok()) break;  // past the last case
    ++cases;
    EXPECT_EQ(r.outcome, EventOutcome::kActorFailed) << n << ": " << ErrorOf(r);
    EXPECT_NE(r.error.find("is outside linear memory"), std::string::npos) << n << ": " << r.error;
  }
  EXPECT_EQ(cases, 20);
  auto ok = h_.Call("t/probe/oob", MakeRequest("GET", "/echo"));
  EXPECT_TRUE(ok.ok()) << "the actor goes on serving";
}

TEST_F(RuntimeTest, RefusedBeforeRunning) {
  RuntimeOptions o = Options();
  o.limits.max_request_bytes = 100;
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  auto big = h.CallRaw("t/probe/x", MakeRequest("POST", "/echo", "", std::string(101, 'x')));
  EXPECT_EQ(big.outcome, EventOutcome::kBadRequest);
  EXPECT_NE(big.error.find("max_request_bytes = 100"), std::string::npos) << big.error;
  auto unknown = h.CallRaw("t/nosuchclass/x", MakeRequest("GET", "/"));
  EXPECT_EQ(unknown.outcome, EventOutcome::kNotFound);
  EXPECT_NE(unknown.error.find("no class t/nosuchclass"), std::string::npos) << unknown.error;
}

TEST_F(RuntimeTest, BadModulesAreRefusedAtDeploy) {
  struct Case {
    const char* file;
    const char* text;
  };
  for (Case c : {Case{"no_handler", "does not export the function \"wk_on_request\""},
                 Case{"bad_import", "imports the function wasmkeep_v1.no_such_function, which the host does not provide"}}) {
    Status s = h_.TryDeploy("x", Actors(c.file));
    ASSERT_FALSE(s.ok()) << c.file;
    EXPECT_NE(s.message().find(c.text), std::string::npos) << s.ToString();
  }
  const std::string not_wasm = ::testing::TempDir() + "/not_wasm.wasm";
  {
    std::ofstream(not_wasm) << "#!/bin/sh\necho this is not WebAssembly\n";
  }
  Status s = h_.TryDeploy("x", not_wasm);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a WebAssembly module"), std::string::npos) << s.ToString();
  // A module without a declared maximum memory gets the limit imposed, and runs.
  ASSERT_TRUE(h_.TryDeploy("nomax", Actors("no_max_memory")).ok());
  EXPECT_TRUE(h_.Call("t/nomax/a", MakeRequest("GET", "/")).ok());
}

// The input gate: one event at a time, a bounded queue, "overloaded" beyond it.
TEST_F(RuntimeTest, OneEventAtATimeWithABoundedQueue) {
  RuntimeOptions o = Options();
  o.limits.max_queued_events = 2;
  Harness h(o);
  h.Deploy("bad", Actors("bad_actors"));
  h.Deploy("probe", Actors("abi_probe"));
  ASSERT_TRUE(h.Call("t/probe/q", MakeRequest("GET", "/echo")).ok());  // resident, so the queue applies

  // Five events arrive in one turn of the loop: the first runs, two queue, two are refused.
  // Spawned concurrently so they queue behind each other.
  std::vector<EventResult> results(5);
  auto run = [](Harness& h, std::vector<EventResult>* results) -> Task<void> {
    std::vector<TaskHandle> handles;
    Env& env = h.env();
    for (int i = 0; i < 5; ++i) {
      auto one = [](ActorRuntime& rt, EventResult* out, int i) -> Task<void> {
        Request r;
        r.method = "POST";
        r.path = "/count";
        (void)i;
        ActorId id{"t", "probe", "q"};  // a named local: GCC 12 and temporaries in co_await
        EventResult res = co_await rt.HandleRequest(std::move(id), std::move(r));
        *out = std::move(res);
      };
      handles.push_back(env.Spawn(one(h.runtime(), &(*results)[i], i), "burst"));
    }
    for (auto& hd : handles) (void)co_await hd.Join();
  };
  h.env().RunMain(run(h, &results));
  int ok = 0, overloaded = 0;
  for (const auto& r : results) {
    if (r.outcome == EventOutcome::kOverloaded) {
      ++overloaded;
      EXPECT_NE(r.error.find("max_queued_events"), std::string::npos) << r.error;
    } else if (r.ok()) {
      ++ok;
    }
  }
  // Event 0 runs; 1 and 2 queue; 3 and 4 find the queue full.
  EXPECT_EQ(overloaded, 2);
  EXPECT_EQ(ok, 3);
  auto count = h.Call("t/probe/q", MakeRequest("POST", "/count"));
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(count->body, "4") << "the queued events ran one after another, none lost or doubled";
}

// Workers and the loop that spin after work (env/spin.h, the node's default) run every
// event once and in order: events back to back (picked up while spinning), after a pause
// longer than the window (the threads slept and are woken), and from two workers at once.
TEST_F(RuntimeTest, SpinningWorkersRunEveryEventOnceInOrder) {
  RuntimeOptions o = Options();
  o.workers = 2;
  o.spin = std::chrono::microseconds(100);
  Harness h(o);
  h.env().set_idle_spin(o.spin);
  h.Deploy("probe", Actors("abi_probe"));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 50; ++i) {
      for (const char* actor : {"t/probe/s1", "t/probe/s2", "t/probe/s3"}) {
        auto r = h.Call(actor, MakeRequest("POST", "/count"));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ASSERT_EQ(r->body, std::to_string(round * 50 + i + 1)) << actor;
      }
    }
    h.RunFor(std::chrono::milliseconds(5));  // past the window: every thread goes to sleep
  }
  h.runtime().SetSpin(Duration::zero());  // and back to sleeping at once, live
  auto r = h.Call("t/probe/s1", MakeRequest("POST", "/count"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "151");
}

TEST_F(RuntimeTest, IdleActorsHibernateAndComeBackWithTheirState) {
  RuntimeOptions o = Options();
  o.idle_hibernate = std::chrono::milliseconds(50);
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  std::vector<std::string> unloaded;
  ASSERT_TRUE(h.Call("t/probe/sleepy", MakeRequest("POST", "/count")).ok());
  EXPECT_TRUE(h.runtime().IsResident(ActorId{"t", "probe", "sleepy"}));
  h.RunFor(std::chrono::milliseconds(300));
  EXPECT_FALSE(h.runtime().IsResident(ActorId{"t", "probe", "sleepy"}));
  EXPECT_EQ(h.runtime().stats().hibernations, 1u);
  EXPECT_EQ(h.storage().closes(), 1);
  auto again = h.Call("t/probe/sleepy", MakeRequest("POST", "/count"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->body, "2") << "restored through the storage interface";
  EXPECT_EQ(h.storage().opens(), 2);
}

// An actor a hand-over warms (EventHost::Warm: restored at once, before any event) is a
// resident actor like any other: it is swept idle, hibernates and leaves memory cleanly, and
// comes back on its next event. (The warm start once made its slot outside the activity
// list, and leaving memory then crashed the node: cluster.move.file.)
TEST_F(RuntimeTest, AWarmStartedActorIsSweptAndLeavesMemoryLikeAnyOther) {
  RuntimeOptions o = Options();
  o.idle_hibernate = std::chrono::milliseconds(50);
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  // Warm starts only actors of a class the node has loaded: an event of another loads it.
  ASSERT_TRUE(h.Call("t/probe/first", MakeRequest("POST", "/count")).ok());
  const ActorId id{"t", "probe", "warm"};
  h.runtime().Warm(id);
  h.RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(h.storage().opens(), 2) << "restored at once, before any event";
  h.RunFor(std::chrono::milliseconds(300));
  EXPECT_FALSE(h.runtime().IsResident(id)) << "the sweep hibernated it";
  EXPECT_EQ(h.runtime().stats().hibernations, 2u);
  EXPECT_EQ(h.runtime().stats().resident_actors, 0u);
  auto called = h.Call("t/probe/warm", MakeRequest("POST", "/count"));
  ASSERT_TRUE(called.ok());
  EXPECT_EQ(called->body, "1");
}

// What one probe actor costs after one /count event, measured on a runtime with room:
// the figures the budget tests below size their budgets from.
RuntimeStats OneActorFootprint() {
  RuntimeOptions o = testing::DefaultHarnessOptions();
  o.workers = 1;
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  EXPECT_TRUE(h.Call("t/probe/m", MakeRequest("POST", "/count")).ok());
  return h.runtime().stats();
}

// The budget counts what an actor really takes: the pages of linear memory it touched (not
// the size mapped), its state with the map's per-entry cost, the worker's V8 heap and a
// fixed bookkeeping cost; the metric reports that same figure, by part and by tenant.
TEST_F(RuntimeTest, MemoryIsCountedAsItIsReallyUsed) {
  const RuntimeStats s = OneActorFootprint();
  EXPECT_EQ(s.resident_actors, 1u);
  EXPECT_EQ(s.instances, 1u);
  EXPECT_GT(s.linear_bytes, 0u) << "its data and stack pages";
  EXPECT_LT(s.linear_bytes, s.linear_mapped_bytes) << "most of what it mapped is never touched";
  EXPECT_EQ(s.state_bytes, EntryMemoryBytes(5, 1)) << "one entry: \"count\" = \"1\"";
  EXPECT_GT(s.heap_bytes, 0u) << "the worker's V8 heap is counted";
  EXPECT_GT(s.instance_heap_bytes, 0u) << "what its instance holds of it";
  EXPECT_LE(s.instance_heap_bytes, s.heap_bytes);
  EXPECT_EQ(s.bookkeeping_bytes, kResidentActorBookkeepingBytes);
  EXPECT_GT(s.compiled_bytes, 0u) << "the class's compiled module is counted";
  EXPECT_EQ(s.memory_bytes, s.linear_bytes + s.state_bytes + s.heap_bytes + s.bookkeeping_bytes + s.compiled_bytes);

  MetricsRegistry registry;
  RuntimeOptions o = testing::DefaultHarnessOptions();
  o.workers = 1;
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  PublishRuntimeMetrics(registry, h.runtime());
  ASSERT_TRUE(h.Call("acme/probe/m", MakeRequest("POST", "/count")).ok());
  const RuntimeStats now = h.runtime().stats();
  const std::string text = registry.RenderText();
  EXPECT_NE(text.find("wasmkeep_actor_memory_bytes " + FormatMetricValue(double(now.memory_bytes)) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("wasmkeep_actor_memory_part_bytes{part=\"state\"} " + std::to_string(now.state_bytes) + "\n"),
            std::string::npos)
      << text;
  const auto tenants = h.runtime().MemoryByTenant();
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].tenant, "acme");
  EXPECT_EQ(tenants[0].bytes, double(now.linear_bytes + now.state_bytes + now.bookkeeping_bytes +
                                     now.instance_heap_bytes));
  EXPECT_NE(text.find("wasmkeep_actor_tenant_memory_bytes{tenant=\"acme\"} " + FormatMetricValue(tenants[0].bytes)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("wasmkeep_actor_tenant_memory_bytes{tenant=\"_node\"} " +
                      FormatMetricValue(double(now.memory_bytes) - tenants[0].bytes)),
            std::string::npos)
      << "the rest of the heap, so the series add up to the total\n"
      << text;
}

// The breakdown by tenant is kept as actors come and go, not walked from them: at every
// point its tenants add up to what the budget counts for actors (linear memory, state,
// instances' heap and bookkeeping), an instance dropped leaves its tenant's figure, and a
// tenant whose last actor left memory leaves the breakdown. (With one update left out, e.g.
// ForgetInstance not taking linear memory off the tenant's figure, the sums differ and this
// fails; checked by hand.)
TEST_F(RuntimeTest, TheBreakdownByTenantFollowsActorsAsTheyComeAndGo) {
  RuntimeOptions o = Options();
  o.workers = 1;
  o.idle_instance = std::chrono::milliseconds(40);
  o.idle_hibernate = std::chrono::milliseconds(400);
  Harness h(o);
  h.Deploy("mem", Actors("memory_probe"));
  auto sums_match = [&](const char* when) {
    const RuntimeStats s = h.runtime().stats();
    double total = 0;
    std::size_t actors = 0;
    for (const TenantMemory& t : h.runtime().MemoryByTenant()) {
      total += t.bytes;
      actors += t.actors;
    }
    EXPECT_EQ(total, double(s.linear_bytes + s.state_bytes + s.instance_heap_bytes + s.bookkeeping_bytes)) << when;
    EXPECT_EQ(actors, s.resident_actors) << when;
  };
  ASSERT_TRUE(h.Call("greedy/mem/a", MakeRequest("POST", "/")).ok());  // touches 1 MiB
  ASSERT_TRUE(h.Call("frugal/mem/a", MakeRequest("GET", "/")).ok());
  ASSERT_TRUE(h.Call("frugal/mem/b", MakeRequest("GET", "/")).ok());
  sums_match("three actors with instances");
  auto tenants = h.runtime().MemoryByTenant();
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[0].tenant, "greedy") << "the most first";
  EXPECT_GE(tenants[0].bytes, double(1u << 20));
  EXPECT_EQ(tenants[1].actors, 2u);

  h.RunFor(std::chrono::milliseconds(150));  // instances dropped, actors still resident
  EXPECT_EQ(h.runtime().stats().instances, 0u);
  EXPECT_EQ(h.runtime().stats().resident_actors, 3u);
  sums_match("warm but not instantiated");
  tenants = h.runtime().MemoryByTenant();
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_LT(tenants[0].bytes + tenants[1].bytes, double(1u << 20)) << "greedy's touched memory went with its instance";

  ASSERT_TRUE(h.Call("frugal/mem/a", MakeRequest("GET", "/")).ok());
  h.RunFor(std::chrono::milliseconds(300));  // greedy/mem/a and frugal/mem/b hibernate
  EXPECT_FALSE(h.runtime().IsResident(ActorId{"greedy", "mem", "a"}));
  EXPECT_TRUE(h.runtime().IsResident(ActorId{"frugal", "mem", "a"}));
  sums_match("one actor left");
  tenants = h.runtime().MemoryByTenant();
  ASSERT_EQ(tenants.size(), 1u) << "a tenant with no resident actor leaves the breakdown";
  EXPECT_EQ(tenants[0].tenant, "frugal");
  EXPECT_EQ(tenants[0].actors, 1u);
}

// An actor that touches all of its linear memory is charged all of it, one that touches
// none is charged none of it, whatever both have mapped; reading pages counts as touching
// them, so memory cannot be used unseen; a grown table is charged on the heap. The
// breakdown by tenant tells them apart.
TEST_F(RuntimeTest, AnActorIsChargedTheMemoryItTouchesNotWhatItMaps) {
  RuntimeOptions o = Options();
  o.workers = 1;
  Harness h(o);
  h.Deploy("mem", Actors("memory_probe"));
  const std::uint64_t mib = 1u << 20;
  ASSERT_TRUE(h.Call("frugal/mem/a", MakeRequest("GET", "/")).ok());
  RuntimeStats s = h.runtime().stats();
  EXPECT_EQ(s.linear_mapped_bytes, mib);
  EXPECT_EQ(s.linear_bytes, 0u) << "it touched none of its memory";

  ASSERT_TRUE(h.Call("greedy/mem/a", MakeRequest("POST", "/")).ok());
  s = h.runtime().stats();
  EXPECT_EQ(s.linear_mapped_bytes, 2 * mib);
  EXPECT_EQ(s.linear_bytes, mib) << "the greedy one touched all of its memory";

  ASSERT_TRUE(h.Call("reader/mem/a", MakeRequest("DELETE", "/")).ok());
  EXPECT_EQ(h.runtime().stats().linear_bytes, 2 * mib) << "pages only read are charged too";

  const std::uint64_t heap_before = h.runtime().stats().instance_heap_bytes;
  ASSERT_TRUE(h.Call("frugal/mem/a", MakeRequest("PATCH", "/")).ok());
  EXPECT_EQ(h.runtime().stats().instance_heap_bytes, heap_before + 1000 * engine::kTableElementHeapBytes)
      << "its grown table";

  std::map<std::string, double> by_tenant;
  for (const TenantMemory& t : h.runtime().MemoryByTenant()) by_tenant[t.tenant] = t.bytes;
  ASSERT_EQ(by_tenant.size(), 3u);
  EXPECT_GE(by_tenant["greedy"], double(mib));
  EXPECT_GE(by_tenant["reader"], double(mib));
  EXPECT_LT(by_tenant["frugal"], by_tenant["greedy"] - double(mib) / 2);
  EXPECT_GE(by_tenant["frugal"], double(1000 * engine::kTableElementHeapBytes));
}

// A long-idle actor drops its instance but stays resident with its hold and state: its next
// event only instantiates again (no restore), and it is charged no linear memory meanwhile.
TEST_F(RuntimeTest, AnIdleActorDropsItsInstanceButStaysResident) {
  RuntimeOptions o = Options();
  o.idle_instance = std::chrono::milliseconds(50);
  o.idle_hibernate = std::chrono::seconds(60);
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  ASSERT_TRUE(h.Call("t/probe/warm", MakeRequest("POST", "/count")).ok());
  EXPECT_EQ(h.runtime().stats().instances, 1u);
  h.RunFor(std::chrono::milliseconds(300));
  RuntimeStats s = h.runtime().stats();
  EXPECT_TRUE(h.runtime().IsResident(ActorId{"t", "probe", "warm"}));
  EXPECT_EQ(s.instances, 0u);
  EXPECT_EQ(s.instances_dropped_idle, 1u);
  EXPECT_EQ(s.linear_bytes, 0u);
  EXPECT_EQ(s.instance_heap_bytes, 0u);
  EXPECT_EQ(s.state_bytes, EntryMemoryBytes(5, 1)) << "its state stays in memory";
  EXPECT_EQ(s.hibernations, 0u);
  EXPECT_EQ(h.storage().closes(), 0) << "its storage, and so its hold, are kept";
  auto again = h.Call("t/probe/warm", MakeRequest("POST", "/count"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->body, "2");
  EXPECT_EQ(h.storage().opens(), 1) << "not restored";
  EXPECT_EQ(h.runtime().stats().instantiations, 2u);
  EXPECT_EQ(h.runtime().stats().instances, 1u);
}

// At most max_instances live instances: a new one first drops the least recently active
// idle actor's instance; every actor stays resident with its state.
TEST_F(RuntimeTest, LiveInstancesStayWithinMaxInstances) {
  RuntimeOptions o = Options();
  o.max_instances = 2;
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  for (const char* name : {"t/probe/a", "t/probe/b", "t/probe/c"}) {
    ASSERT_TRUE(h.Call(name, MakeRequest("POST", "/count")).ok());
  }
  RuntimeStats s = h.runtime().stats();
  EXPECT_EQ(s.resident_actors, 3u);
  EXPECT_EQ(s.instances, 2u);
  EXPECT_EQ(s.instances_dropped_limit, 1u);
  auto a = h.Call("t/probe/a", MakeRequest("POST", "/count"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->body, "2") << "the first one lost its instance, not its state";
  EXPECT_EQ(h.runtime().stats().instances_dropped_limit, 2u) << "b was the least recently active then";
  EXPECT_EQ(h.storage().opens(), 3);
}

// V8 reserves address space for each linear memory's maximum until it collects the memory,
// and refuses more than about 1 TiB in all (engine::kLinearReservationLimitBytes), running
// critical collections inside the instantiation that meets the limit. With 4 GiB per actor,
// 400 actors called once would need 1.6 TiB: live instances stay within
// kLiveReservationBytes (the least recently active lose theirs, as for max_instances), and
// thrown-away memories are collected before they fill the rest, so V8 never has to. Without
// the workers' memory pool (every dropped instance's memory thrown away) the runtime starts
// those collections; with it the memories are zeroed and reused and none is needed.
class LinearMemoryReservationTest : public RuntimeTest, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(LinearMemoryReservationTest, LinearMemoryReservationsStayWithinV8sLimit) {
  RuntimeOptions o = Options();
  o.workers = 1;
  o.limits.max_memory_bytes = 4ull << 30;
  o.memory_budget_bytes = 8ull << 30;
  o.memory_pool_size = GetParam();
  Harness h(o);
  h.Deploy("nomax", Actors("no_max_memory"));
  ASSERT_TRUE(h.Call("t/nomax/first", MakeRequest("POST", "/")).ok());
  ASSERT_EQ(h.runtime().stats().instance_reserved_bytes, o.limits.max_memory_bytes)
      << "the module declares no maximum: each instance reserves 4 GiB";
  const auto all_available = static_cast<std::size_t>(engine::GcCause::kAllAvailable);
  const std::uint64_t v8_collections = h.engine().stats().collections[all_available];
  const std::uint64_t reused_before = h.engine().stats().reused_memories;
  std::uint64_t most_reserved = 0;
  for (int i = 0; i < 400; ++i) {
    auto r = h.Call("t/nomax/a" + std::to_string(i), MakeRequest("POST", "/"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_LE(h.runtime().stats().instance_reserved_bytes, kLiveReservationBytes);
    most_reserved = std::max(most_reserved, h.engine().stats().linear_reserved_bytes);
  }
  const RuntimeStats s = h.runtime().stats();
  // (Memories kept for reuse count against the same bound: at most two of 4 GiB.)
  EXPECT_LE(s.instances, kLiveReservationBytes / o.limits.max_memory_bytes);
  EXPECT_GE(s.instances, (kLiveReservationBytes - engine::kMaxPooledReservationBytes) / o.limits.max_memory_bytes);
  EXPECT_GE(s.instances_dropped_limit, 401 - s.instances);
  if (o.memory_pool_size == 0) {
    EXPECT_GT(s.reservation_collections, 0u);
  } else {
    EXPECT_EQ(s.reservation_collections, 0u) << "dropped instances' memories serve the next ones";
    // (Each drop is queued on the worker before the next instantiation, which finds its memory.)
    EXPECT_GE(h.engine().stats().reused_memories - reused_before, s.instances_dropped_limit);
  }
  EXPECT_LT(most_reserved, engine::kLinearReservationLimitBytes) << "V8 held at most this much";
  EXPECT_EQ(h.engine().stats().collections[all_available], v8_collections)
      << "no instantiation had to collect to find address space";
  EXPECT_EQ(s.resident_actors, 401u) << "instances were dropped, not actors";
  EXPECT_TRUE(h.Call("t/nomax/a0", MakeRequest("POST", "/")).ok()) << "and made again";
}
INSTANTIATE_TEST_SUITE_P(Pool, LinearMemoryReservationTest, ::testing::Values(std::size_t{0}, engine::kDefaultMemoryPoolSize),
                         [](const auto& info) { return info.param == 0 ? "WithoutPool" : "WithPool"; });

// The sweep collects what dropped instances held, but does not stop a worker that is
// running events for it (every event queued there would wait: the warm tail at 50,000
// actors, docs/benchmarks.md "Density"); once the worker is idle it does.
TEST_F(RuntimeTest, TheSweepDoesNotStopABusyWorkerToCollect) {
  RuntimeOptions o = Options();
  o.workers = 1;
  o.idle_instance = std::chrono::milliseconds(100);
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  ASSERT_TRUE(h.Call("t/probe/dropped", MakeRequest("POST", "/count")).ok());
  const engine::EngineStats before = h.engine().stats();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(h.Call("t/probe/busy", MakeRequest("POST", "/count")).ok());
    h.RunFor(std::chrono::milliseconds(5));
  }
  ASSERT_GE(h.runtime().stats().instances_dropped_idle, 1u);
  engine::EngineStats s = h.engine().stats();
  EXPECT_EQ(s.collect_garbage_calls, before.collect_garbage_calls) << "no full collection on the busy worker";

  // Idle now: once busy's instance is dropped too and the interval has passed, a full one.
  h.RunFor(std::chrono::milliseconds(6500));
  s = h.engine().stats();
  EXPECT_GT(s.collect_garbage_calls, before.collect_garbage_calls) << "an idle worker is collected at once";
}

TEST_F(RuntimeTest, MemoryBudgetEvictsIdleActorsLeastRecentlyUsedFirst) {
  const RuntimeStats one = OneActorFootprint();
  RuntimeOptions o = Options();
  o.workers = 1;
  // Each actor keeps 64 KiB of state. Room for the worker's heap (twice over, for its
  // garbage) and about eight such actors: forty must first lose their instances, then most
  // of them must leave.
  const std::string blob(64 << 10, 'x');
  o.limits.max_memory_bytes = 1 << 20;
  o.memory_budget_bytes = std::max<std::uint64_t>(
      o.limits.max_memory_bytes,
      one.heap_bytes * 2 + 8 * (EntryMemoryBytes(4, blob.size()) + kResidentActorBookkeepingBytes));
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  for (int i = 0; i < 40; ++i) {
    auto r = h.Call("t/probe/a" + std::to_string(i), MakeRequest("POST", "/put", "blob", blob));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  h.RunFor(std::chrono::milliseconds(50));
  const RuntimeStats s = h.runtime().stats();
  EXPECT_GT(s.instances_dropped_memory, 0u) << "instances go first";
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.memory_refusals, 0u) << "idle actors always make room";
  EXPECT_LE(s.memory_bytes, o.memory_budget_bytes);
  EXPECT_LT(s.resident_actors, 40u);
  EXPECT_FALSE(h.runtime().IsResident(ActorId{"t", "probe", "a0"})) << "least recently used went first";
  EXPECT_TRUE(h.runtime().IsResident(ActorId{"t", "probe", "a39"}));
  for (int i = 0; i < 40; i += 13) {
    auto r = h.Call("t/probe/a" + std::to_string(i), MakeRequest("GET", "/get", "blob"));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->body, blob) << "state kept across eviction";
  }
}

// Under a budget that holds every actor but not every instance, dropping idle instances is
// enough: nobody is evicted. (Each instance here touches 1 MiB of linear memory.)
TEST_F(RuntimeTest, MemoryBudgetDropsInstancesBeforeEvictingActors) {
  const RuntimeStats one = OneActorFootprint();
  RuntimeOptions o = Options();
  o.workers = 1;
  o.limits.max_memory_bytes = 1 << 20;
  o.memory_budget_bytes = one.heap_bytes * 2 + (4u << 20);
  Harness h(o);
  h.Deploy("mem", Actors("memory_probe"));
  for (int i = 0; i < 20; ++i) {
    auto r = h.Call("t/mem/b" + std::to_string(i), MakeRequest("POST", "/"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  h.RunFor(std::chrono::milliseconds(50));
  const RuntimeStats s = h.runtime().stats();
  EXPECT_GE(s.instances_dropped_memory, 15u) << "20 MiB of touched memory in a budget of a few";
  EXPECT_LE(s.instances, 5u);
  EXPECT_EQ(s.evictions, 0u) << "dropping instances was enough";
  EXPECT_EQ(s.resident_actors, 20u);
  EXPECT_EQ(h.storage().opens(), 20) << "nobody restored";
  EXPECT_LE(s.memory_bytes, o.memory_budget_bytes);
}

// When what is resident cannot be evicted enough (here: the worker's V8 heap alone is over
// the budget), a new actor is refused with "overloaded" (503) naming the setting; it is not
// started and nothing of it is restored.
TEST_F(RuntimeTest, ANewActorIsRefusedWhenTheBudgetCannotBeMet) {
  const RuntimeStats one = OneActorFootprint();
  RuntimeOptions o = Options();
  o.workers = 1;
  o.limits.max_memory_bytes = (one.linear_mapped_bytes + 65535) / 65536 * 65536;
  o.memory_budget_bytes = o.limits.max_memory_bytes + one.compiled_bytes;
  ASSERT_LT(o.memory_budget_bytes, one.heap_bytes + one.linear_bytes + one.compiled_bytes)
      << "the staging needs one actor's footprint over its own linear memory";
  Harness h(o);
  h.Deploy("probe", Actors("abi_probe"));
  ASSERT_TRUE(h.Call("t/probe/first", MakeRequest("POST", "/count")).ok());
  const int opens = h.storage().opens();
  EventResult r = h.CallRaw("t/probe/second", MakeRequest("POST", "/count"));
  EXPECT_EQ(r.outcome, EventOutcome::kOverloaded) << ErrorOf(r);
  EXPECT_NE(r.error.find("actors.memory_budget_bytes"), std::string::npos) << r.error;
  EXPECT_EQ(h.storage().opens(), opens) << "a refused actor is not restored";
  EXPECT_EQ(h.runtime().stats().memory_refusals, 1u);
}

TEST_F(RuntimeTest, ADurabilityFailureAnswersUnavailableAndRestoresTheActor) {
  ASSERT_TRUE(h_.Call("t/probe/d", MakeRequest("POST", "/count")).ok());
  const int opens = h_.storage().opens();
  h_.storage().FailDurability(true);
  auto r = h_.CallRaw("t/probe/d", MakeRequest("POST", "/count"));
  EXPECT_EQ(r.outcome, EventOutcome::kUnavailable) << ErrorOf(r);
  EXPECT_NE(r.error.find("could not be made durable"), std::string::npos);
  h_.storage().FailDurability(false);
  auto next = h_.Call("t/probe/d", MakeRequest("POST", "/count"));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(h_.storage().opens(), opens + 1) << "the actor was thrown away and restored";
  EXPECT_EQ(next->body, "2") << "restored from durable state: the unacknowledged increment is gone";
}

// The output gate passes read-only answers too: a read answered from memory by a node
// that no longer holds the actor could be older than what a next owner already answered.
// (Fails if the runtime skips the gate for events that wrote nothing, or if the storage
// answers seq 0 without asking its hold, as WhenDurable(0) once did.)
TEST_F(RuntimeTest, AReadOnlyAnswerIsRefusedOnceTheHoldEnded) {
  ASSERT_TRUE(h_.Call("t/probe/ro", MakeRequest("GET", "/echo")).ok());
  const int opens = h_.storage().opens();
  h_.storage().EndHolds();
  auto r = h_.CallRaw("t/probe/ro", MakeRequest("GET", "/echo"));
  EXPECT_EQ(r.outcome, EventOutcome::kUnavailable) << ErrorOf(r);
  EXPECT_NE(r.error.find("the hold ended"), std::string::npos) << r.error;
  auto next = h_.Call("t/probe/ro", MakeRequest("GET", "/echo"));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(h_.storage().opens(), opens + 1) << "the broken actor was closed and restored under a new hold";
}

// Exec-durable is an effect visible outside the actor: sync fails (and the answer is never
// released) once the hold ended, even though everything before it was durable.
TEST_F(RuntimeTest, ExecDurableIsRefusedOnceTheHoldEnded) {
  ASSERT_TRUE(h_.Call("t/probe/se", MakeRequest("POST", "/count")).ok());
  const int opens = h_.storage().opens();
  h_.storage().EndHolds();
  auto r = h_.CallRaw("t/probe/se", MakeRequest("POST", "/sync"));
  EXPECT_EQ(r.outcome, EventOutcome::kUnavailable) << ErrorOf(r);
  auto again = h_.Call("t/probe/se", MakeRequest("POST", "/sync"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->body, "0") << "restored under a new hold, sync succeeds";
  EXPECT_EQ(h_.storage().opens(), opens + 1);
}

TEST_F(RuntimeTest, RestoreFailureAnswersUnavailable) {
  h_.storage().FailOpens(true);
  auto r = h_.CallRaw("t/probe/r", MakeRequest("GET", "/echo"));
  EXPECT_EQ(r.outcome, EventOutcome::kUnavailable);
  EXPECT_NE(r.error.find("could not be restored"), std::string::npos) << r.error;
  h_.storage().FailOpens(false);
  EXPECT_TRUE(h_.Call("t/probe/r", MakeRequest("GET", "/echo")).ok());
}

// Destroying the runtime with events queued and running (Shutdown's limit passed) leaves
// nobody waiting: every event is answered, the storage is closed.
TEST(RuntimeDestructionTest, EveryWaitingEventIsAnswered) {
  RealEnv env;
  engine::Engine engine;
  MemStorageProvider storage;
  ClassRegistry classes;
  auto module = CompileActorModule(engine, testing::ReadFileBytes(Actors("abi_probe")), ActorLimits{});
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  classes.Set("t", "probe", *module);
  RuntimeOptions o = testing::DefaultHarnessOptions();
  auto runtime = std::make_unique<ActorRuntime>(env, engine, classes, storage, o);
  std::vector<EventResult> results(4);
  // One coroutine: start four events (one runs, three queue), let them reach the runtime,
  // destroy it, then wait for every caller.
  auto scenario = [](Env& env, std::unique_ptr<ActorRuntime>* rt, std::vector<EventResult>* results) -> Task<void> {
    std::vector<TaskHandle> handles;
    for (int i = 0; i < 4; ++i) {
      auto one = [](ActorRuntime& rt, EventResult* out) -> Task<void> {
        Request r;
        r.method = "POST";
        r.path = "/count";
        ActorId id{"t", "probe", "x"};
        EventResult res = co_await rt.HandleRequest(std::move(id), std::move(r));
        *out = std::move(res);
      };
      handles.push_back(env.Spawn(one(**rt, &(*results)[i]), "event"));
    }
    (void)co_await env.SleepFor(std::chrono::milliseconds(0));
    rt->reset();
    for (auto& h : handles) (void)co_await h.Join();
  };
  env.RunMain(scenario(env, &runtime, &results));
  int stopped = 0;
  for (const auto& r : results) {
    if (r.ok()) continue;  // the first event may have finished before the destruction
    EXPECT_EQ(r.outcome, EventOutcome::kUnavailable) << ErrorOf(r);
    EXPECT_NE(r.error.find("stopped"), std::string::npos) << r.error;
    ++stopped;
  }
  EXPECT_GE(stopped, 1);
  EXPECT_EQ(storage.closes(), 1);
}

TEST(RuntimeOptionsTest, BadSettingsAreNamed) {
  RuntimeOptions o;
  o.limits.max_memory_bytes = 1000;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.max_memory_bytes"), std::string::npos);
  o = {};
  o.limits.max_queued_events = 0;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.max_queued_events"), std::string::npos);
  o = {};
  o.memory_budget_bytes = 1;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.memory_budget_bytes"), std::string::npos);
  o = {};
  o.limits.max_event_cpu_ms = 0;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.max_event_cpu_ms"), std::string::npos);
  o = {};
  o.limits.max_module_bytes = kMaxModuleBytesSetting + 1;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.max_module_bytes"), std::string::npos);
  o = {};
  o.limits.max_table_elements = kMaxTableElementsSetting + 1;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.max_table_elements"), std::string::npos);
  o = {};
  o.isolate_heap_limit_bytes = kMinIsolateHeapLimitBytes - 1;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.isolate_heap_limit_bytes"), std::string::npos);
  o = {};
  o.isolate_gc_floor_bytes = o.isolate_heap_limit_bytes / 2 + 1;
  EXPECT_NE(ValidateRuntimeOptions(o).message().find("actors.isolate_gc_floor_bytes"), std::string::npos);
  o.isolate_gc_floor_bytes = o.isolate_heap_limit_bytes / 2;
  EXPECT_TRUE(ValidateRuntimeOptions(o).ok());
  EXPECT_EQ(DefaultIsolateGcFloor(kMinIsolateHeapLimitBytes), kMinIsolateHeapLimitBytes / 8);
  EXPECT_EQ(DefaultIsolateGcFloor(kMaxIsolateHeapLimitBytes), kMaxDefaultIsolateGcFloorBytes);
  EXPECT_TRUE(ValidateRuntimeOptions(RuntimeOptions{}).ok());
}

// A redeploy reaches a resident actor from its next event, an alarm included (docs/security.md,
// "Threats tried, and their defences"): v1 (abi_probe) arms an alarm, the class is redeployed as v2 (alarm_probe), and
// the alarm runs v2's handler, which logs "f<armed>:<retry>:<now>"; v1's would write
// "alarm-ran".
TEST_F(RuntimeTest, ARedeployReachesAResidentActorFromItsNextEventAlarmsIncluded) {
  h_.Deploy("re", Actors("abi_probe"));
  ASSERT_TRUE(h_.Call("t/re/a", MakeRequest("POST", "/alarm")).ok());
  ASSERT_TRUE(h_.runtime().IsResident(ActorId{"t", "re", "a"}));
  h_.Deploy("re", Actors("alarm_probe"));
  EventResult alarm = h_.Alarm("t/re/a");
  ASSERT_TRUE(alarm.ok()) << ErrorOf(alarm);
  EXPECT_TRUE(alarm.alarm_fired);
  auto state = h_.storage().State(ActorId{"t", "re", "a"});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->data().count("alarm-ran"), 0u) << "v1's alarm handler ran after the redeploy";
  ASSERT_EQ(state->data().count("log"), 1u) << "v2's alarm handler did not run";
  EXPECT_TRUE(state->data().at("log").starts_with("f-1:0:")) << state->data().at("log");
  auto get = h_.Call("t/re/a", MakeRequest("GET", "/"));
  ASSERT_TRUE(get.ok()) << get.status().ToString();
  EXPECT_EQ(get->body, state->data().at("log")) << "a request runs v2 too";
  EXPECT_EQ(h_.runtime().stats().instances_dropped_redeploy, 1u) << "v1's instance went once";
}

// An actor class whose module has `functions` functions of 64 KiB of i32.load chains (the
// mix with the most machine code per byte, engine_test.cc) besides a handler that answers.
std::vector<std::uint8_t> LargeCodeActor(std::size_t functions) {
  namespace et = engine::testing;
  et::ModuleBuilder b;
  b.funcs.push_back(et::ModuleBuilder::Returns(0));
  b.func_exports = {"wk_on_request"};
  et::ModuleBuilder::Func f;
  f.locals = {0};
  f.body = {0x41, 0x00};
  while (f.body.size() + 3 < (64u << 10)) et::Append(f.body, {0x28, 0x02, 0x00});
  for (std::size_t i = 0; i < functions; ++i) b.funcs.push_back(f);
  return b.Build();
}

// N classes of large compiled code on one node: the node stays within its budget, evicting
// idle actors and dropping the compiled modules no resident actor runs (least recently used
// first), instead of growing (docs/security.md, "Threats tried, and their defences": four classes of 58 MB of
// functions took a node from 0.9 to 4.5 GiB while the budget counted 1.2 MB).
TEST(RuntimeCompiledCodeTest, ClassesOfLargeCompiledCodeStayWithinTheBudget) {
  RuntimeOptions o = testing::DefaultHarnessOptions();
  o.workers = 1;
  o.memory_budget_bytes = 96ull << 20;
  Harness h(o);
  const std::vector<std::uint8_t> wasm = LargeCodeActor(16);  // 1 MiB of function bodies
  int served = 0;
  std::uint64_t charge = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string tenant = "t" + std::to_string(i);
    // A load refused while evicted actors are still leaving is retried, as a client retries
    // the 503 it gets.
    Status registered;
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto module = CompileActorModule(h.engine(), wasm, o.limits, tenant);
      ASSERT_TRUE(module.ok()) << module.status().ToString();
      charge = (*module)->compiled_bytes();
      registered = h.runtime().RegisterClass(tenant, "big", std::move(*module));
      if (registered.code() != Code::kRetryable) break;
      EXPECT_NE(registered.message().find("actors.memory_budget_bytes"), std::string::npos) << registered.ToString();
      h.RunFor(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(registered.ok()) << i << ": " << registered.ToString();
    EventResult r = h.CallRaw(tenant + "/big/a", MakeRequest("GET", "/"));
    for (int attempt = 0; attempt < 20 && r.outcome == EventOutcome::kOverloaded; ++attempt) {
      h.RunFor(std::chrono::milliseconds(50));
      r = h.CallRaw(tenant + "/big/a", MakeRequest("GET", "/"));
    }
    if (r.ok()) ++served;
    // The evictions end and the unused code goes (asynchronously: the actors' close jobs).
    for (int wait = 0; wait < 100 && h.runtime().stats().memory_bytes > o.memory_budget_bytes; ++wait) {
      h.RunFor(std::chrono::milliseconds(20));
    }
    const RuntimeStats s = h.runtime().stats();
    EXPECT_LE(s.memory_bytes, o.memory_budget_bytes) << i;
    EXPECT_LE(h.engine().compiled_bytes(), o.memory_budget_bytes) << i << ": the compiled code alive";
    EXPECT_EQ(s.compiled_bytes, h.engine().compiled_bytes());
  }
  std::printf("each class's module charged %.1f MiB; %d of 10 served, %llu modules dropped\n", charge / 1048576.0,
              served, static_cast<unsigned long long>(h.runtime().stats().compiled_dropped));
  EXPECT_EQ(served, 10) << "each class fits once the idle ones have gone";
  EXPECT_GE(h.runtime().stats().compiled_dropped, 10u - (o.memory_budget_bytes / charge));
  EXPECT_GT(h.runtime().stats().evictions, 0u);
  // A dropped class compiles again on demand: its registry entry says so.
  auto again = CompileActorModule(h.engine(), wasm, o.limits, "t0");
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(h.runtime().RegisterClass("t0", "big", std::move(*again)).ok());
  EXPECT_TRUE(h.CallRaw("t0/big/a", MakeRequest("GET", "/")).ok());
}

// One tenant's compiled modules on a node are bounded (actors.max_compiled_bytes_per_tenant):
// past it its unused modules go first, and a module that still does not fit is refused
// naming the setting; another tenant is not affected.
TEST(RuntimeCompiledCodeTest, ATenantsCompiledModulesAreBounded) {
  RuntimeOptions o = testing::DefaultHarnessOptions();
  o.workers = 1;
  const std::vector<std::uint8_t> wasm = LargeCodeActor(16);
  Harness probe(o);
  auto sized = CompileActorModule(probe.engine(), wasm, o.limits, "acme");
  ASSERT_TRUE(sized.ok());
  const std::uint64_t charge = (*sized)->compiled_bytes();
  o.max_compiled_bytes_per_tenant = 2 * charge + charge / 2;  // two fit, not three
  Harness h(o);
  auto load = [&](const std::string& tenant, const std::string& class_name) {
    auto module = CompileActorModule(h.engine(), wasm, o.limits, tenant);
    EXPECT_TRUE(module.ok());
    return h.runtime().RegisterClass(tenant, class_name, std::move(*module));
  };
  for (const char* c : {"c0", "c1"}) {
    ASSERT_TRUE(load("acme", c).ok());
    ASSERT_TRUE(h.CallRaw(std::string("acme/") + c + "/a", MakeRequest("GET", "/")).ok());
  }
  Status third = load("acme", "c2");
  EXPECT_EQ(third.code(), Code::kRetryable) << third.ToString();
  EXPECT_NE(third.message().find("actors.max_compiled_bytes_per_tenant"), std::string::npos) << third.ToString();
  EXPECT_EQ(h.runtime().compiled_refusals(), 1u);
  EXPECT_LE(h.engine().compiled_bytes_of("acme"), o.max_compiled_bytes_per_tenant);
  EXPECT_TRUE(load("other", "c0").ok()) << "another tenant has its own bound";
  // Once c0's actor has left, its module is unused: it goes to make room for c2.
  h.runtime().Unload(ActorId{"acme", "c0", "a"});
  for (int wait = 0; wait < 100 && h.runtime().IsResident(ActorId{"acme", "c0", "a"}); ++wait) {
    h.RunFor(std::chrono::milliseconds(20));
  }
  Status now = load("acme", "c2");
  EXPECT_TRUE(now.ok()) << now.ToString();
  EXPECT_LE(h.engine().compiled_bytes_of("acme"), o.max_compiled_bytes_per_tenant);
  EXPECT_TRUE(h.CallRaw("acme/c2/a", MakeRequest("GET", "/")).ok());
  const auto tenants = h.runtime().MemoryByTenant();
  const auto acme = std::find_if(tenants.begin(), tenants.end(), [](const TenantMemory& t) { return t.tenant == "acme"; });
  ASSERT_NE(acme, tenants.end());
  EXPECT_GE(acme->bytes, static_cast<double>(h.engine().compiled_bytes_of("acme"))) << "charged to the tenant";
}

}  // namespace
}  // namespace wk::actor

namespace wk::actor {
namespace {

TestRequest Keyed(std::string key, std::string path = "/count", std::string body = "") {
  TestRequest r = MakeRequest("POST", std::move(path), "", std::move(body));
  r.headers = {{"Idempotency-Key", std::move(key)}};
  return r;
}

// docs/http-api.md, "Idempotent requests": a key runs its request once; a retry gets the
// first answer, marked replayed, without running the actor; another request under the same
// key is refused 422; a malformed key 400; an expired key runs again.
TEST_F(RuntimeTest, AnIdempotencyKeyRunsItsRequestOnceAndRetriesGetTheFirstAnswer) {
  auto first = h_.Call("t/probe/idem", Keyed("k1"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->body, "1");
  const auto events = h_.runtime().stats().events;
  for (int i = 0; i < 3; ++i) {
    EventResult again = h_.CallRaw("t/probe/idem", Keyed("k1"));
    ASSERT_TRUE(again.ok()) << ErrorOf(again);
    EXPECT_EQ(again.response.body, "1");
    EXPECT_EQ(again.replayed, "1");
  }
  EXPECT_EQ(h_.runtime().stats().idempotent_replays, 3u);
  auto other = h_.Call("t/probe/idem", Keyed("k2"));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->body, "2") << "another key runs";
  auto plain = h_.Call("t/probe/idem", MakeRequest("POST", "/count"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->body, "3") << "no key: runs every time";
  EXPECT_EQ(h_.runtime().stats().events, events + 3 + 2);

  EventResult reused = h_.CallRaw("t/probe/idem", Keyed("k1", "/count", "another body"));
  EXPECT_EQ(reused.outcome, EventOutcome::kKeyReused) << ErrorOf(reused);
  EXPECT_EQ(h_.runtime().stats().idempotency_key_reused, 1u);
  EventResult bad = h_.CallRaw("t/probe/idem", Keyed("two words"));
  EXPECT_EQ(bad.outcome, EventOutcome::kInvalidHeader) << ErrorOf(bad);
  EXPECT_NE(bad.error.find("Idempotency-Key"), std::string::npos);

  // The module never sees the records: its listing of everything holds its own key only.
  auto state = h_.storage().State(ActorId{"t", "probe", "idem"});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->data().size(), 1u);
  EXPECT_TRUE(state->map.GetSystem("idem/k1").has_value()) << "durable with the writes";

  // Past the TTL (24 h by default) the key is forgotten and the request runs again.
  h_.AdvanceClock(24 * 3600 * 1000);
  auto late = h_.Call("t/probe/idem", Keyed("k1"));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->body, "4");
}

// A retry that arrives while the first run is still queued or running waits behind it (the
// input gate) and gets its answer: one run for any number of concurrent copies.
TEST_F(RuntimeTest, ConcurrentCopiesOfAKeyedRequestRunOnce) {
  ASSERT_TRUE(h_.Call("t/probe/idemc", MakeRequest("GET", "/echo")).ok());
  std::vector<EventResult> results(5);
  auto run = [](Harness& h, std::vector<EventResult>* results) -> Task<void> {
    std::vector<TaskHandle> handles;
    for (int i = 0; i < 5; ++i) {
      auto one = [](ActorRuntime& rt, EventResult* out) -> Task<void> {
        Request r;
        r.method = "POST";
        r.path = "/count";
        r.headers = {{"Idempotency-Key", "\"same\""}};
        ActorId id{"t", "probe", "idemc"};
        EventResult res = co_await rt.HandleRequest(std::move(id), std::move(r));
        *out = std::move(res);
      };
      handles.push_back(h.env().Spawn(one(h.runtime(), &(*results)[i]), "copy"));
    }
    for (auto& hd : handles) (void)co_await hd.Join();
  };
  h_.env().RunMain(run(h_, &results));
  int replayed = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << ErrorOf(r);
    EXPECT_EQ(r.response.body, "1");
    replayed += r.replayed == "1";
  }
  EXPECT_EQ(replayed, 4);
}

// The record is committed in the same batch as the writes it answers for (the broken model
// idempotent-answer-not-in-batch commits it apart, after the answer is out), and an event
// that fails stores nothing: its retry runs.
TEST_F(RuntimeTest, TheRecordIsInTheBatchOfItsWritesAndAFailedEventStoresNone) {
  auto state_of = [&](const char* name) { return h_.storage().State(ActorId{"t", "probe", name}); };
  ASSERT_TRUE(h_.Call("t/probe/idemb", Keyed("k")).ok());
  auto state = state_of("idemb");
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->commits, 1u) << "one batch: the increment and its record";
  EXPECT_TRUE(state->map.GetSystem("idem/k").has_value());

  // A durability failure after the answer: with the record apart, the retry would run again.
  h_.storage().FailDurability(true);
  EventResult r = h_.CallRaw("t/probe/idemb", Keyed("k2"));
  EXPECT_EQ(r.outcome, EventOutcome::kUnavailable) << "not acknowledged: " << ErrorOf(r);
  h_.storage().FailDurability(false);
  auto retry = h_.Call("t/probe/idemb", Keyed("k2"));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(retry->body, "2") << "the unacknowledged run left nothing: the retry runs once";

  EventResult trap = h_.CallRaw("t/bad/idemt", Keyed("k", "/write-then-trap"));
  EXPECT_EQ(trap.outcome, EventOutcome::kActorFailed) << ErrorOf(trap);
  auto s2 = h_.storage().State(ActorId{"t", "bad", "idemt"});
  EXPECT_TRUE(s2 == nullptr || !s2->map.GetSystem("idem/k").has_value()) << "a failed event stores no answer";
}

}  // namespace
}  // namespace wk::actor
