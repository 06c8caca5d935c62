// history_bench: point-in-time restore of an actor with a long history, and what retention
// costs in the bucket (docs/benchmarks.md, "History and point-in-time restore"; issue 37).
//
//   history_bench [--batches 100000] [--holds 4] [--keys 3] [--keyspace 1000]
//                 [--value-bytes 100] [--inflight 1] [--reps 5] URL...
//
// Per backend, side by side in one run, with replica::Replica on a RealEnv and holds that
// stay valid (ownership is not measured; the CLI's and the node's routes call the same
// functions):
//   1. One actor writes --batches batches through a Replica with retention on (7 days, the
//      node's default), each batch putting --keys keys of --value-bytes bytes from a space
//      of --keyspace keys, --inflight awaiting their acknowledgement at once (1: each batch
//      its own segment, as an actor whose batches come seconds apart: a day of 100,000
//      batches is 1.2 a second), the snapshot policy at its defaults (a snapshot every 64
//      segments), across --holds holds (closed, and opened at generation + 1, every
//      batches / holds batches: an actor that moves).
//   2. replica::StateAt of the oldest batch (the history's beginning: the point "one day
//      back" when the batches are a day's traffic), of one in the middle, of a snapshot's own
//      segment (64 segments after the base before it: the most a point reads), and of one
//      near the tip; replica::ReadHistory with limit 100, and since the middle batch's time
//      with limit 100 and 10,000 (the HTTP route's most). For each: wall time (median and
//      worst of --reps runs), bucket requests by kind and bytes read (bodies of GETs),
//      counted by a wrapper around the store; and a check that the state is exactly the
//      writes 1..M for the M it shows (every value names its batch).
//   3. The same writes for another actor with retention 0 (garbage collection collects
//      what a restore does not need), then the bytes stored under wal/ and snapshot/ for
//      each actor over the MiB of batches written (keys and values): the bucket bytes per
//      written MiB, with and without retention. Garbage collection runs unthrottled in both
//      (a node's deletes 50 a second at most, which a day of these writes never outruns but
//      these minutes would), and the bytes are counted once it has been quiet for a second.
// It prints figures and asserts nothing; a case that fails is a row saying why.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "env/real_env.h"
#include "replica/format.h"
#include "replica/history.h"
#include "replica/replica.h"
#include "replica/restore.h"
#include "store/open_store.h"
#include "store/store_wrapper.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using replica::Replica;
using replica::ReplicaOptions;

// Counts the requests that reach the bucket, and the bytes of the bodies read.
class CountingStore final : public StoreWrapper {
 public:
  explicit CountingStore(ObjectStore& inner) : StoreWrapper(inner) {}
  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    ++c.gets;
    auto r = co_await StoreWrapper::Get(std::move(key), options);
    if (r.ok()) c.get_bytes += r->body.size();
    co_return r;
  }
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override {
    ++c.heads;
    return StoreWrapper::Head(std::move(key), options);
  }
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override {
    ++c.puts;
    c.put_bytes += body.size();
    return StoreWrapper::Put(std::move(key), std::move(body), std::move(condition), options);
  }
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override {
    ++c.deletes;
    return StoreWrapper::Delete(std::move(key), std::move(condition), options);
  }
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override {
    ++c.lists;
    auto r = co_await StoreWrapper::List(std::move(options), call);
    if (r.ok()) c.listed += r->entries.size();
    co_return r;
  }

  struct Counts {
    std::uint64_t gets = 0, get_bytes = 0, heads = 0, puts = 0, put_bytes = 0, deletes = 0, lists = 0, listed = 0;
    Counts operator-(const Counts& o) const {
      return {gets - o.gets,       get_bytes - o.get_bytes, heads - o.heads, puts - o.puts,
              put_bytes - o.put_bytes, deletes - o.deletes, lists - o.lists, listed - o.listed};
    }
  };
  Counts c;
};

