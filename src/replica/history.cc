#include "replica/history.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <memory>
#include <set>

namespace wk::replica {
namespace {

// How far ahead of the reader's clock a point may lie and still be "now" (clocks of the
// reader and the bucket differ by a little).
constexpr std::int64_t kFutureSlackMs = 5'000;

std::string FormatMs(std::int64_t ms) { return std::to_string(ms) + " ms"; }

Result<std::uint64_t> ParseUnsigned(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty() || s.size() > 20) return InvalidArgument("not a number");
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return InvalidArgument("not a number");
  return v;
}

using Listed = std::optional<Result<std::vector<ListEntry>>>;

Task<void> ListInto(Env& env, ObjectStore& store, std::string prefix, RestoreOptions options,
                    std::shared_ptr<Listed> into) {
  auto r = co_await ListAll(env, store, std::move(prefix), options.list_timeout, options.read_attempts);
  into->emplace(std::move(r));
}

// A plain function, not a coroutine: GCC 12 miscompiled a coroutine that spawns several
// tasks (docs/DEVELOPING.md).
std::pair<TaskHandle, TaskHandle> SpawnListings(Env& env, ObjectStore& store, const ActorId& actor,
                                                const RestoreOptions& options, const std::shared_ptr<Listed>& wal,
                                                const std::shared_ptr<Listed>& snap) {
  TaskHandle a = env.Spawn(ListInto(env, store, WalPrefix(actor), options, wal), "history list");
  TaskHandle b = env.Spawn(ListInto(env, store, SnapshotPrefix(actor), options, snap), "history list");
  return {a, b};
}

// The restorable part of a chain: the segments after its oldest base (all of them when it
// reaches the beginning), data segments only, ascending.
std::vector<Position> RestorableData(const Chain& chain) {
  std::vector<Position> out;
  for (const Position& p : chain.segments) {
    if (p.seq == 0) continue;
    if (!chain.from_empty && (chain.bases.empty() || p <= chain.bases.front())) continue;
    out.push_back(p);
  }
  return out;
}

BatchInfo Describe(BatchId id, std::int64_t time_ms, const actor::Batch& b) {
  BatchInfo info;
  info.id = id;
  info.time_ms = time_ms;
  info.alarm = b.alarm;
  info.system = static_cast<std::uint32_t>(b.system.size());
  std::set<std::string_view> seen;
  for (const auto& m : b.mutations) {
    switch (m.kind) {
      case actor::Mutation::Kind::kPut:
        ++info.puts;
        break;
      case actor::Mutation::Kind::kDelete:
        ++info.deletes;
        break;
      case actor::Mutation::Kind::kDeleteAll:
        info.delete_all = true;
        break;
    }
    info.bytes += m.key.size() + m.value.size();
    if (m.kind != actor::Mutation::Kind::kDeleteAll && info.keys.size() < kSampleKeys && seen.insert(m.key).second) {
      info.keys.push_back(m.key);
    }
  }
  for (const auto& m : b.system) info.bytes += m.key.size() + m.value.size();
  return info;
}

Result<Segment> DecodeChainSegment(const ActorId& actor, Position p, std::string_view body) {
  auto seg = DecodeSegment(body);
  if (!seg.ok()) return Fatal(SegmentKey(actor, p) + ": " + seg.status().message());
  if (seg->actor != actor || seg->position != p) return Fatal(SegmentKey(actor, p) + " names another actor or position");
  return seg;
}

}  // namespace

std::string BatchId::ToString() const { return segment.ToString() + "." + std::to_string(index); }

Result<BatchId> ParseBatchId(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("batch " + std::string(text) + " is not <generation>-<segment>.<index> (as `actor history` shows it)");
  };
  const auto dash = text.find('-');
  const auto dot = text.find('.');
  if (dash == std::string_view::npos || dot == std::string_view::npos || dot < dash) return bad();
  auto g = ParseUnsigned(text.substr(0, dash));
  auto s = ParseUnsigned(text.substr(dash + 1, dot - dash - 1));
  auto i = ParseUnsigned(text.substr(dot + 1));
  if (!g.ok() || !s.ok() || !i.ok() || *g == 0 || *s == 0 || *i == 0 || *i > std::numeric_limits<std::uint32_t>::max()) {
    return bad();
  }
  return BatchId{Position{Generation{*g}, *s}, static_cast<std::uint32_t>(*i)};
}

