#include "alarm_clients.h"

#include <algorithm>

#include "alarms/alarm_index.h"
#include "alarms/alarm_service.h"
#include "alarms/format.h"
#include "replica/format.h"
#include "replica/restore.h"
#include "durable_state.h"
#include "storage_history.h"

namespace wk::sim {

AlarmClients::AlarmClients(World& world, ServingCluster& cluster, AlarmClientsOptions options)
    : w_(world), cluster_(cluster), options_(std::move(options)), actors_(Actors(options_)) {}

std::vector<ActorId> AlarmClients::Actors(const AlarmClientsOptions& options) {
  const std::string tenant(kServingTenant);
  std::vector<ActorId> actors;
  for (int i = 0; i < options.busy; ++i) actors.push_back(ActorId{tenant, options.class_name, "b" + std::to_string(i)});
  for (int i = 0; i < options.lonely; ++i) actors.push_back(ActorId{tenant, options.class_name, "l" + std::to_string(i)});
  return actors;
}

alarms::AlarmOptions SimAlarmOptions(const LeaseTiming& timing) {
  alarms::AlarmOptions a;
  a.scan_period = seconds(3);
  a.scan_lag = seconds(1);
  a.first_retry = seconds(1);
  a.max_retries = 3;
  a.handed_recheck = 2 * timing.ttl + timing.grace;
  WK_CHECK(alarms::ValidateAlarmOptions(a, timing).ok(), "bad simulator alarm options");
  return a;
}

void AlarmClients::Configure(ServingOptions& o) {
  alarm_options_ = SimAlarmOptions(w_.timing());
  o.alarms = alarm_options_;
  o.host.alarm_failure_percent = static_cast<int>(w_.Uniform(5, 20));
  o.host.on_alarm_run = [this](const ActorId& actor, std::int64_t due, std::int64_t now, int retry, bool failed,
                               bool last) { OnAlarmRun(actor, due, now, retry, failed, last); };
}

void AlarmClients::Start() {
  for (int c = 0; c < options_.clients; ++c) cluster_.client_env().Spawn(BusyClient(), "busy client");
  for (int i = 0; i < options_.lonely; ++i) {
    const Duration at = milliseconds(w_.Uniform(3000, World::Ms(options_.lonely_until)));
    cluster_.client_env().Spawn(LonelyClient(options_.busy + i, at), "lonely client");
  }
}

void AlarmClients::OnLanded(const std::string& key, const std::string& body) {
  if (key.starts_with(replica::kWalPrefix)) OnSegmentLanded(key, body);
}

void AlarmClients::OnDelete(int number, const std::string& key) {
  if (key.starts_with(alarms::kAlarmsPrefix)) OnEntryDelete(number, key);
}

std::size_t AlarmClients::EntriesFor(const ActorId& actor, std::int64_t due, const std::string& except) {
  const std::string prefix = alarms::AlarmPrefix(actor, due);
  std::size_t n = 0;
  for (auto it = w_.bucket()->objects().lower_bound(prefix); it != w_.bucket()->objects().end() && it->first.starts_with(prefix);
       ++it) {
    n += it->first != except;
  }
  return n;
}

// ---- online checkers
// A1: never before its time, on the running node's clock.
void AlarmClients::OnAlarmRun(const ActorId& actor, std::int64_t due, std::int64_t now, int retry, bool failed, bool last) {
  ++w_.result().alarm_runs;
  if (failed) ++w_.result().alarm_failed_runs;
  w_.Trace(actor.name + " alarm " + std::to_string(due) + " runs at " + std::to_string(now) + " retry " +
        std::to_string(retry) + (failed ? " FAILS" : "") + (last ? " (last attempt)" : ""));
  if (now < due) {
    w_.Violation("A1: the alarm of " + actor.name + " due at " + std::to_string(due) + " ran at " + std::to_string(now) +
              " on its node's clock, " + std::to_string(due - now) + " ms early");
  }
  if (failed && last) gave_up_.insert({actor, due});
}

// A2: an entry goes only once the durable state no longer needs it.
void AlarmClients::OnEntryDelete(int number, const std::string& key) {
  auto e = alarms::ParseEntryKey(key);
  if (!e.ok()) return;
  ++w_.result().alarm_entries_deleted;
  auto state = DurableState(w_, e->actor);
  if (!state) return;  // a restore in the middle of a chain's change: judged at the end
  if (state->alarm() == std::optional<std::int64_t>(e->due_ms) && EntriesFor(e->actor, e->due_ms, key) == 0) {
    w_.Violation("A2: p" + std::to_string(number) + " deletes the last index entry of " + e->actor.name + " at " +
              std::to_string(e->due_ms) + " (generation " + std::to_string(e->generation.value) + ", batch " +
              std::to_string(e->batch) + ") while the durable state still holds that alarm");
  }
}

// A3: a segment setting an alarm lands on the newest chain only with an index entry.
void AlarmClients::OnSegmentLanded(const std::string& key, const std::string& body) {
  auto seg = replica::DecodeSegment(body);
  if (!seg.ok() || seg->position.seq == 0) return;
  std::optional<std::optional<std::int64_t>> alarm;
  for (const actor::Batch& b : seg->batches) {
    if (b.alarm.has_value()) alarm = b.alarm;
  }
  if (!alarm || !alarm->has_value()) return;
  // Off the chain if a later hold's fence exists already (it restored without this).
  const std::string wal = replica::WalPrefix(seg->actor);
  for (auto it = w_.bucket()->objects().lower_bound(wal); it != w_.bucket()->objects().end() && it->first.starts_with(wal); ++it) {
    auto p = replica::ParseKeyPosition(wal, it->first);
    if (p.ok() && p->seq == 0 && p->generation > seg->position.generation) return;
  }
  if (EntriesFor(seg->actor, **alarm) == 0) {
    w_.Violation("A3: segment " + key + " sets the alarm of " + seg->actor.name + " to " + std::to_string(**alarm) +
              " and landed with no index entry for it");
  }
}

// ---- clients
// Sends one request to a random node; true if answered 200.
Task<bool> AlarmClients::Send(int actor, std::string method, std::string path, std::string query) {
  const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
  const ActorId& id = actors_[static_cast<std::size_t>(actor)];
  ServerRequest request = cluster_.Request(method, id.ToString() + path + (query.empty() ? "" : "?" + query));
  auto got = co_await cluster_.Send(slot, std::move(request));
  const bool ok = got.ok() && got->status == 200;
  w_.Trace("client " + method + " " + id.name + path + "?" + query + " via n" + std::to_string(slot) + ": " +
        (got.ok() ? std::to_string(got->status) : got.status().ToString()));
  co_return ok;
}

Task<bool> AlarmClients::SetAlarm(int actor, std::int64_t due) {
  ++w_.result().alarm_sets;
  const bool ok = co_await Send(actor, "POST", "/set", "t=" + std::to_string(due));
  if (ok) {
    ++w_.result().alarm_acked_sets;
    acked_sets_[actors_[static_cast<std::size_t>(actor)]].insert(due);
  }
  co_return ok;
}

Task<void> AlarmClients::BusyClient() {
  for (;;) {
    if (!co_await cluster_.client_env().SleepFor(milliseconds(w_.Uniform(300, 1500)))) co_return;
    if (w_.Now() >= MonoTime(options_.busy_clients_for)) co_return;
    const int actor = static_cast<int>(w_.Uniform(0, options_.busy - 1));
    const auto roll = w_.Uniform(0, 99);
    if (roll < 50) {
      std::int64_t due = TrueMs() + w_.Uniform(300, 15000);
      // Now and then the same time again: a key of its own per set keeps it apart.
      auto last = last_due_.find(actor);
      if (w_.Chance(0.2) && last != last_due_.end() && last->second > TrueMs()) due = last->second;
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
Task<void> AlarmClients::LonelyClient(int actor, Duration at) {
  if (!co_await cluster_.client_env().SleepUntil(MonoTime(at))) co_return;
  const std::int64_t due = TrueMs() + w_.Uniform(1000, 30000);
  for (int attempt = 0; attempt < 5; ++attempt) {
    const bool ok = co_await SetAlarm(actor, due);
    if (ok) co_return;
    if (!co_await cluster_.client_env().SleepFor(seconds(2))) co_return;
  }
}

// ---- the checkers at the end
void AlarmClients::FinalChecks() {
  const std::int64_t end_ms = TrueMs();
  const std::int64_t healthy_ms = kOriginMs + World::Ms(options_.healthy_from);
  const std::int64_t bound_ms = World::Ms(alarm_options_.scan_period + alarm_options_.scan_lag + seconds(3));
  for (const ActorId& actor : actors_) {
    auto state = DurableState(w_, actor);
    if (!state) {
      w_.Violation(actor.name + ": its durable state cannot be restored");
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
        ++w_.result().alarm_fired;
        if (pending != std::optional<std::int64_t>(due)) {
          w_.Violation("A5: " + actor.name + " fired its alarm of " + std::to_string(due) + " after it was " +
                    (pending ? "replaced by " + std::to_string(*pending) : std::string("deleted")));
        }
        if (now < due) w_.Violation("A1: " + actor.name + "'s log shows its alarm of " + std::to_string(due) + " fired early");
        if (retry > alarm_options_.max_retries) {
          w_.Violation(actor.name + ": alarm of " + std::to_string(due) + " ran at retry " + std::to_string(retry));
        }
        const std::int64_t backoff =
            World::Ms(alarm_options_.first_retry) * ((std::int64_t{1} << std::min(retry, 20)) - 1);
        if (due >= healthy_ms && now - due > bound_ms + backoff) {
          w_.Violation("A6: " + actor.name + "'s alarm of " + std::to_string(due) + " fired " +
                    std::to_string(now - due) + " ms late while the cluster was healthy (bound " +
                    std::to_string(bound_ms + backoff) + " ms)");
        }
        pending.reset();
      }
    }
    if (pending) {
      const std::int64_t due = *pending;
      if (final_alarm == pending) {
        if (due <= end_ms - World::Ms(options_.not_yet_due)) {
          ++w_.result().alarm_lost;
          w_.Violation("A4: " + actor.name + "'s alarm of " + std::to_string(due) + " (due " +
                    std::to_string((end_ms - due) / 1000) + " s before the end) never fired; index entries: " +
                    std::to_string(EntriesFor(actor, due)));
        }
      } else if (!gave_up_.count({actor, due})) {
        w_.Violation("A4: " + actor.name + "'s alarm of " + std::to_string(due) +
                  " was cleared without firing and without a failed last attempt");
      } else {
        ++w_.result().alarm_given_up;
      }
    }
    if (final_alarm && EntriesFor(actor, *final_alarm) == 0) {
      w_.Violation("A7: " + actor.name + "'s durable state holds the alarm " + std::to_string(*final_alarm) +
                " with no index entry");
    }
    for (std::int64_t due : acked_sets_[actor]) {
      if (!logged_sets.count(due)) {
        w_.Violation(actor.name + ": the acknowledged set of its alarm to " + std::to_string(due) + " is not in its log");
      }
    }
  }
}

}  // namespace wk::sim