double Ms(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

std::string Human(std::uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

struct Plan {
  std::uint64_t batches = 100'000;
  int holds = 4;
  int keys = 3;
  int keyspace = 1000;
  int value_bytes = 100;
  int inflight = 1;
  int reps = 5;
};

// The writes are a function of the batch number (from 1): batch i puts the keys
// (i * keys + j) mod keyspace, j < keys, each with a value naming i, padded.
std::string KeyOf(const Plan& plan, std::uint64_t batch, int j) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "key-%05llu",
                static_cast<unsigned long long>((batch * static_cast<std::uint64_t>(plan.keys) + static_cast<std::uint64_t>(j)) %
                                                static_cast<std::uint64_t>(plan.keyspace)));
  return buf;
}
std::string ValueOf(const Plan& plan, std::uint64_t batch) {
  std::string v = "b" + std::to_string(batch) + ":";
  if (v.size() < static_cast<std::size_t>(plan.value_bytes)) v.resize(static_cast<std::size_t>(plan.value_bytes), 'x');
  return v;
}
std::uint64_t BatchOfValue(const std::string& v) {
  const auto colon = v.find(':');
  if (v.size() < 2 || v[0] != 'b' || colon == std::string::npos) return 0;
  return std::stoull(v.substr(1, colon - 1));
}

// "" when state is exactly the writes of batches 1..M, M being the newest batch any of its
// values names (M returned through newest); else what is wrong.
std::string CheckState(const Plan& plan, const actor::StateMap& state, std::uint64_t* newest) {
  std::uint64_t m = 0;
  for (const auto& [k, v] : state.entries()) m = std::max(m, BatchOfValue(v));
  *newest = m;
  std::map<std::string, std::uint64_t> want;
  for (std::uint64_t i = 1; i <= m; ++i) {
    for (int j = 0; j < plan.keys; ++j) want[KeyOf(plan, i, j)] = i;
  }
  if (want.size() != state.entries().size()) {
    return "WRONG: " + std::to_string(state.entries().size()) + " keys, the writes 1.." + std::to_string(m) + " make " +
           std::to_string(want.size());
  }
  for (const auto& [k, i] : want) {
    auto it = state.entries().find(k);
    if (it == state.entries().end() || it->second != ValueOf(plan, i)) return "WRONG: " + k + " is not batch " + std::to_string(i) + "'s";
  }
  return "";
}

struct Written {
  Status status;
  std::uint64_t batches = 0;
  std::uint64_t batch_bytes = 0;    // keys and values of the batches
  std::uint64_t segments = 0;       // acknowledged, fences included
  std::uint64_t segment_bytes = 0;
  std::uint64_t snapshots = 0;
  std::uint64_t gc_deleted = 0;
  double seconds = 0;         // until the last acknowledgement
  double settle_seconds = 0;  // then until garbage collection was quiet for a second
  CountingStore::Counts requests;
};

struct Bench {
  RealEnv* env;
  CountingStore* store;
  Plan plan;
};

