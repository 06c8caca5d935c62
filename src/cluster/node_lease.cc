#include "cluster/node_lease.h"

#include <algorithm>

#include "base/log.h"
#include "store/bucket_check.h"

namespace wk {
namespace {

// How many unacknowledged sends we remember for adoption. More than a lapse's worth of
// attempts; older ones cannot be adopted with a known send time (and then give no
// validity, only the version).
constexpr std::size_t kMaxUnackedSends = 64;
// Back-off between attempts that failed fast, within one period.
constexpr Duration kRetryBackoffMin = std::chrono::milliseconds(100);
constexpr Duration kRetryBackoffMax = std::chrono::milliseconds(1000);
// Retries of a first write refused as retryable before going back to the start check.
constexpr int kFirstWriteRetries = 3;

std::string Describe(const NodeRecord& r) {
  return std::string(LeaseStateName(r.state)) + " (instance " +
         (r.instance.empty() ? std::string("none") : r.instance.str()) + ", written_at " +
         std::to_string(ToUnixMs(r.written_at)) + ")";
}

// The parts of an object that say whether it changed (never the version token: some
// stores return a different token on read than on write, docs/node-lease.md, "When to fence").
struct Fingerprint {
  bool present = false;
  bool old_format = false;
  bool corrupt = false;
  LeaseState state = LeaseState::kLive;
  InstanceToken instance;
  std::int64_t written_at_ms = 0;
  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

Fingerprint FingerprintOf(const Result<GetOutput>& got, std::optional<NodeRecord>* record) {
  Fingerprint f;
  record->reset();
  if (!got.ok()) return f;  // absent
  f.present = true;
  auto obj = DecodeNodeObject(got->body);
  if (!obj.ok()) {
    f.corrupt = true;
    return f;
  }
  if (auto* old = std::get_if<OldHeartbeat>(&*obj)) {
    f.old_format = true;
    f.written_at_ms = old->written_at ? ToUnixMs(*old->written_at) : -1;
    return f;
  }
  const auto& r = std::get<NodeRecord>(*obj);
  f.state = r.state;
  f.instance = r.instance;
  f.written_at_ms = ToUnixMs(r.written_at);
  *record = r;
  return f;
}

}  // namespace

std::string_view LeaseEndReasonName(LeaseEndReason r) {
  switch (r) {
    case LeaseEndReason::kStopped: return "stopped";
    case LeaseEndReason::kLost: return "lost";
    case LeaseEndReason::kTwin: return "twin";
    case LeaseEndReason::kBucketUnfit: return "bucket unfit";
    case LeaseEndReason::kOldVersionRunning: return "old version running";
  }
  return "?";
}

NodeLease::NodeLease(Env& env, ObjectStore& store, NodeIdentity identity, LeaseTiming timing,
                     InstanceToken instance)
    : env_(env),
      store_(store.ForPurpose(BucketPurpose::kLease)),
      identity_(std::move(identity)),
      timing_(timing),
      instance_(std::move(instance)),
      key_(NodeKey(identity_.node_id)),
      started_at_(env.WallNow()) {
  WK_CHECK(timing_.Validate().ok(), "NodeLease needs validated timings");
  WK_CHECK(ValidateNodeId(identity_.node_id).ok(), "NodeLease needs a valid node id");
}

bool NodeLease::IsValid() const {
  const bool stopped = stopping_ && !broken_.on(BrokenModel::kStopKeepsLeaseValid);
  return valid_ && !stopped && !lost_ && env_.MonoNow() < valid_until_;
}

bool NodeLease::IsReady() const {
  return IsValid() && env_.MonoNow() + timing_.attempt_timeout() < valid_until_ && Announced();
}

bool NodeLease::Announced() const {
  return first_valid_since_ &&
         env_.MonoNow() >= *first_valid_since_ + timing_.heartbeat_period + timing_.attempt_timeout();
}

NodeRecord NodeLease::LiveRecord(WallTime written_at) const {
  NodeRecord r;
  r.state = LeaseState::kLive;
  r.instance = instance_;
  r.written_at = written_at;
  r.node_id = identity_.node_id;
  r.address = identity_.address;
  r.software_version = identity_.software_version;
  r.started_at = started_at_;
  r.cert_pin = identity_.cert_pin;
  return r;
}

void NodeLease::Acknowledged(const Version& version, WallTime written_at, MonoTime sent,
                             MonoTime replied) {
  // An acknowledgement that arrives after validity ended (the write was sent in time, its
  // reply came late) must not make validity come back inside the same epoch: IsValid() has
  // already said no, and a hold cut in that gap would come back with it. The gap is a lapse
  // like any other, reported before this write starts the next epoch.
  if (!broken_.on(BrokenModel::kAckAfterLapseKeepsEpoch)) CheckLapse();
  version_ = version;
  written_at_ = written_at;
  unacked_sends_.clear();
  const MonoTime from = broken_.on(BrokenModel::kValidityFromReply) ? replied : sent;
  const MonoTime until = from + timing_.validity();
  const MonoTime now = env_.MonoNow();
  if (until <= now) return;  // acknowledged too late to be valid on; the version still counts
  valid_until_ = std::max(valid_until_, until);
  if (!valid_) {
    valid_ = true;
    ++epoch_;
    valid_since_ = now;
    if (!first_valid_since_) first_valid_since_ = now;
    WK_LOG_INFO("node lease valid", {{"node", identity_.node_id.str()},
                                     {"instance", instance_.str()},
                                     {"epoch", std::to_string(epoch_)}});
    for (auto& o : observers_)
      if (o.on_valid) o.on_valid(epoch_);
  }
}

void NodeLease::CheckLapse() {
  if (!valid_ || env_.MonoNow() < valid_until_) return;
  if (broken_.on(BrokenModel::kLapseIsLost)) {
    Lose("the node lease ran out (broken model lapse-is-lost)");
    return;
  }
  valid_ = false;
  valid_since_.reset();
  ++stats_.lapses;
  WK_LOG_WARN("node lease ran out; not ready, still renewing",
              {{"node", identity_.node_id.str()}, {"epoch", std::to_string(epoch_)}});
  for (auto& o : observers_)
    if (o.on_lapse) o.on_lapse(epoch_);
}

void NodeLease::Lose(const std::string& why) {
  if (lost_) return;
  lost_ = true;
  valid_ = false;
  lost_why_ = why;
  WK_LOG_ERROR("node lease lost", {{"node", identity_.node_id.str()}, {"instance", instance_.str()}, {"why", why}});
  for (auto& o : observers_)
    if (o.on_lost) o.on_lost(why);
}

Task<bool> NodeLease::WaitUntil(MonoTime deadline) {
  if (stopping_ || aborted_) co_return false;
  Latch<bool> latch(env_, [] { return false; });
  wake_ = latch;
  const Env::TimerId timer = env_.StartTimer(deadline, [latch] { latch.Set(true); });
  bool woke_by_time = co_await latch.Wait();
  env_.CancelTimer(timer);
  wake_.reset();
  // A cancelled task is a process being torn down abruptly (a crash in the simulator):
  // it ends without writing anything more, and never spins.
  if ((co_await CurrentCancel())->cancelled()) aborted_ = true;
  co_return woke_by_time && !stopping_ && !aborted_;
}

Task<Status> NodeLease::WriteLive(Precondition condition, Duration timeout) {
  WallTime written_at = env_.WallNow();
  // written_at strictly increases, so peers always see a renewal as a change and every
  // body differs (S3 ETags are MD5s of the body), even if the wall clock stepped back.
  if (version_ && written_at <= written_at_) written_at = written_at_ + std::chrono::milliseconds(1);
  for (const auto& [ms, sent] : unacked_sends_) {
    if (ms >= ToUnixMs(written_at)) written_at = FromUnixMs(ms + 1);
  }
  const MonoTime sent = env_.MonoNow();
  last_send_ = sent;
  unacked_sends_.emplace_back(ToUnixMs(written_at), sent);
  if (unacked_sends_.size() > kMaxUnackedSends) unacked_sends_.pop_front();
  std::string body = EncodeNodeRecord(LiveRecord(written_at));
  auto put = co_await store_.Put(key_, std::move(body), std::move(condition), CallOptions{timeout});
  if (put.ok()) {
    ++stats_.writes_ok;
    Acknowledged(*put, written_at, sent, env_.MonoNow());
    co_return Status::Ok();
  }
  ++stats_.write_failures;
  co_return put.status();
}

Task<NodeLease::ReRead> NodeLease::ReReadAndAdopt() {
  ReRead out;
  auto got = co_await store_.Get(key_, CallOptions{timing_.attempt_timeout()});
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) {
      out.kind = ReReadKind::kAbsent;
      out.what = key_ + " is absent";
    } else {
      out.what = "cannot read " + key_ + ": " + got.status().ToString();
    }
    co_return out;
  }
  auto obj = DecodeNodeObject(got->body);
  if (!obj.ok()) {
    out.kind = ReReadKind::kForeign;
    out.what = key_ + " is unreadable: " + obj.status().message();
    co_return out;
  }
  if (std::holds_alternative<OldHeartbeat>(*obj)) {
    out.kind = ReReadKind::kForeign;
    out.what = key_ + " is an old-format heartbeat (an old version runs under this id)";
    co_return out;
  }
  const auto& r = std::get<NodeRecord>(*obj);
  if (r.instance == instance_ && r.state != LeaseState::kLive) {
    out.kind = ReReadKind::kOursEnded;
    out.what = key_ + " is " + Describe(r) + ": this process's own lease was ended by another writer";
    co_return out;
  }
  if (r.state == LeaseState::kLive && r.instance == instance_) {
    // Our own write whose reply was lost: adopt the read's version (R2's read token
    // differs from the write's) and its written_at. Validity runs from that write's own
    // send, if we still know it; otherwise the version is adopted without validity.
    ++stats_.adoptions;
    const std::int64_t ms = ToUnixMs(r.written_at);
    std::optional<MonoTime> sent;
    for (const auto& [w, s] : unacked_sends_)
      if (w == ms) sent = s;
    if (sent) {
      ++stats_.writes_ok;
      Acknowledged(got->version, r.written_at, *sent, env_.MonoNow());
    } else {
      version_ = got->version;
      written_at_ = std::max(written_at_, r.written_at);
    }
    WK_LOG_INFO("adopted our own lease write after a conflict",
                {{"node", identity_.node_id.str()}, {"written_at", std::to_string(ms)}});
    out.kind = ReReadKind::kOursLive;
    co_return out;
  }
  out.kind = ReReadKind::kForeign;
  if (r.state == LeaseState::kLive) {
    out.what = key_ + " is live under instance " + r.instance.str() +
               ": another process runs under this node id (a second process started with it, or one that took "
               "the id over after this process's object was fenced or deleted)";
  } else {
    out.what = key_ + " is " + Describe(r) + ", written by another process";
  }
  co_return out;
}

