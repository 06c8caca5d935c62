// Where an idle resident actor's bytes go, and what its next event costs in each state it
// can be in: the measurements behind "warm but not instantiated" (actor/runtime.h) and the
// bookkeeping figure the memory budget charges (kResidentActorBookkeepingBytes). Prints one
// table; asserts nothing. docs/benchmarks.md ("Density") records a run.
//
//   density_parts [N]     (default 5000 counters)
//
// Two runtimes, one worker each, run the counter (examples/counter) for N actors, one POST
// /increment each: over in-memory storage (the runtime alone), then over durable replicas
// on a file:// bucket in a temporary directory with holds that never end (the runtime and
// the replicas, without the ownership records of `wasmkeep serve`). For each it reads, per
// actor: the process's resident size (/proc/self/statm), the bytes malloc has handed out
// (mallinfo2, every arena: V8's own native allocations included), the memory mappings
// (/proc/self/maps), and the runtime's own accounting (RuntimeStats), first with every
// instance alive, then once the idle sweep has dropped them (actors.idle_instance_ms), and
// after malloc_trim. Then the time of one more event for actors in each state: with an
// instance, warm but not instantiated, and (replicas only) hibernated, so restored.
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "actor/runtime.h"
#include "actor/testing/harness.h"
#include "base/log.h"
#include "replica/provider.h"
#include "store/open_store.h"

namespace wk {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string ActorWasm(const std::string& name) { return std::string(WK_ACTORS_DIR) + "/" + name + ".wasm"; }

struct Sample {
  double rss = 0;      // bytes resident
  double malloced = 0;  // bytes malloc has handed out
  double mappings = 0;
  actor::RuntimeStats stats;
};

Sample Take(actor::testing::Harness& h) {
  Sample s;
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  statm >> size >> resident;
  s.rss = resident * static_cast<double>(sysconf(_SC_PAGESIZE));
  const struct mallinfo2 m = mallinfo2();
  s.malloced = static_cast<double>(m.uordblks + m.hblkhd);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) ++s.mappings;
  s.stats = h.runtime().stats();
  return s;
}

// Holds without the cluster: a new generation per acquisition, always valid.
class AlwaysHolds final : public replica::HoldSource {
 public:
  Task<Result<replica::Replica::Hold>> Acquire(ActorId) override {
    const Generation g = next_;
    next_ = next_.Next();
    co_return replica::Replica::Hold{g, [] { return true; }};
  }
  Task<void> Release(ActorId, Generation) override { co_return; }

 private:
  Generation next_{1};
};

class FileReplicas final : public actor::StorageProvider {
 public:
  FileReplicas(RealEnv& env, const std::string& dir) {
    auto s = OpenStore(env, "file://" + dir);
    if (!s.ok()) {
      std::fprintf(stderr, "cannot open file://%s: %s\n", dir.c_str(), s.status().ToString().c_str());
      std::exit(1);
    }
    store_ = std::move(*s);
    replica::Replica::Deps deps{env, *store_, [&env](std::function<void()> fn) { env.PostFromAnyThread(std::move(fn)); }};
    provider_ = std::make_unique<replica::ReplicaProvider>(std::move(deps), holds_, replica::ReplicaOptions{},
                                                           std::chrono::seconds(10));
  }
  Task<Result<std::unique_ptr<actor::ActorStorage>>> Open(const ActorId& id) override { return provider_->Open(id); }
  void Close(const ActorId& id, std::unique_ptr<actor::ActorStorage> s, actor::CloseIntent intent) override {
    provider_->Close(id, std::move(s), intent);
  }

 private:
  AlwaysHolds holds_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<replica::ReplicaProvider> provider_;
};

