#include "alarms/shard_scanner.h"

#include <map>

#include "base/crc32c.h"
#include "base/log.h"

namespace wk::alarms {
namespace {

constexpr int kScanPageSize = 1000;
constexpr Duration kListTimeout = std::chrono::seconds(5);

std::uint32_t Rank(const NodeId& node, int shard) { return Crc32c(node.str() + "/" + std::to_string(shard)); }

}  // namespace

ShardScanner::ShardScanner(Env& env, ObjectStore& store, Owners& owners, const Membership& membership,
                           const NodeLease& lease, const DrainControl& drains, AlarmService& service)
    : env_(env),
      store_(store.ForPurpose(BucketPurpose::kAlarm)),
      owners_(owners),
      membership_(membership),
      lease_(lease),
      drains_(drains),
      service_(service) {}

ShardScanner::~ShardScanner() {
  Stop();
  *alive_ = false;
}

void ShardScanner::Start() {
  running_ = true;
  ScheduleTick();
}

void ShardScanner::Stop() {
  running_ = false;
  if (tick_) env_.CancelTimer(*tick_);
  tick_.reset();
  if (pass_.valid()) pass_.Cancel();
}

// Driven by a timer that spawns one pass at a time (docs/DEVELOPING.md: a looping member
// coroutine that sleeps was miscompiled by GCC 12).
void ShardScanner::ScheduleTick() {
  std::weak_ptr<bool> alive = alive_;
  tick_ = env_.StartTimer(env_.MonoNow() + kPassInterval, [this, alive] {
    if (auto a = alive.lock(); !a || !*a) return;
    tick_.reset();
    if (!running_) return;
    if (pass_.done() || !pass_.valid()) pass_ = env_.Spawn(Pass(alive_, this), "alarm shard pass");
    ScheduleTick();
  });
}

std::array<bool, kShards> ShardScanner::Assigned() const {
  std::array<bool, kShards> out{};
  const NodeId& self = lease_.identity().node_id;
  // A draining node releases its shards and takes none: ranking it would leave its share
  // unscanned for as long as it stays drained (docs/alarms.md, "Who fires").
  auto serving = [&](const NodeId& id) {
    return broken_.on(BrokenModel::kShardRankIncludesDrained) || !drains_.Draining(id);
  };
  std::vector<NodeId> live;
  for (const auto& [id, view] : membership_.view()) {
    if (view.live() && id != self && serving(id)) live.push_back(id);
  }
  if (lease_.IsValid() && serving(self)) live.push_back(self);
  for (int s = 0; s < kShards; ++s) {
    const NodeId* best = nullptr;
    for (const NodeId& n : live) {
      if (best == nullptr || Rank(n, s) > Rank(*best, s) || (Rank(n, s) == Rank(*best, s) && n > *best)) best = &n;
    }
    out[static_cast<std::size_t>(s)] = best != nullptr && *best == self;
  }
  return out;
}

Task<void> ShardScanner::Pass(std::shared_ptr<bool> alive, ShardScanner* self) {
  const std::array<bool, kShards> assigned = self->Assigned();
  std::size_t held = 0;
  for (int s = 0; s < kShards && *alive && self->running_; ++s) {
    const ActorId shard = ShardActor(s);
    HoldView hold = self->owners_.Find(shard);
    if (!assigned[static_cast<std::size_t>(s)]) {
      if (!hold.empty()) {
        ++self->stats_.releases;
        Status released = co_await self->owners_.Release(shard);
        released.IgnoreError();  // a release that cannot land stays pending (Owners)
      }
      self->due_entries_[static_cast<std::size_t>(s)] = 0;
      continue;
    }
    if (!hold.IsValid()) {
      if (!self->lease_.IsValid() || !self->owners_.accepting()) continue;
      AcquireResult got = co_await self->owners_.Acquire(shard);
      if (!*alive) co_return;
      if (got.kind != AcquireResult::Kind::kAcquired) continue;  // held by the node it was assigned to before: next pass
      ++self->stats_.acquisitions;
      hold = got.hold;
      self->next_scan_[static_cast<std::size_t>(s)] = MonoTime{};  // scan a newly held shard at once
    }
    ++held;
    if (self->env_.MonoNow() < self->next_scan_[static_cast<std::size_t>(s)]) continue;
    self->next_scan_[static_cast<std::size_t>(s)] = self->env_.MonoNow() + self->service_.options().scan_period;
    co_await self->Scan(s);
    if (!*alive) co_return;
  }
  if (*alive) self->stats_.shards_held = held;
  std::size_t due = 0;
  for (std::size_t n : self->due_entries_) due += n;
  if (*alive) self->stats_.index_due_entries = due;
}

Task<void> ShardScanner::Scan(int shard) {
  std::shared_ptr<bool> alive = alive_;
  const ActorId shard_actor = ShardActor(shard);
  const std::int64_t now_ms = ToUnixMs(env_.WallNow());
  const std::int64_t lag_ms = std::chrono::duration_cast<std::chrono::milliseconds>(service_.options().scan_lag).count();
  // Per actor, its earliest entry due for at least scan_lag.
  std::map<ActorId, EntryKey> ready;
  std::size_t due = 0;
  ListOptions lo;
  lo.prefix = ShardPrefix(shard);
  lo.page_size = kScanPageSize;
  bool more = true;
  ++stats_.scans;
  while (more) {
    ++stats_.lists;
    ListOptions page_options = lo;
    auto page = co_await store_.List(std::move(page_options), CallOptions{kListTimeout});
    if (!*alive) co_return;
    if (!page.ok()) {
      ++stats_.scan_failures;
      // The next pass scans it again.
      next_scan_[static_cast<std::size_t>(shard)] = env_.MonoNow();
      co_return;
    }
    more = page->next_continuation.has_value();
    if (more) lo.continuation = *page->next_continuation;
    for (const ListEntry& e : page->entries) {
      auto key = ParseEntryKey(e.key);
      if (!key.ok()) {
        ++stats_.foreign_keys;
        continue;
      }
      if (key->due_ms > now_ms) {
        more = false;  // sorted by due time: nothing later is due
        break;
      }
      ++due;
      if (key->due_ms > now_ms - lag_ms) continue;  // its owner's timer goes first
      auto it = ready.find(key->actor);
      if (it == ready.end() || key->due_ms < it->second.due_ms) ready[key->actor] = *key;
    }
  }
  due_entries_[static_cast<std::size_t>(shard)] = due;
  stats_.due_entries += due;
  for (const auto& [actor, key] : ready) {
    // Only while this node holds the shard (a lapse, a loss or a drain stops it at once).
    if (!owners_.Find(shard_actor).IsValid()) break;
    if (service_.Saturated()) break;  // the rest at the next scan
    if (!service_.MayDeliver(actor, key.due_ms)) continue;
    service_.Deliver(actor, key.due_ms, DeliverySource::kScanner, key.generation);
  }
}

void PublishAlarmMetrics(MetricsRegistry& registry, const AlarmService& service, const AlarmIndex& index,
                         const ShardScanner& scanner) {
  const AlarmStats& s = service.stats();
  registry.AddCallbackCounter("wasmkeep_alarms_due_total", "Alarm events started (an alarm found due by a timer, a scan or a hand-over).",
                              [&s] { return static_cast<double>(s.due); });
  registry.AddCallbackCounter("wasmkeep_alarms_fired_total", "Alarm handlers that ran and succeeded, their writes durable.",
                              [&s] { return static_cast<double>(s.fired); });
  registry.AddCallbackCounter("wasmkeep_alarms_retried_total", "Retries scheduled after a failed alarm handler.",
                              [&s] { return static_cast<double>(s.retried); });
  registry.AddCallbackCounter("wasmkeep_alarms_gave_up_total", "Alarms cleared after their last retry failed.",
                              [&s] { return static_cast<double>(s.gave_up); });
  registry.AddCallbackCounter("wasmkeep_alarms_quarantined_total",
                              "Alarm deliveries not started because the actor is quarantined.",
                              [&s] { return static_cast<double>(s.quarantined); });
  registry.AddCallbackCounter("wasmkeep_alarms_handed_total", "Alarms handed over to the node holding their actor.",
                              [&s] { return static_cast<double>(s.handed); });
  const std::string held = "Alarm attempts the rate gates held (docs/alarms.md, \"Rate\"): to their actor's "
                           "min_interval, or queued for the node's max_events_per_second.";
  registry.AddCallbackCounter("wasmkeep_alarms_held_total", held, [&s] { return static_cast<double>(s.spaced); },
                              {{"gate", "interval"}});
  registry.AddCallbackCounter("wasmkeep_alarms_held_total", held, [&s] { return static_cast<double>(s.queued); },
                              {{"gate", "rate"}});
  registry.AddHistogramView("wasmkeep_alarms_late_seconds",
                            "From an alarm's time to the start of its handler's successful run.", s.late_seconds);
  const AlarmIndexStats& i = index.stats();
  const std::string requests = "Requests of the alarm index by kind (entries written, deleted; prefixes listed).";
  registry.AddCallbackCounter("wasmkeep_alarms_index_requests_total", requests,
                              [&i] { return static_cast<double>(i.puts); }, {{"op", "put"}});
  registry.AddCallbackCounter("wasmkeep_alarms_index_requests_total", requests,
                              [&i] { return static_cast<double>(i.deletes); }, {{"op", "delete"}});
  registry.AddCallbackCounter("wasmkeep_alarms_index_requests_total", requests,
                              [&i] { return static_cast<double>(i.lists); }, {{"op", "list"}});
  registry.AddCallbackGauge("wasmkeep_alarms_wake_timers", "Timers kept for actors that left memory with an alarm.",
                            [&s] { return static_cast<double>(s.wake_timers); });
  const ShardScannerStats& sc = scanner.stats();
  registry.AddCallbackGauge("wasmkeep_alarms_shards_held", "Alarm index shards this node holds and scans.",
                            [&sc] { return static_cast<double>(sc.shards_held); });
  registry.AddCallbackGauge("wasmkeep_alarms_index_entries",
                            "Due index entries (alarms not yet removed) in this node's shards at their last scans.",
                            [&sc] { return static_cast<double>(sc.index_due_entries); });
  registry.AddCallbackCounter("wasmkeep_alarms_scans_total", "Shard scans (each one LIST, and one more per 1,000 due entries).",
                              [&sc] { return static_cast<double>(sc.scans); });
}

}  // namespace wk::alarms
