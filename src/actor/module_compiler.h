// ModuleCompiler: compiles class modules off the event loop (docs/security.md, "Tenants").
// Concurrent Compile calls for one key (a class's module digest) share one compile, and a
// key compiled recently is answered from a small cache; a caller waits at most `timeout`,
// then gets kRetryable (503 with Retry-After) while the compile goes on and its result is
// cached; up to `threads` compiles of different keys run at once. Why compiles leave the
// loop and how the bounds fit together: docs/internals.md, "actor: the runtime".
//
// Threading: Compile and the destructor on the Env's loop thread; the compile threads hand
// results back with Env::PostFromAnyThread (so a RealEnv). The destructor joins the threads
// after the compile in progress (bounded by the engine's limits).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actor/types.h"
#include "base/status.h"
#include "engine/engine.h"
#include "env/env.h"

namespace wk::actor {

struct ModuleCompilerOptions {
  int threads = 2;
  // How long a caller waits for a compile before it gets kRetryable.
  Duration timeout = std::chrono::seconds(30);
  // Compiled results kept for keys no caller was waiting for any more (timed out).
  std::size_t cache_entries = 64;
  // Tests only: runs on the compile thread before each compile (to hold one in progress).
  std::function<void()> before_compile_for_test;
  // Broken model for tests only: compile on the calling (loop) thread, as before this
  // class existed. The test that the loop keeps running must fail with it.
  bool compile_on_loop_for_test = false;
};

struct ModuleCompilerStats {
  std::uint64_t compiles = 0;   // compiles started (one per key in flight)
  std::uint64_t shared = 0;     // calls that joined a compile in flight
  std::uint64_t cached = 0;     // calls answered from the cache
  std::uint64_t timeouts = 0;   // callers that gave up waiting
  std::uint64_t failures = 0;   // compiles that failed (a module that does not compile)
};

class ModuleCompiler {
 public:
  using ModuleResult = Result<std::shared_ptr<const engine::Module>>;

  // engine and env must outlive the compiler.
  ModuleCompiler(Env& env, engine::Engine& engine, ModuleCompilerOptions options = {});
  ~ModuleCompiler();
  ModuleCompiler(const ModuleCompiler&) = delete;
  ModuleCompiler& operator=(const ModuleCompiler&) = delete;

  // Compiles wasm (CompileActorModule with limits) for key. Errors: the compile's own
  // (kInvalidArgument for a module the limits or the ABI refuse, naming why); kRetryable
  // if it took longer than the timeout; kCancelled if the compiler is being destroyed.
  // A failed compile is not cached: the next call compiles again. The module is charged to
  // `owner` (its tenant: engine::ModuleLimits::owner).
  Task<ModuleResult> Compile(std::string key, std::string wasm, ActorLimits limits, std::string owner = {});

  const ModuleCompilerStats& stats() const { return stats_; }
  std::size_t in_flight() const { return in_flight_.size(); }

 private:
  struct Flight;
  struct Job {
    std::string key;
    std::string wasm;
    ActorLimits limits;
    std::string owner;
  };
  void Loop();
  void Finish(const std::string& key, ModuleResult result);

  Env& env_;
  engine::Engine& engine_;
  const ModuleCompilerOptions options_;
  ModuleCompilerStats stats_;
  // Loop thread.
  std::map<std::string, std::shared_ptr<Flight>> in_flight_;
  std::map<std::string, std::shared_ptr<const engine::Module>> cache_;
  std::deque<std::string> cache_order_;  // oldest first
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Shared with the compile threads.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace wk::actor