// Writes the plan's batches for actor across its holds, retention as given.
Task<Written> WriteActor(Bench* b, ActorId actor, Duration retention) {
  Written out;
  RealEnv* env = b->env;
  const Plan& plan = b->plan;
  const MonoTime start = env->MonoNow();
  const CountingStore::Counts before = b->store->c;
  ReplicaOptions options;
  options.retention = retention;
  // Garbage collection unthrottled: a node's GC deletes at most 500 objects a pass, 20 ms
  // apart (50 a second), at the pace of a real actor (a day of 100,000 batches makes a
  // snapshot every minute); these writes come hundreds of times faster, and a throttled GC
  // would fall behind and leave a backlog that a day's traffic never has.
  options.gc_delete_interval = Duration{};
  options.gc_max_deletes_per_pass = 1'000'000;
  const std::uint64_t per_hold = (plan.batches + static_cast<std::uint64_t>(plan.holds) - 1) / static_cast<std::uint64_t>(plan.holds);
  std::uint64_t next = 1;
  for (int h = 1; h <= plan.holds && out.status.ok(); ++h) {
    Replica::Deps deps{*env, *b->store, [env](std::function<void()> fn) { env->Post(std::move(fn)); }, nullptr, {}};
    Replica::Hold hold{Generation{static_cast<std::uint64_t>(h)}, [] { return true; }};
    auto opened = co_await Replica::Open(std::move(deps), actor, std::move(hold), options);
    if (!opened.ok()) {
      out.status = opened.status();
      break;
    }
    std::unique_ptr<Replica> r = std::move(opened).value();
    const std::uint64_t last = std::min(plan.batches, static_cast<std::uint64_t>(h) * per_hold);
    // A window of --inflight writes awaiting their acknowledgement, oldest first.
    std::vector<Latch<Status>> waiting;
    while ((next <= last || !waiting.empty()) && out.status.ok()) {
      while (next <= last && waiting.size() < static_cast<std::size_t>(plan.inflight)) {
        actor::Batch batch;
        const std::string value = ValueOf(plan, next);
        for (int j = 0; j < plan.keys; ++j) {
          std::string key = KeyOf(plan, next, j);
          out.batch_bytes += key.size() + value.size();
          batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, std::move(key), value});
        }
        const std::uint64_t seq = r->Commit(std::move(batch));
        Latch<Status> done(*env, [] { return Cancelled("cancelled"); });
        r->WhenReleasable(seq, [done](Status s) { done.Set(std::move(s)); });
        waiting.push_back(done);
        ++next;
        ++out.batches;
      }
      Latch<Status> oldest = waiting.front();
      waiting.erase(waiting.begin());
      const Status s = co_await oldest.Wait();
      if (!s.ok()) out.status = s;
    }
    // The last hold: garbage collection settled (nothing deleted for a second) before the
    // bytes are counted; it stops with the replica's close.
    if (h == plan.holds && out.status.ok()) {
      out.seconds = std::chrono::duration<double>(env->MonoNow() - start).count();
      std::uint64_t seen = r->stats().gc_deleted;
      MonoTime quiet_since = env->MonoNow();
      const MonoTime deadline = env->MonoNow() + std::chrono::seconds(120);
      while (env->MonoNow() - quiet_since < std::chrono::seconds(1) && env->MonoNow() < deadline) {
        if (!co_await env->SleepFor(milliseconds(50))) break;
        if (r->stats().gc_deleted != seen) {
          seen = r->stats().gc_deleted;
          quiet_since = env->MonoNow();
        }
      }
    }
    const replica::ReplicaStats st = r->stats();
    out.segments += st.segments;
    out.segment_bytes += st.segment_bytes;
    out.snapshots += st.snapshots;
    out.gc_deleted += st.gc_deleted;
    const Status closed = co_await r->Close(std::chrono::seconds(60));
    if (out.status.ok() && !closed.ok()) out.status = closed;
  }
  const double total = std::chrono::duration<double>(env->MonoNow() - start).count();
  if (out.seconds == 0) out.seconds = total;
  out.settle_seconds = total - out.seconds;
  out.requests = b->store->c - before;
  co_return out;
}

struct Row {
  std::string backend;
  std::string what;
  std::size_t reps = 0;
  double p50_ms = 0;
  double max_ms = 0;
  CountingStore::Counts requests;  // of one run
  std::uint64_t segments_read = 0;
  std::string note;
};

