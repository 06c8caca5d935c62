#include "env/env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "env/real_env.h"
#include "env/sim_env.h"

namespace wk {
namespace {

using std::chrono::milliseconds;

Task<int> AddLater(Env& env, int a, int b) {
  co_await env.SleepFor(milliseconds(10));
  co_return a + b;
}

Task<int> Nested(Env& env) {
  int x = co_await AddLater(env, 1, 2);
  int y = co_await AddLater(env, x, 10);
  co_return y;
}

TEST(SimEnvTest, SleepAdvancesVirtualTimeOnly) {
  SimWorld world(1);
  SimEnv env(world, FromUnixMs(1'000'000));
  int result = 0;
  auto h = env.Spawn([](Env& e, int* out) -> Task<void> { *out = co_await Nested(e); }(env, &result),
                     "nested");
  world.RunUntilIdle();
  EXPECT_TRUE(h.done());
  EXPECT_EQ(result, 13);
  EXPECT_EQ(world.Now().time_since_epoch(), milliseconds(20));
  EXPECT_EQ(ToUnixMs(env.WallNow()), 1'000'020);
  EXPECT_EQ(env.live_tasks(), 0u);
}

TEST(SimEnvTest, AFrozenEnvRunsNothingUntilTheThawThenEverythingInOrder) {
  SimWorld world(1);
  SimEnv env(world, WallTime{});
  SimEnv other(world, WallTime{});
  std::vector<std::string> ran;
  env.StartTimer(MonoTime(std::chrono::seconds(1)), [&] { ran.push_back("timer 1s"); });
  const auto cancelled = env.StartTimer(MonoTime(std::chrono::seconds(2)), [&] { ran.push_back("cancelled"); });
  env.StartTimer(MonoTime(std::chrono::seconds(3)), [&] { ran.push_back("timer 3s"); });
  other.StartTimer(MonoTime(std::chrono::seconds(2)), [&] { ran.push_back("other 2s"); });
  env.Freeze();
  EXPECT_TRUE(env.frozen());
  world.RunFor(std::chrono::seconds(2));
  env.Post([&] { ran.push_back("post"); });
  world.RunFor(std::chrono::milliseconds(500));
  env.CancelTimer(cancelled);  // while it waits in the backlog
  EXPECT_EQ(ran, std::vector<std::string>({"other 2s"})) << "another env keeps running";
  env.Thaw();
  world.RunFor(std::chrono::milliseconds(1));
  EXPECT_EQ(ran, std::vector<std::string>({"other 2s", "timer 1s", "post"}));
  EXPECT_EQ(world.Now(), MonoTime(std::chrono::milliseconds(2501))) << "the thawed env sees time jump";
  world.RunUntilIdle();
  EXPECT_EQ(ran, std::vector<std::string>({"other 2s", "timer 1s", "post", "timer 3s"}));
  // A timer requeued by a thaw can still be cancelled.
  const auto later = env.StartTimer(world.Now() + std::chrono::seconds(1), [&] { ran.push_back("requeued"); });
  env.Freeze();
  world.RunFor(std::chrono::seconds(2));
  env.Thaw();
  env.CancelTimer(later);
  world.RunUntilIdle();
  EXPECT_EQ(ran.back(), "timer 3s");
}

TEST(SimEnvTest, SkewShiftsWallClockNotMonotonic) {
  SimWorld world(1);
  SimEnv a(world, FromUnixMs(5000));
  SimEnv b(world, FromUnixMs(5000), milliseconds(-700));
  EXPECT_EQ(ToUnixMs(a.WallNow()) - ToUnixMs(b.WallNow()), 700);
  EXPECT_EQ(a.MonoNow(), b.MonoNow());
}

TEST(SimEnvTest, CancelWakesASleepingTaskWithFalse) {
  SimWorld world(2);
  SimEnv env(world, FromUnixMs(0));
  int state = 0;
  auto h = env.Spawn(
      [](Env& e, int* st) -> Task<void> {
        bool slept = co_await e.SleepFor(std::chrono::hours(1));
        *st = slept ? 1 : 2;
      }(env, &state),
      "sleeper");
  world.RunFor(milliseconds(5));
  EXPECT_EQ(state, 0);
  h.Cancel();
  world.RunUntilIdle();
  EXPECT_EQ(state, 2);
  EXPECT_TRUE(h.done());
  // The timer was cancelled: time did not jump an hour ahead.
  EXPECT_LT(world.Now().time_since_epoch(), std::chrono::seconds(1));
}

TEST(SimEnvTest, CancellationReachesNestedAwaits) {
  SimWorld world(3);
  SimEnv env(world, FromUnixMs(0));
  std::vector<int> trace;
  auto inner = [](Env& e, std::vector<int>* t) -> Task<bool> {
    bool slept = co_await e.SleepFor(std::chrono::seconds(100));
    t->push_back(slept ? 1 : 0);
    co_return slept;
  };
  auto h = env.Spawn(
      [](Env& e, std::vector<int>* t, auto in) -> Task<void> {
        bool r = co_await in(e, t);
        t->push_back(r ? 11 : 10);
      }(env, &trace, inner),
      "outer");
  world.RunFor(milliseconds(1));
  h.Cancel();
  world.RunUntilIdle();
  EXPECT_EQ(trace, (std::vector<int>{0, 10}));
}

TEST(SimEnvTest, JoinWaitsForCompletion) {
  SimWorld world(4);
  SimEnv env(world, FromUnixMs(0));
  std::vector<std::string> order;
  auto worker = env.Spawn(
      [](Env& e, std::vector<std::string>* o) -> Task<void> {
        co_await e.SleepFor(milliseconds(50));
        o->push_back("worker");
      }(env, &order),
      "worker");
  env.Spawn(
      [](TaskHandle w, std::vector<std::string>* o) -> Task<void> {
        bool joined = co_await w.Join();
        o->push_back(joined ? "joined" : "join-cancelled");
      }(worker, &order),
      "joiner");
  world.RunUntilIdle();
  EXPECT_EQ(order, (std::vector<std::string>{"worker", "joined"}));
}

TEST(SimEnvTest, LatchFirstSetWinsAndCancelGivesFallback) {
  SimWorld world(5);
  SimEnv env(world, FromUnixMs(0));
  Latch<int> latch(env, [] { return -1; });
  int got = 0;
  env.Spawn([](Latch<int> l, int* out) -> Task<void> { *out = co_await l.Wait(); }(latch, &got),
            "waiter");
  world.RunUntilIdle();
  EXPECT_TRUE(latch.Set(42));
  EXPECT_FALSE(latch.Set(43));
  world.RunUntilIdle();
  EXPECT_EQ(got, 42);

  Latch<int> never(env, [] { return -1; });
  int got2 = 0;
  auto h = env.Spawn([](Latch<int> l, int* out) -> Task<void> { *out = co_await l.Wait(); }(never, &got2),
                     "waiter2");
  world.RunUntilIdle();
  h.Cancel();
  world.RunUntilIdle();
  EXPECT_EQ(got2, -1);
  EXPECT_FALSE(never.Set(5));  // already delivered the fallback
}

TEST(SimEnvTest, SameSeedSameRandomStream) {
  SimWorld w1(99), w2(99);
  SimEnv a(w1, FromUnixMs(0)), b(w2, FromUnixMs(0));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.RandomU64(), b.RandomU64());
  EXPECT_EQ(a.RandomHex(16).size(), 32u);
}

TEST(SimEnvTest, DestroyingEnvFreesSuspendedTasks) {
  // LeakSanitizer (debug preset) fails this test if the frames leak.
  SimWorld world(6);
  auto env = std::make_unique<SimEnv>(world, FromUnixMs(0));
  env->Spawn([](Env& e) -> Task<void> { co_await e.SleepFor(std::chrono::hours(1)); }(*env), "stuck");
  world.RunFor(milliseconds(1));
  EXPECT_EQ(env->live_tasks(), 1u);
  env.reset();
  world.RunUntilIdle();  // the timer fires into a dead env and does nothing
}

TEST(SimEnvDeathTest, RefusesRealThreads) {
  SimWorld world(7);
  SimEnv env(world, FromUnixMs(0));
  EXPECT_DEATH(env.PostFromAnyThread([] {}), "real threads cannot be simulated");
}

TEST(RealEnvTest, RunMainReturnsValueAndTimersWork) {
  RealEnv env;
  auto start = env.MonoNow();
  int v = env.RunMain(Nested(env));
  EXPECT_EQ(v, 13);
  EXPECT_GE(env.MonoNow() - start, milliseconds(20));
}

TEST(RealEnvTest, PostFromAnotherThreadResumesOnLoop) {
  RealEnv env;
  auto main = [](RealEnv& e) -> Task<int> {
    Latch<int> latch(e, [] { return -1; });
    std::thread worker([&e, latch] { e.PostFromAnyThread([latch] { latch.Set(7); }); });
    int v = co_await latch.Wait();
    worker.join();
    co_return v;
  };
  EXPECT_EQ(env.RunMain(main(env)), 7);
}

// With a spin window the loop polls instead of blocking after work (env/spin.h): posts
// from other threads, timers and the end of main are all still seen, whether they come
// inside the window or long after it (when the loop has gone back to epoll_wait).
TEST(RealEnvTest, ASpinningLoopSeesPostsFromOtherThreadsAndTimersInAndAfterItsWindow) {
  RealEnv env;
  env.set_idle_spin(std::chrono::microseconds(200));
  auto main = [](RealEnv& e) -> Task<int> {
    int sum = 0;
    for (int gap_us : {0, 50, 5000}) {  // inside the window, near it, long after it
      Latch<int> latch(e, [] { return -1; });
      std::thread worker([&e, latch, gap_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
        e.PostFromAnyThread([latch] { latch.Set(1); });
      });
      sum += co_await latch.Wait();
      worker.join();
    }
    co_await e.SleepFor(milliseconds(5));  // a timer, after the loop went back to sleep
    co_return sum;
  };
  const MonoTime start = env.MonoNow();
  EXPECT_EQ(env.RunMain(main(env)), 3);
  EXPECT_GE(env.MonoNow() - start, milliseconds(5));
}

TEST(RealEnvTest, RunMainCancelsBackgroundTasks) {
  RealEnv env;
  bool background_saw_cancel = false;
  auto main = [](RealEnv& e, bool* saw) -> Task<void> {
    e.Spawn([](Env& en, bool* s) -> Task<void> {
      bool slept = co_await en.SleepFor(std::chrono::hours(1));
      *s = !slept;
    }(e, saw), "background");
    co_await e.SleepFor(milliseconds(1));
  };
  env.RunMain(main(env, &background_saw_cancel));
  EXPECT_TRUE(background_saw_cancel);
  EXPECT_EQ(env.live_tasks(), 0u);
}

TEST(RealEnvTest, WallSkewIsInjected) {
  RealEnv env;
  auto before = ToUnixMs(env.WallNow());
  env.set_wall_skew(std::chrono::seconds(100));
  EXPECT_GE(ToUnixMs(env.WallNow()) - before, 99'000);
}

}  // namespace
}  // namespace wk

