// The `alarms` scenario: alarm delivery on three simulated nodes (docs/alarms.md,
// docs/simulation.md "alarms"). Each node is the serving harness's (serving.h: its real
// ClusterNode, ReplicaProvider, Forwarder and Front, native actors in place of
// WebAssembly) with the real alarm subsystem switched on: the AlarmIndex under its replicas, the AlarmService (owner and
// wake timers, deliveries, retries, hand-overs through the front's /v1/alarms/) and the
// ShardScanner (shards held through ownership records). The actors are the native host's
// "alarm" class: a log of what happened to the alarm (s<ms> set, d deleted,
// f<due>:<retry>:<now> fired), kept in the actor's durable state.
//
// Faults: the Faults' serving profile (faults.h), a little harsher than the routing
// scenario's mix.
//
// Workload. Busy actors get sets, deletes and reads from clients all run long; lonely
// actors get exactly one set each during the chaos and nothing more, so an alarm lost by
// the index is lost for good (no later request restores them). Handlers fail at random
// (retries), always for poisoned times (given up), and sometimes re-arm.
//
// Checkers (violations name the actor, the alarm and the node):
//   A1 (online) no handler runs before its time on its node's clock;
//   A2 (online) no index entry is removed while the actor's durable state (what a restore
//      sees at that instant) holds its alarm with no other entry for it: the handler's
//      writes, or the change that replaced the alarm, are durable before the entry goes;
//   A3 (online) no segment that sets an alarm lands on the newest chain without an index
//      entry for it (the invariant, rule 1);
//   at the end, from each actor's durable log (restored from the bucket):
//   A4 every alarm set, not replaced or deleted, fired at least once (or was given up after
//      its last retry failed, observed), unless it is not yet due;
//   A5 none fired after a delete or replacement: each f<due> follows its own s<due>;
//   A6 while the cluster is healthy every alarm fires within scan_period + scan_lag + 3 s
//      of its time (plus its retries' back-off);
//   A7 an alarm the durable state still holds has an index entry; and every acknowledged
//      set is in the log.
#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "alarms/alarm_index.h"
#include "alarms/alarm_service.h"
#include "alarms/format.h"
#include "faults.h"
#include "replica/format.h"
#include "replica/restore.h"
#include "scenario.h"
#include "serving.h"
#include "storage_history.h"
#include "world.h"

namespace wk::sim {
namespace {

constexpr int kBusy = 6;
constexpr int kLonely = 16;
constexpr int kClients = 3;
constexpr Duration kChaos = seconds(100);
constexpr Duration kBusyClientsFor = seconds(150);
constexpr Duration kLonelyUntil = seconds(85);
constexpr Duration kEnd = seconds(220);
// From here the cluster is healthy (every node restarted, every handed alarm rechecked).
constexpr Duration kHealthyFrom = seconds(140);
// Alarms due later than this before the end need not have fired yet.
constexpr Duration kNotYetDue = seconds(40);
constexpr std::string_view kClass = "alarm";

WorldOptions AlarmsWorld() {
  return WorldOptions{
      .stream = 0x2545f4914f6cdd1dULL, .skew_per_process = true, .chaos_for = kChaos, .heal_for = kEnd - kChaos};
}

class AlarmsSim {
 public:
  explicit AlarmsSim(const RunOptions& options)
      : world_(options, AlarmsWorld()),
        faults_(world_, FaultOptions{.serving = true,
                                     .serving_chaos = {.kill = 25, .freeze = 50, .peer_cut = 65, .bucket_cut = 85},
                                     .chaos_min = seconds(2),
                                     .chaos_max = seconds(7)}),
        cluster_(world_, faults_, Serving()) {
    const std::string tenant(kServingTenant), class_name(kClass);
    for (int i = 0; i < kBusy; ++i) actors_.push_back(ActorId{tenant, class_name, "b" + std::to_string(i)});
    for (int i = 0; i < kLonely; ++i) actors_.push_back(ActorId{tenant, class_name, "l" + std::to_string(i)});
    world_.hooks.on_landed = [this](const std::string& key, const std::string& body) {
      if (key.starts_with(replica::kWalPrefix)) OnSegmentLanded(key, body);
    };
    world_.hooks.on_delete = [this](int number, const std::string& key) {
      if (key.starts_with(alarms::kAlarmsPrefix)) OnDelete(number, key);
    };
  }

