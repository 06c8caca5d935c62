#include "replica/replica.h"

#include <algorithm>
#include <list>
#include <map>
#include <set>

#include "base/check.h"
#include "base/log.h"
#include "replica/gc.h"
#include "replica/history.h"

namespace wk::replica {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Status ValidateReplicaOptions(const ReplicaOptions& o) {
  if (o.segment_max_bytes < 1024) return InvalidArgument("segment_max_bytes must be at least 1024");
  if (o.segment_max_batches < 1) return InvalidArgument("segment_max_batches must be at least 1");
  if (o.snapshot_every_segments < 1) return InvalidArgument("snapshot_every_segments must be at least 1");
  if (o.snapshot_every_bytes < 1024) return InvalidArgument("snapshot_every_bytes must be at least 1024");
  if (o.upload_timeout <= Duration(0)) return InvalidArgument("upload_timeout must be positive");
  if (o.restore.read_timeout <= Duration(0)) return InvalidArgument("restore_read_timeout must be positive");
  if (o.restore.read_attempts < 1) return InvalidArgument("restore_read_attempts must be at least 1");
  if (o.restore.parallelism < 1 || o.restore.parallelism > 256) {
    return InvalidArgument("restore_parallelism must be between 1 and 256");
  }
  if (o.gc_max_deletes_per_pass < 0) return InvalidArgument("gc_max_deletes_per_pass must not be negative");
  if (o.gc_delete_interval < Duration(0)) return InvalidArgument("gc_delete_interval must not be negative");
  if (o.retention.all < Duration(0)) return InvalidArgument("retention must not be negative");
  for (const auto& [tenant, d] : o.retention.tenants) {
    if (d < Duration(0)) return InvalidArgument("retention of tenant " + tenant + " must not be negative");
  }
  if (o.retention_margin < Duration(0)) return InvalidArgument("retention_margin must not be negative");
  return Status::Ok();
}

void PublishReplicaMetrics(MetricsRegistry& r, const ReplicaTotals& totals) {
  auto counter = [&r](std::string name, std::string help, const std::uint64_t& field) {
    r.AddCallbackCounter(std::move(name), std::move(help), [&field] { return static_cast<double>(field); });
  };
  counter("wasmkeep_replica_segments_total", "Segment PUTs the bucket acknowledged while the hold was valid (owner fences included).", totals.segments);
  counter("wasmkeep_replica_segment_bytes_total", "Bytes of acknowledged segments.", totals.segment_bytes);
  counter("wasmkeep_replica_batches_total", "Event batches in acknowledged segments; divided by segments it is the group-commit ratio.", totals.batches);
  counter("wasmkeep_replica_late_uploads_total", "Uploads acknowledged only after the hold's validity ended (Late): nothing waiting on them was acknowledged.", totals.late);
  counter("wasmkeep_replica_upload_failures_total", "Segment uploads that failed or whose outcome is unknown; each abandoned its hold.", totals.upload_failures);
  counter("wasmkeep_replica_snapshots_total", "Snapshots written.", totals.snapshots);
  counter("wasmkeep_replica_snapshot_failures_total", "Snapshot PUTs that failed (retried after more segments).", totals.snapshot_failures);
  counter("wasmkeep_replica_gc_deleted_total", "Objects deleted by garbage collection.", totals.gc_deleted);
  counter("wasmkeep_replica_restores_total", "Restores that succeeded.", totals.restores);
  counter("wasmkeep_replica_restore_failures_total", "Restores that failed.", totals.restore_failures);
  r.AddHistogramView("wasmkeep_replica_restore_seconds", "Time to restore an actor: listing, reading the snapshot and segments, applying them.", totals.restore_seconds);
  r.AddHistogramView("wasmkeep_replica_upload_seconds", "Time from sending a segment to its acknowledgement.", totals.upload_seconds);
}

struct Replica::Core : std::enable_shared_from_this<Core> {
  Core(Deps d, ActorId a, Hold h, ReplicaOptions o)
      : env(d.env), store(d.store), post(d.post), totals(d.totals), broken(d.broken), alarms(d.alarms),
        alarms_alive(std::move(d.alarms_alive)), actor(std::move(a)), hold(std::move(h)), options(o),
        gate(HoldGate::Deps{hold.is_valid, std::move(d.post), actor, hold.generation,
                            broken}) {}

  Env& env;
  ObjectStore& store;
  std::function<void(std::function<void()>)> post;
  ReplicaTotals* totals;
  BrokenModels broken;
  AlarmIndexHook* alarms;  // null: no alarm index
  std::shared_ptr<const bool> alarms_alive;  // null: the index outlives the replica
  ActorId actor;
  Hold hold;
  ReplicaOptions options;
  Restored restored;
  // The output gate: durability, validity and failure (sticky) of this hold.
  HoldGate gate;