Task<Result<LogListing>> ListLog(Env& env, ObjectStore& store, ActorId actor, RestoreOptions options) {
  auto wal = std::make_shared<Listed>();
  auto snap = std::make_shared<Listed>();
  std::pair<TaskHandle, TaskHandle> lists = SpawnListings(env, store, actor, options, wal, snap);
  TaskHandle h1 = lists.first;
  TaskHandle h2 = lists.second;
  const bool joined1 = co_await h1.Join();
  // Not a co_await inside && (the ?: family of GCC 12's bug: docs/DEVELOPING.md).
  bool joined2 = false;
  if (joined1) joined2 = co_await h2.Join();
  if (!joined1 || !joined2 || !wal->has_value() || !snap->has_value()) {
    h1.Cancel();
    h2.Cancel();
    co_return Cancelled("listing cancelled");
  }
  if (!(*wal)->ok()) co_return (*wal)->status();
  if (!(*snap)->ok()) co_return (*snap)->status();
  LogListing out;
  const std::string wal_prefix = WalPrefix(actor);
  const std::string snap_prefix = SnapshotPrefix(actor);
  for (const ListEntry& e : (*wal)->value()) {
    auto p = ParseKeyPosition(wal_prefix, e.key);
    if (!p.ok()) co_return p.status();
    out.segments[*p] = ListedObject{e.size, e.modified_ms};
  }
  for (const ListEntry& e : (*snap)->value()) {
    auto p = ParseKeyPosition(snap_prefix, e.key);
    if (!p.ok()) co_return p.status();
    out.snapshots[*p] = ListedObject{e.size, e.modified_ms};
  }
  co_return out;
}

FenceReader StoreFenceReader(Env& env, ObjectStore& store, ActorId actor, RestoreOptions options) {
  return [&env, &store, actor, options](Position p) -> Task<Result<FenceInfo>> {
    std::vector<std::string> keys;
    keys.push_back(SegmentKey(actor, p));
    auto bodies = co_await ReadObjects(env, store, std::move(keys), options);
    if (!bodies.ok()) co_return bodies.status();
    auto seg = DecodeChainSegment(actor, p, (*bodies)[0]);
    if (!seg.ok()) co_return seg.status();
    co_return seg->fence;
  };
}