// StateAt of one point, --reps times.
// `base`: the snapshot StateAt starts from (the newest on the chain before the point's
// segment), for the note.
Task<Row> PointCase(Bench* b, std::string backend, std::string what, ActorId actor, replica::BatchId point,
                    std::optional<replica::Position> base, replica::HistoryOptions options) {
  Row row;
  row.backend = std::move(backend);
  row.what = std::move(what) + " (" + point.ToString() + ")";
  std::vector<double> ms;
  for (int rep = 0; rep < b->plan.reps; ++rep) {
    const CountingStore::Counts before = b->store->c;
    const MonoTime start = b->env->MonoNow();
    replica::PointSpec spec;
    spec.batch = point;
    auto s = co_await replica::StateAt(*b->env, *b->store, actor, spec, options);
    ms.push_back(Ms(b->env->MonoNow() - start));
    row.requests = b->store->c - before;
    if (!s.ok()) {
      row.note = "failed: " + s.status().ToString();
      break;
    }
    row.segments_read = s->segments_read;
    std::uint64_t newest = 0;
    const std::string wrong = CheckState(b->plan, s->state, &newest);
    row.note = wrong.empty() ? "ok: " + std::to_string(s->state.entries().size()) + " keys = batches 1.." +
                                   std::to_string(newest) + "; " +
                                   (base ? "snapshot " + base->ToString() + " + " : std::string("no snapshot, ")) +
                                   std::to_string(s->segments_read) + " segments"
                             : wrong;
    if (!wrong.empty()) break;
  }
  row.reps = ms.size();
  row.p50_ms = Percentile(ms, 0.5);
  row.max_ms = Percentile(ms, 1.0);
  co_return row;
}

// ReadHistory, --reps times.
Task<Row> HistoryCase(Bench* b, std::string backend, std::string what, ActorId actor, replica::HistoryOptions options) {
  Row row;
  row.backend = std::move(backend);
  row.what = std::move(what);
  std::vector<double> ms;
  for (int rep = 0; rep < b->plan.reps; ++rep) {
    const CountingStore::Counts before = b->store->c;
    const MonoTime start = b->env->MonoNow();
    auto h = co_await replica::ReadHistory(*b->env, *b->store, actor, options);
    ms.push_back(Ms(b->env->MonoNow() - start));
    row.requests = b->store->c - before;
    if (!h.ok()) {
      row.note = "failed: " + h.status().ToString();
      break;
    }
    row.segments_read = h->segments_read;
    row.note = "ok: " + std::to_string(h->batches.size()) + " batches" + (h->truncated ? " (truncated)" : "") +
               (h->batches.empty() ? "" : ", " + h->batches.front().id.ToString() + ".." + h->batches.back().id.ToString());
  }
  row.reps = ms.size();
  row.p50_ms = Percentile(ms, 0.5);
  row.max_ms = Percentile(ms, 1.0);
  co_return row;
}

struct Stored {
  Status status;
  std::uint64_t wal_objects = 0, wal_bytes = 0, snapshot_objects = 0, snapshot_bytes = 0;
};

Task<Stored> StoredBytes(Bench* b, ActorId actor) {
  Stored out;
  replica::RestoreOptions ro;
  auto wal = co_await replica::ListAll(*b->env, *b->store, replica::WalPrefix(actor), ro.list_timeout, ro.read_attempts);
  if (!wal.ok()) {
    out.status = wal.status();
    co_return out;
  }
  for (const auto& e : *wal) {
    ++out.wal_objects;
    out.wal_bytes += e.size;
  }
  auto snap = co_await replica::ListAll(*b->env, *b->store, replica::SnapshotPrefix(actor), ro.list_timeout, ro.read_attempts);
  if (!snap.ok()) {
    out.status = snap.status();
    co_return out;
  }
  for (const auto& e : *snap) {
    ++out.snapshot_objects;
    out.snapshot_bytes += e.size;
  }
  co_return out;
}

struct BackendResult {
  std::vector<Row> rows;
  std::vector<std::string> lines;  // the write and bytes summaries
};