  // ---- shared with the thread that runs events (under mu)
  mutable std::mutex mu;
  actor::StateMap state;
  std::uint64_t committed = 0;  // the last batch seq committed
  std::string open_payload;     // encoded batches not yet in a segment
  struct OpenBatch {
    std::uint64_t seq;
    std::size_t bytes;
    bool system;  // carries system entries: its segment is written as version 2
  };
  // Lists, not deques: a resident actor keeps three of these, mostly empty, and libstdc++'s
  // deque allocates about 600 bytes even when empty (docs/benchmarks.md, "Density").
  std::list<OpenBatch> open_batches;
  bool kick_posted = false;
  // Committed batches that changed the alarm, not yet reported to the index (the alarm
  // after each).
  struct AlarmChange {
    std::uint64_t seq;
    std::optional<std::int64_t> alarm;
  };
  std::list<AlarmChange> alarm_commits;

  // ---- loop thread only
  std::uint64_t next_seq = 1;  // the fence is 0
  std::uint64_t sent_seq = 0;  // the last batch put in a segment
  bool uploading = false;
  std::set<Position> chain;              // the restore's run (positions on the chain)
  std::optional<Position> snapshot;      // newest acknowledged snapshot on the chain
  std::uint64_t segments_since_snapshot = 0;
  std::uint64_t bytes_since_snapshot = 0;
  bool snapshot_in_flight = false;
  bool gc_running = false;
  bool gc_again = false;
  std::optional<Env::TimerId> gc_timer;
  std::optional<MonoTime> last_gc_pass;       // when the last pass started
  std::optional<Env::TimerId> gc_pass_timer;  // a pass deferred by RetainedPassInterval
  TaskHandle gc_task;
  // Fences of older holds read by GC's retention (a fence never changes once written).
  std::map<Position, FenceInfo> fence_cache;
  MonoTime opened{};
  std::function<void(Status)> on_failed;
  bool stopped = false;  // Close finished or destroyed: no more background work
  ReplicaStats stats;
  // Alarm changes reported as committed, not yet durable (in commit order), and the sets
  // whose index entry is not written yet: no segment holding one of those is sent.
  std::list<AlarmChange> alarm_log;
  std::set<std::uint64_t> entry_pending;
  bool closed_reported = false;

  // Loop thread.
  void Kick() {
    {
      std::lock_guard lock(mu);
      kick_posted = false;
    }
    ReportAlarmCommits();
    if (!uploading) StartNextUpload();
  }

  // Tells the index about every alarm change committed so far. Called by Kick and again by
  // StartNextUpload before it picks batches: an upload that ends (or an entry written)
  // starts the next one before the Kick a commit posted has run, and a set it picked up
  // unreported would be sent with no entry (rule 1) and reported durable without its
  // change (rule 2 then judges against an older alarm). Found by the `alarms` deep run
  // (docs/simulation.md); AlarmIndexTest stages it by holding the Kick back.
  void ReportAlarmCommits() {
    std::list<AlarmChange> changes;
    {
      std::lock_guard lock(mu);
      changes.swap(alarm_commits);
    }
    if (alarms != nullptr && !gate.broken()) {
      for (const AlarmChange& c : changes) ReportCommitted(c);
    }
  }

  // Rule 1 of docs/alarms.md: a set holds back its segment until its index entry is written.
  void ReportCommitted(const AlarmChange& c) {
    alarm_log.push_back(c);
    const std::uint64_t seq = c.seq;
    if (c.alarm.has_value()) entry_pending.insert(seq);
    std::weak_ptr<Core> weak = shared_from_this();
    alarms->Committed(actor, hold.generation, seq, c.alarm, [weak, seq](Status written) {
      if (auto core = weak.lock()) core->EntryWritten(seq, std::move(written));
    });
    if (broken.on(BrokenModel::kIndexEntryRemovedBeforeDurable)) {
      // Broken model: the change is reported durable as it is committed.
      alarms->Durable(actor, hold.generation, seq, c.alarm);
    }
  }

  void EntryWritten(std::uint64_t seq, Status written) {
    if (stopped || gate.broken() || entry_pending.erase(seq) == 0) return;
    if (!written.ok()) {
      Fail(Retryable("the alarm index entry of " + actor.ToString() + " was not written: " + written.ToString()));
      return;
    }
    if (!uploading) StartNextUpload();
  }

  // The first open batch that must wait for its index entry (0: none).
  bool BlockedByEntry(std::uint64_t seq) const {
    return !entry_pending.empty() && entry_pending.count(seq) > 0 && !broken.on(BrokenModel::kSegmentBeforeEntry);
  }

