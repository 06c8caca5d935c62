#include "alarms/alarm_service.h"

#include <algorithm>

#include "base/log.h"
#include "base/line_format.h"

namespace wk::alarms {
namespace {

using std::chrono::milliseconds;

constexpr Duration kNotRunBackoffMin = milliseconds(500);

double Seconds(std::int64_t ms) { return static_cast<double>(ms) / 1000.0; }

}  // namespace

Status ValidateAlarmOptions(const AlarmOptions& o, const LeaseTiming& timing) {
  if (o.scan_period < milliseconds(100) || o.scan_period > std::chrono::hours(1)) {
    return InvalidArgument("alarms.scan_period_ms must be between 100 and 3600000");
  }
  if (o.scan_lag < Duration(0) || o.scan_lag > o.scan_period) {
    return InvalidArgument("alarms.scan_lag_ms must be between 0 and alarms.scan_period_ms");
  }
  if (o.first_retry < milliseconds(1) || o.first_retry > std::chrono::hours(1)) {
    return InvalidArgument("alarms.first_retry_ms must be between 1 and 3600000");
  }
  if (o.max_retries < 0 || o.max_retries > 20) return InvalidArgument("alarms.max_retries must be between 0 and 20");
  if (o.min_interval < Duration(0) || o.min_interval > kMaxAlarmMinInterval) {
    return InvalidArgument("alarms.min_interval_ms must be between 0 and " +
                           std::to_string(std::chrono::duration_cast<milliseconds>(kMaxAlarmMinInterval).count()));
  }
  if (o.max_events_per_second < 1 || o.max_events_per_second > kMaxAlarmEventsPerSecondSetting) {
    return InvalidArgument("alarms.max_events_per_second must be between 1 and " +
                           std::to_string(kMaxAlarmEventsPerSecondSetting));
  }
  if (o.handed_recheck < 2 * timing.ttl + timing.grace) {
    return InvalidArgument("alarms.handed_recheck_ms must be at least 2 * lease.ttl_ms + lease.grace_ms (" +
                           FormatDuration(2 * timing.ttl + timing.grace) +
                           "): a handed alarm's record frees only after the sender's release lands or a fence");
  }
  return Status::Ok();
}

AlarmService::AlarmService(AlarmServiceDeps deps, AlarmOptions options, LeaseTiming timing)
    : deps_(std::move(deps)),
      options_(options),
      timing_(timing),
      tokens_(static_cast<double>(options.max_events_per_second)),
      refilled_(deps_.env.MonoNow()) {
  std::weak_ptr<bool> alive = alive_;
  deps_.index.set_listener([this, alive](const ActorId& actor, std::optional<std::int64_t> alarm, bool resident) {
    if (auto a = alive.lock(); a && *a) OnIndexChange(actor, alarm, resident);
  });
}

AlarmService::~AlarmService() {
  Stop();
  *alive_ = false;
  deps_.index.set_listener(nullptr);
}

void AlarmService::Stop() {
  for (auto& [actor, t] : timers_) deps_.env.CancelTimer(t.id);
  timers_.clear();
  wake_timers_ = 0;
  for (auto& [actor, d] : deliveries_) {
    if (d.timer) deps_.env.CancelTimer(*d.timer);
    if (d.attempt.valid()) d.attempt.Cancel();
  }
  deliveries_.clear();
  acquiring_ = 0;
  if (dispatch_timer_) deps_.env.CancelTimer(*dispatch_timer_);
  dispatch_timer_.reset();
  waiting_.clear();
  turns_.clear();
}

std::int64_t AlarmService::WallMs() const { return ToUnixMs(deps_.env.WallNow()); }

MonoTime AlarmService::MonoAt(std::int64_t wall_ms) const {
  const std::int64_t wait = std::max<std::int64_t>(0, wall_ms - WallMs());
  return deps_.env.MonoNow() + milliseconds(wait);
}

// ---- timers

void AlarmService::OnIndexChange(const ActorId& actor, std::optional<std::int64_t> alarm, bool resident) {
  if (auto it = timers_.find(actor); it != timers_.end()) {
    deps_.env.CancelTimer(it->second.id);
    if (!it->second.resident) --wake_timers_;
    timers_.erase(it);
  }
  if (!alarm) {
    stats_.wake_timers = wake_timers_;
    return;
  }
  if (!resident && wake_timers_ >= kMaxWakeTimers) return;  // the scanner's then
  const std::int64_t due = *alarm;
  const MonoTime at = MonoAt(actor::EarliestFireMs(due, deps_.broken));
  std::weak_ptr<bool> alive = alive_;
  const Env::TimerId id = deps_.env.StartTimer(at, [this, alive, actor, due] {
    if (auto a = alive.lock(); !a || !*a) return;
    auto it = timers_.find(actor);
    if (it == timers_.end() || it->second.due_ms != due) return;
    const DeliverySource source = it->second.resident ? DeliverySource::kOwnerTimer : DeliverySource::kWakeTimer;
    if (!it->second.resident) --wake_timers_;
    timers_.erase(it);
    stats_.wake_timers = wake_timers_;
    Deliver(actor, due, source);
  });
  timers_[actor] = Timer{due, resident, id};
  if (!resident) ++wake_timers_;
  stats_.wake_timers = wake_timers_;
}

// ---- deliveries

bool AlarmService::MayDeliver(const ActorId& actor, std::int64_t due_ms) const {
  if (deliveries_.count(actor)) return false;
  // Resident here with its owner's timer armed: that timer delivers it (a scan would only
  // queue a second event behind a busy owner).
  if (deps_.host.IsResident(actor) && timers_.count(actor)) return false;
  auto w = wait_until_.find(actor);
  return w == wait_until_.end() || w->second.first != due_ms || deps_.env.MonoNow() >= w->second.second;
}

void AlarmService::Deliver(const ActorId& actor, std::int64_t due_ms, DeliverySource source,
                           std::optional<Generation> entry_generation) {
  if (auto running = deliveries_.find(actor); running != deliveries_.end()) {
    Delivery& d = running->second;
    if (d.due_ms == due_ms) {
      // One at a time: the running one asks the state. But the owner's timer asks while it
      // runs only after a commit set this same time again (a client re-setting the alarm
      // the handler has just cleared, its answer still on the way): the run may end with
      // the alarm set, so it is asked once more as the run ends. Found by the `combined`
      // deep run, seed 9368 (an alarm fired 7 s late, by a scan).
      if (!d.timer && source == DeliverySource::kOwnerTimer) d.next = {due_ms, source};
      return;
    }
    if (!d.timer) {
      // Running now. Dropping this ask would leave a re-arm set by the running handler to
      // the shard scanner (tens of seconds late; docs/benchmarks.md, the alarms
      // benchmark): it is delivered as the running one ends.
      d.next = {due_ms, source};
      return;
    }
    // Waiting for a retry. The owner's timer is armed by every committed change, so its
    // ask says the state now holds another alarm: that one goes first. Anyone else's ask
    // (a scan of an old entry) waits; the scanner asks again.
    if (source != DeliverySource::kOwnerTimer) return;
    d.next.reset();
    End(actor);
  }
  const bool own = source == DeliverySource::kOwnerTimer || source == DeliverySource::kHandOver;
  if (!own) {
    // A handed alarm is looked at again only after handed_recheck (docs/node-lease.md,
    // "Bounds"): the node it went to runs it, or its release is pending.
    if (auto w = wait_until_.find(actor); w != wait_until_.end()) {
      if (w->second.first == due_ms && deps_.env.MonoNow() < w->second.second) return;
      wait_until_.erase(w);
    }
    if (Saturated()) return;  // the scanner asks again at its next scan
  }
  Delivery& d = deliveries_[actor];
  d.due_ms = due_ms;
  d.source = source;
  d.entry_generation = entry_generation;
  if (!own) {
    d.acquiring = true;
    ++acquiring_;
  }
  StartAttempt(actor);
}

ServerResponse AlarmService::ReceiveHandOver(const ActorId& actor, std::string_view body) {
  // The body is one line, "due <ms>\n".
  constexpr std::string_view kDue = "due ";
  std::optional<std::int64_t> due;
  if (body.starts_with(kDue) && body.ends_with("\n")) {
    if (auto t = line_format::ParseUnixMs(body.substr(kDue.size(), body.size() - kDue.size() - 1))) due = ToUnixMs(*t);
  }
  if (!due) return TextResponse(400, "a hand-over's body is \"due <ms>\\n\"\n");
  // Resident, or held here while not resident (a sleeping hold, which Run starts here).
  if (!deps_.host.IsResident(actor) && (deps_.owners.leaving(actor) || !deps_.owners.Find(actor).IsValid())) {
    return TextResponse(409, actor.ToString() + " is not held here (its release may be pending)\n");
  }
  ++stats_.received;
  Deliver(actor, *due, DeliverySource::kHandOver);
  return TextResponse(202, "accepted: delivered by this node\n");
}

void AlarmService::StartAttempt(const ActorId& actor) {
  auto it = deliveries_.find(actor);
  if (it == deliveries_.end()) return;
  it->second.timer.reset();
  if (!Admit(actor, it->second)) return;
  it->second.attempt = deps_.env.Spawn(Attempt(alive_, this, actor), "alarm delivery");
}

// ---- rate (see "Rate" in the header)

bool AlarmService::Admit(const ActorId& actor, Delivery& d) {
  const MonoTime now = deps_.env.MonoNow();
  if (auto last = last_run_.find(actor); last != last_run_.end()) {
    const MonoTime earliest = last->second + options_.min_interval;
    if (now < earliest) {
      ++stats_.spaced;
      Retry(actor, earliest - now);  // StartAttempt again then, through both gates
      return false;
    }
  }
  RefillTokens();
  if (turns_.empty() && tokens_ >= 1) {
    tokens_ -= 1;
    return true;
  }
  ++stats_.queued;
  d.queued = true;
  std::deque<ActorId>& queue = waiting_[actor.tenant];
  if (queue.empty()) turns_.push_back(actor.tenant);
  queue.push_back(actor);
  ArmDispatch();
  return false;
}

void AlarmService::RefillTokens() {
  const MonoTime now = deps_.env.MonoNow();
  const double rate = static_cast<double>(options_.max_events_per_second);
  tokens_ = std::min(rate, tokens_ + rate * std::chrono::duration<double>(now - refilled_).count());
  refilled_ = now;
}

void AlarmService::ArmDispatch() {
  if (dispatch_timer_) return;
  // When the next token is whole (at least a microsecond on: rounding must not fire early).
  const double rate = static_cast<double>(options_.max_events_per_second);
  const double wait_s = std::max(0.0, (1.0 - tokens_) / rate);
  const Duration wait = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(wait_s)) +
                        std::chrono::microseconds(1);
  std::weak_ptr<bool> alive = alive_;
  dispatch_timer_ = deps_.env.StartTimer(deps_.env.MonoNow() + wait, [this, alive] {
    if (auto a = alive.lock(); !a || !*a) return;
    dispatch_timer_.reset();
    Dispatch();
  });
}

