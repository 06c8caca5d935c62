// Actor-runtime benchmarks, Google Benchmark. They print figures and assert
// nothing; docs/benchmarks.md, "Actor runtime" records a run next to the V8 prototype's figures.
//
// Four levels, each labelled in the output:
//   - engine: engine::Worker/Instance directly, with a tiny module (bench/testdata/
//     host_call.wat) and one host function: a trivial export call and one host call.
//   - raw event: one event of a real actor module through the real ABI
//     (AbiHostInterface, EventContext, EventTxn, commit to an in-memory map) on an engine
//     Instance, on this thread: what a worker spends per event, without the runtime.
//   - harness: actor::testing::Harness::Call, i.e. ActorRuntime over in-memory storage with
//     one worker thread, and the RealEnv loop run once per call on this thread. Each call
//     is a round trip loop thread -> worker thread -> loop thread, one event at a time, so
//     it measures the runtime's per-event hand-off (latency) as much as the actor.
//   - runtime: the same runtime with 1,000 events in flight at once (throughput per worker).
// Plus instantiation time, resident memory per instance, and compile time per class.
//
// Twins: each example that has an AssemblyScript twin (examples/assemblyscript/) is measured
// in both builds, the same event for both: events per second through the runtime on one
// worker, the raw event's time, the module's size, and memory per instance. The run ends
// with a table of them side by side (PrintTwinTable), for docs/benchmarks.md.
//
// Every benchmark reports wall time (UseRealTime) and process CPU time (all threads: the
// harness's worker, V8's background compile threads, the CPU watchdog).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actor/abi.h"
#include "actor/runtime.h"
#include "actor/state_map.h"
#include "actor/storage.h"
#include "actor/testing/harness.h"
#include "actor/txn.h"
#include "cluster/owner_record.h"
#include "engine/engine.h"
#include "env/env.h"
#include "env/real_env.h"
#include "env/task.h"

namespace wk::actor {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kCpuLimit = std::chrono::milliseconds(1000);

std::string ActorWasm(const std::string& name) { return std::string(WK_ACTORS_DIR) + "/" + name + ".wasm"; }

double NsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

// Resident set size of this process, from /proc/self/statm (pages).
std::uint64_t RssBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? std::uint64_t{resident} * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// One engine and one worker (V8 isolate) on the benchmark thread, for everything that does
// not go through the harness. A worker is bound to the thread that created it; Google
// Benchmark runs non-threaded benchmarks on the main thread. Made and destroyed in main.
struct Rig {
  engine::Engine engine;
  engine::Worker worker{engine};
};
Rig* g_rig = nullptr;

// An ActorStorage over a std::map that is durable at once: what the raw-event benchmarks
// commit to (MemStorageProvider's storage is reached only through its coroutine Open).
class MapStorage final : public ActorStorage {
 public:
  std::optional<std::string> Get(std::string_view key) const override {
    auto it = data_.find(key);
    if (it == data_.end()) return std::nullopt;
    return it->second;
  }
  void List(const ListQuery& q, const ListVisitor& visit) const override {
    if (q.reverse) {
      for (auto it = data_.rbegin(); it != data_.rend(); ++it) {
        if (InQuery(q, it->first) && !visit(it->first, it->second)) return;
      }
    } else {
      for (const auto& [k, v] : data_) {
        if (InQuery(q, k) && !visit(k, v)) return;
      }
    }
  }
  std::optional<std::int64_t> Alarm() const override { return alarm_; }
  // The raw-event benchmarks send no idempotency key: no system entries.
  std::optional<std::string> GetSystem(std::string_view) const override { return std::nullopt; }
  void ListSystem(const ListQuery&, const ListVisitor&) const override {}
  std::uint64_t SystemBytes() const override { return 0; }
  std::uint64_t StoredBytes() const override { return bytes_; }
  // The bench's map has the StateMap's layout: its bytes plus the per-entry node (short keys).
  std::uint64_t MemoryBytes() const override { return bytes_ + data_.size() * EntryMemoryBytes(0, 0); }
  std::uint64_t Commit(Batch batch) override {
    for (Mutation& m : batch.mutations) {
      switch (m.kind) {
        case Mutation::Kind::kPut: {
          auto it = data_.find(m.key);
          if (it != data_.end()) {
            bytes_ -= it->first.size() + it->second.size();
            it->second = std::move(m.value);
          } else {
            it = data_.emplace(std::move(m.key), std::move(m.value)).first;
          }
          bytes_ += it->first.size() + it->second.size();
          break;
        }
        case Mutation::Kind::kDelete:
          if (auto it = data_.find(m.key); it != data_.end()) {
            bytes_ -= it->first.size() + it->second.size();
            data_.erase(it);
          }
          break;
        case Mutation::Kind::kDeleteAll:
          data_.clear();
          bytes_ = 0;
          break;
      }
    }
    if (batch.alarm) alarm_ = *batch.alarm;
    return ++seq_;
  }
  // Always durable, always held; only Break fails it (sticky, as storage.h asks).
  void WhenReleasable(std::uint64_t, std::function<void(Status)> done) override { done(failure()); }
  Status failure() const override {
    std::lock_guard lock(mu_);
    return broken_.value_or(Status::Ok());
  }
  void Break(Status why) override {
    std::lock_guard lock(mu_);
    if (!broken_) broken_ = std::move(why);
  }

