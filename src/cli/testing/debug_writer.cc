#include "cli/testing/debug_writer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>

#include "base/log.h"
#include "store/store_wrapper.h"

namespace wk::cli {
namespace {

using std::chrono::milliseconds;

// How often the writer looks at its pace and its replica.
constexpr Duration kTick = milliseconds(10);
// Between acquisition attempts, and after a failed hold.
constexpr Duration kRetryPause = std::chrono::seconds(1);
// After the hold ended with nothing failed yet: how long the upload in flight may take to
// come back (Late) before the writer cuts the replica itself (upload_timeout + this).
constexpr Duration kCutMargin = std::chrono::seconds(1);

// Forwards to the node's store and counts the reads in flight, so the restore line can
// show that the restore's reads overlapped.
class ReadGauge final : public StoreWrapper {
 public:
  explicit ReadGauge(ObjectStore& inner) : StoreWrapper(inner) {}
  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
    auto got = co_await inner().Get(std::move(key), options);
    --in_flight_;
    co_return got;
  }

  int TakeMaxInFlight() { return std::exchange(max_in_flight_, in_flight_); }

 private:
  int in_flight_ = 0;
  int max_in_flight_ = 0;
};

struct Writer {
  RealEnv* env;
  ClusterNode* node;
  replica::ReplicaTotals* totals;
  NodeId node_id;
  std::shared_ptr<const DebugWriterOptions> options;
  ActorId actor;
  std::unique_ptr<ReadGauge> store;
};

// Shared with the WhenReleasable callbacks, which may run after the hold's coroutine ended.
struct InFlight {
  int count = 0;
  std::uint64_t acked = 0;
};

std::vector<std::string> SplitIds(std::string_view log) {
  std::vector<std::string> ids;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t comma = log.find(',', pos);
    if (comma == std::string_view::npos) comma = log.size();
    ids.emplace_back(log.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return ids;
}

void LogRestore(const replica::Replica& r, Generation generation, int max_reads_in_flight) {
  const std::string log = r.Get("log").value_or("");
  const std::vector<std::string> ids = SplitIds(log);
  std::set<std::string> e_ids;
  actor::ListQuery query;
  query.start = "e/";
  query.prefix = true;
  r.List(query, [&](std::string_view key, std::string_view) {
    e_ids.emplace(key.substr(2));
    return true;
  });
  const std::set<std::string> log_ids(ids.begin(), ids.end());
  const replica::Restored& restored = r.restored();
  const double took_ms = std::chrono::duration<double, std::milli>(restored.took).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", took_ms);
  WK_LOG_INFO("debug writer restored",
              {{"actor", r.actor().ToString()},
               {"generation", std::to_string(generation.value)},
               {"log_ids", std::to_string(ids.size())},
               {"log_unique", log_ids.size() == ids.size() ? "true" : "false"},
               {"e_keys", std::to_string(e_ids.size())},
               {"e_match", e_ids == log_ids ? "true" : "false"},
               {"reads", std::to_string(restored.reads)},
               {"read_retries", std::to_string(restored.read_retries)},
               {"max_reads_in_flight", std::to_string(max_reads_in_flight)},
               {"base", restored.chain.base ? restored.chain.base->ToString() : "none"},
               {"run", std::to_string(restored.chain.run.size())},
               {"took_ms", took},
               {"log", log.empty() ? "-" : log}});
}

// One hold: acquire, open, write until the replica fails or the hold ends, clean up.
// The caller's frame keeps w alive. False once the process is stopping (cancelled).
Task<bool> WriteOneHold(Writer* w) {
  if (!w->node->lease().IsValid()) co_return true;
  AcquireResult acquired = co_await w->node->owners().Acquire(w->actor);
  if (acquired.kind != AcquireResult::Kind::kAcquired) co_return true;
  const HoldView hold = acquired.hold;
  const Generation generation = hold.generation();
  const DebugWriterOptions& o = *w->options;

  RealEnv* env = w->env;
  replica::Replica::Deps deps{*env, *w->store, [env](std::function<void()> fn) { env->Post(std::move(fn)); },
                              w->totals, w->node->broken_models()};
  replica::Replica::Hold replica_hold{hold.generation(), [hold] { return hold.IsValid(); }};
  (void)w->store->TakeMaxInFlight();
  auto opened = co_await replica::Replica::Open(std::move(deps), w->actor, std::move(replica_hold), o.replica);
  if (!opened.ok()) {
    WK_LOG_WARN("debug writer: restore failed",
                {{"actor", w->actor.ToString()}, {"generation", std::to_string(generation.value)}, {"error", opened.status().ToString()}});
    if (hold.IsValid()) (void)co_await w->node->owners().Release(w->actor);
    co_return true;
  }
  std::unique_ptr<replica::Replica> r = std::move(opened).value();
  LogRestore(*r, generation, w->store->TakeMaxInFlight());

  auto in_flight = std::make_shared<InFlight>();
  const std::string id_prefix = w->node_id.str() + "." + std::to_string(generation.value) + ".";
  std::uint64_t n = 0;
  double credit = 0;
  bool idle_logged = false;
  MonoTime last = env->MonoNow();
  while (r->failure().ok() && hold.IsValid()) {
    if (!co_await env->SleepFor(kTick)) co_return false;  // the process is stopping
    const MonoTime now = env->MonoNow();
    credit = std::min(credit + o.writes_per_second * std::chrono::duration<double>(now - last).count(),
                      static_cast<double>(o.inflight));
    last = now;
    while (credit >= 1 && in_flight->count < o.inflight && (o.writes == 0 || n < o.writes) && r->failure().ok() &&
           hold.IsValid()) {
      credit -= 1;
      const std::string id = id_prefix + std::to_string(++n);
      std::string log = r->Get("log").value_or("");
      if (!log.empty()) log += ',';
      log += id;
      actor::Batch batch;
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", std::move(log)});
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "e/" + id, std::to_string(n)});
      const std::uint64_t seq = r->Commit(std::move(batch));
      ++in_flight->count;
      r->WhenReleasable(seq, [in_flight, id](Status s) {
        --in_flight->count;
        if (!s.ok()) return;
        ++in_flight->acked;
        std::printf("acked %s\n", id.c_str());
        std::fflush(stdout);
      });
    }
    if (o.writes > 0 && n >= o.writes && in_flight->count == 0 && !idle_logged) {
      idle_logged = true;
      const replica::ReplicaStats s = r->stats();
      WK_LOG_INFO("debug writer idle", {{"actor", w->actor.ToString()}, {"generation", std::to_string(generation.value)},
                                        {"writes", std::to_string(n)}, {"segments", std::to_string(s.segments)},
                                        {"batches", std::to_string(s.batches)}, {"snapshots", std::to_string(s.snapshots)}});
    }
  }