void AlarmService::Dispatch() {
  RefillTokens();
  while (tokens_ >= 1 && !turns_.empty()) {
    const std::string tenant = std::move(turns_.front());
    turns_.pop_front();
    auto queue = waiting_.find(tenant);
    if (queue == waiting_.end()) continue;
    const ActorId actor = queue->second.front();
    queue->second.pop_front();
    if (queue->second.empty()) {
      waiting_.erase(queue);
    } else {
      turns_.push_back(tenant);  // its next waits for the other tenants' turns
    }
    auto it = deliveries_.find(actor);
    if (it == deliveries_.end() || !it->second.queued) continue;  // ended meanwhile: no token spent
    it->second.queued = false;
    tokens_ -= 1;
    it->second.attempt = deps_.env.Spawn(Attempt(alive_, this, actor), "alarm delivery");
  }
  if (!turns_.empty()) ArmDispatch();
}

void AlarmService::RememberRun(const ActorId& actor) {
  const MonoTime now = deps_.env.MonoNow();
  last_run_[actor] = now;
  if (last_run_.size() < prune_runs_at_) return;
  // Runs older than min_interval hold nothing back. Amortized: the next prune waits until
  // the map has doubled again.
  const Duration interval = options_.min_interval;
  std::erase_if(last_run_, [now, interval](const auto& run) { return run.second + interval <= now; });
  prune_runs_at_ = std::max(kMinRunsBeforePrune, 2 * last_run_.size());
}