Task<Result<Chain>> ReconstructChain(const LogListing& listing, FenceReader read_fence, BrokenModels broken) {
  Chain out;
  if (broken.on(BrokenModel::kHistoryIgnoresFence)) {
    // Broken model: every listed segment in key order, as if each had landed in time.
    for (const auto& [p, o] : listing.segments) out.segments.push_back(p);
    for (const auto& [p, o] : listing.snapshots) out.bases.push_back(p);
    out.from_empty = true;
    co_return out;
  }
  std::optional<Generation> newest;
  for (auto it = listing.segments.rbegin(); it != listing.segments.rend(); ++it) {
    if (it->first.seq == 0) {
      newest = it->first.generation;
      break;
    }
  }
  if (!newest) {
    if (!listing.segments.empty() || !listing.snapshots.empty()) {
      co_return Fatal("the log has " + std::string(listing.segments.empty() ? "snapshots" : "segments") +
                      " but no owner fence");
    }
    out.from_empty = true;
    co_return out;
  }
  // Every position the chain is known to hold, newest first, listed or not.
  std::vector<Position> known;
  const Generation g = *newest;
  // The newest hold's own segments: contiguous from the lowest listed (garbage collection
  // removes a prefix of them at most), up to the first gap, exactly as a restore takes them.
  {
    auto it = listing.segments.upper_bound(Position{g, 0});
    std::uint64_t tip = 0;
    if (it != listing.segments.end() && it->first.generation == g) {
      std::uint64_t s = it->first.seq;
      while (listing.segments.count(Position{g, s})) tip = s++;
    }
    for (std::uint64_t s = tip; s >= 1; --s) known.push_back(Position{g, s});
  }
  Position fence_at{g, 0};
  for (;;) {
    known.push_back(fence_at);
    auto fence = co_await read_fence(fence_at);
    if (!fence.ok()) co_return fence.status();
    for (auto it = fence->run.rbegin(); it != fence->run.rend(); ++it) {
      if (!known.empty() && !(*it < known.back())) co_return Fatal("fence " + fence_at.ToString() + " names a run out of order");
      known.push_back(*it);
    }
    if (!fence->base) break;
    const Position b = *fence->base;
    if (!(b < known.back())) co_return Fatal("fence " + fence_at.ToString() + " names a base after its run");
    // The base's hold's segments up to it are on the chain; its fence says what came before.
    if (known.back() != b) {
      for (std::uint64_t s = b.seq; s >= 1; --s) known.push_back(Position{b.generation, s});
    }
    fence_at = Position{b.generation, 0};
    if (!listing.segments.count(fence_at)) {
      known.push_back(fence_at);
      // Collected: the chain before this hold is out of reach. Mark it so the beginning
      // is never taken as reached.
      known.push_back(Position{Generation{0}, 0});
      break;
    }
  }
  std::reverse(known.begin(), known.end());
  const bool truncated = !known.empty() && known.front() == Position{Generation{0}, 0};
  if (truncated) known.erase(known.begin());
  // The last position that is not listed: nothing at or before it can be rebuilt from
  // segments, only from a snapshot at or after it.
  std::optional<std::size_t> last_missing;
  for (std::size_t i = 0; i < known.size(); ++i) {
    if (!listing.segments.count(known[i])) last_missing = i;
  }
  out.from_empty = !truncated && !last_missing;
  const std::size_t first_usable = last_missing ? *last_missing : 0;
  for (std::size_t i = first_usable; i < known.size(); ++i) {
    if (listing.snapshots.count(known[i])) out.bases.push_back(known[i]);
  }
  std::optional<Position> oldest_base;
  if (!out.bases.empty()) oldest_base = out.bases.front();
  for (std::size_t i = 0; i < known.size(); ++i) {
    if (!listing.segments.count(known[i])) continue;
    if (!out.from_empty && (!oldest_base || known[i] <= *oldest_base)) continue;
    out.segments.push_back(known[i]);
  }
  co_return out;
}

namespace {

// The history reads race the owner's garbage collection: an object listed may be gone by
// the time it is read (a newer base covers it). One attempt sets *collected then; the
// public functions list again, a few times, before saying so (kRetryable).
constexpr int kCollectedAttempts = 3;

Task<Result<History>> ReadHistoryOnce(Env& env, ObjectStore& store, ActorId actor, HistoryOptions options,
                                      bool* collected) {
  History out;
  out.actor = actor;
  auto listing = co_await ListLog(env, store, actor, options.read);
  if (!listing.ok()) co_return listing.status();
  // Named, not a temporary in the co_await operand (GCC 12: docs/DEVELOPING.md).
  FenceReader fences = StoreFenceReader(env, store, actor, options.read);
  auto chain = co_await ReconstructChain(*listing, fences, options.read.broken);
  if (!chain.ok()) {
    if (chain.code() == Code::kNotFound) *collected = true;
    co_return chain.status();
  }
  const std::vector<Position> data = RestorableData(*chain);
  std::vector<Position> wanted;
  for (const Position& p : data) {
    if (listing->segments.at(p).modified_ms >= options.since_ms) wanted.push_back(p);
  }
  // Every segment holds one batch or more: the newest `limit` segments hold the newest
  // `limit` batches.
  if (wanted.size() > options.limit) {
    out.truncated = true;
    wanted.erase(wanted.begin(), wanted.end() - static_cast<std::ptrdiff_t>(options.limit));
  }
  std::vector<std::string> keys;
  for (const Position& p : wanted) keys.push_back(SegmentKey(actor, p));
  auto bodies = co_await ReadObjects(env, store, std::move(keys), options.read);
  if (!bodies.ok()) {
    if (bodies.code() == Code::kNotFound) *collected = true;
    co_return bodies.status();
  }
  out.segments_read = wanted.size();
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    auto seg = DecodeChainSegment(actor, wanted[i], (*bodies)[i]);
    if (!seg.ok()) co_return seg.status();
    const std::int64_t t = listing->segments.at(wanted[i]).modified_ms;
    for (std::size_t b = 0; b < seg->batches.size(); ++b) {
      out.batches.push_back(Describe(BatchId{wanted[i], static_cast<std::uint32_t>(b + 1)}, t, seg->batches[b]));
    }
  }
  if (out.batches.size() > options.limit) {
    out.truncated = true;
    out.batches.erase(out.batches.begin(), out.batches.end() - static_cast<std::ptrdiff_t>(options.limit));
  }
  if (!data.empty()) out.latest_ms = listing->segments.at(data.back()).modified_ms;
  // The earliest point: the oldest base's (its snapshot's time), or the first batch's when
  // the chain reaches the beginning; never before the window.
  std::optional<std::int64_t> earliest;
  if (chain->from_empty) {
    if (!data.empty()) earliest = listing->segments.at(data.front()).modified_ms;
  } else if (!chain->bases.empty()) {
    earliest = listing->snapshots.at(chain->bases.front()).modified_ms;
  }
  if (earliest && options.retention > Duration(0)) {
    const std::int64_t window = options.now_ms - std::chrono::duration_cast<std::chrono::milliseconds>(options.retention).count();
    earliest = std::max(*earliest, window);
  }
  out.earliest_ms = earliest;
  co_return out;
}

