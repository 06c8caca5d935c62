// replica_bench: durable writes through the replica, side by side on every
// backend given, in one run.
//
//   replica_bench [--seconds S] [--concurrency 1,16,64] [--actors 1000] [--restores N] URL...
//
// Uses replica::Replica directly on a RealEnv, with a hold that stays valid: ownership
// (node lease, ownership records) is not measured here. Per backend it prints:
//   - durable writes per second and latency (Commit -> WhenReleasable Ok) for one hot actor
//     and for --actors actors, at each concurrency (that many writes awaiting their
//     acknowledgement at any time; each client commits its next write once the last is
//     acknowledged; with many actors, clients go round-robin over them);
//   - PUTs per acknowledged write (every PUT the case sent — segments, snapshots — over
//     the writes acknowledged, counted by a wrapper around the store; fences of the
//     replicas' opening are not counted): the group-commit ratio;
//   - restore time of one actor whose log is 1 snapshot + 50 segments (the fence read
//     first, then the snapshot and the segments), with parallelism 16 and with 1 read at a
//     time, alternating, median and worst of --restores runs.
// Each write is one batch putting a 100-byte value under one of 1,000 keys. It prints
// figures and asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "env/real_env.h"
#include "replica/replica.h"
#include "replica/restore.h"
#include "store/open_store.h"
#include "store/store_wrapper.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using replica::Replica;
using replica::ReplicaOptions;

// Counts the requests that reach the bucket.
class CountingStore final : public StoreWrapper {
 public:
  explicit CountingStore(ObjectStore& inner) : StoreWrapper(inner) {}
  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    ++gets;
    return StoreWrapper::Get(std::move(key), options);
  }
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override {
    ++puts;
    return StoreWrapper::Put(std::move(key), std::move(body), std::move(condition), options);
  }
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override {
    ++deletes;
    return StoreWrapper::Delete(std::move(key), std::move(condition), options);
  }
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override {
    ++lists;
    return StoreWrapper::List(std::move(options), call);
  }

  std::uint64_t puts = 0, gets = 0, lists = 0, deletes = 0;
};