Task<void> AlarmService::Attempt(std::shared_ptr<bool> alive, AlarmService* self, ActorId actor) {
  auto it = self->deliveries_.find(actor);
  if (it == self->deliveries_.end()) co_return;
  const std::int64_t due = it->second.due_ms;
  const std::optional<Generation> generation = it->second.entry_generation;
  actor::AlarmEvent event;
  event.retry_count = it->second.retries;
  event.last_attempt = it->second.retries >= self->options_.max_retries;
  Outcome outcome = co_await self->Run(actor, due, event, generation);
  if (!*alive) co_return;
  self->Finish(actor, outcome);
}

Task<AlarmService::Outcome> AlarmService::Run(ActorId actor, std::int64_t due_ms, actor::AlarmEvent event,
                                              std::optional<Generation> generation) {
  std::shared_ptr<bool> alive = alive_;
  const std::int64_t started_ms = WallMs();
  if (deps_.host.IsResident(actor)) {
    if (deps_.refresh_class) deps_.refresh_class(actor.tenant, actor.class_name);
  } else {
    // Routed as the front routes a request: held here (a sleeping hold: run here, with no
    // routing read), the holder's, or acquired here.
    if (!deps_.owners.accepting()) co_return Outcome::kNotRun;  // draining: the shard's next scanner
    const bool held_here = !deps_.owners.leaving(actor) && deps_.owners.Find(actor).IsValid();
    if (!held_here) {
      auto other = co_await deps_.owners.OtherOwner(actor);
      if (!*alive) co_return Outcome::kNotRun;
      if (!other.ok()) co_return Outcome::kNotRun;
      if (other->has_value()) {
        NodeId owner = (*other)->node_id;
        Outcome handed = co_await HandOver(actor, due_ms, std::move(owner));
        co_return handed;
      }
    }
    Status loaded = co_await deps_.load_class(actor.tenant, actor.class_name);
    if (!*alive) co_return Outcome::kNotRun;
    if (loaded.code() == Code::kNotFound) co_return Outcome::kNoClass;
    if (!loaded.ok()) co_return Outcome::kNotRun;
    if (deps_.quarantine != nullptr && !deps_.broken.on(BrokenModel::kAlarmWakesQuarantined)) {
      // About to start the actor here: checked with what this node knows no older than the
      // cache's ttl, else asked (docs/security.md, "Poisoned actors"); an actor whose alarm
      // handler brings nodes down must not walk the cluster one alarm at a time.
      // Unreadable: not started (the next scan asks again).
      auto quarantined = co_await deps_.quarantine->Check(actor, control::QuarantineRead::kOnMiss);
      if (!*alive) co_return Outcome::kNotRun;
      if (!quarantined.ok()) co_return Outcome::kNotRun;
      if (quarantined->has_value()) co_return Outcome::kQuarantined;
    }
  }
  if (deps_.admit) {
    while (const std::optional<Duration> wait = deps_.admit(actor.tenant)) {
      co_await deps_.env.SleepFor(*wait);
      if (!*alive) co_return Outcome::kNotRun;
    }
  }
  ++stats_.due;
  RememberRun(actor);
  actor::EventResult r = co_await deps_.host.HandleAlarm(actor, event);
  if (!*alive) co_return Outcome::kNotRun;
  co_return Classify(actor, due_ms, generation, r, started_ms, event.last_attempt);
}