  void StartNextUpload() {
    std::string payload;
    std::size_t count = 0;
    std::uint64_t last_seq = 0;
    bool system = false;
    std::optional<std::string> snapshot_body;
    Position position;
    if (gate.broken()) return;
    ReportAlarmCommits();
    if (gate.broken() || stopped) return;  // the report may have failed the replica
    {
      std::lock_guard lock(mu);
      if (open_batches.empty()) return;
      // Rule 1 of docs/alarms.md: nothing from a set whose index entry is not written on.
      if (BlockedByEntry(open_batches.front().seq)) return;
    }
    // The lost-lease cut: a hold that is no longer valid sends nothing more.
    if (!hold.is_valid()) {
      Fail(Retryable("the hold of " + actor.ToString() + " ended; its unacknowledged writes are void"));
      return;
    }
    {
      std::lock_guard lock(mu);
      std::size_t bytes = 0;
      // A batch committed (on a worker) since ReportAlarmCommits ran may change the alarm
      // unreported: the segment ends before it; the Kick its commit posted reports it.
      const std::uint64_t unreported = alarm_commits.empty() ? UINT64_MAX : alarm_commits.front().seq;
      while (!open_batches.empty() && count < options.segment_max_batches &&
             (count == 0 || bytes + open_batches.front().bytes <= options.segment_max_bytes) &&
             !BlockedByEntry(open_batches.front().seq) && open_batches.front().seq < unreported) {
        // Segments carry every committed batch once, in commit order: restore replays them
        // in key order.
        WK_CHECK(open_batches.front().seq == sent_seq + 1,
                 actor.ToString() + ": batch " + std::to_string(open_batches.front().seq) + " sent after batch " +
                     std::to_string(sent_seq));
        sent_seq = open_batches.front().seq;
        bytes += open_batches.front().bytes;
        system = system || open_batches.front().system;
        last_seq = open_batches.front().seq;
        open_batches.pop_front();
        ++count;
      }
      if (count == 0) return;  // the first open batch's alarm change is not reported yet
      payload = open_payload.substr(0, bytes);
      open_payload.erase(0, bytes);
      position = Position{hold.generation, next_seq++};
      // The state now is exactly the state as of this segment only if it holds every
      // batch committed so far.
      if (open_batches.empty() && SnapshotDue(bytes)) {
        snapshot_body = EncodeSnapshot(actor, position, state);
        segments_since_snapshot = 0;
        bytes_since_snapshot = 0;
      }
    }
    std::string body = EncodeDataSegment(actor, position, count, payload, system);
    WK_CHECK(!uploading, actor.ToString() + ": a second segment upload while one is in flight");
    uploading = true;
    env.Spawn(Upload(shared_from_this(), position, std::move(body), last_seq, count, std::move(snapshot_body)),
              "segment upload");
  }

  // Rule 2 of docs/alarms.md: the gate acknowledged every batch up to last_seq while the
  // hold was valid; the alarm as of it is the last change at or before it.
  // Whether the alarm index may still be told anything (Deps::alarms_alive).
  bool AlarmsReachable() const { return alarms != nullptr && (alarms_alive == nullptr || *alarms_alive); }

  void ReportDurable(std::uint64_t last_seq) {
    if (!AlarmsReachable() || alarm_log.empty() || alarm_log.front().seq > last_seq) return;
    std::optional<std::int64_t> alarm;
    while (!alarm_log.empty() && alarm_log.front().seq <= last_seq) {
      alarm = alarm_log.front().alarm;
      alarm_log.pop_front();
    }
    if (!broken.on(BrokenModel::kIndexEntryRemovedBeforeDurable)) alarms->Durable(actor, hold.generation, last_seq, alarm);
  }

  // The replica reports nothing more to the alarm index (closed, failed or destroyed).
  void ReportClosed() {
    if (!AlarmsReachable() || closed_reported) return;
    closed_reported = true;
    std::optional<std::int64_t> alarm;
    {
      std::lock_guard lock(mu);
      alarm = state.indexed_time();
    }
    alarms->Closed(actor, hold.generation, alarm);
  }

  bool SnapshotDue(std::uint64_t next_bytes) const {
    if (snapshot_in_flight) return false;
    return segments_since_snapshot + 1 >= options.snapshot_every_segments ||
           bytes_since_snapshot + next_bytes >= options.snapshot_every_bytes;
  }

