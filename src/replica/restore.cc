#include "replica/restore.h"

#include <algorithm>
#include <map>

namespace wk::replica {
namespace {

using std::chrono::milliseconds;

bool Transient(const Status& s) { return s.code() == Code::kRetryable || s.code() == Code::kUnknownOutcome; }

Duration Backoff(int attempt) { return milliseconds(50) * (1 << std::min(attempt, 6)); }

// One object of the chain to read, and what came back.
struct Read {
  std::string key;
  bool snapshot = false;
  std::optional<std::string> body;
  Status status;
};

struct ReadQueue {
  std::vector<Read> reads;
  std::size_t next = 0;
  int retries = 0;
  bool failed = false;
  std::optional<std::string> missing;  // a key read back as not found
};

Task<void> ReadWorker(Env& env, ObjectStore& store, std::shared_ptr<ReadQueue> q, RestoreOptions options) {
  while (!q->failed && q->next < q->reads.size()) {
    Read& r = q->reads[q->next++];
    const CallOptions call{options.read_timeout};
    for (int attempt = 0;; ++attempt) {
      std::string key = r.key;
      auto got = co_await store.Get(std::move(key), call);
      if (got.ok()) {
        r.body = std::move(got->body);
        break;
      }
      r.status = got.status();
      if (got.code() == Code::kNotFound) {
        r.status = Fatal("the chain names " + r.key + " but it is missing: acknowledged writes would be lost");
        q->missing = r.key;
      }
      if (!Transient(got.status()) || attempt + 1 >= options.read_attempts) {
        q->failed = true;
        co_return;
      }
      ++q->retries;
      if (!co_await env.SleepFor(Backoff(attempt))) {
        r.status = Cancelled("restore cancelled");
        q->failed = true;
        co_return;
      }
    }
  }
}

// Spawns the readers. A plain function, not a coroutine: GCC 12 miscompiled a coroutine
// that spawns several tasks (cluster/cluster_node.cc, docs/DEVELOPING.md).
std::vector<TaskHandle> SpawnReaders(Env& env, ObjectStore& store, const std::shared_ptr<ReadQueue>& q,
                                     const RestoreOptions& options) {
  const int workers = std::max(1, std::min<int>(options.parallelism, static_cast<int>(q->reads.size())));
  std::vector<TaskHandle> handles;
  for (int i = 0; i < workers && !q->reads.empty(); ++i) {
    handles.push_back(env.Spawn(ReadWorker(env, store, q, options), "restore read"));
  }
  return handles;
}

// Reads every object of q, `parallelism` at once.
Task<Status> ReadAll(Env& env, ObjectStore& store, std::shared_ptr<ReadQueue> q, RestoreOptions options) {
  std::vector<TaskHandle> handles = SpawnReaders(env, store, q, options);
  for (auto& h : handles) {
    if (!co_await h.Join()) {
      for (auto& other : handles) other.Cancel();
      co_return Cancelled("restore cancelled");
    }
  }
  for (const auto& r : q->reads) {
    if (!r.body) co_return r.status.ok() ? Fatal("restore read of " + r.key + " did not run") : r.status;
  }
  co_return Status::Ok();
}

using Listed = std::optional<Result<std::vector<ListEntry>>>;

Task<void> ListInto(Env& env, ObjectStore& store, std::string prefix, RestoreOptions options,
                    std::shared_ptr<Listed> into) {
  auto r = co_await ListAll(env, store, std::move(prefix), options.list_timeout, options.read_attempts);
  into->emplace(std::move(r));
}

// A plain function for the same reason as SpawnReaders.
std::pair<TaskHandle, TaskHandle> SpawnListings(Env& env, ObjectStore& store, const std::string& wal_prefix,
                                                const std::string& snap_prefix, const RestoreOptions& options,
                                                const std::shared_ptr<Listed>& wal, const std::shared_ptr<Listed>& snap) {
  TaskHandle a = env.Spawn(ListInto(env, store, wal_prefix, options, wal), "restore list");
  TaskHandle b = env.Spawn(ListInto(env, store, snap_prefix, options, snap), "restore list");
  return {a, b};
}

}  // namespace

Task<Result<std::vector<std::string>>> ReadObjects(Env& env, ObjectStore& store, std::vector<std::string> keys,
                                                   RestoreOptions options) {
  auto q = std::make_shared<ReadQueue>();
  for (auto& k : keys) q->reads.push_back(Read{std::move(k), false, std::nullopt, Status::Ok()});
  if (!q->reads.empty()) {
    Status st = co_await ReadAll(env, store, q, options);
    if (!st.ok() && q->missing) co_return NotFound(*q->missing + " was listed but is not there any more");
    if (!st.ok()) co_return st;
  }
  std::vector<std::string> out;
  out.reserve(q->reads.size());
  for (auto& r : q->reads) out.push_back(std::move(*r.body));
  co_return out;
}

Task<Result<std::vector<ListEntry>>> ListAll(Env& env, ObjectStore& store, std::string prefix, Duration timeout,
                                             int attempts) {
  std::vector<ListEntry> out;
  std::string continuation;
  for (;;) {
    Result<ListPage> page = Retryable("not listed");
    for (int attempt = 0;; ++attempt) {
      ListOptions options;
      options.prefix = prefix;
      options.continuation = continuation;
      page = co_await store.List(std::move(options), CallOptions{timeout});
      if (page.ok() || !Transient(page.status()) || attempt + 1 >= attempts) break;
      if (!co_await env.SleepFor(Backoff(attempt))) co_return Cancelled("list cancelled");
    }
    if (!page.ok()) co_return page.status();
    for (auto& e : page->entries) out.push_back(std::move(e));
    if (!page->next_continuation) break;
    continuation = *page->next_continuation;
  }
  co_return out;
}

Task<Result<Restored>> Restore(Env& env, ObjectStore& store, ActorId actor, Generation generation,
                               RestoreOptions options, std::optional<std::uint64_t> resume_segment) {
  const MonoTime start = env.MonoNow();
  Restored out;
  const std::string wal_prefix = WalPrefix(actor);
  const std::string snap_prefix = SnapshotPrefix(actor);

  // 1. Both listings at once.
  auto wal_list = std::make_shared<Listed>();
  auto snap_list = std::make_shared<Listed>();
  std::pair<TaskHandle, TaskHandle> lists = SpawnListings(env, store, wal_prefix, snap_prefix, options, wal_list, snap_list);
  TaskHandle h1 = lists.first;
  TaskHandle h2 = lists.second;
  const bool joined1 = co_await h1.Join();
  // Not a co_await inside && (the ?: family of GCC 12's bug: docs/DEVELOPING.md).
  bool joined2 = false;
  if (joined1) joined2 = co_await h2.Join();
  if (!joined1 || !joined2) {
    h1.Cancel();
    h2.Cancel();
    co_return Cancelled("restore cancelled");
  }
  if (!wal_list->has_value() || !snap_list->has_value()) co_return Cancelled("restore cancelled");
  if (!(*wal_list)->ok()) co_return (*wal_list)->status();
  if (!(*snap_list)->ok()) co_return (*snap_list)->status();

  std::map<Position, std::uint64_t> segments;  // position -> size
  for (const auto& e : (*wal_list)->value()) {
    auto p = ParseKeyPosition(wal_prefix, e.key);
    if (!p.ok()) co_return p.status();
    segments.emplace(*p, e.size);
    out.listed_segments.push_back(*p);
  }
  std::vector<Position> snapshots;
  for (const auto& e : (*snap_list)->value()) {
    auto p = ParseKeyPosition(snap_prefix, e.key);
    if (!p.ok()) co_return p.status();
    snapshots.push_back(*p);
  }
  std::sort(snapshots.begin(), snapshots.end());
  out.listed_snapshots = snapshots;
  Generation newest_generation = segments.empty() ? Generation{} : segments.rbegin()->first.generation;
  if (!snapshots.empty()) newest_generation = std::max(newest_generation, snapshots.back().generation);
  // A woken sleeping hold finds its own generation in the log (it wrote it); anything newer
  // is a later hold, for it as for a new hold.
  if (newest_generation > generation || (newest_generation == generation && !resume_segment)) {
    co_return PreconditionFailed("the log of " + actor.ToString() + " already has generation " +
                                 std::to_string(newest_generation.value) + ", not below this hold's " +
                                 std::to_string(generation.value) + ": a later hold exists");
  }

  auto q = std::make_shared<ReadQueue>();
  std::optional<Position> base;
  std::vector<Position> chain;  // data segments to apply, in order

  if (options.broken.on(BrokenModel::kRestoreIgnoresFence)) {
    // Broken model: the newest snapshot of any generation, then every later segment in key
    // order, chain or not.
    if (!snapshots.empty()) base = snapshots.back();
    for (const auto& [p, size] : segments) {
      if (base && p <= *base) continue;
      out.chain.run.push_back(p);
      if (p.seq > 0) chain.push_back(p);
    }
  } else {
    // 2. The newest fence.
    std::optional<Generation> fence_gen;
    for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
      if (it->first.seq == 0) {
        fence_gen = it->first.generation;
        break;
      }
    }
    if (!fence_gen) {
      if (!segments.empty()) {
        co_return Fatal("the log of " + actor.ToString() + " has segments but no owner fence (first: " +
                        SegmentKey(actor, segments.begin()->first) + ")");
      }
      // A fresh actor (or one whose only snapshot lost its segments: impossible, since a
      // snapshot follows its segment and GC keeps the newest fence).
      if (!snapshots.empty()) {
        co_return Fatal("the log of " + actor.ToString() + " has snapshots but no segments");
      }
    } else {
      const Generation g = *fence_gen;
      if (resume_segment && g != generation) {
        co_return PreconditionFailed("the log of " + actor.ToString() + " has no fence of its sleeping hold (generation " +
                                     std::to_string(generation.value) + "; newest fence " + std::to_string(g.value) + ")");
      }
      Read fence_read{SegmentKey(actor, Position{g, 0}), false, std::nullopt, Status::Ok()};
      auto fq = std::make_shared<ReadQueue>();
      fq->reads.push_back(std::move(fence_read));
      Status st = co_await ReadAll(env, store, fq, options);
      if (!st.ok()) co_return st;
      ++out.reads;
      out.read_retries += fq->retries;
      auto fence = DecodeSegment(*fq->reads[0].body);
      if (!fence.ok()) co_return Fatal(SegmentKey(actor, Position{g, 0}) + ": " + fence.status().message());
      if (fence->actor != actor || fence->position != Position{g, 0}) {
        co_return Fatal(SegmentKey(actor, Position{g, 0}) + " names another actor or position");
      }
      // 3. G's newest snapshot, if any: G sends a snapshot only after the segment it is
      // as of was acknowledged while valid, so it is on the chain even once garbage
      // collection has deleted the segments it covers. Then G's own segments, contiguous
      // from the one after it (or from 1): G sends a segment only after the previous one
      // was acknowledged, so a gap ends the chain.
      std::optional<Position> own_snapshot;
      for (const auto& p : snapshots) {
        if (p.generation == g) own_snapshot = p;
      }
      std::vector<Position> own;
      for (std::uint64_t s = own_snapshot ? own_snapshot->seq + 1 : 1; segments.count(Position{g, s}); ++s) {
        own.push_back(Position{g, s});
      }
      if (resume_segment && options.broken.on(BrokenModel::kWakeForgetsOwnSegments)) {
        // Broken model: the woken hold restores the chain its fence names, as a new hold
        // restores an earlier one's, without what it wrote itself before it slept.
        own_snapshot.reset();
        own.clear();
      } else if (resume_segment) {
        // The sleeping hold closed with every segment acknowledged, each sent after the one
        // before: its log ends exactly where it left it. A gap or a segment past it means
        // something else wrote under this generation (never: one hold, one writer); the
        // caller then takes a new hold rather than continue an uncertain log.
        const std::uint64_t tip = !own.empty() ? own.back().seq : own_snapshot ? own_snapshot->seq : 0;
        const auto past = segments.upper_bound(Position{g, tip});
        if (tip != *resume_segment || (past != segments.end() && past->first.generation == g)) {
          co_return PreconditionFailed("the log of " + actor.ToString() + " does not end where its sleeping hold left it (" +
                                       Position{g, *resume_segment}.ToString() + "; found " + Position{g, tip}.ToString() +
                                       (past != segments.end() && past->first.generation == g
                                            ? " and " + past->first.ToString()
                                            : std::string()) +
                                       ")");
        }
      }
      if (own_snapshot) {
        base = own_snapshot;
        out.chain.run = own;
      } else {
        base = fence->fence.base;
        out.chain.run = fence->fence.run;
        out.chain.run.push_back(Position{g, 0});
        for (const auto& p : own) out.chain.run.push_back(p);
      }
      for (const auto& p : out.chain.run) {
        if (p.seq > 0) chain.push_back(p);
      }
    }
  }
  out.chain.base = base;