struct Row {
  std::string backend;
  std::string what;
  int concurrency = 0;
  std::size_t ops = 0;
  double per_second = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  std::string puts_per_write = "-";
  std::string note;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

double Ms(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Bench {
  RealEnv* env;
  CountingStore* store;
  std::string run;  // a random class name: runs never see each other's objects
};

Task<Result<std::unique_ptr<Replica>>> OpenOne(Bench* b, ActorId actor, ReplicaOptions options) {
  RealEnv* env = b->env;
  Replica::Deps deps{*env, *b->store, [env](std::function<void()> fn) { env->Post(std::move(fn)); }, nullptr, {}};
  Replica::Hold hold{Generation{1}, [] { return true; }};
  co_return co_await Replica::Open(std::move(deps), std::move(actor), std::move(hold), options);
}

// Opens count actors, at most 32 at a time, and waits until every fence is acknowledged.
struct Opening {
  std::vector<std::unique_ptr<Replica>> replicas;
  std::size_t next = 0;
  Status error;
};

Task<void> OpenWorker(Bench* b, std::string prefix, ReplicaOptions options, std::shared_ptr<Opening> o) {
  while (o->next < o->replicas.size() && o->error.ok()) {
    const std::size_t i = o->next++;
    ActorId actor{"bench", b->run, prefix + std::to_string(i)};
    auto r = co_await OpenOne(b, std::move(actor), options);
    if (!r.ok()) {
      o->error = r.status();
      co_return;
    }
    o->replicas[i] = std::move(r).value();
  }
}

Task<Result<std::vector<std::unique_ptr<Replica>>>> OpenMany(Bench* b, std::string prefix, std::size_t count,
                                                             ReplicaOptions options) {
  auto o = std::make_shared<Opening>();
  o->replicas.resize(count);
  std::vector<TaskHandle> workers;
  for (int i = 0; i < 32 && static_cast<std::size_t>(i) < count; ++i) {
    workers.push_back(b->env->Spawn(OpenWorker(b, prefix, options, o), "open"));
  }
  for (auto& w : workers) (void)co_await w.Join();
  if (!o->error.ok()) co_return o->error;
  const MonoTime deadline = b->env->MonoNow() + std::chrono::seconds(60);
  for (;;) {
    bool fenced = true;
    for (const auto& r : o->replicas) fenced = fenced && r->stats().segments >= 1;
    if (fenced) break;
    if (b->env->MonoNow() > deadline) co_return Fatal("fences not acknowledged within 60 s");
    if (!co_await b->env->SleepFor(milliseconds(5))) co_return Cancelled("cancelled");
  }
  co_return std::move(o->replicas);
}

struct Load {
  std::vector<Replica*> actors;
  MonoTime until{};
  std::size_t next_actor = 0;
  std::vector<double> latencies_ms;
  std::size_t failures = 0;
  std::uint64_t key = 0;
  std::string value = std::string(100, 'v');
};

// One client: commit a write, wait for its acknowledgement, again, until the deadline.
Task<void> Client(RealEnv* env, std::shared_ptr<Load> load) {
  while (env->MonoNow() < load->until) {
    Replica* r = load->actors[load->next_actor++ % load->actors.size()];
    actor::Batch batch;
    batch.mutations.push_back(
        actor::Mutation{actor::Mutation::Kind::kPut, "k" + std::to_string(load->key++ % 1000), load->value});
    const MonoTime start = env->MonoNow();
    const std::uint64_t seq = r->Commit(std::move(batch));
    Latch<Status> done(*env, [] { return Cancelled("cancelled"); });
    r->WhenReleasable(seq, [done](Status s) { done.Set(std::move(s)); });
    const Status s = co_await done.Wait();
    if (!s.ok()) {
      ++load->failures;
      if (s.code() == Code::kCancelled) co_return;
      continue;
    }
    load->latencies_ms.push_back(Ms(env->MonoNow() - start));
  }
}

Task<Row> WriteCase(Bench* b, std::string backend, std::size_t actors, int concurrency, double seconds) {
  Row row;
  row.backend = backend;
  row.concurrency = concurrency;
  row.what = actors == 1 ? "durable writes, 1 hot actor" : "durable writes, " + std::to_string(actors) + " actors";
  const std::string prefix = "w" + std::to_string(actors) + "c" + std::to_string(concurrency) + "-";
  auto opened = co_await OpenMany(b, prefix, actors, ReplicaOptions{});
  if (!opened.ok()) {
    row.note = "open failed: " + opened.status().ToString();
    co_return row;
  }
  std::vector<std::unique_ptr<Replica>> replicas = std::move(opened).value();
  auto load = std::make_shared<Load>();
  for (auto& r : replicas) load->actors.push_back(r.get());
  const std::uint64_t puts_before = b->store->puts;
  const MonoTime start = b->env->MonoNow();
  load->until = start + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
  std::vector<TaskHandle> clients;
  for (int i = 0; i < concurrency; ++i) clients.push_back(b->env->Spawn(Client(b->env, load), "client"));
  for (auto& c : clients) (void)co_await c.Join();
  const double elapsed = std::chrono::duration<double>(b->env->MonoNow() - start).count();
  const std::uint64_t puts = b->store->puts - puts_before;
  for (auto& r : replicas) (void)co_await r->Close(std::chrono::seconds(30));
  replicas.clear();
  row.ops = load->latencies_ms.size();
  row.per_second = static_cast<double>(row.ops) / elapsed;
  row.p50_ms = Percentile(load->latencies_ms, 0.50);
  row.p99_ms = Percentile(load->latencies_ms, 0.99);
  row.max_ms = Percentile(load->latencies_ms, 1.0);
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.3f", row.ops ? static_cast<double>(puts) / static_cast<double>(row.ops) : 0.0);
  row.puts_per_write = ratio;
  if (load->failures) row.note = std::to_string(load->failures) + " failed";
  co_return row;
}

// Builds an actor whose log is a snapshot at 1-60 and the segments 1-61 .. 1-110 (the
// covered ones collected), then restores it `reps` times with parallelism 16 and 1,
// alternating.
Task<std::vector<Row>> RestoreCase(Bench* b, std::string backend, int reps) {
  std::vector<Row> rows(2);
  rows[0].backend = rows[1].backend = backend;
  rows[0].what = rows[1].what = "restore, 1 snapshot + 50 segments";
  rows[0].concurrency = 16;
  rows[1].concurrency = 1;
  ActorId actor{"bench", b->run, "restore"};
  ReplicaOptions options;
  options.snapshot_every_segments = 60;
  options.gc_delete_interval = milliseconds(1);
  {
    auto opened = co_await OpenOne(b, actor, options);
    if (!opened.ok()) {
      rows[0].note = rows[1].note = "open failed: " + opened.status().ToString();
      co_return rows;
    }
    std::unique_ptr<Replica> r = std::move(opened).value();
    for (int i = 1; i <= 110; ++i) {
      actor::Batch batch;
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "k" + std::to_string(i), std::string(1024, 'r')});
      const std::uint64_t seq = r->Commit(std::move(batch));
      Latch<Status> done(*b->env, [] { return Cancelled("cancelled"); });
      r->WhenReleasable(seq, [done](Status s) { done.Set(std::move(s)); });
      const Status s = co_await done.Wait();
      if (!s.ok()) {
        rows[0].note = rows[1].note = "write failed: " + s.ToString();
        co_return rows;
      }
    }
    // The snapshot, then garbage collection of the 60 segments it covers (bounded wait).
    const MonoTime deadline = b->env->MonoNow() + std::chrono::seconds(30);
    while ((r->stats().snapshots < 1 || r->stats().gc_deleted < 60) && b->env->MonoNow() < deadline) {
      if (!co_await b->env->SleepFor(milliseconds(10))) co_return rows;
    }
    (void)co_await r->Close(std::chrono::seconds(30));
  }
  std::vector<double> ms[2];
  int reads = 0;
  for (int rep = 0; rep < reps; ++rep) {
    for (int k = 0; k < 2; ++k) {
      replica::RestoreOptions ro;
      ro.parallelism = rows[static_cast<std::size_t>(k)].concurrency;
      auto restored = co_await replica::Restore(*b->env, *b->store, actor, Generation{2}, ro);
      if (!restored.ok()) {
        rows[static_cast<std::size_t>(k)].note = restored.status().ToString();
        continue;
      }
      if (restored->state.entries().size() != 110) {
        rows[static_cast<std::size_t>(k)].note = "restored " + std::to_string(restored->state.entries().size()) + " keys, not 110";
      }
      reads = restored->reads;
      ms[k].push_back(Ms(restored->took));
    }
  }
  for (int k = 0; k < 2; ++k) {
    Row& row = rows[static_cast<std::size_t>(k)];
    row.ops = ms[k].size();
    row.p50_ms = Percentile(ms[k], 0.5);
    row.p99_ms = Percentile(ms[k], 0.99);
    row.max_ms = Percentile(ms[k], 1.0);
    row.per_second = row.p50_ms > 0 ? 1000.0 / row.p50_ms : 0;
    if (row.note.empty()) row.note = std::to_string(reads) + " reads";
  }
  co_return rows;
}