  static Task<void> Upload(std::shared_ptr<Core> c, Position position, std::string body, std::uint64_t last_seq,
                           std::size_t count, std::optional<std::string> snapshot_body) {
    // A spawned task starts later than the check that spawned it: a hold that ended since
    // sends nothing more (a process whose lease was lost sends nothing afterwards: found
    // by the simulator's `storage` scenario).
    if (!c->hold.is_valid()) {
      c->uploading = false;
      if (!c->stopped) c->Fail(Retryable("the hold of " + c->actor.ToString() + " ended before segment " + position.ToString() + " was sent; its unacknowledged writes are void"));
      co_return;
    }
    // A hold writes only its own generation's segments (the owner fence's chain rests on it).
    WK_CHECK(position.generation == c->hold.generation,
             c->actor.ToString() + ": segment " + position.ToString() + " written by the hold at generation " +
                 std::to_string(c->hold.generation.value));
    const MonoTime sent = c->env.MonoNow();
    const std::size_t size = body.size();
    std::string key = SegmentKey(c->actor, position);
    auto put = co_await c->store.ForPurpose(BucketPurpose::kSegment)
                   .Put(key, std::move(body), Precondition::IfNoneMatchAny(), CallOptions{c->options.upload_timeout});
    c->uploading = false;
    if (c->stopped) co_return;  // closed or destroyed meanwhile: its waiters were answered
    if (!put.ok()) {
      if (c->totals) ++c->totals->upload_failures;
      c->Fail(Retryable("segment " + key + " was not acknowledged: " + put.status().ToString()));
      co_return;
    }
    // The gate asks validity at this instant: acknowledged after it ended is Late, and the
    // gate (so the replica) fails. Otherwise every waiter up to last_seq is released.
    switch (c->gate.Acknowledged(last_seq, "segment " + key)) {
      case HoldGate::AckOutcome::kAcknowledged:
        break;
      case HoldGate::AckOutcome::kLate:
        c->stats.late = true;
        if (c->totals) ++c->totals->late;
        co_return;
      case HoldGate::AckOutcome::kBroken:
        co_return;
    }
    if (position.seq == 0 && c->AlarmsReachable()) c->alarms->Fenced(c->actor, c->hold.generation);
    c->ReportDurable(last_seq);
    if (c->totals) {
      ++c->totals->segments;
      c->totals->segment_bytes += size;
      c->totals->batches += count;
      c->totals->upload_seconds.Observe(Seconds(c->env.MonoNow() - sent));
    }
    ++c->stats.segments;
    c->stats.batches += count;
    c->stats.segment_bytes += size;
    // A segment that a snapshot is taken as of is covered by it: the counts restarted at
    // its cut.
    if (position.seq > 0 && !snapshot_body) {
      ++c->segments_since_snapshot;
      c->bytes_since_snapshot += size;
    }
    if (snapshot_body) c->env.Spawn(SendSnapshot(c, position, std::move(*snapshot_body)), "snapshot upload");
    if (position.seq == 0 && c->RestoreSawGarbage()) c->MaybeCollect();
    c->StartNextUpload();
  }

  static Task<void> SendSnapshot(std::shared_ptr<Core> c, Position position, std::string body) {
    if (!c->hold.is_valid()) co_return;  // as in Upload: nothing is sent after the hold ended
    c->snapshot_in_flight = true;
    std::string key = SnapshotKey(c->actor, position);
    auto put = co_await c->store.ForPurpose(BucketPurpose::kSnapshot)
                   .Put(key, std::move(body), Precondition::IfNoneMatchAny(), CallOptions{c->options.upload_timeout});
    c->snapshot_in_flight = false;
    if (!put.ok()) {
      if (c->totals) ++c->totals->snapshot_failures;
      WK_LOG_WARN("snapshot not written; retried after the next segment", {{"key", key}, {"error", put.status().ToString()}});
      // Due again at the next segment.
      c->segments_since_snapshot = std::max<std::uint64_t>(c->segments_since_snapshot, c->options.snapshot_every_segments);
      co_return;
    }
    if (c->totals) ++c->totals->snapshots;
    ++c->stats.snapshots;
    // Garbage collection may lean on a snapshot only if it landed while the hold was
    // valid: then every later restore lists it and starts from it (or from a newer one),
    // so what it covers is needed by nobody, even if a delete lands after the hold ended.
    // A snapshot that landed later is still correct (its segment was acknowledged), but a
    // next owner may have restored without it, from the objects it covers.
    if (!c->hold.is_valid()) co_return;
    if (!c->snapshot || *c->snapshot < position) c->snapshot = position;
    c->MaybeCollect();
  }

  // ---- garbage collection
  GcInput MakeGcInput(std::vector<Position> segments, std::vector<Position> snapshots) const {
    GcInput in;
    in.generation = hold.generation;
    in.snapshot = snapshot;
    in.chain = chain;
    // Without retention the restore's base is all GC leans on (see RetainedFrom).
    if (options.retention.For(actor.tenant) > Duration(0)) in.keep_from = Position{Generation{0}, 0};
    in.off_chain_ripe = env.MonoNow() - opened >= options.gc_off_chain_after;
    in.segments = std::move(segments);
    in.snapshots = std::move(snapshots);
    in.broken = broken;
    return in;
  }