  RunResult Run() {
    World::Stages stages;
    stages.begin = [this] {
      for (int c = 0; c < kClients; ++c) cluster_.client_env().Spawn(BusyClient(), "busy client");
      for (int i = 0; i < kLonely; ++i) {
        const Duration at = milliseconds(world_.Uniform(3000, World::Ms(kLonelyUntil)));
        cluster_.client_env().Spawn(LonelyClient(kBusy + i, at), "lonely client");
      }
      faults_.ScheduleChaos();
    };
    stages.heal = [this] { faults_.Heal(); };
    stages.final_checks = [this] {
      world_.finished = true;
      FinalChecks();
    };
    return world_.Run(stages);
  }

 private:
  // The scenario's draws, in the order its recorded histories made them.
  ServingOptions Serving() {
    const BrokenModels broken = world_.options().broken();
    const LeaseTiming& timing = world_.timing();
    ServingOptions o;
    o.token = "Bearer alarms-test-token";
    o.class_name = std::string(kClass);
    o.secret_byte = 0x3c;
    o.replica.gc_off_chain_after = timing.takeover_after();
    o.replica.segment_max_batches = static_cast<std::uint32_t>(world_.Uniform(1, 6));
    o.replica.snapshot_every_segments = static_cast<std::uint32_t>(world_.Uniform(3, 8));
    alarms::AlarmOptions& a = alarm_options_;
    a.scan_period = seconds(3);
    a.scan_lag = seconds(1);
    a.first_retry = seconds(1);
    a.max_retries = 3;
    a.handed_recheck = 2 * timing.ttl + timing.grace;
    WK_CHECK(alarms::ValidateAlarmOptions(a, timing).ok(), "bad simulator alarm options");
    o.alarms = a;
    o.host.broken = broken;
    o.host.idle_hibernate = milliseconds(world_.Uniform(1500, 6000));
    o.host.alarm_failure_percent = static_cast<int>(world_.Uniform(5, 20));
    o.host.on_alarm_run = [this](const ActorId& actor, std::int64_t due, std::int64_t now, int retry, bool failed,
                                 bool last) { OnAlarmRun(actor, due, now, retry, failed, last); };
    return o;
  }

  static std::string At(MonoTime t) { return std::to_string(World::Ms(t.time_since_epoch())) + "ms"; }
  std::int64_t TrueMs() { return kOriginMs + World::Ms(world_.Now().time_since_epoch()); }
  void Trace(const std::string& line) { world_.Trace(line); }
  void Violation(const std::string& what) { world_.Violation(what); }
  const std::map<std::string, MemBucket::Object>& objects() { return world_.bucket()->objects(); }

  // ---- the durable state, as a restore at this instant would see it
  std::optional<actor::StateMap> DurableState(const ActorId& actor) {
    auto copy = std::make_shared<MemBucket>();
    const std::string wal = replica::WalPrefix(actor), snap = replica::SnapshotPrefix(actor);
    for (auto it = objects().lower_bound(wal); it != objects().end() && it->first.starts_with(wal); ++it) {
      copy->ApplyPut(it->first, it->second.body, Precondition::None()).status().IgnoreError();
    }
    for (auto it = objects().lower_bound(snap); it != objects().end() && it->first.starts_with(snap); ++it) {
      copy->ApplyPut(it->first, it->second.body, Precondition::None()).status().IgnoreError();
    }
    SimWorld w(1);
    SimEnv env(w, FromUnixMs(kOriginMs));
    MemStore store(env, copy);
    auto r = RunTask(w, env, replica::Restore(env, store, actor, Generation{UINT64_MAX - 1}, {}));
    if (!r || !r->ok()) return std::nullopt;
    return std::move((*r)->state);
  }
  // Index entries of (actor, due) in the bucket, but `except`.
  std::size_t EntriesFor(const ActorId& actor, std::int64_t due, const std::string& except = "") {
    const std::string prefix = alarms::AlarmPrefix(actor, due);
    std::size_t n = 0;
    for (auto it = objects().lower_bound(prefix); it != objects().end() && it->first.starts_with(prefix);
         ++it) {
      n += it->first != except;
    }
    return n;
  }

  // ---- online checkers
  // A1: never before its time, on the running node's clock.
  void OnAlarmRun(const ActorId& actor, std::int64_t due, std::int64_t now, int retry, bool failed, bool last) {
    ++world_.result().alarm_runs;
    if (failed) ++world_.result().alarm_failed_runs;
    Trace(actor.name + " alarm " + std::to_string(due) + " runs at " + std::to_string(now) + " retry " +
          std::to_string(retry) + (failed ? " FAILS" : "") + (last ? " (last attempt)" : ""));
    if (now < due) {
      Violation("A1: the alarm of " + actor.name + " due at " + std::to_string(due) + " ran at " + std::to_string(now) +
                " on its node's clock, " + std::to_string(due - now) + " ms early");
    }
    if (failed && last) gave_up_.insert({actor, due});
  }