 private:
  std::map<std::string, std::string, std::less<>> data_;
  std::optional<std::int64_t> alarm_;
  std::uint64_t bytes_ = 0;
  std::uint64_t seq_ = 0;
  mutable std::mutex mu_;  // failure() may be asked from the runtime's loop thread
  std::optional<Status> broken_;
};

// One request event, as ActorRuntime::Execute runs it on a worker, minus the runtime:
// an EventTxn over the storage, the EventContext the ABI's host functions read, the call
// of wk_on_request, and the batch committed. No exec-durable `sync` (no module here uses it).
struct RawActor {
  ActorLimits limits;
  MapStorage storage;
  std::unique_ptr<engine::Instance> instance;
  // The event's now_ms(): a millisecond later for each event, so that clock-driven actors
  // (ratelimit's refill) see time pass as they would under load.
  std::int64_t now_ms = 1'800'000'000'000;

  Status Instantiate(const std::shared_ptr<const engine::Module>& module) {
    EventTxn txn(storage, limits);
    EventContext ctx;
    ctx.limits = &limits;
    ctx.actor = "t/bench/a";
    ctx.txn = &txn;
    auto made = g_rig->worker.Instantiate(module, &ctx, kCpuLimit);
    if (!made.ok()) return made.status();
    instance = std::move(*made);
    return Status::Ok();
  }