Task<Result<PointState>> StateAtOnce(Env& env, ObjectStore& store, ActorId actor, PointSpec point,
                                     HistoryOptions options, bool* collected) {
  if (point.at_ms.has_value() == point.batch.has_value()) co_return InvalidArgument("give a time or a batch, one of them");
  const std::int64_t retention_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(options.retention).count();
  const std::int64_t window_start = retention_ms > 0 ? options.now_ms - retention_ms : std::numeric_limits<std::int64_t>::min();
  if (point.at_ms && *point.at_ms > options.now_ms + kFutureSlackMs) {
    co_return InvalidArgument("time " + FormatMs(*point.at_ms) + " is in the future (now " + FormatMs(options.now_ms) + ")");
  }
  if (point.at_ms && *point.at_ms < window_start) {
    co_return InvalidArgument("time " + FormatMs(*point.at_ms) + " is outside the retention window (it starts at " +
                              FormatMs(window_start) + ")");
  }
  auto listing = co_await ListLog(env, store, actor, options.read);
  if (!listing.ok()) co_return listing.status();
  if (listing->segments.empty() && listing->snapshots.empty()) co_return NotFound("nothing is stored for " + actor.ToString());
  // Named, not a temporary in the co_await operand (GCC 12: docs/DEVELOPING.md).
  FenceReader fences = StoreFenceReader(env, store, actor, options.read);
  auto chain = co_await ReconstructChain(*listing, fences, options.read.broken);
  if (!chain.ok()) {
    if (chain.code() == Code::kNotFound) *collected = true;
    co_return chain.status();
  }
  const std::vector<Position> data = RestorableData(*chain);
  auto time_of = [&](Position p) { return listing->segments.at(p).modified_ms; };

  // The target: the segment to stop in and how many of its batches (0: all).
  std::optional<Position> target;
  std::uint32_t take = 0;
  if (point.batch) {
    const Position p = point.batch->segment;
    if (!std::binary_search(data.begin(), data.end(), p)) {
      co_return InvalidArgument("batch " + point.batch->ToString() + " of " + actor.ToString() +
                                " is not in its retained history (see `actor history`)");
    }
    if (time_of(p) < window_start) {
      co_return InvalidArgument("batch " + point.batch->ToString() + " is outside the retention window (it starts at " +
                                FormatMs(window_start) + ")");
    }
    target = p;
    take = point.batch->index;
  } else {
    // The longest prefix of the chain whose times are all at or before the point.
    for (const Position& p : data) {
      if (time_of(p) > *point.at_ms) break;
      target = p;
    }
    if (!target) {
      const bool base_ok = !chain->from_empty && !chain->bases.empty() &&
                           listing->snapshots.at(chain->bases.front()).modified_ms <= *point.at_ms;
      if (!chain->from_empty && !base_ok) {
        std::string earliest = data.empty() ? std::string("none") : FormatMs(time_of(data.front()));
        if (!chain->bases.empty()) earliest = FormatMs(listing->snapshots.at(chain->bases.front()).modified_ms);
        co_return InvalidArgument("time " + FormatMs(*point.at_ms) + " is older than the retained history of " +
                                  actor.ToString() + " (the earliest point is at " + earliest + ")");
      }
    }
  }

  // The base: the newest snapshot strictly before the target's segment (a snapshot at it
  // would include its later batches), or the oldest one when the point is the oldest base.
  std::optional<Position> base;
  for (const Position& b : chain->bases) {
    if (!target || b < *target) base = b;
  }
  if (!target && !chain->from_empty) base = chain->bases.front();
  if (target && !base && !chain->from_empty) co_return Fatal("no snapshot before " + target->ToString());
  std::vector<Position> apply;
  for (const Position& p : data) {
    if (base && p <= *base) continue;
    if (!target || *target < p) break;
    apply.push_back(p);
  }
  std::vector<std::string> keys;
  if (base) keys.push_back(SnapshotKey(actor, *base));
  for (const Position& p : apply) keys.push_back(SegmentKey(actor, p));
  auto bodies = co_await ReadObjects(env, store, std::move(keys), options.read);
  if (!bodies.ok()) {
    if (bodies.code() == Code::kNotFound) *collected = true;
    co_return bodies.status();
  }
  PointState out;
  std::size_t i = 0;
  if (base) {
    out.bytes_read += (*bodies)[0].size();
    auto snap = DecodeSnapshot((*bodies)[0]);
    if (!snap.ok()) co_return Fatal(SnapshotKey(actor, *base) + ": " + snap.status().message());
    if (snap->actor != actor || snap->position != *base) co_return Fatal(SnapshotKey(actor, *base) + " names another actor or position");
    out.state = std::move(snap->state);
    out.time_ms = listing->snapshots.at(*base).modified_ms;
    i = 1;
  }
  for (std::size_t a = 0; a < apply.size(); ++a, ++i) {
    out.bytes_read += (*bodies)[i].size();
    auto seg = DecodeChainSegment(actor, apply[a], (*bodies)[i]);
    if (!seg.ok()) co_return seg.status();
    const bool last = a + 1 == apply.size();
    std::size_t n = seg->batches.size();
    if (last && take > 0) {
      if (take > n) {
        co_return InvalidArgument("batch " + point.batch->ToString() + " does not exist: segment " + apply[a].ToString() +
                                  " holds " + std::to_string(n) + " batches");
      }
      n = take;
    }
    for (std::size_t b = 0; b < n; ++b) out.state.Apply(seg->batches[b]);
    out.last = BatchId{apply[a], static_cast<std::uint32_t>(n)};
    out.time_ms = time_of(apply[a]);
  }
  // A base with no batch after it: the state is the snapshot's (every batch up to the end of
  // its segment, whose batch ids may be collected by now), not the empty state.
  if (base && apply.empty()) out.snapshot = *base;
  out.segments_read = apply.size();
  co_return out;
}

}  // namespace