  // A2: an entry goes only once the durable state no longer needs it.
  void OnDelete(int number, const std::string& key) {
    auto e = alarms::ParseEntryKey(key);
    if (!e.ok()) return;
    ++world_.result().alarm_entries_deleted;
    auto state = DurableState(e->actor);
    if (!state) return;  // a restore in the middle of a chain's change: judged at the end
    if (state->alarm() == std::optional<std::int64_t>(e->due_ms) && EntriesFor(e->actor, e->due_ms, key) == 0) {
      Violation("A2: p" + std::to_string(number) + " deletes the last index entry of " + e->actor.name + " at " +
                std::to_string(e->due_ms) + " (generation " + std::to_string(e->generation.value) + ", batch " +
                std::to_string(e->batch) + ") while the durable state still holds that alarm");
    }
  }

  // A3: a segment setting an alarm lands on the newest chain only with an index entry.
  void OnSegmentLanded(const std::string& key, const std::string& body) {
    auto seg = replica::DecodeSegment(body);
    if (!seg.ok() || seg->position.seq == 0) return;
    std::optional<std::optional<std::int64_t>> alarm;
    for (const actor::Batch& b : seg->batches) {
      if (b.alarm.has_value()) alarm = b.alarm;
    }
    if (!alarm || !alarm->has_value()) return;
    // Off the chain if a later hold's fence exists already (it restored without this).
    const std::string wal = replica::WalPrefix(seg->actor);
    for (auto it = objects().lower_bound(wal); it != objects().end() && it->first.starts_with(wal); ++it) {
      auto p = replica::ParseKeyPosition(wal, it->first);
      if (p.ok() && p->seq == 0 && p->generation > seg->position.generation) return;
    }
    if (EntriesFor(seg->actor, **alarm) == 0) {
      Violation("A3: segment " + key + " sets the alarm of " + seg->actor.name + " to " + std::to_string(**alarm) +
                " and landed with no index entry for it");
    }
  }

  // ---- clients
  // Sends one request to a random node; true if answered 200.
  Task<bool> Send(int actor, std::string method, std::string path, std::string query) {
    const int slot = static_cast<int>(world_.Uniform(0, kSlots - 1));
    const ActorId& id = actors_[static_cast<std::size_t>(actor)];
    ServerRequest request = cluster_.Request(method, id.ToString() + path + (query.empty() ? "" : "?" + query));
    auto got = co_await cluster_.Send(slot, std::move(request));
    const bool ok = got.ok() && got->status == 200;
    Trace("client " + method + " " + id.name + path + "?" + query + " via n" + std::to_string(slot) + ": " +
          (got.ok() ? std::to_string(got->status) : got.status().ToString()));
    co_return ok;
  }

  Task<bool> SetAlarm(int actor, std::int64_t due) {
    ++world_.result().alarm_sets;
    const bool ok = co_await Send(actor, "POST", "/set", "t=" + std::to_string(due));
    if (ok) {
      ++world_.result().alarm_acked_sets;
      acked_sets_[actors_[static_cast<std::size_t>(actor)]].insert(due);
    }
    co_return ok;
  }

  Task<void> BusyClient() {
    for (;;) {
      if (!co_await cluster_.client_env().SleepFor(milliseconds(world_.Uniform(300, 1500)))) co_return;
      if (world_.Now() >= MonoTime(kBusyClientsFor)) co_return;
      const int actor = static_cast<int>(world_.Uniform(0, kBusy - 1));
      const auto roll = world_.Uniform(0, 99);
      if (roll < 50) {
        std::int64_t due = TrueMs() + world_.Uniform(300, 15000);
        // Now and then the same time again: a key of its own per set keeps it apart.
        auto last = last_due_.find(actor);
        if (world_.Chance(0.2) && last != last_due_.end() && last->second > TrueMs()) due = last->second;
        last_due_[actor] = due;
        const bool ok = co_await SetAlarm(actor, due);
        (void)ok;
      } else if (roll < 65) {
        const bool ok = co_await Send(actor, "POST", "/del", "");
        (void)ok;
      } else {
        const bool ok = co_await Send(actor, "GET", "", "");
        (void)ok;
      }
    }
  }