Task<NodeLease::CheckResult> NodeLease::StartCheck(std::string* twin_message) {
  // The first read, retried until the bucket answers (each attempt bounded).
  Result<GetOutput> got = NotFound("");
  Duration backoff = kRetryBackoffMin;
  for (;;) {
    ++stats_.start_check_reads;
    got = co_await store_.Get(key_, CallOptions{timing_.attempt_timeout()});
    if (got.ok() || got.code() == Code::kNotFound) break;
    WK_LOG_WARN("start check: cannot read node lease", {{"key", key_}, {"error", got.status().ToString()}});
    if (!co_await WaitUntil(env_.MonoNow() + backoff)) co_return CheckResult::kGo;  // stopping
    backoff = std::min(backoff * 2, timing_.lease_period());
  }
  std::optional<NodeRecord> record;
  Fingerprint seen = FingerprintOf(got, &record);
  const InstanceToken first_instance = record ? record->instance : InstanceToken();
  last_check_version_ = got.ok() ? std::optional<Version>(got->version) : std::nullopt;
  if (!seen.present && broken_.on(BrokenModel::kStartCheckNoWait)) co_return CheckResult::kGo;

  // Our own instance, live: a write of ours from an earlier round of this check landed.
  auto ours = [&] { return record && record->state == LeaseState::kLive && record->instance == instance_; };
  // Our own instance, fenced or released by someone else: a first write of ours landed
  // unacknowledged and was then fenced. That instance may never be valid again (records
  // naming it may already be free): the lease is lost, as the re-read rule says.
  auto ours_ended = [&] {
    return record && record->state != LeaseState::kLive && record->instance == instance_ &&
           !broken_.on(BrokenModel::kOwnFenceNotLost);
  };
  if (ours_ended()) {
    *twin_message = key_ + " is " + Describe(*record) + ": this process's own lease was ended before it was acknowledged";
    co_return CheckResult::kLost;
  }

  const MonoTime deadline = env_.MonoNow() + timing_.takeover_after();
  WK_LOG_INFO("start check", {{"node", identity_.node_id.str()},
                              {"found", seen.present ? (record ? Describe(*record) : std::string("old or corrupt object")) : "nothing"},
                              {"wait", FormatDuration(timing_.takeover_after())}});
  while (!ours()) {
    // The shortcut: a fence or release of the instance first read proves that process
    // lapsed once the kept written_at + ttl + grace has passed on our clock.
    if (record && record->state != LeaseState::kLive && !first_instance.empty() &&
        record->instance == first_instance && !broken_.on(BrokenModel::kNoReleaseShortcut) &&
        env_.WallNow() >= record->written_at + timing_.takeover_after()) {
      break;
    }
    const MonoTime now = env_.MonoNow();
    if (now >= deadline) break;
    if (!co_await WaitUntil(std::min(deadline, now + timing_.lease_period()))) co_return CheckResult::kGo;
    ++stats_.start_check_reads;
    auto again = co_await store_.Get(key_, CallOptions{timing_.attempt_timeout()});
    if (!again.ok() && again.code() != Code::kNotFound) continue;  // undecided; read again
    std::optional<NodeRecord> again_record;
    Fingerprint now_seen = FingerprintOf(again, &again_record);
    last_check_version_ = again.ok() ? std::optional<Version>(again->version) : std::nullopt;
    if (now_seen != seen) {
      const bool live_other = again_record && again_record->state == LeaseState::kLive &&
                              again_record->instance != instance_;
      if ((live_other || now_seen.old_format) && !broken_.on(BrokenModel::kStartCheckIgnoresChanges)) {
        *twin_message = "node id " + identity_.node_id.str() + " is in use by another process: " + key_ +
                        (now_seen.old_format ? " is being rewritten in an old format (an old version runs)"
                                             : " was rewritten live by instance " + again_record->instance.str());
        co_return CheckResult::kTwin;
      }
      seen = now_seen;
      record = again_record;
      if (ours_ended()) {
        *twin_message = key_ + " is " + Describe(*record) + ": this process's own lease was ended before it was acknowledged";
        co_return CheckResult::kLost;
      }
    }
  }
  co_return CheckResult::kGo;
}

