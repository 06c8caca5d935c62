// AlarmService: delivers due alarms to actors, at least once (docs/alarms.md, "Who fires",
// "Retries, in detail", "Rate"). Deliveries are asked for by the owner's timer, the last
// owner's timer (at most kMaxWakeTimers), the shard scanner and peers' hand-overs
// (ReceiveHandOver); each is routed as a request is: run here if resident, or held here
// while not resident (a sleeping hold: no routing read), else handed over to another live
// holder through a PeerSender, else acquired and run here; a start here is checked for
// quarantine first (routing/front.h). The alarm event decides against the state whether the handler
// runs (actor/alarm_event.h). One delivery per actor at a time; every attempt passes the
// per-actor interval and the node's rate.
//
// Threading: Env loop thread only. Simulator-clean: peers only through a PeerSender, events
// only through an actor::EventHost.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actor/event_host.h"
#include "alarms/alarm_index.h"
#include "base/metrics.h"
#include "cluster/membership.h"
#include "control/quarantine_cache.h"
#include "cluster/owners.h"
#include "cluster/timing.h"
#include "net/http_types.h"
#include "routing/peer_sender.h"

namespace wk::alarms {

// The default of alarms.max_events_per_second: 20 actors re-arming every millisecond ran 640
// alarm events a second on one node, most of a core, and raised another tenant's p99 from
// 2 ms to 25-200 ms (issue "Hostile tenants, round two"); 500 a second is room for 30,000
// actors whose alarms fire once a minute.
inline constexpr int kDefaultMaxAlarmEventsPerSecond = 500;
// Ranges of the rate settings: an interval past a minute is no longer a rate limit but a
// delay an actor cannot reason about; a node does not run more than 100,000 events a second.
inline constexpr Duration kMaxAlarmMinInterval = std::chrono::minutes(1);
inline constexpr int kMaxAlarmEventsPerSecondSetting = 100'000;

// The [alarms] settings (docs/alarms.md, "Settings"; docs/configuration.md).
struct AlarmOptions {
  Duration scan_period = std::chrono::seconds(10);
  Duration scan_lag = std::chrono::seconds(1);
  Duration first_retry = std::chrono::seconds(2);
  int max_retries = 6;
  Duration handed_recheck = std::chrono::seconds(30);
  // The least time between the starts of two alarm events of one actor on this node.
  Duration min_interval = std::chrono::seconds(1);
  // Alarm attempts the node starts a second at most, shared by tenants in turn.
  int max_events_per_second = kDefaultMaxAlarmEventsPerSecond;
};
// Ranges, and handed_recheck >= 2 * ttl + grace (the time a sender's pending release or a
// fence takes to free the record: docs/node-lease.md, "Bounds"). The error names the setting.
Status ValidateAlarmOptions(const AlarmOptions& options, const LeaseTiming& timing);

// Bounds, with their reasons.
// Deliveries that may acquire an actor (not the owner's own), in flight at once per node:
// each costs an acquisition and a restore, so a burst of due alarms of hibernated actors
// does not stampede the bucket.
inline constexpr std::size_t kDeliveryConcurrency = 64;
// Timers kept for actors that left memory; beyond it their alarms wait for the scanner.
inline constexpr std::size_t kMaxWakeTimers = 100'000;
// Attempts that could not run the event (the actor could not start here, the bucket
// failed) before a delivery gives up and leaves the entry to the next scan or timer.
inline constexpr int kMaxUnrunAttempts = 6;

struct AlarmStats {
  std::uint64_t due = 0;        // alarm events started
  std::uint64_t fired = 0;      // handlers that ran and succeeded
  std::uint64_t retried = 0;    // retries scheduled after a failed handler
  std::uint64_t gave_up = 0;    // alarms cleared after the last retry failed
  std::uint64_t stale = 0;      // deliveries the state found stale (nothing ran)
  std::uint64_t not_run = 0;    // attempts that could not run the event
  std::uint64_t quarantined = 0;  // deliveries not started: the actor is quarantined
  std::uint64_t handed = 0;     // hand-overs sent
  std::uint64_t received = 0;   // hand-overs received and accepted
  std::uint64_t wake_timers = 0;  // timers kept for actors that left memory (now)
  std::uint64_t spaced = 0;       // attempts held back to the actor's min_interval
  std::uint64_t queued = 0;       // attempts that waited for the node's max_events_per_second
  // From the alarm's time to the start of the run that succeeded.
  Histogram late_seconds{{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}};
};

// Who asked for a delivery (for the handed rule and the concurrency bound).
enum class DeliverySource : std::uint8_t { kOwnerTimer, kWakeTimer, kScanner, kHandOver };

struct AlarmServiceDeps {
  Env& env;
  Owners& owners;
  const Membership& membership;
  actor::EventHost& host;
  AlarmIndex& index;
  // Sends hand-overs, signed (the node's Forwarder); null: no hand-over (such a delivery
  // counts as not run).
  PeerSender* forwarder = nullptr;
  // Makes the class's module known before an actor starts here (as the front's, routing/front.h).
  std::function<Task<Status>(std::string tenant, std::string class_name)> load_class;
  // The node's quarantine records: an actor that is not resident is started by a delivery
  // only once what the node knows, at most the cache's ttl old, says it is not quarantined,
  // as a request's start is (routing/front.h). Null: quarantine off.
  control::QuarantineCache* quarantine = nullptr;
  // drop-handed-alarm (base/broken_models.h), and fire-before-due for the timers.
  BrokenModels broken;
  // Before an alarm of a resident actor, as the front's (routing/front.h). Unset: none.
  std::function<void(const std::string& tenant, const std::string& class_name)> refresh_class;
  // Right before an alarm event runs here: nullopt to run it, or how long to wait before
  // asking again (the tenant's alarms_per_second, routing/tenant_limits.h): the alarm runs
  // late, never dropped. Unset: no wait.
  std::function<std::optional<Duration>(const std::string& tenant)> admit;
};

class AlarmService {
 public:
  AlarmService(AlarmServiceDeps deps, AlarmOptions options, LeaseTiming timing);
  ~AlarmService();
  AlarmService(const AlarmService&) = delete;
  AlarmService& operator=(const AlarmService&) = delete;