  // Ok with the response status, or the failure.
  Result<int> Event(const Request& request) {
    EventTxn txn(storage, limits);
    EventContext ctx;
    ctx.limits = &limits;
    ctx.actor = "t/bench/a";
    ctx.request = &request;
    ctx.txn = &txn;
    ctx.now_ms = ++now_ms;
    engine::CallResult call = instance->Call(kRequestExport, &ctx, kCpuLimit);
    ctx.FlushOutput();
    if (!call.ok()) return InvalidArgument("event failed: " + call.message);
    if (call.value != 0) return InvalidArgument("wk_on_request returned " + std::to_string(call.value));
    Batch batch = txn.TakeBatch();
    if (!batch.empty()) storage.Commit(std::move(batch));
    return ctx.response.status;
  }
};

Result<std::shared_ptr<const engine::Module>> CompileActor(const std::string& name) {
  auto bytes = testing::ReadFileBytes(ActorWasm(name));
  if (bytes.empty()) return NotFound("cannot read " + ActorWasm(name) + " (build the target wk_actors)");
  return CompileActorModule(g_rig->engine, bytes, ActorLimits{});
}

Request PostRequest(std::string path) {
  Request r;
  r.method = "POST";
  r.path = std::move(path);
  return r;
}

// ---------------------------------------------------------------------------------------
// Instantiation and resident memory (registered first: measured on a fresh process heap).

// Time per instance of counter.wasm on a worker that already has the module loaded
// (Worker::Instantiate: V8 instance, imports bound, _initialize run). Instances are kept,
// 256 at a time, and destroyed outside the timed region.
void BM_InstantiateCounter(benchmark::State& state) {
  auto module = CompileActor("counter");
  if (!module.ok()) return state.SkipWithError(module.status().ToString().c_str());
  std::vector<RawActor> actors(256);
  if (auto s = actors[0].Instantiate(*module); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  actors[0].instance.reset();
  std::size_t next = 0;
  for (auto _ : state) {
    if (next == actors.size()) {
      state.PauseTiming();
      for (RawActor& a : actors) a.instance.reset();
      g_rig->worker.PumpMessageLoop();
      next = 0;
      state.ResumeTiming();
    }
    if (auto s = actors[next++].Instantiate(*module); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("engine: Worker::Instantiate, module already loaded in the worker");
}

// 1,000 counter instances on one worker: RSS (/proc/self/statm) before, after creating
// them, and after one POST /increment each; and their linear memory (Instance::MemoryBytes).
// Run once, first, whatever --benchmark_repetitions says: memory freed by an earlier run
// would be reused and hide the cost.
// "After event" includes each actor's one committed key in its MapStorage (about 100 bytes).
void BM_InstanceMemoryCounter(benchmark::State& state) {
  constexpr int kInstances = 1000;
  auto module = CompileActor("counter");
  if (!module.ok()) return state.SkipWithError(module.status().ToString().c_str());
  const Request inc = PostRequest("/increment");
  for (auto _ : state) {
    std::vector<RawActor> actors(kInstances);  // storages allocated before the baseline
    {
      RawActor warm;  // loads the module into the worker: not a per-actor cost
      if (auto s = warm.Instantiate(*module); !s.ok()) return state.SkipWithError(s.ToString().c_str());
      if (auto r = warm.Event(inc); !r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    }
    g_rig->worker.PumpMessageLoop();
    const std::uint64_t rss0 = RssBytes();
    const auto t0 = Clock::now();
    for (RawActor& a : actors) {
      if (auto s = a.Instantiate(*module); !s.ok()) return state.SkipWithError(s.ToString().c_str());
    }
    const double instantiate_ns = NsSince(t0);
    const std::uint64_t rss1 = RssBytes();
    std::uint64_t linear = 0;
    for (RawActor& a : actors) linear += a.instance->MemoryBytes();
    const auto t1 = Clock::now();
    for (RawActor& a : actors) {
      auto r = a.Event(inc);
      if (!r.ok() || *r != 200) return state.SkipWithError("POST /increment failed");
    }
    const double event_ns = NsSince(t1);
    const std::uint64_t rss2 = RssBytes();
    std::uint64_t linear_after = 0;
    for (RawActor& a : actors) linear_after += a.instance->MemoryBytes();

    state.counters["instantiate_us"] = instantiate_ns / kInstances / 1e3;
    state.counters["first_event_us"] = event_ns / kInstances / 1e3;
    state.counters["rss_KiB_per_instance"] = (static_cast<double>(rss1) - rss0) / kInstances / 1024;
    state.counters["rss_KiB_per_instance_after_event"] = (static_cast<double>(rss2) - rss0) / kInstances / 1024;
    state.counters["linear_KiB_per_instance"] = static_cast<double>(linear) / kInstances / 1024;
    state.counters["linear_KiB_after_event"] = static_cast<double>(linear_after) / kInstances / 1024;
    actors.clear();
    g_rig->worker.PumpMessageLoop();
  }
  state.SetLabel("engine: 1000 counter instances on one worker, RSS from /proc/self/statm");
}

// ---------------------------------------------------------------------------------------
// Engine: export calls and host calls (bench/testdata/host_call.wat).

Status AddOne(engine::HostCall& call) {
  call.ReturnI32(call.I32(0) + 1);
  return Status::Ok();
}

Result<std::unique_ptr<engine::Instance>> HostCallInstance() {
  auto bytes = testing::ReadFileBytes(std::string(WK_BENCH_TESTDATA) + "/host_call.wasm");
  if (bytes.empty()) return NotFound("cannot read host_call.wasm");
  using engine::ValType;
  auto host = std::make_shared<const engine::HostInterface>(std::vector<engine::HostFunction>{
      {"bench", "add_one", {{ValType::kI32}, {ValType::kI32}}, &AddOne}});
  auto module = g_rig->engine.Compile(bytes, host, {}, engine::ModuleLimits{});
  if (!module.ok()) return module.status();
  return g_rig->worker.Instantiate(*module, nullptr, kCpuLimit);
}

// The floor under every call: Instance::Call reads the thread's CPU clock
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID), a system call) for the CPU-time limit.
void BM_ThreadCpuClockRead(benchmark::State& state) {
  timespec ts{};
  for (auto _ : state) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    benchmark::DoNotOptimize(ts);
  }
  state.SetLabel("reference: clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
}

void BM_ExportCallNoop(benchmark::State& state) {
  auto instance = HostCallInstance();
  if (!instance.ok()) return state.SkipWithError(instance.status().ToString().c_str());
  engine::Instance& inst = **instance;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    engine::CallResult r = inst.Call("noop", nullptr, kCpuLimit);
    if (!r.ok()) return state.SkipWithError(r.message.c_str());
  }
  state.counters["ns_per_call"] = NsSince(t0) / static_cast<double>(state.iterations());
  state.SetLabel("engine: Instance::Call of an export returning i32 0");
}

// The timed loop calls call_host_1000; before it, loop_1000 (the same loop without the host
// call) is timed alone over as many calls. The host call's cost is the difference over
// 1000: the export call and the loop cancel out. (Timing the two alternately inflates the
// call after call_host_1000 by several microseconds, so each is timed in a steady run.)
void BM_HostCall(benchmark::State& state) {
  constexpr int kBaselineCalls = 4000;
  auto instance = HostCallInstance();
  if (!instance.ok()) return state.SkipWithError(instance.status().ToString().c_str());
  engine::Instance& inst = **instance;
  for (int i = 0; i < 100; ++i) {  // warm both exports
    if (!inst.Call("loop_1000", nullptr, kCpuLimit).ok() || !inst.Call("call_host_1000", nullptr, kCpuLimit).ok()) {
      return state.SkipWithError("warm-up call failed");
    }
  }
  auto t0 = Clock::now();
  for (int i = 0; i < kBaselineCalls; ++i) {
    engine::CallResult r = inst.Call("loop_1000", nullptr, kCpuLimit);
    if (!r.ok() || r.value != 0) return state.SkipWithError("loop_1000 failed");
  }
  const double loop_ns = NsSince(t0) / kBaselineCalls;
  t0 = Clock::now();
  for (auto _ : state) {
    engine::CallResult r = inst.Call("call_host_1000", nullptr, kCpuLimit);
    if (!r.ok() || r.value != 0) return state.SkipWithError(r.ok() ? "call_host_1000 returned non-zero" : r.message.c_str());
  }
  const double host_ns = NsSince(t0) / static_cast<double>(state.iterations());
  state.counters["ns_per_host_call"] = (host_ns - loop_ns) / 1000;
  state.counters["call_host_1000_us"] = host_ns / 1e3;
  state.counters["loop_1000_us"] = loop_ns / 1e3;
  state.SetLabel("engine: (call_host_1000 - loop_1000) / 1000; host fn (i32)->i32");
}

// ---------------------------------------------------------------------------------------
// Raw events: a real actor's handler through the full ABI on an engine Instance.

// Skips the benchmark with why; 0, for the functions that return a figure.
double Skip(benchmark::State& state, const std::string& why) {
  state.SkipWithError(why.c_str());
  return 0;
}

// Returns ns per event (0 after a skip).
double RawEvent(benchmark::State& state, const std::string& actor, const Request& req,
                const Request* setup = nullptr, int setup_repeats = 1) {
  auto module = CompileActor(actor);
  if (!module.ok()) return Skip(state, module.status().ToString());
  RawActor a;
  if (auto s = a.Instantiate(*module); !s.ok()) return Skip(state, s.ToString());
  for (int k = 0; setup != nullptr && k < setup_repeats; ++k) {
    auto r = a.Event(*setup);
    if (!r.ok() || *r != 200) return Skip(state, "setup: " + (r.ok() ? "status " + std::to_string(*r) : r.status().ToString()));
  }
  if (auto r = a.Event(req); !r.ok()) return Skip(state, r.status().ToString());
  std::int64_t n = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    auto r = a.Event(req);
    if (!r.ok() || *r != 200) return Skip(state, r.ok() ? "status " + std::to_string(*r) : r.status().ToString());
    // abi_probe never frees what it mallocs (a few dozen bytes an event): give it a fresh
    // instance over the same storage before its linear memory nears the 16 MiB maximum.
    if (++n % 4096 == 0 && a.instance->MemoryBytes() > (8u << 20)) {
      state.PauseTiming();
      if (auto s = a.Instantiate(*module); !s.ok()) return Skip(state, s.ToString());
      state.ResumeTiming();
    }
  }
  const double ns_per_event = NsSince(t0) / static_cast<double>(state.iterations());
  state.counters["ns_per_event"] = ns_per_event;
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("raw event: engine Instance + AbiHostInterface + EventContext/EventTxn + commit; no runtime, no loop");
  return ns_per_event;
}

// abi_probe's POST /count: storage_get, result_read, storage_put, response_write.
void BM_RawEventAbiProbeCount(benchmark::State& state) { RawEvent(state, "abi_probe", PostRequest("/count")); }
// counter's POST /increment through the C++ SDK (request_get and storage get+put).
void BM_RawEventCounterIncrement(benchmark::State& state) { RawEvent(state, "counter", PostRequest("/increment")); }

// ---------------------------------------------------------------------------------------
// Harness: events through ActorRuntime (1 worker, in-memory storage), one call at a time.

std::unique_ptr<testing::Harness> g_harness;
std::string g_harness_error;
bool g_warmed_1000 = false;

testing::Harness* TheHarness() {
  if (g_harness || !g_harness_error.empty()) return g_harness.get();
  RuntimeOptions options = testing::DefaultHarnessOptions();  // 1 worker, default limits
  // Warmed actors must stay resident for the whole run (the default is 30 s).
  options.idle_hibernate = std::chrono::hours(1);
  options.idle_instance = std::chrono::hours(1);  // and keep their instances
  auto h = std::make_unique<testing::Harness>(options);
  for (const char* cls : {"counter", "abi_probe"}) {
    if (Status s = h->TryDeploy(cls, ActorWasm(cls)); !s.ok()) {
      g_harness_error = s.ToString();
      return nullptr;
    }
  }
  // The twins, where built (as_*.wasm needs node and npm at build time).
  for (const char* cls : {"chat", "ratelimit", "as_counter", "as_chat", "as_ratelimit"}) {
    if (testing::ReadFileBytes(ActorWasm(cls)).empty()) continue;
    if (Status s = h->TryDeploy(cls, ActorWasm(cls)); !s.ok()) {
      g_harness_error = s.ToString();
      return nullptr;
    }
  }
  g_harness = std::move(h);
  return g_harness.get();
}

// Reference for the harness figures: Harness::Call's fixed cost on the loop thread alone,
// RealEnv::RunMain of a coroutine that returns at once (spawn, run the loop, drain).
Task<int> Nothing() { co_return 0; }
void BM_RealEnvRunMainEmpty(benchmark::State& state) {
  RealEnv env;
  for (auto _ : state) benchmark::DoNotOptimize(env.RunMain(Nothing()));
  state.SetLabel("reference: RealEnv::RunMain of an empty coroutine, no worker thread");
}

// The benchmark's argument is the spin window in microseconds (env/spin.h), for the loop
// and the worker alike: 0 (each hand-off wakes a sleeping thread) against the node's
// default, side by side in one run.
void SetHarnessSpin(testing::Harness* h, const benchmark::State& state) {
  const Duration spin = std::chrono::microseconds(state.range(0));
  h->env().set_idle_spin(spin);
  h->runtime().SetSpin(spin);
}

void HarnessOne(benchmark::State& state, const std::string& actor, const std::string& path) {
  testing::Harness* h = TheHarness();
  if (h == nullptr) return state.SkipWithError(g_harness_error.c_str());
  SetHarnessSpin(h, state);
  const testing::TestRequest req{.method = "POST", .path = path};
  if (auto r = h->Call(actor, req); !r.ok()) return state.SkipWithError(r.status().ToString().c_str());
  for (auto _ : state) {
    auto r = h->Call(actor, req);
    if (!r.ok() || r->status != 200) return state.SkipWithError(r.ok() ? "status not 200" : r.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("harness: Harness::Call = RealEnv loop run per call + hand-off to the worker thread and back; arg = spin us");
}

void BM_HarnessCounterIncrement(benchmark::State& state) { HarnessOne(state, "t/counter/c", "/increment"); }
void BM_HarnessAbiProbeCount(benchmark::State& state) { HarnessOne(state, "t/abi_probe/p", "/count"); }

// Round robin over 1,000 resident counters (each warmed by one event first): the same
// work per event, but a different instance, storage and slot each time (colder caches).
void BM_HarnessCounter1000Actors(benchmark::State& state) {
  constexpr int kActors = 1000;
  testing::Harness* h = TheHarness();
  if (h == nullptr) return state.SkipWithError(g_harness_error.c_str());
  SetHarnessSpin(h, state);
  const testing::TestRequest req{.method = "POST", .path = "/increment"};
  std::vector<std::string> names;
  for (int i = 0; i < kActors; ++i) names.push_back("t/counter/rr" + std::to_string(i));
  if (!g_warmed_1000) {
    for (const std::string& name : names) {
      if (auto r = h->Call(name, req); !r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    }
    g_warmed_1000 = true;
  }
  std::size_t i = 0;
  for (auto _ : state) {
    auto r = h->Call(names[i], req);
    if (!r.ok() || r->status != 200) return state.SkipWithError(r.ok() ? "status not 200" : r.status().ToString().c_str());
    if (++i == names.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["resident_actors"] = static_cast<double>(h->runtime().stats().resident_actors);
  state.SetLabel("harness: round robin over 1000 resident counters; includes loop hand-off per call; arg = spin us");
}

// Throughput rather than one call at a time: each iteration runs 1,000 events at once,
// one to each of the 1,000 resident counters, through ActorRuntime::HandleRequest on the
// harness's loop, and waits for all of them. The loop thread queues events while the
// worker runs earlier ones, so hand-offs overlap: events per second per worker.
Task<void> OneIncrement(ActorRuntime* runtime, ActorId id, int* failures) {
  Request request = PostRequest("/increment");
  Task<EventResult> event = runtime->HandleRequest(std::move(id), std::move(request));
  EventResult result = co_await std::move(event);
  if (!result.ok() || result.response.status != 200) ++*failures;
}

Task<int> IncrementAll(Env* env, ActorRuntime* runtime, const std::vector<ActorId>* ids) {
  int failures = 0;
  std::vector<TaskHandle> handles;
  handles.reserve(ids->size());
  for (const ActorId& id : *ids) handles.push_back(env->Spawn(OneIncrement(runtime, id, &failures), "bench-event"));
  for (const TaskHandle& h : handles) {
    Task<bool> join = h.Join();
    (void)co_await std::move(join);
  }
  co_return failures;
}

// The same with any request: one event per actor, all in flight at once.
Task<void> SendOne(ActorRuntime* runtime, ActorId id, const Request* request, int* failures) {
  Task<EventResult> event = runtime->HandleRequest(std::move(id), *request);
  EventResult result = co_await std::move(event);
  if (!result.ok() || result.response.status != 200) ++*failures;
}

Task<int> SendAll(Env* env, ActorRuntime* runtime, const std::vector<ActorId>* ids, const Request* request) {
  int failures = 0;
  std::vector<TaskHandle> handles;
  handles.reserve(ids->size());
  for (const ActorId& id : *ids) handles.push_back(env->Spawn(SendOne(runtime, id, request, &failures), "bench-event"));
  for (const TaskHandle& h : handles) {
    Task<bool> join = h.Join();
    (void)co_await std::move(join);
  }
  co_return failures;
}

void BM_RuntimeCounter1000Concurrent(benchmark::State& state) {
  constexpr int kActors = 1000;
  testing::Harness* h = TheHarness();
  if (h == nullptr) return state.SkipWithError(g_harness_error.c_str());
  SetHarnessSpin(h, state);
  std::vector<ActorId> ids;
  for (int i = 0; i < kActors; ++i) {
    // Through the harness first: registers the class for the tenant and warms the actor.
    const std::string name = "t/counter/rr" + std::to_string(i);
    if (auto r = h->Call(name, {.method = "POST", .path = "/increment"}); !r.ok()) {
      return state.SkipWithError(r.status().ToString().c_str());
    }
    auto id = ParseActorId(name);
    if (!id.ok()) return state.SkipWithError(id.status().ToString().c_str());
    ids.push_back(*id);
  }
  for (auto _ : state) {
    const int failures = h->env().RunMain(IncrementAll(&h->env(), &h->runtime(), &ids));
    if (failures != 0) return state.SkipWithError("some events failed");
  }
  state.SetItemsProcessed(state.iterations() * kActors);
  state.SetLabel("runtime: 1000 concurrent events (one per resident counter) per iteration, 1 worker; arg = spin us");
}

// ---------------------------------------------------------------------------------------
// Twins: an example's C++ module against its AssemblyScript twin, the same event for both.

// One example's event, and the request that prepares an actor for it.
struct TwinEvent {
  const char* example;
  const char* what;  // the event, for the table
  Request request;
  std::optional<Request> setup;  // sent once to each actor before the timed events
};

const std::vector<TwinEvent>& TwinEvents() {
  static const std::vector<TwinEvent> events = [] {
    Request post_message = PostRequest("/messages");
    post_message.body = "hello, this is a chat message of some length";
    Request read_messages;
    read_messages.path = "/messages";
    read_messages.query = "since=0";
    Request seed_twenty = post_message;  // chat-read actors hold 20 messages (see TwinSetUp)
    Request config = PostRequest("/config");
    // With the clock a millisecond later each event (RawActor) or iteration (BM_TwinRuntime),
    // 1,000,000 tokens a second refill 1,000 a millisecond: takes never run out.
    config.query = "capacity=1000000&refill_per_sec=1000000";
    return std::vector<TwinEvent>{
        {"counter", "POST /increment", PostRequest("/increment"), std::nullopt},
        {"chat", "POST /messages (44 bytes)", post_message, std::nullopt},
        {"chat", "GET /messages, 20 messages", read_messages, seed_twenty},
        {"ratelimit", "POST /take", PostRequest("/take"), config},
    };
  }();
  return events;
}

// How many times TwinSetUp sends the setup request: chat reads list 20 messages.
int SetupRepeats(const TwinEvent& e) { return e.request.method == "GET" ? 20 : 1; }

struct TwinFigures {
  double module_bytes = 0;
  double events_per_s = 0;       // runtime, 1 worker, 1000 actors, 1000 events in flight
  double raw_event_ns = 0;       // raw event on one instance
  double linear_kib = 0;         // linear memory of one instance after its events
  double rss_kib_per_instance = 0;
};
// (event index, build) -> figures; build is "C++" or "AssemblyScript".
std::map<std::pair<std::size_t, std::string>, TwinFigures> g_twins;

std::string TwinModule(const TwinEvent& e, bool assemblyscript) {
  return assemblyscript ? std::string("as_") + e.example : std::string(e.example);
}
const char* BuildName(bool assemblyscript) { return assemblyscript ? "AssemblyScript" : "C++"; }

void BM_TwinRuntime(benchmark::State& state, std::size_t event, bool assemblyscript) {
  constexpr int kActors = 1000;
  const TwinEvent& e = TwinEvents()[event];
  const std::string cls = TwinModule(e, assemblyscript);
  testing::Harness* h = TheHarness();
  if (h == nullptr) return state.SkipWithError(g_harness_error.c_str());
  // No spinning: the twins' figures stay comparable with their earlier runs.
  h->env().set_idle_spin(Duration::zero());
  h->runtime().SetSpin(Duration::zero());
  const std::string wasm = ActorWasm(cls);
  if (testing::ReadFileBytes(wasm).empty()) return state.SkipWithError(("not built: " + wasm).c_str());
  std::vector<ActorId> ids;
  for (int i = 0; i < kActors; ++i) {
    const std::string name = "t/" + cls + "/e" + std::to_string(event) + "-" + std::to_string(i);
    auto call = [&](const Request& r) {
      return h->Call(name, {.method = r.method, .path = r.path, .query = r.query, .body = r.body});
    };
    for (int k = 0; e.setup && k < SetupRepeats(e); ++k) {
      if (auto r = call(*e.setup); !r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    }
    if (auto r = call(e.request); !r.ok() || r->status != 200) {
      return state.SkipWithError(r.ok() ? "status not 200" : r.status().ToString().c_str());
    }
    auto id = ParseActorId(name);
    if (!id.ok()) return state.SkipWithError(id.status().ToString().c_str());
    ids.push_back(*id);
  }
  const auto t0 = Clock::now();
  for (auto _ : state) {
    h->AdvanceClock(1);  // ratelimit refills 1,000 tokens a millisecond after its setup
    const int failures = h->env().RunMain(SendAll(&h->env(), &h->runtime(), &ids, &e.request));
    if (failures != 0) return state.SkipWithError("some events failed");
  }
  const double events_per_s = static_cast<double>(state.iterations()) * kActors / (NsSince(t0) / 1e9);
  state.SetItemsProcessed(state.iterations() * kActors);
  state.SetLabel(std::string("twins, runtime: 1000 concurrent ") + e.what + " per iteration, 1 worker, " +
                 BuildName(assemblyscript));
  TwinFigures& f = g_twins[{event, BuildName(assemblyscript)}];
  f.events_per_s = events_per_s;
  f.module_bytes = static_cast<double>(testing::ReadFileBytes(wasm).size());
}

void BM_TwinRawEvent(benchmark::State& state, std::size_t event, bool assemblyscript) {
  const TwinEvent& e = TwinEvents()[event];
  const double ns = RawEvent(state, TwinModule(e, assemblyscript), e.request, e.setup ? &*e.setup : nullptr,
                             SetupRepeats(e));
  state.SetLabel(std::string("twins, raw event: ") + e.what + ", " + BuildName(assemblyscript));
  g_twins[{event, BuildName(assemblyscript)}].raw_event_ns = ns;
}

// The twins' measured instances, kept until the end of the run (destroyed in main, before
// the worker): memory freed by one measurement would be reused by the next and hide its cost.
std::vector<std::vector<RawActor>> g_kept_instances;

// 200 instances of the module on one worker, each after its setup and one event: RSS
// (/proc/self/statm) per instance and linear memory per instance. Run once.
void BM_TwinMemory(benchmark::State& state, std::size_t event, bool assemblyscript) {
  constexpr int kInstances = 200;
  const TwinEvent& e = TwinEvents()[event];
  auto module = CompileActor(TwinModule(e, assemblyscript));
  if (!module.ok()) return state.SkipWithError(module.status().ToString().c_str());
  for (auto _ : state) {
    std::vector<RawActor> actors(kInstances);
    {
      RawActor warm;  // loads the module into the worker: not a per-actor cost
      if (auto s = warm.Instantiate(*module); !s.ok()) return state.SkipWithError(s.ToString().c_str());
    }
    g_rig->worker.PumpMessageLoop();
    const std::uint64_t rss0 = RssBytes();
    for (RawActor& a : actors) {
      if (auto s = a.Instantiate(*module); !s.ok()) return state.SkipWithError(s.ToString().c_str());
      for (int k = 0; e.setup && k < SetupRepeats(e); ++k) {
        if (auto r = a.Event(*e.setup); !r.ok()) return state.SkipWithError(r.status().ToString().c_str());
      }
      if (auto r = a.Event(e.request); !r.ok() || *r != 200) return state.SkipWithError("event failed");
    }
    const std::uint64_t rss1 = RssBytes();
    std::uint64_t linear = 0;
    for (RawActor& a : actors) linear += a.instance->MemoryBytes();
    TwinFigures& f = g_twins[{event, BuildName(assemblyscript)}];
    f.rss_kib_per_instance = (static_cast<double>(rss1) - rss0) / kInstances / 1024;
    f.linear_kib = static_cast<double>(linear) / kInstances / 1024;
    state.counters["rss_KiB_per_instance"] = f.rss_kib_per_instance;
    state.counters["linear_KiB_per_instance"] = f.linear_kib;
    g_kept_instances.push_back(std::move(actors));
  }
  state.SetLabel(std::string("twins, memory: 200 instances after ") + e.what + ", " + BuildName(assemblyscript));
}

// The twins side by side, after every benchmark ran (skipped ones print as "-").
void PrintTwinTable() {
  if (g_twins.empty()) return;
  auto cell = [](double v, const char* fmt) {
    if (v <= 0) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  std::printf("\nTwins: each example's C++ module and its AssemblyScript twin, the same event\n");
  std::printf("(events/s: runtime, 1 worker, 1000 actors with 1000 events in flight; raw: one event\n");
  std::printf("on one instance, no runtime; memory: per instance, 200 instances after the event)\n\n");
  std::printf("| example | event | build | events/s | raw event us | module bytes | linear KiB | RSS KiB |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (std::size_t i = 0; i < TwinEvents().size(); ++i) {
    for (const char* build : {"C++", "AssemblyScript"}) {
      auto it = g_twins.find({i, build});
      if (it == g_twins.end()) continue;
      const TwinFigures& f = it->second;
      std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", TwinEvents()[i].example, TwinEvents()[i].what, build,
                  cell(f.events_per_s, "%.0f").c_str(), cell(f.raw_event_ns / 1e3, "%.2f").c_str(),
                  cell(f.module_bytes, "%.0f").c_str(), cell(f.linear_kib, "%.0f").c_str(),
                  cell(f.rss_kib_per_instance, "%.0f").c_str());
    }
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// Compile time per class (actor::CompileActorModule: our module checks plus V8's compile).
//
// V8 keeps a process-wide cache of compiled modules keyed by their bytes, alive while a
// module object for them is: compiling the same bytes again can be a cache hit. The "fresh"
// variant appends a custom section with a new number each time (bytes V8 has not seen,
// same code), which is what deploying a new class costs; "same_bytes" shows the other case.

std::vector<std::uint8_t> WithUniqueCustomSection(const std::vector<std::uint8_t>& wasm, std::uint64_t n) {
  std::vector<std::uint8_t> out = wasm;
  const char name[] = "bench";
  out.push_back(0x00);                   // custom section
  out.push_back(1 + 5 + 8);              // size (one-byte LEB128)
  out.push_back(5);                      // name length
  out.insert(out.end(), name, name + 5);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  return out;
}

void Compile(benchmark::State& state, const std::string& actor, bool fresh) {
  const auto wasm = testing::ReadFileBytes(ActorWasm(actor));
  if (wasm.empty()) return state.SkipWithError(("cannot read " + ActorWasm(actor)).c_str());
  static std::uint64_t serial = 0;
  std::vector<std::uint8_t> bytes = wasm;
  for (auto _ : state) {
    if (fresh) {
      state.PauseTiming();
      bytes = WithUniqueCustomSection(wasm, ++serial);
      state.ResumeTiming();
    }
    auto module = CompileActorModule(g_rig->engine, bytes, ActorLimits{});
    if (!module.ok()) return state.SkipWithError(module.status().ToString().c_str());
    benchmark::DoNotOptimize(module);
  }
  state.counters["module_bytes"] = static_cast<double>(wasm.size());
  state.SetLabel(fresh ? "CompileActorModule, bytes new to V8 each time" : "CompileActorModule, same bytes each time");
}

void BM_CompileFresh(benchmark::State& state, const char* actor) { Compile(state, actor, true); }
void BM_CompileSameBytes(benchmark::State& state, const char* actor) { Compile(state, actor, false); }

}  // namespace
}  // namespace wk::actor

namespace {
using namespace wk::actor;  // NOLINT: registration only

void Register() {
  auto common = [](benchmark::internal::Benchmark* b) {
    b->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
  };
  common(benchmark::RegisterBenchmark("BM_InstanceMemoryCounter", BM_InstanceMemoryCounter)
             ->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond));
  // Memory next, while the heap is fresh.
  for (std::size_t i = 0; i < TwinEvents().size(); ++i) {
    for (bool as : {false, true}) {
      const std::string suffix = std::string("/") + TwinEvents()[i].example + "/" + std::to_string(i) + "/" +
                                 (as ? "as" : "cpp");
      common(benchmark::RegisterBenchmark(("BM_TwinMemory" + suffix).c_str(), BM_TwinMemory, i, as)
                 ->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond));
    }
  }
  common(benchmark::RegisterBenchmark("BM_InstantiateCounter", BM_InstantiateCounter));
  common(benchmark::RegisterBenchmark("BM_ThreadCpuClockRead", BM_ThreadCpuClockRead));
  benchmark::RegisterBenchmark("BM_ExportCallNoop", BM_ExportCallNoop)->UseRealTime()->MeasureProcessCPUTime();
  common(benchmark::RegisterBenchmark("BM_HostCall", BM_HostCall));
  common(benchmark::RegisterBenchmark("BM_RawEventAbiProbeCount", BM_RawEventAbiProbeCount));
  common(benchmark::RegisterBenchmark("BM_RawEventCounterIncrement", BM_RawEventCounterIncrement));
  common(benchmark::RegisterBenchmark("BM_RealEnvRunMainEmpty", BM_RealEnvRunMainEmpty));
  // Each at spin 0 and at the node's default window (actors.spin_us = 50).
  for (int spin_us : {0, 50}) {
    common(benchmark::RegisterBenchmark("BM_HarnessCounterIncrement", BM_HarnessCounterIncrement)->Arg(spin_us));
    common(benchmark::RegisterBenchmark("BM_HarnessCounter1000Actors", BM_HarnessCounter1000Actors)->Arg(spin_us));
    common(benchmark::RegisterBenchmark("BM_HarnessAbiProbeCount", BM_HarnessAbiProbeCount)->Arg(spin_us));
    common(benchmark::RegisterBenchmark("BM_RuntimeCounter1000Concurrent", BM_RuntimeCounter1000Concurrent)
               ->Arg(spin_us)->Unit(benchmark::kMillisecond));
  }
  for (std::size_t i = 0; i < TwinEvents().size(); ++i) {
    for (bool as : {false, true}) {
      const std::string suffix = std::string("/") + TwinEvents()[i].example + "/" + std::to_string(i) + "/" +
                                 (as ? "as" : "cpp");
      common(benchmark::RegisterBenchmark(("BM_TwinRawEvent" + suffix).c_str(), BM_TwinRawEvent, i, as));
      common(benchmark::RegisterBenchmark(("BM_TwinRuntime" + suffix).c_str(), BM_TwinRuntime, i, as)
                 ->Unit(benchmark::kMillisecond));
    }
  }
  for (const char* actor : {"counter", "chat"}) {
    common(benchmark::RegisterBenchmark((std::string("BM_CompileFresh/") + actor).c_str(), BM_CompileFresh, actor));
    common(benchmark::RegisterBenchmark((std::string("BM_CompileSameBytes/") + actor).c_str(), BM_CompileSameBytes,
                                        actor));
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Register();
  wk::actor::g_rig = new wk::actor::Rig();
  benchmark::RunSpecifiedBenchmarks();
  wk::actor::PrintTwinTable();
  benchmark::Shutdown();
  wk::actor::g_kept_instances.clear();  // instances before their worker
  wk::actor::g_rig->worker.PumpMessageLoop();
  wk::actor::g_harness.reset();  // its own engine and worker thread
  delete wk::actor::g_rig;       // the worker before the engine (Rig's member order)
  return 0;
}