AlarmService::Outcome AlarmService::Classify(const ActorId& actor, std::int64_t due_ms,
                                             std::optional<Generation> generation, const actor::EventResult& r,
                                             std::int64_t started_ms, bool last_attempt) {
  switch (r.outcome) {
    case actor::EventOutcome::kOk:
      // Released through the gate: r.indexed_after is durable. Entries of earlier holds for
      // this time go if the state's indexed time is another (rule 2; the replica reports
      // this hold's).
      if (generation || !r.alarm_fired) deps_.index.AfterAlarmEvent(actor, due_ms, r.indexed_after);
      if (r.alarm_fired) {
        ++stats_.fired;
        stats_.late_seconds.Observe(Seconds(std::max<std::int64_t>(0, started_ms - due_ms)));
        return Outcome::kFired;
      }
      if (r.indexed_after == std::optional<std::int64_t>(due_ms)) {
        // Still indexed at this time. When that is the wake time of an actor that must be
        // started (a pending outbox: actor/storage.h) its start did what was needed; an
        // alarm behind it gets the owner's timer now, which the index's listener (told the
        // indexed time) did not arm.
        if (r.alarm_after && *r.alarm_after > due_ms && deps_.host.IsResident(actor)) {
          OnIndexChange(actor, r.alarm_after, true);
        }
        return Outcome::kNotDue;
      }
      ++stats_.stale;
      return Outcome::kStale;
    case actor::EventOutcome::kActorFailed:
      if (last_attempt) {
        ++stats_.gave_up;
        WK_LOG_WARN("alarm handler failed its last retry: the alarm is cleared",
                    {{"actor", actor.ToString()}, {"due_ms", std::to_string(due_ms)}, {"error", r.error}});
        return Outcome::kGaveUp;
      }
      return Outcome::kFailed;
    case actor::EventOutcome::kNotFound:
      return Outcome::kNoClass;
    case actor::EventOutcome::kBadRequest:
    case actor::EventOutcome::kOverloaded:
    case actor::EventOutcome::kOverQuota:
    case actor::EventOutcome::kUnavailable:
    case actor::EventOutcome::kInvalidHeader:
    case actor::EventOutcome::kKeyReused:
      break;
  }
  return Outcome::kNotRun;
}