std::string WriteLine(const std::string& backend, const char* what, const Written& w) {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "%-22s %-14s %s: %llu batches (%s of keys and values) in %.1f s (%.0f/s; then %.1f s until GC was "
                "quiet), %llu segments (%s), %llu snapshots, %llu objects collected; requests: %llu PUT, %llu GET, "
                "%llu LIST, %llu DELETE",
                backend.c_str(), what, w.status.ok() ? "ok" : ("FAILED: " + w.status.ToString()).c_str(),
                static_cast<unsigned long long>(w.batches), Human(w.batch_bytes).c_str(), w.seconds,
                w.seconds > 0 ? static_cast<double>(w.batches) / w.seconds : 0.0, w.settle_seconds,
                static_cast<unsigned long long>(w.segments), Human(w.segment_bytes).c_str(),
                static_cast<unsigned long long>(w.snapshots), static_cast<unsigned long long>(w.gc_deleted),
                static_cast<unsigned long long>(w.requests.puts), static_cast<unsigned long long>(w.requests.gets),
                static_cast<unsigned long long>(w.requests.lists), static_cast<unsigned long long>(w.requests.deletes));
  return buf;
}

std::string BytesLine(const std::string& backend, const char* what, const Stored& s, const Written& w) {
  char buf[512];
  if (!s.status.ok()) {
    std::snprintf(buf, sizeof buf, "%-22s %-14s FAILED to list: %s", backend.c_str(), what, s.status.ToString().c_str());
    return buf;
  }
  const double mib = static_cast<double>(w.batch_bytes) / (1 << 20);
  const std::uint64_t total = s.wal_bytes + s.snapshot_bytes;
  std::snprintf(buf, sizeof buf,
                "%-22s %-14s wal/ %llu objects %s, snapshot/ %llu objects %s; %s in all = %.2f MiB per written MiB "
                "(wal/ %.2f, snapshot/ %.2f)",
                backend.c_str(), what, static_cast<unsigned long long>(s.wal_objects), Human(s.wal_bytes).c_str(),
                static_cast<unsigned long long>(s.snapshot_objects), Human(s.snapshot_bytes).c_str(), Human(total).c_str(),
                mib > 0 ? static_cast<double>(total) / (1 << 20) / mib : 0.0,
                mib > 0 ? static_cast<double>(s.wal_bytes) / (1 << 20) / mib : 0.0,
                mib > 0 ? static_cast<double>(s.snapshot_bytes) / (1 << 20) / mib : 0.0);
  return buf;
}