  // 4. The snapshot and the segments after it, in parallel.
  if (base) q->reads.push_back(Read{SnapshotKey(actor, *base), true, std::nullopt, Status::Ok()});
  for (const auto& p : chain) q->reads.push_back(Read{SegmentKey(actor, p), false, std::nullopt, Status::Ok()});
  if (!q->reads.empty()) {
    Status st = co_await ReadAll(env, store, q, options);
    if (!st.ok()) co_return st;
  }
  out.reads += static_cast<int>(q->reads.size());
  out.read_retries += q->retries;

  // 5. Apply in chain order.
  std::size_t i = 0;
  if (base) {
    auto snap = DecodeSnapshot(*q->reads[0].body);
    if (!snap.ok()) co_return Fatal(q->reads[0].key + ": " + snap.status().message());
    if (snap->actor != actor || snap->position != *base) co_return Fatal(q->reads[0].key + " names another actor or position");
    out.state = std::move(snap->state);
    i = 1;
  }
  for (std::size_t c = 0; c < chain.size(); ++c, ++i) {
    const std::string& body = *q->reads[i].body;
    out.bytes_since_base += body.size();
    auto seg = DecodeSegment(body);
    if (!seg.ok()) co_return Fatal(q->reads[i].key + ": " + seg.status().message());
    if (seg->actor != actor || seg->position != chain[c]) co_return Fatal(q->reads[i].key + " names another actor or position");
    for (const auto& b : seg->batches) out.state.Apply(b);
  }
  out.took = env.MonoNow() - start;
  co_return out;
}

}  // namespace wk::replica