// Microseconds per call of POST /increment to actors first..first+count-1, one at a time.
double MicrosPerCall(actor::testing::Harness& h, int first, int count) {
  const auto t0 = Clock::now();
  for (int i = first; i < first + count; ++i) {
    auto r = h.Call("bench/counter/c" + std::to_string(i), actor::testing::MakeRequest("POST", "/increment"));
    if (!r.ok()) {
      std::fprintf(stderr, "call failed: %s\n", r.status().ToString().c_str());
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / count;
}

void Row(const char* what, double v, const char* how) { std::printf("| %s | %.0f | %s |\n", what, v, how); }

void Measure(const char* storage_name, int n, const actor::testing::Harness::StorageFactory& make_storage) {
  actor::RuntimeOptions o = actor::testing::DefaultHarnessOptions();  // one worker
  o.idle_hibernate = std::chrono::hours(1);
  // Instances must outlive the creation of all N and the warm calls, then be dropped: time
  // a few creations first, on a runtime of their own.
  double pilot_us = 0;
  {
    o.idle_instance = std::chrono::hours(1);
    auto pilot = make_storage ? std::make_unique<actor::testing::Harness>(o, make_storage)
                              : std::make_unique<actor::testing::Harness>(o);
    pilot->Deploy("counter", ActorWasm("counter"));
    (void)MicrosPerCall(*pilot, n + 100, 20);
    pilot_us = MicrosPerCall(*pilot, n + 120, 100);
  }
  const auto idle = std::max<Clock::duration>(
      std::chrono::seconds(5), std::chrono::microseconds(static_cast<std::int64_t>(4 * pilot_us * (n + 1000))));
  o.idle_instance = std::chrono::duration_cast<Duration>(idle);
  auto h = make_storage ? std::make_unique<actor::testing::Harness>(o, make_storage)
                        : std::make_unique<actor::testing::Harness>(o);
  h->Deploy("counter", ActorWasm("counter"));
  // Warm-up: the class loaded into the worker, the allocator's arenas made; their
  // instances are dropped with the others below.
  (void)MicrosPerCall(*h, n, 50);
  malloc_trim(0);
  const Sample base = Take(*h);
  const double create_us = MicrosPerCall(*h, 0, n);
  const Sample with = Take(*h);
  const double warm_us = MicrosPerCall(*h, 0, 1000);  // instances alive: warm calls
  h->RunFor(idle + std::chrono::seconds(2));  // every instance dropped (and one collection of the heap)
  const Sample without = Take(*h);
  malloc_trim(0);
  const Sample trimmed = Take(*h);
  const double reinstantiate_us = MicrosPerCall(*h, 1000, 1000);
  double restore_us = 0;
  if (make_storage) {
    for (int i = 2000; i < 3000; ++i) h->runtime().Unload(ActorId{"bench", "counter", "c" + std::to_string(i)});
    h->RunFor(std::chrono::seconds(2));
    restore_us = MicrosPerCall(*h, 2000, 1000);
  }

  const double N = n;
  auto per = [N](double a, double b) { return (b - a) / N; };
  std::printf("\n%s, %d counters (1 worker), bytes per actor:\n\n", storage_name, n);
  std::printf("| part | bytes per actor | how |\n|---|---|---|\n");
  Row("linear memory mapped", with.stats.linear_mapped_bytes / N, "RuntimeStats::linear_mapped_bytes");
  Row("linear memory touched (charged)", with.stats.linear_bytes / N, "mincore: RuntimeStats::linear_bytes");
  Row("V8 heap held by the instance (charged)", with.stats.instance_heap_bytes / N, "Instance::HeapBytes");
  Row("worker's V8 heap growth", per(base.stats.heap_bytes, with.stats.heap_bytes), "RuntimeStats::heap_bytes");
  Row("state (charged)", with.stats.state_bytes / N, "StateMap::MemoryBytes");
  Row("process resident, with instances", per(base.rss, with.rss), "/proc/self/statm");
  Row("malloc in use, with instances", per(base.malloced, with.malloced), "mallinfo2");
  Row("memory mappings per instance (count)", per(base.mappings, with.mappings) , "/proc/self/maps lines");
  Row("process resident, instances dropped", per(base.rss, without.rss), "");
  Row("process resident, instances dropped, after malloc_trim", per(base.rss, trimmed.rss), "");
  Row("malloc in use, instances dropped (slot, storage, state)", per(base.malloced, without.malloced), "mallinfo2");
  Row("worker's V8 heap growth, instances dropped", per(base.stats.heap_bytes, without.stats.heap_bytes), "");
  std::printf("\n| event | µs per call (mean, one at a time) |\n|---|---|\n");
  std::printf("| first (create: open the storage, instantiate) | %.0f |\n", create_us);
  std::printf("| warm, with its instance | %.0f |\n", warm_us);
  std::printf("| warm but not instantiated (instantiate again) | %.0f |\n", reinstantiate_us);
  if (make_storage) std::printf("| hibernated (acquire a hold, restore from file://) | %.0f |\n", restore_us);
  std::printf("\n(actors.idle_instance_ms for this run: %.0f s) instances dropped idle: %llu; resident %zu, instances %zu\n",
              std::chrono::duration<double>(idle).count(),
              static_cast<unsigned long long>(trimmed.stats.instances_dropped_idle), trimmed.stats.resident_actors,
              trimmed.stats.instances);
}

}  // namespace
}  // namespace wk

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 5000;
  if (n < 3000) {
    std::fprintf(stderr, "usage: density_parts [N >= 3000]\n");
    return 2;
  }
  wk::log::SetLevel(wk::log::Level::kOff);
  std::printf("density_parts: %d counters; %ld cores; build %s\n", n, sysconf(_SC_NPROCESSORS_ONLN),
#ifdef NDEBUG
              "optimized"
#else
              "debug"
#endif
  );
  wk::Measure("in-memory storage (the runtime alone)", n, nullptr);
  const auto dir = std::filesystem::temp_directory_path() / ("wk-density-parts-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  wk::Measure("durable replicas on file:// (runtime and replicas)", n, [&dir](wk::RealEnv& env) {
    return std::make_unique<wk::FileReplicas>(env, dir.string());
  });
  std::filesystem::remove_all(dir);
  return 0;
}