  // Retention: the oldest base the window still needs (GcInput::keep_from) and the whole
  // chain back to it, followed through the older holds' fences (each read once per hold).
  // A base is the newest snapshot on the chain listed at or before now - retention - margin,
  // never after the snapshot GC may lean on; none that old: the oldest one there is (or,
  // when the chain reaches the actor's beginning, nothing on the chain is collected).
  Task<Status> RetainedFrom(const std::vector<ListEntry>& wal, const std::vector<ListEntry>& snaps, GcInput& input) {
    LogListing listing;
    const std::string wal_prefix = WalPrefix(actor);
    const std::string snap_prefix = SnapshotPrefix(actor);
    for (const auto& e : wal) {
      if (auto p = ParseKeyPosition(wal_prefix, e.key); p.ok()) listing.segments[*p] = ListedObject{e.size, e.modified_ms};
    }
    for (const auto& e : snaps) {
      if (auto p = ParseKeyPosition(snap_prefix, e.key); p.ok()) listing.snapshots[*p] = ListedObject{e.size, e.modified_ms};
    }
    std::shared_ptr<Core> self = shared_from_this();
    FenceReader read = [self](Position p) -> Task<Result<FenceInfo>> {
      if (auto it = self->fence_cache.find(p); it != self->fence_cache.end()) co_return it->second;
      ObjectStore& gc_store = self->store.ForPurpose(BucketPurpose::kGc);
      FenceReader direct = StoreFenceReader(self->env, gc_store, self->actor, self->options.restore);
      auto got = co_await direct(p);
      if (got.ok()) self->fence_cache[p] = *got;
      co_return got;
    };
    auto chain = co_await ReconstructChain(listing, read);
    if (!chain.ok()) co_return chain.status();
    const std::int64_t cutoff =
        ToUnixMs(env.WallNow()) -
        std::chrono::duration_cast<std::chrono::milliseconds>(options.retention.For(actor.tenant) + options.retention_margin)
            .count();
    Position keep{Generation{0}, 0};
    if (!chain->from_empty && !chain->bases.empty()) keep = chain->bases.front();
    for (const Position& b : chain->bases) {
      if (listing.snapshots.at(b).modified_ms <= cutoff) keep = std::max(keep, b);
    }
    const Position lean_limit = snapshot.value_or(Position{Generation{0}, 0});
    input.keep_from = std::min(keep, lean_limit);
    for (const Position& p : chain->segments) input.chain.insert(p);
    for (const Position& p : chain->bases) input.chain.insert(p);
    co_return Status::Ok();
  }

  // Whether the log as the restore listed it holds anything to collect (or to collect once
  // the fencing bound has passed): otherwise the pass after the fence would be two LISTs
  // for nothing.
  bool RestoreSawGarbage() const {
    const GcPlan plan = PlanGc(MakeGcInput(restored.listed_segments, restored.listed_snapshots));
    return !plan.segments.empty() || !plan.snapshots.empty() || plan.waiting_for_bound;
  }

  // With history retained, a pass lists the whole retained log (a window of 7 days by
  // default) to find what is past it. One pass per snapshot (every 64 segments) made that
  // quadratic in the log's length: the largest CPU cost of a hot actor, growing for as long
  // as the window, and a LIST per 64 writes on S3 (docs/benchmarks.md, "Speed at the
  // limit"). So under retention two passes start at least a sixtieth of the retention margin
  // apart (a minute by default). A deferred pass only deletes later, which the margin already
  // allows for (a base is collected an hour past the window anyway): what is kept is the same.
  Duration RetainedPassInterval() const {
    if (options.retention.For(actor.tenant) <= Duration(0)) return Duration(0);
    return options.retention_margin / 60;
  }
  // How long until the next pass may start (0: now).
  Duration UntilNextPass() const {
    const Duration interval = RetainedPassInterval();
    if (interval <= Duration(0) || !last_gc_pass) return Duration(0);
    const Duration since = env.MonoNow() - *last_gc_pass;
    return since >= interval ? Duration(0) : interval - since;
  }

  void MaybeCollect() {
    if (stopped || gate.broken() || options.gc_max_deletes_per_pass == 0 || !hold.is_valid()) return;
    if (gc_running) {
      gc_again = true;
      return;
    }
    if (const Duration wait = UntilNextPass(); wait > Duration(0)) {
      DeferPass(wait);
      return;
    }
    gc_running = true;
    gc_task = env.Spawn(CollectGarbage(shared_from_this()), "replica gc");
  }
  // A pass asked for `wait` from now: MaybeCollect then, from a timer (never from inside a
  // pass, whose task gc_task still is).
  void DeferPass(Duration wait) {
    if (gc_pass_timer) return;
    std::weak_ptr<Core> weak = shared_from_this();
    gc_pass_timer = env.StartTimer(env.MonoNow() + wait, [weak] {
      if (auto core = weak.lock()) {
        core->gc_pass_timer.reset();
        core->MaybeCollect();
      }
    });
  }