Task<AlarmService::Outcome> AlarmService::HandOver(ActorId actor, std::int64_t due_ms, NodeId owner) {
  if (deps_.forwarder == nullptr) co_return Outcome::kNotRun;
  const auto& view = deps_.membership.view();
  auto it = view.find(owner);
  if (it == view.end() || !it->second.live() || it->second.record->address.empty()) co_return Outcome::kNotRun;
  PeerTarget to{owner, it->second.record->instance, it->second.record->address};
  ServerRequest request;
  request.method = "POST";
  request.target = std::string(kAlarmsHandOverPrefix) + actor.ToString();
  request.body = "due " + std::to_string(due_ms) + "\n";
  ++stats_.handed;
  std::string tenant = actor.tenant;
  auto got = co_await deps_.forwarder->Forward(std::move(to), std::move(request), std::move(tenant), 1);
  if (got.ok() && got->status != 202) {
    WK_LOG_DEBUG("alarm hand-over not accepted", {{"actor", actor.ToString()}, {"owner", owner.str()},
                                                  {"status", std::to_string(got->status)}});
  }
  // Whatever the answer, the alarm is looked at again after handed_recheck: a receiver
  // that accepted runs it (and removes its entries); one that refused may hold the actor
  // with its release pending, or be gone, its record freeing by release or fence.
  co_return Outcome::kHanded;
}