  // Delivers the alarm of `actor` due at `due_ms`: now; or, if a delivery of the actor is
  // running, as it ends (for another time than its own; for the same time it is the
  // running one); a delivery waiting to retry an earlier time is ended for it (the state
  // holds at most one alarm, so the earlier one was replaced). Not at all if the actor's
  // alarm was handed over recently and this is not the owner's ask. `entry_generation`: the hold that wrote
  // the entry a scan found (its earlier entries are removed if the event finds it stale).
  void Deliver(const ActorId& actor, std::int64_t due_ms, DeliverySource source,
               std::optional<Generation> entry_generation = std::nullopt);
  // A peer's hand-over of a verified /v1/alarms/... request (its body "due <ms>\n"): 202
  // once a delivery runs here, 409 if the actor is neither resident nor held here, 400 for
  // a bad body.
  ServerResponse ReceiveHandOver(const ActorId& actor, std::string_view body);
  // Whether the scanner may deliver this actor's alarm of due_ms now (no delivery running,
  // not resident here with its owner's timer armed, no hand-over of that alarm waiting for
  // its recheck).
  bool MayDeliver(const ActorId& actor, std::int64_t due_ms) const;
  // Whether non-owner deliveries are at kDeliveryConcurrency.
  bool Saturated() const { return acquiring_ >= kDeliveryConcurrency; }

  // Cancels every timer and attempt (a stopping node).
  void Stop();

  const AlarmStats& stats() const { return stats_; }
  const AlarmOptions& options() const { return options_; }
  std::size_t deliveries() const { return deliveries_.size(); }
  std::size_t timers() const { return timers_.size(); }

 private:
  enum class Outcome : std::uint8_t { kFired, kStale, kNotDue, kFailed, kGaveUp, kNotRun, kHanded, kNoClass, kQuarantined };
  struct Delivery {
    std::int64_t due_ms = 0;
    DeliverySource source = DeliverySource::kOwnerTimer;
    std::optional<Generation> entry_generation;
    int retries = 0;  // failed handler runs
    int not_run = 0;
    bool acquiring = false;  // counted in acquiring_
    std::optional<Env::TimerId> timer;
    bool queued = false;  // waiting for a turn of the node's rate (AlarmService::Admit)
    TaskHandle attempt;
    // Another alarm time asked for while this delivery runs (the owner's timer for the
    // alarm its handler just set, whose batch is not durable yet): delivered as this one
    // ends. The latest ask wins; the event judges it against the state either way.
    std::optional<std::pair<std::int64_t, DeliverySource>> next;
  };
  struct Timer {
    std::int64_t due_ms = 0;
    bool resident = false;
    Env::TimerId id = 0;
  };

  void OnIndexChange(const ActorId& actor, std::optional<std::int64_t> alarm, bool resident);
  void StartAttempt(const ActorId& actor);
  // The rate gates (see "Rate" above): true if the attempt may start now; otherwise it is
  // held (a timer to its interval's end, or a place in its tenant's queue).
  bool Admit(const ActorId& actor, Delivery& d);
  void RefillTokens();
  void ArmDispatch();
  void Dispatch();
  void RememberRun(const ActorId& actor);
  static Task<void> Attempt(std::shared_ptr<bool> alive, AlarmService* self, ActorId actor);
  Task<Outcome> Run(ActorId actor, std::int64_t due_ms, actor::AlarmEvent event, std::optional<Generation> generation);
  Task<Outcome> HandOver(ActorId actor, std::int64_t due_ms, NodeId owner);
  Outcome Classify(const ActorId& actor, std::int64_t due_ms, std::optional<Generation> generation,
                   const actor::EventResult& r, std::int64_t started_ms, bool last_attempt);
  void Finish(const ActorId& actor, Outcome outcome);
  void Retry(const ActorId& actor, Duration after);
  void PruneWaits();
  void End(const ActorId& actor);
  std::int64_t WallMs() const;
  MonoTime MonoAt(std::int64_t wall_ms) const;

  AlarmServiceDeps deps_;
  AlarmOptions options_;
  LeaseTiming timing_;
  std::map<ActorId, Delivery> deliveries_;
  std::map<ActorId, Timer> timers_;
  std::size_t wake_timers_ = 0;
  std::size_t acquiring_ = 0;
  // Alarms (actor, due time) handed over (or whose class is missing): not delivered again
  // by this node's scanner or wake timers before this time. Another time of the same actor
  // is not held back.
  std::map<ActorId, std::pair<std::int64_t, MonoTime>> wait_until_;
  // The rate gates. last_run_: when each actor's last alarm event started here (pruned of
  // those older than min_interval once it doubles: kept small by the node's rate).
  std::map<ActorId, MonoTime> last_run_;
  std::size_t prune_runs_at_ = kMinRunsBeforePrune;
  static constexpr std::size_t kMinRunsBeforePrune = 1024;
  double tokens_ = 0;
  MonoTime refilled_{};
  // Per tenant, the actors whose attempts wait for a token, in order; turns_: the tenants
  // with any waiting, the next to go first.
  std::map<std::string, std::deque<ActorId>> waiting_;
  std::deque<std::string> turns_;
  std::optional<Env::TimerId> dispatch_timer_;
  AlarmStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk::alarms