Task<BackendResult> RunBackend(RealEnv* env, ObjectStore* inner, Plan plan, std::string backend) {
  CountingStore store(*inner);
  Bench b{env, &store, plan};
  BackendResult out;
  const std::string run = "h" + env->RandomHex(5);
  const ActorId kept{"bench", run, "retained"};
  const ActorId collected{"bench", run, "collected"};
  const Duration week = std::chrono::hours(24 * 7);

  auto fail_all = [&](const std::string& why) {
    Row row;
    row.backend = backend;
    row.what = "every case";
    row.note = why;
    out.rows.push_back(row);
  };

  // 1. The history, retention on.
  Written w1 = co_await WriteActor(&b, kept, week);
  out.lines.push_back(WriteLine(backend, "retention 7 d", w1));
  if (!w1.status.ok()) {
    fail_all("writing the history failed: " + w1.status.ToString());
    co_return out;
  }

  // 2. The points, found from the chain (not counted in the cases).
  replica::HistoryOptions options;
  options.now_ms = ToUnixMs(env->WallNow());
  options.retention = week;
  auto listing = co_await replica::ListLog(*env, store, kept, options.read);
  if (!listing.ok()) {
    fail_all("listing the log failed: " + listing.status().ToString());
    co_return out;
  }
  replica::FenceReader fences = replica::StoreFenceReader(*env, store, kept, options.read);
  auto chain = co_await replica::ReconstructChain(*listing, fences);
  if (!chain.ok()) {
    fail_all("following the chain failed: " + chain.status().ToString());
    co_return out;
  }
  std::vector<replica::Position> data;
  for (const auto& p : chain->segments) {
    if (p.seq != 0) data.push_back(p);
  }
  if (data.size() < 4) {
    fail_all("the chain holds " + std::to_string(data.size()) + " data segments; at least 4 are needed");
    co_return out;
  }
  const replica::BatchId oldest{data.front(), 1};
  // The middle, a little after it so as not to fall on a hold's first segment.
  const replica::BatchId middle{data[std::min(data.size() / 2 + 13, data.size() - 3)], 1};
  const replica::BatchId near_tip{data[data.size() - 2], 1};
  // A snapshot's own segment near the middle: the base before it is one interval back.
  std::optional<replica::BatchId> worst;
  for (const auto& base : chain->bases) {
    if (base >= middle.segment && base != chain->bases.front()) {
      worst = replica::BatchId{base, 1};
      break;
    }
  }
  const std::int64_t middle_ms = listing->segments.at(middle.segment).modified_ms;
  // The base StateAt starts from: the newest snapshot on the chain before the segment.
  auto base_of = [&](const replica::BatchId& p) {
    std::optional<replica::Position> base;
    for (const auto& s : chain->bases) {
      if (s < p.segment) base = s;
    }
    return base;
  };

  out.rows.push_back(co_await PointCase(&b, backend, "StateAt oldest", kept, oldest, base_of(oldest), options));
  out.rows.push_back(co_await PointCase(&b, backend, "StateAt middle", kept, middle, base_of(middle), options));
  if (worst) {
    out.rows.push_back(
        co_await PointCase(&b, backend, "StateAt a snapshot's segment", kept, *worst, base_of(*worst), options));
  } else {
    Row row;
    row.backend = backend;
    row.what = "StateAt a snapshot's segment";
    row.note = "no snapshot after the middle on the chain";
    out.rows.push_back(row);
  }
  out.rows.push_back(co_await PointCase(&b, backend, "StateAt near the tip", kept, near_tip, base_of(near_tip), options));
  {
    replica::HistoryOptions o = options;
    o.limit = 100;
    out.rows.push_back(co_await HistoryCase(&b, backend, "ReadHistory limit 100", kept, o));
    o.since_ms = middle_ms;
    out.rows.push_back(co_await HistoryCase(&b, backend, "ReadHistory since middle, limit 100", kept, o));
    o.limit = 10'000;
    out.rows.push_back(co_await HistoryCase(&b, backend, "ReadHistory since middle, limit 10,000", kept, o));
  }

  // 3. The same writes, retention 0; then the bytes of both.
  Written w0 = co_await WriteActor(&b, collected, Duration{});
  out.lines.push_back(WriteLine(backend, "retention 0", w0));
  Stored s1 = co_await StoredBytes(&b, kept);
  out.lines.push_back(BytesLine(backend, "retention 7 d", s1, w1));
  if (w0.status.ok()) {
    Stored s0 = co_await StoredBytes(&b, collected);
    out.lines.push_back(BytesLine(backend, "retention 0", s0, w0));
    if (s0.status.ok() && s1.status.ok() && w1.batch_bytes > 0) {
      const double mib = static_cast<double>(w1.batch_bytes) / (1 << 20);
      const double added = (static_cast<double>(s1.wal_bytes + s1.snapshot_bytes) -
                            static_cast<double>(s0.wal_bytes + s0.snapshot_bytes)) / (1 << 20);
      char buf[256];
      std::snprintf(buf, sizeof buf, "%-22s %-14s retention adds %.2f MiB per written MiB", backend.c_str(), "difference",
                    added / mib);
      out.lines.push_back(buf);
    }
  }
  co_return out;
}

}  // namespace
}  // namespace wk

