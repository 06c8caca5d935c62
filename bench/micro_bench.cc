// Micro-benchmarks (Google Benchmark) of the hot paths every later subsystem leans on:
// a coroutine round trip through the Env, and key validation. They print figures only.
#include <benchmark/benchmark.h>

#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk {
namespace {

Task<int> Leaf(int x) { co_return x + 1; }

static void BM_TaskAwait(benchmark::State& state) {
  SimWorld world(1);
  SimEnv env(world, FromUnixMs(0));
  int total = 0;
  for (auto _ : state) {
    env.Spawn([](int* t) -> Task<void> { *t += co_await Leaf(*t); }(&total), "bench");
    world.RunUntilIdle();
  }
  benchmark::DoNotOptimize(total);
}
BENCHMARK(BM_TaskAwait);

static void BM_MemConditionalPut(benchmark::State& state) {
  SimWorld world(1);
  SimEnv env(world, FromUnixMs(0));
  auto bucket = std::make_shared<MemBucket>();
  MemStore store(env, bucket);
  Version v;
  for (auto _ : state) {
    env.Spawn([](MemStore* s, Version* ver) -> Task<void> {
      // Named locals, not temporaries inside the co_await operand (GCC 12, DEVELOPING.md).
      Precondition cond = ver->empty() ? Precondition::IfNoneMatchAny() : Precondition::IfMatch(*ver);
      std::string key = "nodes/a", body = "lease body";
      auto r = co_await s->Put(std::move(key), std::move(body), std::move(cond), CallOptions{});
      if (r.ok()) *ver = *r;
    }(&store, &v), "bench");
    world.RunUntilIdle();
  }
}
BENCHMARK(BM_MemConditionalPut);

static void BM_ValidateKey(benchmark::State& state) {
  std::string key = "wal/tenant-a/counter/user-12345/00000000000000000042-00000000000000000007";
  for (auto _ : state) benchmark::DoNotOptimize(ValidateKey(key).ok());
}
BENCHMARK(BM_ValidateKey);

}  // namespace
}  // namespace wk

BENCHMARK_MAIN();
