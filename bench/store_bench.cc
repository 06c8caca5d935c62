// store_bench: conditional put latency and throughput of ObjectStore backends, side by
// side in one run.
//
//   store_bench [--seconds S] [--writers 1,16] [--body-bytes N] URL...
//
// Each writer owns its own keys and loops: create the key with If-None-Match: *, then
// replace it twice with If-Match on the version just written (the node lease's and the
// ownership record's pattern). Every put is timed; the report gives puts per second and
// latency percentiles per (backend, writers). It prints figures; it asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "env/real_env.h"
#include "store/open_store.h"

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
  std::vector<int> writer_counts = {1, 16};
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--body-bytes" && i + 1 < argc) body_bytes = std::stoi(argv[++i]);
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
      std::fprintf(stderr, "usage: store_bench [--seconds S] [--writers 1,16] [--body-bytes N] URL...\n");
      return 2;
    } else {
      urls.push_back(a);
    }
  }
  if (urls.empty()) urls.push_back("mem://");
  std::printf("store_bench: conditional puts (1 create-only + 2 If-Match per key), %d-byte bodies, %.0f s per case\n",
              body_bytes, seconds);
  std::printf("%-48s %8s %9s %10s %9s %9s %9s %6s\n", "backend", "writers", "puts", "puts/s", "p50 ms",
              "p99 ms", "max ms", "fail");
  for (const auto& url : urls) {
    for (int writers : writer_counts) {
      RealEnv env;
      auto store = OpenStore(env, url);
      if (!store.ok()) {
        std::fprintf(stderr, "%s: %s\n", url.c_str(), store.status().ToString().c_str());
        return 1;
      }
      Sample s = env.RunMain(RunCase(&env, store->get(), writers, seconds, body_bytes));
      double rate = static_cast<double>(s.latencies_ms.size()) / seconds;
      double p50 = Percentile(s.latencies_ms, 0.50), p99 = Percentile(s.latencies_ms, 0.99);
      double mx = s.latencies_ms.empty() ? 0 : s.latencies_ms.back();
      std::string shown = (*store)->Describe();
      if (shown.size() > 48) shown = "..." + shown.substr(shown.size() - 45);
      std::printf("%-48s %8d %9zu %10.0f %9.2f %9.2f %9.2f %6d\n", shown.c_str(), writers,
                  s.latencies_ms.size(), rate, p50, p99, mx, s.failures);
      std::fflush(stdout);
    }
  }
  return 0;
}