int main(int argc, char** argv) {
  using namespace wk;
  Plan plan;
  std::vector<std::string> urls;
  auto usage = [] {
    std::fprintf(stderr,
                 "usage: history_bench [--batches N] [--holds N] [--keys N] [--keyspace N] [--value-bytes N] "
                 "[--inflight N] [--reps N] URL...\n");
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--batches" && has) {
      plan.batches = std::stoull(argv[++i]);
    } else if (a == "--holds" && has) {
      plan.holds = std::stoi(argv[++i]);
    } else if (a == "--keys" && has) {
      plan.keys = std::stoi(argv[++i]);
    } else if (a == "--keyspace" && has) {
      plan.keyspace = std::stoi(argv[++i]);
    } else if (a == "--value-bytes" && has) {
      plan.value_bytes = std::stoi(argv[++i]);
    } else if (a == "--inflight" && has) {
      plan.inflight = std::stoi(argv[++i]);
    } else if (a == "--reps" && has) {
      plan.reps = std::stoi(argv[++i]);
    } else if (a.starts_with("--")) {
      return usage();
    } else {
      urls.push_back(a);
    }
  }
  if (plan.batches < 8 || plan.holds < 1 || plan.keys < 1 || plan.keyspace < 1 || plan.value_bytes < 1 ||
      plan.inflight < 1 || plan.reps < 1) {
    return usage();
  }
  if (urls.empty()) urls.push_back("mem://");
  std::printf("history_bench: Replica directly, holds always valid (ownership is not measured here);\n"
              "  one actor, %llu batches of %d puts (%d-byte values, %d keys in all), %d awaiting acknowledgement at once,\n"
              "  %d holds (generation + 1 every %llu batches), snapshot every 64 segments (default), retention 7 days;\n"
              "  each case %d times: median (p50) and worst; requests and bytes read are one run's;\n"
              "  bytes read = bodies of GETs; LIST entries = keys listed\n",
              static_cast<unsigned long long>(plan.batches), plan.keys, plan.value_bytes, plan.keyspace, plan.inflight,
              plan.holds, static_cast<unsigned long long>((plan.batches + static_cast<std::uint64_t>(plan.holds) - 1) /
                                                          static_cast<std::uint64_t>(plan.holds)),
              plan.reps);
  std::fflush(stdout);
  std::vector<std::string> lines;
  std::vector<std::string> table;
  for (const auto& url : urls) {
    RealEnv env;
    std::string backend = url.substr(0, url.find("://") + 3);
    if (backend == "s3://") backend = "s3:// " + url.substr(5, url.find('?') == std::string::npos ? std::string::npos : url.find('?') - 5);
    auto store = OpenStore(env, url);
    if (!store.ok()) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%-22s %-48s %s", backend.c_str(), "every case",
                    ("cannot open the store: " + store.status().ToString()).c_str());
      table.push_back(buf);
      continue;
    }
    BackendResult r = env.RunMain(RunBackend(&env, store->get(), plan, backend), std::chrono::seconds(30));
    for (const auto& l : r.lines) {
      std::printf("%s\n", l.c_str());
      lines.push_back(l);
    }
    std::fflush(stdout);
    for (const Row& row : r.rows) {
      char buf[1024];
      std::snprintf(buf, sizeof buf, "%-22s %-48s %4zu %9.2f %9.2f %5llu %5llu %7llu %10s %8llu  %s", row.backend.c_str(),
                    row.what.c_str(), row.reps, row.p50_ms, row.max_ms,
                    static_cast<unsigned long long>(row.requests.lists),
                    static_cast<unsigned long long>(row.requests.gets),
                    static_cast<unsigned long long>(row.requests.listed), Human(row.requests.get_bytes).c_str(),
                    static_cast<unsigned long long>(row.segments_read), row.note.c_str());
      table.push_back(buf);
    }
  }
  std::printf("\n%-22s %-48s %4s %9s %9s %5s %5s %7s %10s %8s  %s\n", "backend", "case", "runs", "p50 ms", "max ms",
              "LISTs", "GETs", "listed", "bytes read", "segments", "note");
  for (const auto& t : table) std::printf("%s\n", t.c_str());
  return 0;
}
