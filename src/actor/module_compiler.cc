#include "actor/module_compiler.h"

#include <span>
#include <utility>

#include "actor/runtime.h"
#include "base/check.h"

namespace wk::actor {

// One compile in progress and the callers waiting for it.
struct ModuleCompiler::Flight {
  std::vector<Latch<ModuleResult>> waiters;
};

namespace {

ModuleCompiler::ModuleResult CompileBytes(engine::Engine& engine, const std::string& wasm, const ActorLimits& limits,
                                          const std::string& owner) {
  std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(wasm.data()), wasm.size());
  return CompileActorModule(engine, bytes, limits, owner);
}

}  // namespace

ModuleCompiler::ModuleCompiler(Env& env, engine::Engine& engine, ModuleCompilerOptions options)
    : env_(env), engine_(engine), options_(std::move(options)) {
  WK_CHECK(options_.threads >= 1, "a ModuleCompiler needs at least one thread");
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Loop(); });
}

ModuleCompiler::~ModuleCompiler() {
  *alive_ = false;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  for (auto& [key, flight] : in_flight_) {
    for (const auto& w : flight->waiters) w.Set(Cancelled("the module compiler stopped"));
  }
}

Task<ModuleCompiler::ModuleResult> ModuleCompiler::Compile(std::string key, std::string wasm, ActorLimits limits,
                                                          std::string owner) {
  if (options_.compile_on_loop_for_test) {
    ++stats_.compiles;
    if (options_.before_compile_for_test) options_.before_compile_for_test();
    co_return CompileBytes(engine_, wasm, limits, owner);
  }
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++stats_.cached;
    co_return it->second;
  }
  std::shared_ptr<Flight> flight;
  if (auto it = in_flight_.find(key); it != in_flight_.end()) {
    flight = it->second;
    ++stats_.shared;
  } else {
    flight = std::make_shared<Flight>();
    in_flight_.emplace(key, flight);
    ++stats_.compiles;
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(Job{key, std::move(wasm), limits, std::move(owner)});
    }
    cv_.notify_one();
  }
  Latch<ModuleResult> latch(env_, [] { return ModuleResult(Cancelled("cancelled while waiting for a compile")); });
  flight->waiters.push_back(latch);
  Env& env = env_;  // the compiler may be gone when this coroutine resumes
  const Duration timeout = options_.timeout;
  const Env::TimerId timer =
      env.StartTimer(env.MonoNow() + timeout, [latch, alive = alive_, this, timeout] {
        if (latch.Set(Retryable("compiling the class's module took longer than " +
                                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                                " ms; it goes on, retry shortly")) &&
            *alive) {
          ++stats_.timeouts;
        }
      });
  ModuleResult result = co_await latch.Wait();
  env.CancelTimer(timer);
  co_return result;
}

void ModuleCompiler::Loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (options_.before_compile_for_test) options_.before_compile_for_test();
    ModuleResult result = CompileBytes(engine_, job.wasm, job.limits, job.owner);
    env_.PostFromAnyThread([this, alive = alive_, key = std::move(job.key), result = std::move(result)]() mutable {
      if (*alive) Finish(key, std::move(result));
    });
  }
}

void ModuleCompiler::Finish(const std::string& key, ModuleResult result) {
  auto it = in_flight_.find(key);
  if (it == in_flight_.end()) return;
  const std::shared_ptr<Flight> flight = it->second;
  in_flight_.erase(it);
  if (result.ok()) {
    if (cache_.emplace(key, *result).second) cache_order_.push_back(key);
    while (cache_.size() > options_.cache_entries) {
      cache_.erase(cache_order_.front());
      cache_order_.pop_front();
    }
  } else {
    ++stats_.failures;
  }
  for (const auto& w : flight->waiters) w.Set(result);
}

}  // namespace wk::actor