Task<Status> NodeLease::CheckBucket() {
  const std::string key = std::string(kBucketCheckPrefix) + identity_.node_id.str();
  Duration backoff = kRetryBackoffMin;
  for (int attempt = 1;; ++attempt) {
    // A nonce per attempt and process: no two probe bodies are ever the same.
    Status s = co_await CheckBucketOnce(store_, key, instance_.str() + "." + std::to_string(attempt),
                                        CallOptions{timing_.attempt_timeout()});
    if (s.ok() || s.code() == Code::kInvalidArgument || s.code() == Code::kFatal) co_return s;
    WK_LOG_WARN("bucket check undecided; probing again", {{"node", identity_.node_id.str()}, {"error", s.ToString()}});
    if (!co_await WaitUntil(env_.MonoNow() + backoff)) co_return Cancelled("stopped during the bucket check");
    backoff = std::min(backoff * 2, timing_.lease_period());
  }
}

void NodeLease::SpawnStartGuard() {
  guard_ = std::make_unique<StartGuard>(env_, store_, timing_);
  guard_->set_broken_models(broken_);
  guard_outcome_ = std::make_shared<std::optional<StartGuardOutcome>>();
  guard_task_ = env_.Spawn(
      [](StartGuard* g, std::shared_ptr<std::optional<StartGuardOutcome>> out) -> Task<void> {
        out->emplace(co_await g->Run());
      }(guard_.get(), guard_outcome_),
      "start guard");
}