struct Plan {
  std::string url;
  double seconds = 3;
  std::vector<int> concurrency = {1, 16, 64};
  std::size_t actors = 1000;
  int restores = 5;
};

Task<std::vector<Row>> RunBackend(RealEnv* env, ObjectStore* inner, Plan plan) {
  CountingStore store(*inner);
  Bench b{env, &store, "r" + env->RandomHex(5)};
  std::string backend = inner->Describe();
  if (backend.size() > 30) backend = backend.substr(0, 27) + "...";
  std::vector<Row> rows;
  for (std::size_t actors : {std::size_t{1}, plan.actors}) {
    for (int c : plan.concurrency) {
      Row row = co_await WriteCase(&b, backend, actors, c, plan.seconds);
      rows.push_back(std::move(row));
    }
  }
  std::vector<Row> restore = co_await RestoreCase(&b, backend, plan.restores);
  for (auto& r : restore) rows.push_back(std::move(r));
  co_return rows;
}

}  // namespace
}  // namespace wk

int main(int argc, char** argv) {
  using namespace wk;
  Plan base;
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      base.seconds = std::stod(argv[++i]);
    } else if (a == "--actors" && i + 1 < argc) {
      base.actors = static_cast<std::size_t>(std::stoul(argv[++i]));
    } else if (a == "--restores" && i + 1 < argc) {
      base.restores = std::stoi(argv[++i]);
    } else if (a == "--concurrency" && i + 1 < argc) {
      base.concurrency.clear();
      std::string list = argv[++i];
      for (std::size_t pos = 0; pos <= list.size();) {
        std::size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        base.concurrency.push_back(std::stoi(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (a.starts_with("--")) {
      std::fprintf(stderr, "usage: replica_bench [--seconds S] [--concurrency 1,16,64] [--actors N] [--restores N] URL...\n");
      return 2;
    } else {
      urls.push_back(a);
    }
  }
  if (urls.empty()) urls.push_back("mem://");
  std::printf("replica_bench: Replica directly, a hold that is always valid (ownership is not measured here);\n"
              "  writes: one batch = one 100-byte put, %.0f s per case, latency = Commit -> WhenReleasable Ok;\n"
              "  PUTs/write: segment and snapshot PUTs over acknowledged writes (group commit);\n"
              "  restore: fence, then snapshot + 50 segments, median (p50) and worst of %d, parallelism in 'conc'\n",
              base.seconds, base.restores);
  std::printf("%-30s %-34s %5s %8s %9s %9s %9s %9s %10s  %s\n", "backend", "case", "conc", "ops", "ops/s", "p50 ms",
              "p99 ms", "max ms", "PUTs/write", "note");
  for (const auto& url : urls) {
    RealEnv env;
    auto store = OpenStore(env, url);
    if (!store.ok()) {
      std::fprintf(stderr, "%s: %s\n", url.c_str(), store.status().ToString().c_str());
      return 1;
    }
    Plan plan = base;
    plan.url = url;
    std::vector<Row> rows = env.RunMain(RunBackend(&env, store->get(), plan), std::chrono::seconds(30));
    for (const Row& r : rows) {
      std::printf("%-30s %-34s %5d %8zu %9.0f %9.2f %9.2f %9.2f %10s  %s\n", r.backend.c_str(), r.what.c_str(),
                  r.concurrency, r.ops, r.per_second, r.p50_ms, r.p99_ms, r.max_ms, r.puts_per_write.c_str(),
                  r.note.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}