namespace wk {
namespace {
Task<int> Immediate(int x) { co_return x + 1; }
// Symmetric transfer must keep a long loop of synchronously completing awaits from
// growing the stack, even in the sanitizer build.
TEST(SimEnvTest, LongSynchronousAwaitLoopDoesNotGrowTheStack) {
  SimWorld world(8);
  SimEnv env(world, FromUnixMs(0));
  long total = 0;
  env.Spawn([](long* t) -> Task<void> {
    for (int i = 0; i < 1'000'000; ++i) *t += co_await Immediate(i) - i;
  }(&total), "loop");
  world.RunUntilIdle();
  EXPECT_EQ(total, 1'000'000);
}
}  // namespace
}  // namespace wk

#include "env/async_mutex.h"

namespace wk {
namespace {
TEST(AsyncMutexTest, SerializesAndHandsOverInOrderSkippingCancelled) {
  SimWorld world(9);
  SimEnv env(world, FromUnixMs(0));
  AsyncMutex mutex(env);
  std::vector<std::string> log;
  auto worker = [](Env& e, AsyncMutex& m, std::vector<std::string>* l, std::string name) -> Task<void> {
    auto guard = co_await m.Lock();
    if (!guard.owns()) {
      l->push_back(name + " cancelled");
      co_return;
    }
    l->push_back(name + " in");
    co_await e.SleepFor(std::chrono::milliseconds(10));
    l->push_back(name + " out");
  };
  env.Spawn(worker(env, mutex, &log, "a"), "a");
  auto b = env.Spawn(worker(env, mutex, &log, "b"), "b");
  env.Spawn(worker(env, mutex, &log, "c"), "c");
  world.RunFor(std::chrono::milliseconds(1));
  b.Cancel();
  world.RunUntilIdle();
  EXPECT_EQ(log, (std::vector<std::string>{"a in", "b cancelled", "a out", "c in", "c out"}));
  EXPECT_FALSE(mutex.locked());
}
}  // namespace
}  // namespace wk
