#include "actor/module_compiler.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "actor/testing/harness.h"
#include "env/real_env.h"

namespace wk::actor {
namespace {

using std::chrono::milliseconds;

std::string ProbeModule() {
  const std::vector<std::uint8_t> bytes =
      testing::ReadFileBytes(std::string(WK_ACTORS_DIR) + "/abi_probe.wasm");
  return std::string(bytes.begin(), bytes.end());
}

// Holds every compile at its start until released (from the loop, by a timer), so a test
// can stage "a compile in progress" deterministically. If nothing releases it within
// `limit`, it lets the compile go and records that it had to.
class CompileGate {
 public:
  explicit CompileGate(std::chrono::milliseconds limit) : limit_(limit) {}
  void Wait() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, limit_, [this] { return open_; })) timed_out_ = true;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool timed_out() {
    std::lock_guard lock(mu_);
    return timed_out_;
  }

 private:
  const std::chrono::milliseconds limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  bool timed_out_ = false;
};

// A compiler on a real loop whose compiles are held at their start until the test opens
// the gate (or the gate's limit passes).
struct HeldCompiler {
  explicit HeldCompiler(Duration timeout = std::chrono::seconds(30), bool on_loop = false,
                        milliseconds gate_limit = milliseconds(5000))
      : gate(gate_limit), compiler(env, engine, Options(gate, timeout, on_loop)) {}

  static ModuleCompilerOptions Options(CompileGate& gate, Duration timeout, bool on_loop) {
    ModuleCompilerOptions o;
    o.before_compile_for_test = [&gate] { gate.Wait(); };
    o.timeout = timeout;
    o.compile_on_loop_for_test = on_loop;
    return o;
  }

  RealEnv env;
  engine::Engine engine;
  CompileGate gate;
  ModuleCompiler compiler;
};

// The rule: a compile never runs on the loop. A compile held in progress on its thread is
// released by a timer on the loop, which can only fire if the loop is free. With the broken
// model (compile on the loop) the gate is never opened by the timer: the compile waits out
// the gate's limit first, and the test fails.
void LoopKeepsRunningDuringACompile(bool broken) {
  HeldCompiler held(std::chrono::seconds(30), broken, milliseconds(2000));
  auto& [env, engine, gate, compiler] = held;
  bool timer_fired_first = false;
  bool compiled = false;
  auto run = [](RealEnv& env, ModuleCompiler& compiler, CompileGate& gate, bool* timer_fired_first,
                bool* compiled) -> Task<void> {
    // The loop's timer: it opens the gate after 20 ms of loop time.
    env.StartTimer(env.MonoNow() + milliseconds(20), [&gate, timer_fired_first, compiled] {
      if (!*compiled) *timer_fired_first = true;
      gate.Open();
    });
    auto r = co_await compiler.Compile("t/c@1", ProbeModule(), ActorLimits{});
    *compiled = r.ok();
  };
  env.RunMain(run(env, compiler, gate, &timer_fired_first, &compiled));
  ASSERT_TRUE(compiled);
  EXPECT_TRUE(timer_fired_first && !gate.timed_out())
      << "the loop was blocked while the module compiled (the loop's timer could not release it)";
}

TEST(ModuleCompilerTest, TheLoopRunsWhileAModuleCompiles) { LoopKeepsRunningDuringACompile(false); }

TEST(ModuleCompilerTest, BrokenModelCompilingOnTheLoopIsCaught) {
  // The same test with the rule switched off must fail (and does: exactly that failure).
  EXPECT_NONFATAL_FAILURE(LoopKeepsRunningDuringACompile(true), "the loop was blocked");
}

TEST(ModuleCompilerTest, ConcurrentCallsForOneClassShareOneCompile) {
  HeldCompiler held;
  auto& [env, engine, gate, compiler] = held;
  int ok = 0;
  auto run = [](RealEnv& env, ModuleCompiler& compiler, CompileGate& gate, int* ok) -> Task<void> {
    std::vector<TaskHandle> handles;
    for (int i = 0; i < 8; ++i) {
      auto one = [](ModuleCompiler& c, int* ok) -> Task<void> {
        auto r = co_await c.Compile("t/c@digest", ProbeModule(), ActorLimits{});
        if (r.ok()) ++*ok;
      };
      handles.push_back(env.Spawn(one(compiler, ok), "compile"));
    }
    co_await env.SleepFor(milliseconds(10));  // all eight are waiting on the one compile
    EXPECT_EQ(compiler.in_flight(), 1u);
    gate.Open();
    for (auto& h : handles) co_await h.Join();
    // A later call is answered from the cache.
    auto again = co_await compiler.Compile("t/c@digest", ProbeModule(), ActorLimits{});
    EXPECT_TRUE(again.ok());
  };
  env.RunMain(run(env, compiler, gate, &ok));
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(compiler.stats().compiles, 1u);
  EXPECT_EQ(compiler.stats().shared, 7u);
  EXPECT_EQ(compiler.stats().cached, 1u);
}

TEST(ModuleCompilerTest, ACallerGivesUpAfterTheTimeoutAndTheResultServesTheNext) {
  HeldCompiler held(milliseconds(30));
  auto& [env, engine, gate, compiler] = held;
  auto run = [](RealEnv& env, ModuleCompiler& compiler, CompileGate& gate) -> Task<void> {
    auto first = co_await compiler.Compile("t/slow@1", ProbeModule(), ActorLimits{});
    EXPECT_EQ(first.status().code(), Code::kRetryable) << first.status().ToString();
    EXPECT_NE(first.status().message().find("longer than 30 ms"), std::string::npos);
    gate.Open();
    // The compile goes on; once it lands, the next call gets it without compiling again.
    while (compiler.in_flight() != 0) co_await env.SleepFor(milliseconds(5));
    auto second = co_await compiler.Compile("t/slow@1", ProbeModule(), ActorLimits{});
    EXPECT_TRUE(second.ok()) << second.status().ToString();
  };
  env.RunMain(run(env, compiler, gate));
  EXPECT_EQ(compiler.stats().compiles, 1u);
  EXPECT_EQ(compiler.stats().timeouts, 1u);
  EXPECT_EQ(compiler.stats().cached, 1u);
}

TEST(ModuleCompilerTest, AModuleThatDoesNotCompileIsAnErrorAndNotCached) {
  RealEnv env;
  engine::Engine engine;
  ModuleCompiler compiler(env, engine);
  auto run = [](ModuleCompiler& compiler) -> Task<void> {
    for (int i = 0; i < 2; ++i) {
      auto r = co_await compiler.Compile("t/bad@1", std::string("\0asm\x02\0\0\0", 8), ActorLimits{});
      EXPECT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
    }
  };
  env.RunMain(run(compiler));
  EXPECT_EQ(compiler.stats().compiles, 2u);
  EXPECT_EQ(compiler.stats().failures, 2u);
}

}  // namespace
}  // namespace wk::actor