actor::Batch ReplacementBatch(const actor::StateMap& target) {
  actor::Batch b;
  b.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kDeleteAll, {}, {}});
  for (const auto& [k, v] : target.entries()) b.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, k, v});
  b.alarm = target.alarm();
  return b;
}

Task<Result<History>> ReadHistory(Env& env, ObjectStore& store, ActorId actor, HistoryOptions options) {
  for (int attempt = 1;; ++attempt) {
    bool collected = false;
    auto r = co_await ReadHistoryOnce(env, store, actor, options, &collected);
    if (r.ok() || !collected) co_return r;
    if (attempt == kCollectedAttempts) {
      co_return Retryable("the history of " + actor.ToString() + " changed while it was read (" + r.status().message() +
                          "): ask again");
    }
  }
}

Task<Result<PointState>> StateAt(Env& env, ObjectStore& store, ActorId actor, PointSpec point, HistoryOptions options) {
  for (int attempt = 1;; ++attempt) {
    bool collected = false;
    auto r = co_await StateAtOnce(env, store, actor, point, options, &collected);
    if (r.ok() || !collected) co_return r;
    if (attempt == kCollectedAttempts) {
      co_return Retryable("the history of " + actor.ToString() + " changed while it was read (" + r.status().message() +
                          "): ask again");
    }
  }
}

}  // namespace wk::replica