  static Task<void> CollectGarbage(std::shared_ptr<Core> c) {
    do {
      c->gc_again = false;
      c->last_gc_pass = c->env.MonoNow();
      const std::string wal_prefix = WalPrefix(c->actor);
      const std::string snap_prefix = SnapshotPrefix(c->actor);
      ObjectStore& gc_store = c->store.ForPurpose(BucketPurpose::kGc);
      auto wal = co_await ListAll(c->env, gc_store, wal_prefix, c->options.restore.list_timeout, 1);
      if (!wal.ok() || c->stopped) break;
      auto snaps = co_await ListAll(c->env, gc_store, snap_prefix, c->options.restore.list_timeout, 1);
      if (!snaps.ok() || c->stopped) break;
      std::vector<Position> segments, snapshots;
      bool foreign = false;
      for (const auto& e : *wal) {
        auto p = ParseKeyPosition(wal_prefix, e.key);
        if (!p.ok()) foreign = true; else segments.push_back(*p);
      }
      for (const auto& e : *snaps) {
        auto p = ParseKeyPosition(snap_prefix, e.key);
        if (!p.ok()) foreign = true; else snapshots.push_back(*p);
      }
      if (foreign) {
        WK_LOG_WARN("garbage collection leaves alone objects that are not segments or snapshots",
                    {{"actor", c->actor.ToString()}});
      }
      GcInput input = c->MakeGcInput(std::move(segments), std::move(snapshots));
      if (c->options.retention.For(c->actor.tenant) > Duration(0)) {
        Status kept = co_await c->RetainedFrom(*wal, *snaps, input);
        if (c->stopped) break;
        if (!kept.ok()) {
          WK_LOG_WARN("garbage collection skipped: the history its retention keeps could not be followed",
                      {{"actor", c->actor.ToString()}, {"error", kept.ToString()}});
          break;
        }
      }
      const GcPlan plan = PlanGc(input);
      std::vector<std::string> keys;
      for (const auto& p : plan.segments) keys.push_back(SegmentKey(c->actor, p));
      for (const auto& p : plan.snapshots) keys.push_back(SnapshotKey(c->actor, p));
      int deleted = 0;
      for (const std::string& key : keys) {
        if (!c->hold.is_valid()) break;  // only an owner collects
        // At most gc_max_deletes_per_pass: the rest waits for the next pass (the next
        // snapshot, or the fencing-bound timer).
        if (deleted >= c->options.gc_max_deletes_per_pass || c->stopped) break;
        // Only this actor's log, ever (never nodes/, owners/, leases/).
        WK_CHECK(key.starts_with(wal_prefix) || key.starts_with(snap_prefix), "gc of a key outside the log: " + key);
        std::string k = key;
        Status st = co_await gc_store.Delete(std::move(k), Precondition::None(), CallOptions{c->options.upload_timeout});
        if (!st.ok()) break;  // the next pass tries again
        ++deleted;
        ++c->stats.gc_deleted;
        if (c->totals) ++c->totals->gc_deleted;
        if (c->options.gc_delete_interval > Duration(0) && !co_await c->env.SleepFor(c->options.gc_delete_interval)) break;
      }
      if (plan.waiting_for_bound && !c->gc_timer && !c->stopped) {
        std::weak_ptr<Core> weak = c;
        c->gc_timer = c->env.StartTimer(c->opened + c->options.gc_off_chain_after + milliseconds(1), [weak] {
          if (auto core = weak.lock()) {
            core->gc_timer.reset();
            core->MaybeCollect();
          }
        });
      }
    } while (c->gc_again && !c->stopped && c->UntilNextPass() <= Duration(0));
    c->gc_running = false;
    // Asked again during the pass, too soon for another under retention: deferred (at
    // least a nanosecond, so it never starts inside this task).
    if (c->gc_again && !c->stopped) {
      c->gc_again = false;
      c->DeferPass(std::max(c->UntilNextPass(), Duration(1)));
    }
  }

  // ---- failure and stop
  // Every failure goes through the gate (sticky); the gate then calls GateFailed once.
  void Fail(Status why) { gate.Cut(std::move(why)); }

  // Loop thread, once: the gate failed (an upload failed or was Late, the hold ended, or
  // the runtime gave up on it). Its waiters were answered; stop everything else.
  void GateFailed(const Status& why) {
    // on_failed may destroy the Replica that owns this core.
    std::shared_ptr<Core> self = shared_from_this();
    {
      std::lock_guard lock(mu);
      open_batches.clear();
      open_payload.clear();
    }
    WK_LOG_WARN("replica failed: nothing unacknowledged will be",
                {{"actor", actor.ToString()}, {"generation", std::to_string(hold.generation.value)}, {"error", why.ToString()}});
    StopBackground();
    if (auto fn = std::move(on_failed)) fn(why);
  }

