// store_bench: conditional put latency and throughput of ObjectStore backends, side by
// side in one run.
//
//   store_bench [--seconds S] [--writers 1,16] [--body-bytes N] [--churn N] [--gets N] URL...
//
// Each writer owns its own keys and loops: create the key with If-None-Match: *, then
// replace it twice with If-Match on the version just written (the node lease's and the
// ownership record's pattern). Every put is timed; the report gives puts per second and
// latency percentiles per (backend, writers), and for sqlite:// the writes per commit
// (group commit across writers). It prints figures; it asserts nothing.
//
// --churn N first creates N objects and deletes them all (64 at a time), as garbage
// collection does to segments, and then measures: on file:// each create and delete is a
// file, and some file systems slow down creating files after many deletes
// (docs/benchmarks.md); on sqlite:// a delete frees a row's pages for reuse.
//
// --gets N then reads one object N times in a row from one task (on s3://, over one reused
// keep-alive connection) and prints the GET latency percentiles.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "env/real_env.h"
#include "store/open_store.h"
#include "store/sqlite/sqlite_store.h"

namespace wk {
namespace {

struct Sample {
  std::vector<double> latencies_ms;
  int failures = 0;
};

Task<void> Writer(Env* env, ObjectStore* store, std::string prefix, int id, MonoTime until,
                  std::string body, Sample* out) {
  CallOptions call{std::chrono::seconds(30)};
  for (int round = 0; env->MonoNow() < until; ++round) {
    std::string key = prefix + "w" + std::to_string(id) + "/k" + std::to_string(round);
    Version version;
    for (int step = 0; step < 3 && env->MonoNow() < until; ++step) {
      Precondition cond = step == 0 ? Precondition::IfNoneMatchAny() : Precondition::IfMatch(version);
      // A per-write suffix keeps every body distinct (S3 ETags are MD5s of the body).
      std::string b = body + std::to_string(round * 3 + step);
      MonoTime start = env->MonoNow();
      auto r = co_await store->Put(key, std::move(b), cond, call);
      double ms = std::chrono::duration<double, std::milli>(env->MonoNow() - start).count();
      if (!r.ok()) {
        ++out->failures;
        break;
      }
      out->latencies_ms.push_back(ms);
      version = *r;
    }
  }
}

Task<Sample> RunCase(RealEnv* env, ObjectStore* store, int writers, double seconds, int body_bytes) {
  std::string prefix = "bench/" + env->RandomHex(6) + "/";
  std::string body(static_cast<std::size_t>(body_bytes), 'b');
  std::vector<Sample> samples(static_cast<std::size_t>(writers));
  MonoTime until = env->MonoNow() + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
  std::vector<TaskHandle> handles;
  for (int i = 0; i < writers; ++i) {
    handles.push_back(env->Spawn(Writer(env, store, prefix, i, until, body, &samples[static_cast<std::size_t>(i)]), "writer"));
  }
  for (auto& h : handles) (void)co_await h.Join();
  Sample all;
  for (auto& s : samples) {
    all.latencies_ms.insert(all.latencies_ms.end(), s.latencies_ms.begin(), s.latencies_ms.end());
    all.failures += s.failures;
  }
  co_return all;
}

// Creates count objects under churn/ and deletes them, 64 writers at a time. Returns the
// seconds it took, or a negative number if a call failed.
Task<double> Churn(RealEnv* env, ObjectStore* store, int count) {
  constexpr int kChurnWriters = 64;
  const MonoTime start = env->MonoNow();
  bool failed = false;
  auto worker = [](ObjectStore* s, int first, int step, int total, bool* bad) -> Task<void> {
    CallOptions call{std::chrono::seconds(30)};
    for (int i = first; i < total && !*bad; i += step) {
      auto put = co_await s->Put("churn/" + std::to_string(i), std::string(256, 'c'),
                                 Precondition::None(), call);
      if (!put.ok()) *bad = true;
    }
    for (int i = first; i < total && !*bad; i += step) {
      auto del = co_await s->Delete("churn/" + std::to_string(i), Precondition::None(), call);
      if (!del.ok()) *bad = true;
    }
  };
  std::vector<TaskHandle> handles;
  for (int w = 0; w < kChurnWriters; ++w) {
    handles.push_back(env->Spawn(worker(store, w, kChurnWriters, count, &failed), "churn"));
  }
  for (auto& h : handles) (void)co_await h.Join();
  if (failed) co_return -1.0;
  co_return std::chrono::duration<double>(env->MonoNow() - start).count();
}

// Writes one object, then reads it count times in a row; returns each GET's milliseconds.
Task<std::vector<double>> SequentialGets(RealEnv* env, ObjectStore* store, int count, int body_bytes) {
  CallOptions call{std::chrono::seconds(30)};
  std::vector<double> ms;
  const std::string key = "bench/" + env->RandomHex(6) + "/get";
  auto put = co_await store->Put(key, std::string(static_cast<std::size_t>(body_bytes), 'g'),
                                 Precondition::None(), call);
  if (!put.ok()) co_return ms;
  for (int i = 0; i < count; ++i) {
    const MonoTime start = env->MonoNow();
    auto got = co_await store->Get(key, call);
    if (!got.ok()) break;
    ms.push_back(std::chrono::duration<double, std::milli>(env->MonoNow() - start).count());
  }
  co_return ms;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

}  // namespace
}  // namespace wk

int main(int argc, char** argv) {
  using namespace wk;
  double seconds = 5;
  int body_bytes = 256;
  int churn = 0;
  int gets = 0;
  std::vector<int> writer_counts = {1, 16};
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--body-bytes" && i + 1 < argc) body_bytes = std::stoi(argv[++i]);
    else if (a == "--churn" && i + 1 < argc) churn = std::stoi(argv[++i]);
    else if (a == "--gets" && i + 1 < argc) gets = std::stoi(argv[++i]);
    else if (a == "--writers" && i + 1 < argc) {
      writer_counts.clear();
      std::string list = argv[++i];
      for (std::size_t pos = 0; pos <= list.size();) {
        std::size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        writer_counts.push_back(std::stoi(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (a.starts_with("--")) {
      std::fprintf(stderr, "usage: store_bench [--seconds S] [--writers 1,16] [--body-bytes N] [--churn N] [--gets N] URL...\n");
      return 2;
    } else {
      urls.push_back(a);
    }
  }
  if (urls.empty()) urls.push_back("mem://");
  std::printf("store_bench: conditional puts (1 create-only + 2 If-Match per key), %d-byte bodies, %.0f s per case\n",
              body_bytes, seconds);
  if (churn > 0) std::printf("each case after creating and deleting %d objects (--churn)\n", churn);
  std::printf("%-48s %8s %9s %10s %9s %9s %9s %6s %12s\n", "backend", "writers", "puts", "puts/s", "p50 ms",
              "p99 ms", "max ms", "fail", "puts/commit");
  for (const auto& url : urls) {
    for (int writers : writer_counts) {
      RealEnv env;
      auto store = OpenStore(env, url);
      if (!store.ok()) {
        std::fprintf(stderr, "%s: %s\n", url.c_str(), store.status().ToString().c_str());
        return 1;
      }
      if (churn > 0) {
        const double churn_seconds = env.RunMain(Churn(&env, store->get(), churn));
        if (churn_seconds < 0) {
          std::fprintf(stderr, "%s: a churn write failed\n", url.c_str());
          return 1;
        }
        std::printf("  churn of %d creates and deletes: %.2f s\n", churn, churn_seconds);
      }
      const auto* sqlite = dynamic_cast<const SqliteStore*>(store->get());
      const std::uint64_t commits_before = sqlite ? sqlite->stats().commits.load() : 0;
      const std::uint64_t writes_before = sqlite ? sqlite->stats().writes_applied.load() : 0;
      Sample s = env.RunMain(RunCase(&env, store->get(), writers, seconds, body_bytes));
      std::string per_commit = "-";
      if (sqlite != nullptr && sqlite->stats().commits.load() > commits_before) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.1f",
                      static_cast<double>(sqlite->stats().writes_applied.load() - writes_before) /
                          static_cast<double>(sqlite->stats().commits.load() - commits_before));
        per_commit = buf;
      }
      double rate = static_cast<double>(s.latencies_ms.size()) / seconds;
      double p50 = Percentile(s.latencies_ms, 0.50), p99 = Percentile(s.latencies_ms, 0.99);
      double mx = s.latencies_ms.empty() ? 0 : s.latencies_ms.back();
      std::string shown = (*store)->Describe();
      if (shown.size() > 48) shown = "..." + shown.substr(shown.size() - 45);
      std::printf("%-48s %8d %9zu %10.0f %9.2f %9.2f %9.2f %6d %12s\n", shown.c_str(), writers,
                  s.latencies_ms.size(), rate, p50, p99, mx, s.failures, per_commit.c_str());
      std::fflush(stdout);
    }
    if (gets > 0) {
      RealEnv env;
      auto store = OpenStore(env, url);
      if (!store.ok()) return 1;
      std::vector<double> ms = env.RunMain(SequentialGets(&env, store->get(), gets, body_bytes));
      const double p50 = Percentile(ms, 0.50), p99 = Percentile(ms, 0.99);
      std::printf("%-48s %zu sequential GETs of one %d-byte object: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                  (*store)->Describe().substr(0, 48).c_str(), ms.size(), body_bytes, p50, p99,
                  ms.empty() ? 0.0 : ms.back());
    }
  }
  return 0;
}