  // The replica failed, or the hold ended first: then the upload in flight comes back
  // (Late, or failed) and fails the replica; with nothing in flight to tell it, cut it.
  const MonoTime cut_at = env->MonoNow() + o.replica.upload_timeout + kCutMargin;
  while (r->failure().ok() && in_flight->count > 0 && env->MonoNow() < cut_at) {
    if (!co_await env->SleepFor(kTick)) co_return false;
  }
  if (r->failure().ok()) r->Cut("debug writer: the hold is no longer valid");
  WK_LOG_WARN("debug writer: replica failed",
              {{"actor", w->actor.ToString()}, {"generation", std::to_string(generation.value)},
               {"late", r->stats().late ? "true" : "false"}, {"writes", std::to_string(n)},
               {"acked", std::to_string(in_flight->acked)}, {"error", r->failure().ToString()}});
  r.reset();
  if (hold.IsValid()) (void)co_await w->node->owners().Release(w->actor);
  co_return true;
}

void ScheduleHold(std::shared_ptr<Writer> w);

Task<void> HoldOnce(std::shared_ptr<Writer> w) {
  const bool again = co_await WriteOneHold(w.get());
  if (again) ScheduleHold(std::move(w));
}

// One hold after another, kRetryPause apart, driven by a timer rather than a looping
// coroutine: GCC 12 built a `while (co_await SleepFor(..)) co_await ...;` coroutine here
// with a broken frame (SIGILL at its first resume; docs/DEVELOPING.md).
void ScheduleHold(std::shared_ptr<Writer> w) {
  RealEnv* env = w->env;
  env->StartTimer(env->MonoNow() + kRetryPause, [w] { w->env->Spawn(HoldOnce(w), "debug writer"); });
}