Task<LeaseEnd> NodeLease::Run() {
  auto end = [this](LeaseEndReason reason, std::string message) {
    loop_ended_ = true;
    if (loop_end_latch_) loop_end_latch_->Set(true);
    if (guard_task_.valid()) guard_task_.Cancel();  // a guard still waiting ends with the run
    return LeaseEnd{reason, std::move(message)};
  };

  // The bucket check first (docs/node-lease.md, "Upgrading from per-actor leases"): a bucket that
  // cannot hold the protocol's records is refused before anything is written, with the setting to
  // change.
  if (start_steps_.bucket_check) {
    Status bucket = co_await CheckBucket();
    if (aborted_) co_return end(LeaseEndReason::kStopped, "cancelled");
    if (stopping_) co_return end(LeaseEndReason::kStopped, "stopped during the bucket check");
    if (!bucket.ok()) {
      WK_LOG_ERROR("bucket check failed: this node will not start", {{"node", identity_.node_id.str()}, {"why", bucket.ToString()}});
      Lose(bucket.message());
      co_return end(LeaseEndReason::kBucketUnfit, bucket.message());
    }
  }
  // Then the start guard beside the start check (docs/node-lease.md, "Upgrading from per-actor
  // leases"): the first write waits for both.
  if (start_steps_.start_guard) SpawnStartGuard();
  bool guard_pending = start_steps_.start_guard;

  // Start check and first write, repeated (same instance) until the first write holds.
  for (;;) {
    std::string twin;
    CheckResult check = co_await StartCheck(&twin);
    if (aborted_) co_return end(LeaseEndReason::kStopped, "cancelled");
    if (stopping_) co_return end(LeaseEndReason::kStopped, "stopped during the start check");
    if (check == CheckResult::kTwin) {
      Lose(twin);
      co_return end(LeaseEndReason::kTwin, twin);
    }
    if (check == CheckResult::kLost) {
      Lose(twin);
      co_return end(LeaseEndReason::kLost, twin);
    }
    if (guard_pending) {
      guard_pending = false;
      TaskHandle guard = guard_task_;
      if (!co_await guard.Join()) {
        aborted_ = true;
        co_return end(LeaseEndReason::kStopped, "cancelled");
      }
      if (aborted_) co_return end(LeaseEndReason::kStopped, "cancelled");
      if (stopping_) co_return end(LeaseEndReason::kStopped, "stopped during the start guard");
      if (guard_outcome_->has_value() && (*guard_outcome_)->kind == StartGuardOutcome::Kind::kOldVersionRunning) {
        const std::string why = (*guard_outcome_)->message;
        Lose(why);
        co_return end(LeaseEndReason::kOldVersionRunning, why);
      }
      // If the guard waited past the check, the first write still conditions on the
      // check's last read: a change since (a twin's write) fails that condition, and the
      // re-read below sends this node back to the check.
    }
    // A write of ours found live by the check: re-read rule adopts it.
    Precondition first = last_check_version_ ? Precondition::IfMatch(*last_check_version_)
                                             : Precondition::IfNoneMatchAny();
    Status s;
    for (int tries = 0; tries < kFirstWriteRetries; ++tries) {
      s = co_await WriteLive(first, timing_.attempt_timeout());
      if (s.code() != Code::kRetryable) break;
      if (!co_await WaitUntil(env_.MonoNow() + kRetryBackoffMin * (tries + 1))) break;
    }
    if (s.ok()) break;
    if (aborted_) co_return end(LeaseEndReason::kStopped, "cancelled");
    if (stopping_) co_return end(LeaseEndReason::kStopped, "stopped during the start check");
    if (s.code() == Code::kUnknownOutcome || s.code() == Code::kPreconditionFailed) {
      // docs/node-lease.md, "What the lease is": a first write whose outcome is unknown (or that
      // met a failed condition: a retried request can conflict with its own first attempt) follows
      // the re-read rule, then goes back to the check. The read is retried until the bucket
      // answers: going back undecided could later make this instance valid again after a fence
      // named it (found by the simulator's `lease` scenario in a deep run).
      ReRead read = co_await ReReadAndAdopt();
      Duration read_backoff = kRetryBackoffMin;
      while (read.kind == ReReadKind::kUndecided) {
        if (!co_await WaitUntil(env_.MonoNow() + read_backoff)) break;
        read_backoff = std::min(read_backoff * 2, timing_.lease_period());
        read = co_await ReReadAndAdopt();
      }
      if (aborted_ || stopping_) co_return end(LeaseEndReason::kStopped, "stopped during the start check");
      // Adopted: ours landed. Without a known send time it gives no validity, and the
      // renewal loop writes again at its first period.
      if (read.kind == ReReadKind::kOursLive) break;
      // Our own instance fenced or released: it may never be valid (records naming it may
      // be free already): lost, as the check itself decides.
      if (read.kind == ReReadKind::kOursEnded && !broken_.on(BrokenModel::kOwnFenceNotLost)) {
        Lose(read.what);
        co_return end(LeaseEndReason::kLost, read.what);
      }
      // Absent (our write did not land) or another process's object: the check decides,
      // waiting ttl + grace again (a live object that keeps changing is a twin).
      WK_LOG_WARN("first lease write did not hold; back to the start check",
                  {{"node", identity_.node_id.str()}, {"error", s.ToString()}, {"found", read.what}});
      continue;
    }
    WK_LOG_WARN("first lease write failed; back to the start check",
                {{"node", identity_.node_id.str()}, {"error", s.ToString()}});
  }

  // The renewal loop: a period starts at its first send; the first period starts at the
  // first write's send.
  Duration backoff = kRetryBackoffMin;
  MonoTime period_start = last_send_;
  while (!stopping_ && !lost_ && !aborted_) {
    // Sleep to the next send, waking at the end of validity to report a lapse.
    const MonoTime next_send = period_start + timing_.lease_period();
    while (!stopping_ && !lost_ && env_.MonoNow() < next_send) {
      MonoTime wake = next_send;
      if (valid_ && valid_until_ < wake) wake = valid_until_;
      if (!co_await WaitUntil(wake)) break;
      CheckLapse();
    }
    if (stopping_ || lost_ || aborted_) break;
    period_start = env_.MonoNow();
    const MonoTime period_end = period_start + timing_.lease_period();
    // This period's attempts, each bounded by the attempt timeout and by the period.
    while (!stopping_ && !lost_ && !aborted_) {
      CheckLapse();
      if (lost_) break;
      const Duration left = period_end - env_.MonoNow();
      const Duration budget =
          broken_.on(BrokenModel::kLeaseAttemptUnbounded) ? left : std::min(timing_.attempt_timeout(), left);
      if (budget <= Duration(0)) break;
      const Precondition condition = broken_.on(BrokenModel::kLeaseWriteUnconditional)
                                         ? Precondition::None()
                                         : Precondition::IfMatch(*version_);
      Status s = co_await WriteLive(condition, budget);
      if (s.ok()) {
        backoff = kRetryBackoffMin;
        break;
      }
      if (s.code() == Code::kPreconditionFailed) {
        if (broken_.on(BrokenModel::kConflictIsLost)) {
          Lose(key_ + ": a renewal met a failed condition (taken for a fence without the re-read)");
          co_return end(LeaseEndReason::kLost, lost_why_);
        }
        ReRead read = co_await ReReadAndAdopt();
        if (read.kind != ReReadKind::kUndecided && read.kind != ReReadKind::kOursLive) {
          std::string why = read.kind == ReReadKind::kAbsent
                                ? key_ + " is absent: it was deleted while this process held it"
                                : read.what;
          Lose(why);
          co_return end(LeaseEndReason::kLost, why);
        }
        if (read.kind == ReReadKind::kOursLive) {
          backoff = kRetryBackoffMin;
          if (IsValid()) break;
          continue;  // adopted a version without validity: write again on it at once
        }
      }
      if (broken_.on(BrokenModel::kLeaseNoRetry)) break;
      // Not applied, or unknown (if it landed, the next If-Match conflicts and the
      // re-read adopts it): retry within the period after a short back-off.
      const Duration wait = std::min(backoff, period_end - env_.MonoNow());
      backoff = std::min(backoff * 2, kRetryBackoffMax);
      if (wait <= Duration(0) || !co_await WaitUntil(env_.MonoNow() + wait)) break;
    }
    CheckLapse();
  }
  if (lost_) co_return end(LeaseEndReason::kLost, lost_why_);
  co_return end(LeaseEndReason::kStopped, "stopped");
}