  // One set, retried until answered 200 (at most 5 tries), then nothing more.
  Task<void> LonelyClient(int actor, Duration at) {
    if (!co_await cluster_.client_env().SleepUntil(MonoTime(at))) co_return;
    const std::int64_t due = TrueMs() + world_.Uniform(1000, 30000);
    for (int attempt = 0; attempt < 5; ++attempt) {
      const bool ok = co_await SetAlarm(actor, due);
      if (ok) co_return;
      if (!co_await cluster_.client_env().SleepFor(seconds(2))) co_return;
    }
  }

  // ---- the checkers at the end
  void FinalChecks() {
    const std::int64_t end_ms = TrueMs();
    const std::int64_t healthy_ms = kOriginMs + World::Ms(kHealthyFrom);
    const std::int64_t bound_ms = World::Ms(alarm_options_.scan_period + alarm_options_.scan_lag + seconds(3));
    for (const ActorId& actor : actors_) {
      auto state = DurableState(actor);
      if (!state) {
        Violation(actor.name + ": its durable state cannot be restored");
        continue;
      }
      const std::vector<std::string> log = StorageHistory::SplitLog(state->Get("log").value_or(""));
      const std::optional<std::int64_t> final_alarm = state->alarm();
      std::optional<std::int64_t> pending;
      std::set<std::int64_t> logged_sets;
      for (const std::string& op : log) {
        if (op.empty()) continue;
        if (op[0] == 's') {
          pending = std::stoll(op.substr(1));
          logged_sets.insert(*pending);
        } else if (op == "d") {
          pending.reset();
        } else if (op[0] == 'f') {
          const std::string f = op.substr(1);
          const auto c1 = f.find(':'), c2 = f.rfind(':');
          const std::int64_t due = std::stoll(f.substr(0, c1));
          const int retry = std::stoi(f.substr(c1 + 1, c2 - c1 - 1));
          const std::int64_t now = std::stoll(f.substr(c2 + 1));
          ++world_.result().alarm_fired;
          if (pending != std::optional<std::int64_t>(due)) {
            Violation("A5: " + actor.name + " fired its alarm of " + std::to_string(due) + " after it was " +
                      (pending ? "replaced by " + std::to_string(*pending) : std::string("deleted")));
          }
          if (now < due) Violation("A1: " + actor.name + "'s log shows its alarm of " + std::to_string(due) + " fired early");
          if (retry > alarm_options_.max_retries) {
            Violation(actor.name + ": alarm of " + std::to_string(due) + " ran at retry " + std::to_string(retry));
          }
          const std::int64_t backoff =
              World::Ms(alarm_options_.first_retry) * ((std::int64_t{1} << std::min(retry, 20)) - 1);
          if (due >= healthy_ms && now - due > bound_ms + backoff) {
            Violation("A6: " + actor.name + "'s alarm of " + std::to_string(due) + " fired " +
                      std::to_string(now - due) + " ms late while the cluster was healthy (bound " +
                      std::to_string(bound_ms + backoff) + " ms)");
          }
          pending.reset();
        }
      }
      if (pending) {
        const std::int64_t due = *pending;
        if (final_alarm == pending) {
          if (due <= end_ms - World::Ms(kNotYetDue)) {
            ++world_.result().alarm_lost;
            Violation("A4: " + actor.name + "'s alarm of " + std::to_string(due) + " (due " +
                      std::to_string((end_ms - due) / 1000) + " s before the end) never fired; index entries: " +
                      std::to_string(EntriesFor(actor, due)));
          }
        } else if (!gave_up_.count({actor, due})) {
          Violation("A4: " + actor.name + "'s alarm of " + std::to_string(due) +
                    " was cleared without firing and without a failed last attempt");
        } else {
          ++world_.result().alarm_given_up;
        }
      }
      if (final_alarm && EntriesFor(actor, *final_alarm) == 0) {
        Violation("A7: " + actor.name + "'s durable state holds the alarm " + std::to_string(*final_alarm) +
                  " with no index entry");
      }
      for (std::int64_t due : acked_sets_[actor]) {
        if (!logged_sets.count(due)) {
          Violation(actor.name + ": the acknowledged set of its alarm to " + std::to_string(due) + " is not in its log");
        }
      }
    }
  }

  World world_;
  Faults faults_;
  alarms::AlarmOptions alarm_options_;
  ServingCluster cluster_;
  std::vector<ActorId> actors_;
  std::map<int, std::int64_t> last_due_;
  std::map<ActorId, std::set<std::int64_t>> acked_sets_;
  std::set<std::pair<ActorId, std::int64_t>> gave_up_;
};

}  // namespace

RunResult RunAlarmsScenario(const RunOptions& options) { return AlarmsSim(options).Run(); }

}  // namespace wk::sim