Result<std::uint64_t> ParseCount(std::string_view name, std::string_view value, std::uint64_t min, std::uint64_t max) {
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || p != value.data() + value.size() || n < min || n > max) {
    return InvalidArgument(std::string(name) + " must be an integer in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "] (got '" + std::string(value) + "')");
  }
  return n;
}

}  // namespace

Result<DebugWriterOptions> ParseDebugWriter(std::string_view actors, std::string_view options,
                                            const replica::ReplicaOptions& storage) {
  DebugWriterOptions out;
  out.replica = storage;
  for (const std::string& item : SplitIds(actors)) {
    auto id = ParseActorId(item);
    if (!id.ok()) return InvalidArgument("WASMKEEP_DEBUG_WRITER: " + id.status().message());
    out.actors.push_back(*id);
  }
  if (out.actors.empty()) return InvalidArgument("WASMKEEP_DEBUG_WRITER names no actor");
  for (const std::string& item : SplitIds(options)) {
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgument("WASMKEEP_DEBUG_WRITER_OPTIONS: '" + item + "' needs =VALUE");
    const std::string_view name = std::string_view(item).substr(0, eq);
    const std::string_view value = std::string_view(item).substr(eq + 1);
    Result<std::uint64_t> n = InvalidArgument("");
    if (name == "rate") {
      n = ParseCount(name, value, 1, 100'000);
      if (n.ok()) out.writes_per_second = static_cast<double>(*n);
    } else if (name == "inflight") {
      n = ParseCount(name, value, 1, 10'000);
      if (n.ok()) out.inflight = static_cast<int>(*n);
    } else if (name == "writes") {
      n = ParseCount(name, value, 0, 1'000'000);
      if (n.ok()) out.writes = *n;
    } else if (name == "snapshot_every") {
      n = ParseCount(name, value, 1, 1'000'000);
      if (n.ok()) out.replica.snapshot_every_segments = static_cast<std::uint32_t>(*n);
    } else if (name == "parallelism") {
      n = ParseCount(name, value, 1, 256);
      if (n.ok()) out.replica.restore.parallelism = static_cast<int>(*n);
    } else {
      return InvalidArgument("WASMKEEP_DEBUG_WRITER_OPTIONS: unknown knob '" + std::string(name) +
                             "' (known: rate, inflight, writes, snapshot_every, parallelism)");
    }
    if (!n.ok()) return InvalidArgument("WASMKEEP_DEBUG_WRITER_OPTIONS: " + n.status().message());
  }
  if (Status s = replica::ValidateReplicaOptions(out.replica); !s.ok()) {
    return InvalidArgument("WASMKEEP_DEBUG_WRITER_OPTIONS: " + s.message());
  }
  return out;
}

void StartDebugWriters(RealEnv* env, ClusterNode* node, ObjectStore* store, replica::ReplicaTotals* totals,
                       NodeId node_id, std::shared_ptr<const DebugWriterOptions> options) {
  for (const ActorId& actor : options->actors) {
    auto w = std::make_shared<Writer>(Writer{env, node, totals, node_id, options, actor, std::make_unique<ReadGauge>(*store)});
    ScheduleHold(std::move(w));
  }
}

}  // namespace wk::cli