void AlarmService::Finish(const ActorId& actor, Outcome outcome) {
  auto it = deliveries_.find(actor);
  if (it == deliveries_.end()) return;
  Delivery& d = it->second;
  // The owner's timer asked for another time while this ran: the state holds that one now
  // (the timer follows every committed change), and a retry of this time would be stale.
  if ((outcome == Outcome::kFailed || outcome == Outcome::kNotRun) && d.next &&
      d.next->second == DeliverySource::kOwnerTimer) {
    if (d.next->first != d.due_ms) {
      End(actor);
      return;
    }
    d.next.reset();  // the same time set again: the retry below asks the state anyway
  }
  switch (outcome) {
    case Outcome::kFired:
    case Outcome::kStale:
    case Outcome::kNotDue:
    case Outcome::kGaveUp:
      End(actor);
      return;
    case Outcome::kFailed: {
      ++d.retries;
      ++stats_.retried;
      // first_retry, then twice as long each time.
      const int shift = std::min(d.retries - 1, 20);
      Retry(actor, options_.first_retry * (std::int64_t{1} << shift));
      return;
    }
    case Outcome::kNotRun: {
      ++stats_.not_run;
      if (++d.not_run > kMaxUnrunAttempts) {
        End(actor);  // the entry stays: the scanner, or a timer, asks again
        return;
      }
      const Duration backoff = std::min<Duration>(kNotRunBackoffMin * (std::int64_t{1} << (d.not_run - 1)),
                                                  options_.scan_period);
      Retry(actor, backoff);
      return;
    }
    case Outcome::kHanded:
      PruneWaits();
      // Broken model drop-handed-alarm: never looked at again by this node.
      wait_until_[actor] = {d.due_ms, deps_.broken.on(BrokenModel::kDropHandedAlarm)
                                          ? MonoTime::max()
                                          : deps_.env.MonoNow() + options_.handed_recheck};
      End(actor);
      return;
    case Outcome::kNoClass:
      wait_until_[actor] = {d.due_ms, deps_.env.MonoNow() + 10 * options_.scan_period};
      End(actor);
      return;
    case Outcome::kQuarantined:
      // The entry stays; the alarm fires once the quarantine ends. Asked again after a scan
      // period (what the node knows then is at most the cache's ttl old), so a lifted
      // quarantine is seen soon.
      ++stats_.quarantined;
      wait_until_[actor] = {d.due_ms, deps_.env.MonoNow() + options_.scan_period};
      End(actor);
      return;
  }
}

void AlarmService::PruneWaits() {
  // Past waits are forgotten once there are many: the map holds only alarms rechecked soon.
  if (wait_until_.size() < kMaxWakeTimers) return;
  const MonoTime now = deps_.env.MonoNow();
  std::erase_if(wait_until_, [now](const auto& w) { return w.second.second <= now; });
}

void AlarmService::Retry(const ActorId& actor, Duration after) {
  auto it = deliveries_.find(actor);
  if (it == deliveries_.end()) return;
  std::weak_ptr<bool> alive = alive_;
  it->second.timer = deps_.env.StartTimer(deps_.env.MonoNow() + after, [this, alive, actor] {
    if (auto a = alive.lock(); a && *a) StartAttempt(actor);
  });
}

void AlarmService::End(const ActorId& actor) {
  auto it = deliveries_.find(actor);
  if (it == deliveries_.end()) return;
  if (it->second.acquiring) --acquiring_;
  if (it->second.timer) deps_.env.CancelTimer(*it->second.timer);
  const auto next = it->second.next;
  deliveries_.erase(it);
  if (next) Deliver(actor, next->first, next->second);
}

}  // namespace wk::alarms