  void StopBackground() {
    if (gc_task.valid()) gc_task.Cancel();
    if (gc_timer) {
      env.CancelTimer(*gc_timer);
      gc_timer.reset();
    }
    if (gc_pass_timer) {
      env.CancelTimer(*gc_pass_timer);
      gc_pass_timer.reset();
    }
  }
};

Replica::Replica(std::shared_ptr<Core> core) : core_(std::move(core)) {}

Replica::~Replica() {
  Core& c = *core_;
  c.ReportClosed();
  c.stopped = true;
  c.on_failed = nullptr;
  c.gate.set_on_failed(nullptr);  // a close, not a failure: nothing to abandon or log
  // Callbacks still owed are answered now; nothing is released after this.
  c.gate.Cut(Retryable("the replica of " + c.actor.ToString() + " was closed"));
  c.StopBackground();
}

Task<Result<std::unique_ptr<Replica>>> Replica::Open(Deps deps, ActorId actor, Hold hold, ReplicaOptions options,
                                                     std::optional<HoldResume> resume) {
  Env& env = deps.env;
  ObjectStore& store = deps.store.ForPurpose(BucketPurpose::kRestore);
  ReplicaTotals* totals = deps.totals;
  RestoreOptions ro = options.restore;
  ro.broken = deps.broken;
  const MonoTime start = env.MonoNow();
  const std::optional<std::uint64_t> resume_segment = resume ? std::optional<std::uint64_t>(resume->segment) : std::nullopt;
  auto restored = co_await Restore(env, store, actor, hold.generation, ro, resume_segment);
  if (!restored.ok()) {
    if (totals) ++totals->restore_failures;
    // A restore that outlived its hold listed and read while later holds wrote and collected
    // garbage: a missing object or a later generation in that view proves nothing, so no
    // kFatal or kPreconditionFailed from it (the simulator's `storage` scenario).
    if (!hold.is_valid()) {
      co_return Retryable("the hold of " + actor.ToString() + " ended during its restore: " + restored.status().ToString());
    }
    co_return restored.status();
  }
  if (totals) {
    ++totals->restores;
    totals->restore_seconds.Observe(Seconds(env.MonoNow() - start));
  }
  auto core = std::make_shared<Core>(std::move(deps), actor, std::move(hold), options);
  std::weak_ptr<Core> weak = core;
  core->gate.set_on_failed([weak](Status why) {
    if (auto c = weak.lock()) c->GateFailed(why);
  });
  core->opened = start;
  core->restored = std::move(*restored);
  core->state = std::move(core->restored.state);
  core->restored.state = actor::StateMap();
  core->chain.insert(core->restored.chain.run.begin(), core->restored.chain.run.end());
  core->snapshot = core->restored.chain.base;
  for (const auto& p : core->restored.chain.run) {
    if (p.seq > 0) ++core->segments_since_snapshot;
  }
  core->bytes_since_snapshot = core->restored.bytes_since_base;
  if (resume) {
    // The same hold continues (docs/node-lease.md, "Sleeping holds"): its log and its batch
    // numbers go on where it slept, so no key it wrote is written again (segments, and the
    // alarm index's entries, which carry the batch number).
    core->committed = resume->batch;
    core->sent_seq = resume->batch;
    core->next_seq = resume->segment + 1;
  }
  if (core->alarms != nullptr) {
    core->alarms->Opened(actor, core->hold.generation, core->state.indexed_time(), core->hold.is_valid,
                         resume ? resume->batch : 0);
  }
  if (resume) {
    if (!core->hold.is_valid()) {
      core->ReportClosed();
      co_return Retryable("the hold of " + actor.ToString() + " ended during its restore");
    }
    // Everything up to resume.batch was acknowledged while this hold was valid, before it
    // slept; the gate asks validity now, as a fence's acknowledgement would.
    if (core->gate.Acknowledged(resume->batch, "the woken hold's log") != HoldGate::AckOutcome::kAcknowledged) {
      core->ReportClosed();
      co_return Retryable("the hold of " + actor.ToString() + " ended as it woke");
    }
    if (core->AlarmsReachable()) core->alarms->Fenced(actor, core->hold.generation);
    // A long chain is snapshotted after the next segment (the counts stand as restored).
    co_return std::unique_ptr<Replica>(new Replica(std::move(core)));
  }

  // The fence: the first segment of this hold, naming the chain it restored.
  Segment fence;
  fence.actor = actor;
  fence.position = Position{core->hold.generation, 0};
  fence.fence = core->restored.chain;
  std::string body = EncodeSegment(fence);
  std::optional<std::string> snapshot_body;
  if (core->segments_since_snapshot >= options.snapshot_every_segments ||
      core->bytes_since_snapshot >= options.snapshot_every_bytes) {
    // A long chain inherited: snapshot the restored state as of the fence.
    snapshot_body = EncodeSnapshot(actor, fence.position, core->state);
    core->segments_since_snapshot = 0;
    core->bytes_since_snapshot = 0;
  }
  if (!core->hold.is_valid()) {
    core->ReportClosed();
    co_return Retryable("the hold of " + actor.ToString() + " ended during its restore");
  }
  core->uploading = true;
  env.Spawn(Core::Upload(core, fence.position, std::move(body), 0, 0, std::move(snapshot_body)), "fence upload");
  co_return std::unique_ptr<Replica>(new Replica(std::move(core)));
}

std::optional<std::string> Replica::Get(std::string_view key) const {
  std::lock_guard lock(core_->mu);
  return core_->state.Get(key);
}

void Replica::List(const actor::ListQuery& query, const actor::ListVisitor& visit) const {
  std::lock_guard lock(core_->mu);
  core_->state.List(query, visit);
}

std::optional<std::int64_t> Replica::Alarm() const {
  std::lock_guard lock(core_->mu);
  return core_->state.alarm();
}

std::optional<std::string> Replica::GetSystem(std::string_view key) const {
  std::lock_guard lock(core_->mu);
  return core_->state.GetSystem(key);
}

void Replica::ListSystem(const actor::ListQuery& query, const actor::ListVisitor& visit) const {
  std::lock_guard lock(core_->mu);
  core_->state.ListSystem(query, visit);
}

std::uint64_t Replica::SystemBytes() const {
  std::lock_guard lock(core_->mu);
  return core_->state.system_bytes();
}

std::uint64_t Replica::StoredBytes() const {
  std::lock_guard lock(core_->mu);
  return core_->state.bytes();
}

std::uint64_t Replica::MemoryBytes() const {
  std::lock_guard lock(core_->mu);
  return core_->state.memory_bytes();
}

std::uint64_t Replica::Commit(actor::Batch batch) {
  Core& c = *core_;
  std::uint64_t seq = 0;
  bool kick = false;
  {
    std::lock_guard lock(c.mu);
    seq = ++c.committed;
    c.state.Apply(batch);
    if (c.gate.broken()) return seq;
    // Batches are numbered in commit order with no gap (a gate that never failed dropped
    // none): the gate's "durable up to seq" and Close's target mean every batch before it.
    WK_CHECK(c.open_batches.empty() || c.open_batches.back().seq + 1 == seq,
             c.actor.ToString() + ": batch " + std::to_string(seq) + " committed after batch " +
                 std::to_string(c.open_batches.back().seq));
    // The index keeps the indexed time (the alarm or the wake entry's time, the earlier:
    // actor/storage.h), so a batch touching either is an alarm change for it.
    if (c.alarms != nullptr && actor::ChangesIndexedTime(batch)) {
      c.alarm_commits.push_back(Core::AlarmChange{seq, c.state.indexed_time()});
    }
    const std::size_t bytes = AppendBatch(batch, c.open_payload);
    c.open_batches.push_back(Core::OpenBatch{seq, bytes, !batch.system.empty()});
    kick = !c.kick_posted;
    c.kick_posted = true;
  }
  if (kick) {
    std::weak_ptr<Core> weak = core_;
    c.post([weak] {
      if (auto core = weak.lock()) core->Kick();
    });
  }
  return seq;
}

void Replica::WhenReleasable(std::uint64_t seq, std::function<void(Status)> done) {
  core_->gate.WhenReleasable(seq, std::move(done));
}

Status Replica::failure() const { return core_->gate.failure(); }

void Replica::Break(Status why) { core_->gate.CutFromAnyThread(std::move(why)); }

void Replica::set_on_failed(std::function<void(Status)> fn) { core_->on_failed = std::move(fn); }

void Replica::Cut(std::string why) {
  core_->Fail(Retryable("the hold of " + core_->actor.ToString() + " ended (" + why + "); its unacknowledged writes are void"));
}

Task<Status> Replica::Close(Duration limit) {
  std::shared_ptr<Core> c = core_;
  std::uint64_t target = 0;
  {
    std::lock_guard lock(c->mu);
    target = c->committed;
  }
  Latch<Status> done(c->env, [] { return Cancelled("close cancelled"); });
  WhenReleasable(target, [done](Status s) { done.Set(std::move(s)); });
  const auto timer = c->env.StartTimer(c->env.MonoNow() + limit, [done, limit] {
    done.Set(UnknownOutcome("writes not durable within " + std::to_string(duration_cast<milliseconds>(limit).count()) + " ms"));
  });
  Status s = co_await done.Wait();
  c->env.CancelTimer(timer);
  c->stopped = true;
  c->StopBackground();
  co_return s;
}

const ActorId& Replica::actor() const { return core_->actor; }
Generation Replica::generation() const { return core_->hold.generation; }
HoldResume Replica::resume_point() const {
  std::lock_guard lock(core_->mu);
  return HoldResume{core_->next_seq - 1, core_->committed};
}
ReplicaStats Replica::stats() const { return core_->stats; }
const Restored& Replica::restored() const { return core_->restored; }

}  // namespace wk::replica