Task<Status> NodeLease::Stop(Duration limit) {
  const MonoTime deadline = env_.MonoNow() + limit;
  stopping_ = true;  // IsValid() is false from here on: stragglers are cut
  if (wake_) wake_->Set(false);
  if (guard_task_.valid()) guard_task_.Cancel();  // a start guard still waiting ends the run
  if (!loop_ended_) {
    Latch<bool> ended(env_, [] { return false; });
    loop_end_latch_ = ended;
    const Env::TimerId timer = env_.StartTimer(deadline, [ended] { ended.Set(false); });
    bool ok = co_await ended.Wait();
    env_.CancelTimer(timer);
    loop_end_latch_.reset();
    if (!ok) co_return UnknownOutcome("the lease loop did not end before the stop deadline");
  }
  if (lost_ || !version_) co_return Status::Ok();  // nothing of ours to release

  // `released` keeps the written_at of the last live write it replaces (docs/node-lease.md, "What
  // the lease is"). A write that fails is tried again for one attempt timeout and a second more,
  // within the stop's limit (docs/node-lease.md, "Clean stop"); past it the lease stays live and
  // peers free it by fencing.
  const MonoTime release_deadline =
      std::min(deadline, env_.MonoNow() + timing_.attempt_timeout() + std::chrono::seconds(1));
  NodeRecord released = LiveRecord(written_at_);
  released.state = LeaseState::kReleased;
  Duration backoff = kRetryBackoffMin;
  while (env_.MonoNow() < release_deadline) {
    const Duration budget = std::min(timing_.attempt_timeout(), release_deadline - env_.MonoNow());
    auto put = co_await store_.Put(key_, EncodeNodeRecord(released), Precondition::IfMatch(*version_),
                                   CallOptions{budget});
    if (put.ok()) {
      WK_LOG_INFO("node lease released", {{"node", identity_.node_id.str()}, {"instance", instance_.str()}});
      co_return Status::Ok();
    }
    if (put.code() == Code::kPreconditionFailed) {
      // Re-read rule: a renewal of ours may have landed with its reply lost.
      auto got = co_await store_.Get(key_, CallOptions{budget});
      if (got.ok()) {
        auto obj = DecodeNodeObject(got->body);
        if (obj.ok() && std::holds_alternative<NodeRecord>(*obj)) {
          const auto& r = std::get<NodeRecord>(*obj);
          if (r.instance == instance_ && r.state == LeaseState::kReleased) co_return Status::Ok();
          if (r.instance == instance_ && r.state == LeaseState::kLive) {
            version_ = got->version;
            released.written_at = r.written_at;
            continue;
          }
        }
      }
      if (got.ok() || got.code() == Code::kNotFound) {
        co_return PreconditionFailed(key_ + " is no longer ours; nothing to release");
      }
    }
    const Duration wait = std::min(backoff, release_deadline - env_.MonoNow());
    backoff = std::min(backoff * 2, kRetryBackoffMax);
    if (wait > Duration(0)) (void)co_await env_.SleepFor(wait);
  }
  co_return UnknownOutcome("could not write released in time; the lease stays live until peers fence it");
}

}  // namespace wk
