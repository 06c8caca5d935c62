#include "cluster/owners.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "cluster/first_generation.h"
#include "store/tenant_store.h"

namespace wk {
namespace {

constexpr Duration kBackgroundTick = std::chrono::milliseconds(250);
constexpr Duration kEntryBackoffMin = std::chrono::milliseconds(200);
constexpr Duration kEntryBackoffMax = std::chrono::seconds(3);
constexpr Duration kForegroundRetry = std::chrono::milliseconds(50);

AcquireResult Outcome(AcquireResult::Kind kind, std::string why) {
  AcquireResult r;
  r.kind = kind;
  r.why = std::move(why);
  return r;
}

}  // namespace

Owners::Owners(Env& env, ObjectStore& store, NodeLease& lease, const Membership& membership, LeaseTiming timing)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kOwner)), lease_(lease), membership_(membership), timing_(timing) {}

Owners::~Owners() { StopBackground(); }

// ---- the per-actor locks

void Owners::LockTable::Unlock(const ActorId& actor) {
  auto it = entries.find(actor);
  if (it == entries.end()) return;
  // Hand the lock to the first waiter still waiting (a cancelled one already got its
  // fallback, so its Set fails and the next is tried).
  while (!it->second.waiters.empty()) {
    Latch<bool> next = it->second.waiters.front();
    it->second.waiters.pop_front();
    if (next.Set(true)) return;  // stays locked, now theirs
  }
  entries.erase(it);  // nobody holds it, nobody waits: the entry goes
}

Owners::ActorLock& Owners::ActorLock::operator=(ActorLock&& o) noexcept {
  if (this != &o) {
    Release();
    table_ = std::move(o.table_);
    actor_ = std::move(o.actor_);
    o.table_.reset();
  }
  return *this;
}

void Owners::ActorLock::Release() {
  if (auto table = table_.lock()) table->Unlock(actor_);
  table_.reset();
}

Task<Owners::ActorLock> Owners::LockActor(ActorId actor) {
  std::shared_ptr<LockTable> table = locks_;
  auto& entry = table->entries[actor];
  if (!entry.locked) {
    entry.locked = true;
    co_return ActorLock(table, actor);
  }
  Latch<bool> turn(env_, [] { return false; });
  entry.waiters.push_back(turn);
  if (!co_await turn.Wait()) {
    // Cancelled. The entry stays for its holder, who skips this waiter when it unlocks.
    co_return ActorLock();
  }
  co_return ActorLock(table, actor);
}

bool Owners::AcquisitionsInFlight() const { return !locks_->entries.empty(); }

// ---- holds

HoldView Owners::Find(const ActorId& actor) const {
  auto it = holds_.find(actor);
  if (it == holds_.end()) return HoldView();
  return HoldView(it->second, &lease_);
}

HoldView Owners::Register(const ActorId& actor, Generation g, Version v, std::uint64_t epoch) {
  // A generation is one hold's: a new hold is above the one it replaces and above any whose
  // release is pending (the acquisition wrote above the record, which names them or later).
  // Broken models break exactly such rules on purpose, for the checkers to catch.
  if (!broken_.any()) {
    auto old = holds_.find(actor);
    WK_CHECK(old == holds_.end() || old->second->generation < g,
             actor.ToString() + ": a hold at generation " + std::to_string(g.value) + " replaces one at " +
                 std::to_string(old->second->generation.value));
    WK_CHECK(!pending_.contains({actor, g}),
             actor.ToString() + ": a hold at generation " + std::to_string(g.value) + " whose release is pending");
  }
  auto state = std::make_shared<HoldState>();
  state->actor = actor;
  state->generation = g;
  state->version = std::move(v);
  state->epoch = epoch;
  ++stats_.acquisitions;
  HoldView view(state, &lease_);
  if (!view.IsValid()) {
    // The lease lapsed (or a stop began) while the record was being written: this hold
    // never acts; its record goes straight to the pending releases.
    state->alive = false;
    Park(actor, g, state->version);
    return view;
  }
  PutHold(actor, std::move(state));
  return view;
}

void Owners::Park(const ActorId& actor, Generation g, Version v) {
  if (lost_) return;  // the fence (or the other instance) frees it
  ++stats_.releases_parked;
  Pending p{actor, g, std::move(v), env_.MonoNow(), kEntryBackoffMin};
  p.serial = next_serial_++;
  pending_[{actor, g}] = std::move(p);
}

Task<Owners::Freed> Owners::IsFree(ActorId actor, OwnerRecord record) {
  if (broken_.on(BrokenModel::kFreeOnView)) {
    // Broken model: judging from the membership view (possibly older than the record).
    co_return membership_.IsLive(record.node_id, record.instance) ? Freed::kHeld : Freed::kFree;
  }
  // A read of nodes/<A> issued after the read of the record (docs/node-lease.md, "Freeing a
  // record").
  auto got = co_await StoreOf(actor).Get(NodeKey(record.node_id), CallOptions{timing_.attempt_timeout()});
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return broken_.on(BrokenModel::kFreeOnAbsentNode) ? Freed::kFree : Freed::kHeld;
    co_return Freed::kUnknown;
  }
  auto obj = DecodeNodeObject(got->body);
  if (!obj.ok()) co_return Freed::kHeld;  // corrupt: never free
  if (std::holds_alternative<OldHeartbeat>(*obj)) {
    // An old binary writes its heartbeat unconditionally: it may have overwritten A's
    // object while A was still valid. Never free, however old (docs/node-lease.md, "Freeing a
    // record").
    co_return broken_.on(BrokenModel::kFreeOnOldFormat) ? Freed::kFree : Freed::kHeld;
  }
  const NodeRecord& n = std::get<NodeRecord>(*obj);
  if (n.state == LeaseState::kLive) {
    if (n.instance == record.instance) co_return Freed::kHeld;
    // Another instance is live: A restarted, and the instance the record names can never
    // write again (its object was replaced, and the new one waited ttl + grace first).
    co_return broken_.on(BrokenModel::kRestartFreesNothing) ? Freed::kHeld : Freed::kFree;
  }
  // Fenced or released, naming any instance: free once its kept written_at + ttl + grace
  // has passed on our clock.
  if (broken_.on(BrokenModel::kFreeIgnoresFenceBound)) co_return Freed::kFree;
  co_return env_.WallNow() >= n.written_at + timing_.takeover_after() ? Freed::kFree : Freed::kHeld;
}

ObjectStore& Owners::StoreOf(const ActorId& actor) {
  return tenant_stores_ != nullptr ? tenant_stores_->Of(actor).ForPurpose(BucketPurpose::kOwner) : store_;
}

Task<AcquireResult> Owners::Acquire(ActorId actor) { return AcquireWith(std::move(actor), std::nullopt); }

Task<AcquireResult> Owners::AcquireHandedOver(ActorId actor, Version released, Generation generation) {
  return AcquireWith(std::move(actor), std::make_pair(std::move(released), generation));
}

void Owners::SetLeaving(const ActorId& actor, bool leaving) {
  if (leaving) {
    leaving_.insert(actor);
  } else {
    leaving_.erase(actor);
  }
}

void Owners::PutHold(const ActorId& actor, std::shared_ptr<HoldState> state) {
  const bool inserted = holds_.insert_or_assign(actor, std::move(state)).second;
  if (inserted && IsSystemActor(actor)) ++system_holds_;
}

void Owners::EraseHold(std::map<ActorId, std::shared_ptr<HoldState>>::iterator it) {
  if (IsSystemActor(it->first)) --system_holds_;
  if (it->second->sleeping) --sleeping_;
  holds_.erase(it);
}

std::map<ActorId, std::shared_ptr<HoldState>> Owners::TakeAllHolds() {
  system_holds_ = 0;
  sleeping_ = 0;
  sleep_queue_.clear();
  return std::exchange(holds_, {});
}

// ---- sleeping holds (docs/node-lease.md, "Sleeping holds")

bool Owners::Sleep(const ActorId& actor, Generation generation, HoldResume resume) {
  auto it = holds_.find(actor);
  if (it == holds_.end() || it->second->generation != generation || it->second->sleeping) return false;
  // A hold that is no longer valid (a lapse since its acquisition) is never kept: its
  // release is the caller's, and validity never comes back within an epoch anyway.
  if (!HoldView(it->second, &lease_).IsValid()) return false;
  // System actors (alarm shards) are held for as long as their node ranks them, never
  // hibernated; a draining node or a leaving actor releases (the hand-over waits for it).
  if (IsSystemActor(actor) || sleep_policy_.keep_for <= Duration(0) || sleep_policy_.max_sleeping == 0 ||
      !accepting_ || leaving(actor)) {
    return false;
  }
  it->second->sleeping = resume;
  it->second->sleep_serial = next_serial_++;
  ++sleeping_;
  ++stats_.slept;
  sleep_queue_.push_back(SleepEntry{actor, it->second->sleep_serial, env_.MonoNow()});
  // Stale entries (holds that woke or ended) are dropped once they outnumber the live ones,
  // so the queue stays within twice the sleeping holds however often actors sleep and wake.
  if (sleep_queue_.size() > 2 * sleeping_ + 1024) {
    std::erase_if(sleep_queue_, [this](const SleepEntry& e) {
      auto h = holds_.find(e.actor);
      return h == holds_.end() || !h->second->sleeping || h->second->sleep_serial != e.serial;
    });
  }
  if (sleeping_ > sleep_policy_.max_sleeping) SweepSleeping();
  return true;
}

std::optional<std::pair<HoldView, HoldResume>> Owners::Wake(const ActorId& actor) {
  auto it = holds_.find(actor);
  if (it == holds_.end() || !it->second->sleeping) {
    // Broken models: a sleeping hold that ended comes back, valid under today's lease.
    auto ghost = ghosts_.find(actor);
    if (ghost == ghosts_.end() || it != holds_.end() || !lease_.IsValid()) return std::nullopt;
    auto state = std::make_shared<HoldState>();
    state->actor = actor;
    state->generation = ghost->second.generation;
    state->version = ghost->second.version;
    state->epoch = lease_.epoch();
    const HoldResume resume = ghost->second.resume;
    ghosts_.erase(ghost);
    PutHold(actor, state);
    return std::make_pair(HoldView(state, &lease_), resume);
  }
  HoldView view(it->second, &lease_);
  if (!view.IsValid() || leaving(actor)) return std::nullopt;
  const HoldResume resume = *it->second->sleeping;
  it->second->sleeping.reset();
  --sleeping_;
  ++stats_.woken;
  return std::make_pair(view, resume);
}

bool Owners::IsSleeping(const ActorId& actor) const {
  auto it = holds_.find(actor);
  return it != holds_.end() && it->second->sleeping.has_value();
}

void Owners::KeepGhost(const HoldState& hold) {
  if (hold.sleeping) ghosts_[hold.actor] = Ghost{hold.generation, hold.version, *hold.sleeping};
}

void Owners::SweepSleeping() {
  if (!lease_.IsValid() || !MaySend()) return;  // a release needs a valid lease; the next tick
  const MonoTime now = env_.MonoNow();
  while (!sleep_queue_.empty() && sleep_releases_in_flight_ < static_cast<std::size_t>(kPendingConcurrency)) {
    const SleepEntry e = sleep_queue_.front();
    auto it = holds_.find(e.actor);
    if (it == holds_.end() || !it->second->sleeping || it->second->sleep_serial != e.serial) {
      sleep_queue_.pop_front();  // woke or ended since
      continue;
    }
    const bool over_limit = sleeping_ > sleep_policy_.max_sleeping + sleep_releases_in_flight_;
    if (!over_limit && now - e.since < sleep_policy_.keep_for) break;  // the oldest is young enough
    sleep_queue_.pop_front();
    if (!over_limit && keep_sleeping_ && keep_sleeping_(e.actor)) {
      sleep_queue_.push_back(SleepEntry{e.actor, e.serial, now});  // kept: looked at again later
      continue;
    }
    ++sleep_releases_in_flight_;
    env_.Spawn(ReleaseSleeping(e.actor, e.serial, over_limit), "sleeping hold release");
  }
}

Task<void> Owners::ReleaseSleeping(ActorId actor, std::uint64_t serial, bool over_limit) {
  std::weak_ptr<LockTable> alive = locks_;
  ActorLock guard = co_await LockActor(actor);
  if (alive.expired()) co_return;  // the Owners is gone
  auto it = holds_.find(actor);
  // Still asleep, and the same sleep: a wake since (or a release) leaves it alone.
  if (guard.owns() && it != holds_.end() && it->second->sleeping && it->second->sleep_serial == serial) {
    ++(over_limit ? stats_.sleep_released_limit : stats_.sleep_released_idle);
    (void)co_await ReleaseHeld(actor);
    if (alive.expired()) co_return;
  }
  --sleep_releases_in_flight_;
}

std::vector<ActorId> Owners::HeldActors() const {
  std::vector<ActorId> out;
  out.reserve(holds_.size());
  for (const auto& [a, h] : holds_) out.push_back(a);
  return out;
}

void Owners::HoldEndedAs(const HoldState& hold, HoldEnd how, Version version) {
  HoldEnded ended{hold.actor, hold.generation, how, std::move(version)};
  if (on_hold_ended_) on_hold_ended_(ended);
  if (on_hold_ended_sockets_) on_hold_ended_sockets_(ended);
}

Task<AcquireResult> Owners::AcquireWith(ActorId actor, std::optional<std::pair<Version, Generation>> hint) {
  // Tenants' actors, and the nodes' own records (alarm shards, docs/alarms.md).
  if (Status s = ValidateActorId(actor); !s.ok() && !ValidateSystemActorId(actor).ok()) {
    co_return Outcome(AcquireResult::Kind::kError, s.message());
  }
  ActorLock guard = co_await LockActor(actor);
  if (!guard.owns()) co_return Outcome(AcquireResult::Kind::kError, "cancelled");
  // Leaving (a hand-over): not even the hold we still have is given out, so no new event
  // starts on an actor whose close is under way.
  if (leaving(actor)) co_return Outcome(AcquireResult::Kind::kNotValid, "moving to another node");
  if (HoldView existing = Find(actor); existing.IsValid()) {
    AcquireResult r;
    r.kind = AcquireResult::Kind::kAcquired;
    r.hold = existing;
    co_return r;
  }
  if (!lease_.IsValid()) co_return Outcome(AcquireResult::Kind::kNotValid, "node lease not valid");
  if (!accepting_) co_return Outcome(AcquireResult::Kind::kNotValid, "draining: not taking new actors");

  const std::string key = OwnerKey(actor);
  const CallOptions call{timing_.attempt_timeout()};
  const NodeId& self = lease_.identity().node_id;
  Generation next{1};
  Generation above{0};  // the highest generation the record (or its seed) is known to carry
  bool reuse = false;   // broken model wake-reuses-generation
  Precondition condition = Precondition::IfNoneMatchAny();
  std::optional<Version> read_version;
  // A hand-over's hint stands for the read: the previous holder's release left the record
  // naming nobody at that generation and version (If-Match makes sure it still does).
  // (No conditional around the co_await: GCC 12 miscompiles one; docs/DEVELOPING.md.)
  Result<GetOutput> got = NotFound("a hand-over: no read");
  if (!hint) got = co_await StoreOf(actor).Get(key, call);
  if (hint) {
    above = hint->second;
    read_version = hint->first;
    // Broken model take-unconditional: the hand-over vouched for the record, so the
    // condition looks redundant; it is what refuses a taker who came meanwhile.
    condition = broken_.on(BrokenModel::kTakeUnconditional) ? Precondition::None() : Precondition::IfMatch(hint->first);
  }
  if (!hint && !got.ok() && got.code() != Code::kNotFound) {
    co_return Outcome(AcquireResult::Kind::kError, "reading " + key + ": " + got.status().ToString());
  }
  if (hint) {
    // Handed over: the record exists (it names nobody at the hint's generation), so there is
    // nothing to seed; If-Match the released version refuses anything else.
  } else if (!got.ok() && IsSystemActor(actor)) {
    // A system actor (an alarm shard) has no log to seed above, and no older version ever
    // held one under a per-actor lease, so its first hold starts at 1 with no leases/
    // marker: seeding would only cost two listings, a read and a marker per shard.
  } else if (!got.ok()) {
    // No record: the first acquisition of this actor (an upgraded one, a new one, or one
    // whose record was lost) starts above every generation its log and leases/ carry, and
    // never takes an actor a live old per-actor lease holds (docs/node-lease.md, "Upgrading from
    // per-actor leases"; first_generation.h).
    auto first = co_await SeedFirstGeneration(env_, StoreOf(actor), actor, self, timing_, call, broken_,
                                              [this] { return MaySend(); });
    if (!first.ok()) co_return Outcome(AcquireResult::Kind::kError, "seeding " + key + ": " + first.status().ToString());
    if (first->held_by_old_lease) {
      ++stats_.acquire_conflicts;
      ++stats_.old_lease_refusals;
      const std::string why = "held by a live per-actor lease of an older version (" + LeaseMarkerKey(actor) + ": " +
                              DescribeOldLease(*first->held_by_old_lease) + ")";
      WK_LOG_WARN("actor refused: an old version's per-actor lease still holds it", {{"actor", actor.ToString()}, {"why", why}});
      co_return Outcome(AcquireResult::Kind::kHeldElsewhere, why);
    }
    if (first->marker_written) ++stats_.markers_written;
    above = first->seed;
  }
  if (got.ok()) {
    auto rec = DecodeOwnerRecord(got->body);
    if (!rec.ok()) co_return Outcome(AcquireResult::Kind::kError, key + ": " + rec.status().message());
    const bool mine_or_nobody = rec->names_nobody() || rec->Names(self, lease_.instance());
    if (!mine_or_nobody) {
      Freed freed = co_await IsFree(actor, *rec);
      if (freed != Freed::kFree) {
        ++stats_.acquire_conflicts;
        AcquireResult r = Outcome(freed == Freed::kHeld ? AcquireResult::Kind::kHeldElsewhere : AcquireResult::Kind::kError,
                                  "held by " + rec->node_id.str() + " (instance " + rec->instance.str() + ")");
        r.owner = *rec;
        co_return r;
      }
    }
    reuse = broken_.on(BrokenModel::kWakeReusesGeneration) && mine_or_nobody;
    above = rec->generation;
    read_version = got->version;
    condition = Precondition::IfMatch(got->version);
  }

  if (above.value >= kMaxGeneration) {
    // Only a corrupt record or a planted key gets here; the actor needs an operator.
    co_return Outcome(AcquireResult::Kind::kError, key + ": generation " + std::to_string(above.value) +
                                                       " is the largest a record may carry; not acquired");
  }
  next = reuse ? above : above.Next();
  // Checked right before the record write (docs/node-lease.md, "Actors").
  if (!lease_.IsValid()) co_return Outcome(AcquireResult::Kind::kNotValid, "node lease not valid");
  if (!accepting_) co_return Outcome(AcquireResult::Kind::kNotValid, "draining: not taking new actors");
  if (leaving(actor)) co_return Outcome(AcquireResult::Kind::kNotValid, "moving to another node");
  // Generations only grow: an acquisition writes above what it read (or was handed).
  WK_CHECK(next > above || broken_.any(),
           actor.ToString() + ": an acquisition would write generation " + std::to_string(next.value) +
               " over generation " + std::to_string(above.value));
  const std::uint64_t epoch = lease_.epoch();
  const OwnerRecord mine{self, lease_.instance(), next};
  auto put = co_await StoreOf(actor).Put(key, EncodeOwnerRecord(mine), condition, call);
  if (put.ok()) {
    AcquireResult r;
    r.kind = AcquireResult::Kind::kAcquired;
    r.hold = Register(actor, next, *put, epoch);
    if (!r.hold.IsValid()) r = Outcome(AcquireResult::Kind::kNotValid, "node lease lapsed during the acquisition");
    co_return r;
  }
  if (put.code() == Code::kRetryable || put.code() == Code::kInvalidArgument || put.code() == Code::kFatal) {
    // Refused before it was applied: nothing to resolve.
    co_return Outcome(AcquireResult::Kind::kError, "writing " + key + ": " + put.status().ToString());
  }

  // No reply, a timeout, a cancellation or a conflict: the write may have landed (a
  // conflict too, since a retried request can conflict with its own first attempt). Read
  // back once, still under the lock.
  if (!broken_.on(BrokenModel::kNoAcquireReadBack)) {
    auto back = co_await StoreOf(actor).Get(key, call);
    if (back.ok()) {
      auto rec = DecodeOwnerRecord(back->body);
      if (rec.ok() && rec->Names(self, lease_.instance()) && rec->generation == next) {
        // This write: only this node writes this instance, one acquisition of an actor at
        // a time, and the generation is the attempt's.
        AcquireResult r;
        r.kind = AcquireResult::Kind::kAcquired;
        r.hold = Register(actor, next, back->version, epoch);
        if (!r.hold.IsValid()) r = Outcome(AcquireResult::Kind::kNotValid, "node lease lapsed during the acquisition");
        co_return r;
      }
      const bool changed = !read_version || back->version != *read_version;
      if (rec.ok() && changed && !rec->names_nobody() && !rec->Names(self, lease_.instance())) {
        Freed freed = co_await IsFree(actor, *rec);
        if (freed == Freed::kHeld) {
          ++stats_.acquire_conflicts;
          AcquireResult r = Outcome(AcquireResult::Kind::kHeldElsewhere, "lost the race to " + rec->node_id.str());
          r.owner = *rec;
          co_return r;
        }
      }
    }
  }
  // Undecided: the write may still be in flight and land.
  if (lost_) co_return Outcome(AcquireResult::Kind::kNotValid, "node lease lost");
  ++stats_.unresolved;
  unresolved_[{actor, next}] =
      Unresolved{actor, next, read_version, env_.MonoNow(), kEntryBackoffMin, next_serial_++, env_.MonoNow()};
  WK_LOG_WARN("acquire outcome unknown; kept for the resolver",
              {{"actor", actor.ToString()}, {"generation", std::to_string(next.value)}, {"error", put.status().ToString()}});
  co_return Outcome(AcquireResult::Kind::kUnknown, "acquire outcome unknown: " + put.status().ToString());
}

Task<Status> Owners::Release(ActorId actor, std::optional<Generation> only) {
  // The lock orders this release after any acquisition of the same actor in flight.
  ActorLock guard = co_await LockActor(actor);
  auto it = holds_.find(actor);
  if (it == holds_.end()) co_return Status::Ok();
  if (only && it->second->generation != *only) co_return Status::Ok();  // a later hold: not ours to end
  co_return co_await ReleaseHeld(std::move(actor));
}

Task<Status> Owners::ReleaseHeld(ActorId actor) {
  auto it = holds_.find(actor);
  if (it == holds_.end()) co_return Status::Ok();
  std::shared_ptr<HoldState> hold = it->second;
  hold->alive = false;  // stop acting first, whatever the reply
  if (broken_.on(BrokenModel::kWakeAcquiresNothingAfterRelease)) KeepGhost(*hold);
  EraseHold(it);

  const std::string key = OwnerKey(actor);
  const OwnerRecord nobody = OwnerRecord::Nobody(hold->generation);
  const MonoTime deadline = env_.MonoNow() + kReleaseTries;
  while (env_.MonoNow() < deadline && lease_.IsValid()) {
    const Duration budget = std::min(timing_.attempt_timeout(), deadline - env_.MonoNow());
    std::string body = EncodeOwnerRecord(nobody);
    auto put = co_await StoreOf(actor).Put(key, std::move(body), Precondition::IfMatch(hold->version), CallOptions{budget});
    if (put.ok()) {
      ++stats_.releases_ok;
      HoldEndedAs(*hold, HoldEnd::kReleased, *put);
      co_return Status::Ok();
    }
    if (put.code() == Code::kPreconditionFailed) break;  // the background task reads and decides
    if (!co_await env_.SleepFor(kForegroundRetry)) break;
  }
  Park(actor, hold->generation, hold->version);
  HoldEndedAs(*hold, HoldEnd::kParked);
  co_return UnknownOutcome("release of " + actor.ToString() + " is pending");
}

void Owners::OnLapse() {
  if (broken_.on(BrokenModel::kLapseKeepsHolds)) return;
  // Every hold ends at once into the pending releases (docs/node-lease.md, "Actors").
  auto ended = TakeAllHolds();
  for (auto& [actor, hold] : ended) {
    hold->alive = false;
    if (broken_.on(BrokenModel::kSleepingHoldSurvivesLeaseLoss)) KeepGhost(*hold);
    Park(actor, hold->generation, hold->version);
  }
  for (auto& [actor, hold] : ended) HoldEndedAs(*hold, HoldEnd::kLapsed);
}

void Owners::OnLost() {
  // Dropped without releasing: the fence (or the other instance) frees the records.
  auto ended = TakeAllHolds();
  for (auto& [actor, hold] : ended) {
    hold->alive = false;
    if (broken_.on(BrokenModel::kSleepingHoldSurvivesLeaseLoss)) KeepGhost(*hold);
    ++stats_.dropped_holds;
  }
  pending_.clear();
  unresolved_.clear();
  for (auto& [actor, hold] : ended) HoldEndedAs(*hold, HoldEnd::kDropped);
  if (broken_.on(BrokenModel::kResolverIgnoresLost)) return;
  // A lost process sends nothing more (docs/node-lease.md, "What the lease is": no releases): the
  // pass and every entry in flight are cancelled, and each one checks lost_ before it would send.
  lost_ = true;
  StopBackground();
}

bool Owners::MaySend() const { return !lost_ || broken_.on(BrokenModel::kResolverIgnoresLost); }

Task<bool> Owners::TryPending(Pending entry) {
  if (!MaySend()) co_return false;
  const std::string key = OwnerKey(entry.actor);
  const CallOptions call{timing_.attempt_timeout()};
  // Always the same write: nobody at g, If-Match the acquire's version. Never a version
  // read later (that would release a later hold).
  // Named locals, not temporaries bound inside the co_await operand: GCC 12 destroys such
  // temporaries twice (docs/DEVELOPING.md).
  std::string body = EncodeOwnerRecord(OwnerRecord::Nobody(entry.generation));
  auto put = co_await StoreOf(entry.actor).Put(key, std::move(body), Precondition::IfMatch(entry.version), call);
  if (put.ok()) {
    ++stats_.pending_landed;
    co_return true;
  }
  if (put.code() != Code::kPreconditionFailed) co_return false;
  auto got = co_await StoreOf(entry.actor).Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) {
      ++stats_.pending_ended;
      co_return true;
    }
    co_return false;
  }
  auto rec = DecodeOwnerRecord(got->body);
  const bool ours = rec.ok() && rec->Names(lease_.identity().node_id, lease_.instance());
  if (ours && broken_.on(BrokenModel::kPendingReleaseAdoptsVersion) && MaySend()) {
    // Broken model: the release adopts the version just read, and frees whatever hold of
    // this instance the record names now.
    std::string adopted = EncodeOwnerRecord(OwnerRecord::Nobody(rec->generation));
    auto again = co_await StoreOf(entry.actor).Put(key, std::move(adopted), Precondition::IfMatch(got->version), call);
    if (again.ok()) ++stats_.pending_landed;
    co_return again.ok();
  }
  if (rec.ok() && !(ours && rec->generation == entry.generation)) {
    ++stats_.pending_ended;  // nobody, another owner, a higher generation
    co_return true;
  }
  co_return false;
}

Task<bool> Owners::TryUnresolved(Unresolved entry) {
  ActorLock guard;
  if (!broken_.on(BrokenModel::kResolverWithoutLock)) {
    guard = co_await LockActor(entry.actor);
    if (!guard.owns()) co_return false;
  }
  if (!MaySend()) co_return false;
  const std::string key = OwnerKey(entry.actor);
  const CallOptions call{timing_.attempt_timeout()};
  auto got = co_await StoreOf(entry.actor).Get(key, call);
  if (!MaySend()) co_return false;
  if (!got.ok() && got.code() != Code::kNotFound) co_return false;  // undecided: read again later
  const bool absent = !got.ok();
  if (absent && entry.read_version) {
    ++stats_.resolver_dropped;  // deleted since: the write (If-Match) can never land
    co_return true;
  }
  const bool unchanged = absent || (entry.read_version && got->version == *entry.read_version);
  std::optional<OwnerRecord> rec;
  if (!absent) {
    auto decoded = DecodeOwnerRecord(got->body);
    if (decoded.ok()) rec = *decoded;
  }
  const bool ours_at_g =
      rec && rec->Names(lease_.identity().node_id, lease_.instance()) && rec->generation == entry.generation;
  if (!ours_at_g && unchanged) {
    // The lost write may still be in flight and land. Close it: write what this entry's
    // generation would leave if released, `nobody` at g, conditioned exactly as the lost
    // write was. Once it lands the lost write can never land (its condition names a
    // version the record no longer has), and the record frees nothing it did not free
    // already (owners.h, "Closing"; docs/node-lease.md, "Unresolved acquires").
    // Not before ttl + grace: a write merely slow in transit usually lands meanwhile, and
    // is then released (or found by a second acquisition) as usual.
    if (env_.MonoNow() - entry.created < timing_.takeover_after()) co_return false;
    if (broken_.on(BrokenModel::kUnresolvedNeverClosed)) co_return false;
    std::string body = EncodeOwnerRecord(OwnerRecord::Nobody(entry.generation));
    const Precondition condition =
        entry.read_version ? Precondition::IfMatch(*entry.read_version) : Precondition::IfNoneMatchAny();
    auto put = co_await StoreOf(entry.actor).Put(key, std::move(body), condition, call);
    if (!put.ok()) co_return false;  // landed or not, the next read decides
    ++stats_.resolver_closed;
    WK_LOG_INFO("unresolved acquire closed: its write can no longer land",
                {{"actor", entry.actor.ToString()}, {"generation", std::to_string(entry.generation.value)}});
    co_return true;
  }
  if (!ours_at_g || holds_.count(entry.actor) || broken_.on(BrokenModel::kResolverNeverReleases)) {
    ++stats_.resolver_dropped;  // names anything else (it can never land now), or a hold lives here
    co_return true;
  }
  // It landed and nothing here holds it: release it, If-Match that read's version (only
  // this node could have written this instance at that generation).
  std::string body = EncodeOwnerRecord(OwnerRecord::Nobody(entry.generation));
  auto put = co_await StoreOf(entry.actor).Put(key, std::move(body), Precondition::IfMatch(got->version), call);
  if (put.ok()) {
    ++stats_.resolver_released;
  } else {
    Park(entry.actor, entry.generation, got->version);
  }
  co_return true;
}

// One batch of due entries, at most kPendingConcurrency at once. A member coroutine, not
// a lambda: GCC 12 mis-built the frames of this file's other coroutines when this was a
// lambda coroutine capturing by reference (garbage at their first resume).
Task<void> Owners::RunBatch(bool pendings, std::vector<EntryKey> keys, int* refusals) {
  const bool unbounded = broken_.on(BrokenModel::kUnboundedPendingConcurrency);
  const bool no_limit = broken_.on(BrokenModel::kNoRefusalLimit);
  const bool while_invalid = broken_.on(BrokenModel::kPendingRetriesWhileInvalid);
  for (std::size_t i = 0; i < keys.size() && (no_limit || *refusals < kMaxRefusalsInARow) &&
                          (while_invalid || lease_.IsValid()) && MaySend();) {
    std::vector<EntryKey> batch_keys;
    std::vector<std::uint64_t> serials;
    std::vector<std::shared_ptr<bool>> done;
    batch_.clear();
    for (; i < keys.size() && (unbounded || static_cast<int>(batch_.size()) < kPendingConcurrency); ++i) {
      auto flag = std::make_shared<bool>(false);
      if (pendings) {
        auto it = pending_.find(keys[i]);
        if (it == pending_.end()) continue;
        serials.push_back(it->second.serial);
        batch_.push_back(env_.Spawn(TryPendingInto(it->second, flag), "pending release"));
      } else {
        auto it = unresolved_.find(keys[i]);
        if (it == unresolved_.end()) continue;
        serials.push_back(it->second.serial);
        batch_.push_back(env_.Spawn(TryUnresolvedInto(it->second, flag), "resolver"));
      }
      batch_keys.push_back(keys[i]);
      done.push_back(flag);
    }
    stats_.max_entries_in_flight = std::max<std::uint64_t>(stats_.max_entries_in_flight, batch_.size());
    std::vector<TaskHandle> handles = batch_;
    for (std::size_t j = 0; j < handles.size(); ++j) {
      if (!co_await handles[j].Join()) co_return;  // cancelled
      const EntryKey& k = batch_keys[j];
      if (*done[j]) {
        *refusals = 0;
        // Only the entry that was worked on: one that replaced it meanwhile stays.
        if (pendings) {
          if (auto it = pending_.find(k); it != pending_.end() && it->second.serial == serials[j]) pending_.erase(it);
        } else {
          if (auto it = unresolved_.find(k); it != unresolved_.end() && it->second.serial == serials[j]) unresolved_.erase(it);
        }
        continue;
      }
      ++*refusals;
      if (pendings) {
        if (auto it = pending_.find(k); it != pending_.end()) Backoff(it->second.backoff, it->second.next_try);
      } else {
        if (auto it = unresolved_.find(k); it != unresolved_.end()) Backoff(it->second.backoff, it->second.next_try);
      }
    }
    batch_.clear();
  }
}

void Owners::Backoff(Duration& backoff, MonoTime& next_try) {
  backoff = std::min(backoff * 2, kEntryBackoffMax);
  next_try = env_.MonoNow() + backoff;
}

Task<void> Owners::TryPendingInto(Pending entry, std::shared_ptr<bool> done) {
  *done = co_await TryPending(std::move(entry));
}

Task<void> Owners::TryUnresolvedInto(Unresolved entry, std::shared_ptr<bool> done) {
  *done = co_await TryUnresolved(std::move(entry));
}

Task<void> Owners::Pass() {
  // Due entries, pending releases first; the pass stops after kMaxRefusalsInARow
  // failures in a row (a refusing or throttling bucket gets no burst of writes).
  int refusals = 0;
  const MonoTime now = env_.MonoNow();
  std::vector<EntryKey> due_pending, due_unresolved;
  for (auto& [k, p] : pending_)
    if (p.next_try <= now) due_pending.push_back(k);
  for (auto& [k, u] : unresolved_)
    if (u.next_try <= now) due_unresolved.push_back(k);
  co_await RunBatch(true, std::move(due_pending), &refusals);
  co_await RunBatch(false, std::move(due_unresolved), &refusals);
}

// The background task is driven by a timer rather than written as a looping coroutine:
// GCC 12 laid out that coroutine's frame with its promise 8 bytes off (garbage at the
// first resume, SIGILL), while the passes themselves compile correctly.
void Owners::StartBackground() {
  StopBackground();
  if (lost_) return;
  background_on_ = true;
  ScheduleTick();
}

void Owners::StopBackground() {
  background_on_ = false;
  if (tick_timer_) env_.CancelTimer(*tick_timer_);
  tick_timer_.reset();
  if (pass_.valid()) pass_.Cancel();
  pass_ = TaskHandle();
  // The entries in flight too (their writes stop with them), but for the broken model
  // resolver-ignores-lost, which leaves them running.
  if (!broken_.on(BrokenModel::kResolverIgnoresLost)) {
    for (TaskHandle& h : batch_)
      if (h.valid()) h.Cancel();
  }
  batch_.clear();
}

void Owners::ScheduleTick() {
  tick_timer_ = env_.StartTimer(env_.MonoNow() + kBackgroundTick, [this] {
    tick_timer_.reset();
    if (!background_on_) return;
    // Retries pause while the node lease is invalid (docs/node-lease.md, "Actors"); one pass at a
    // time.
    if (HasWork() && pass_.done()) pass_ = env_.Spawn(Pass(), "pending releases");
    SweepSleeping();
    ScheduleTick();
  });
}

bool Owners::HasWork() const {
  const bool may = lease_.IsValid() || broken_.on(BrokenModel::kPendingRetriesWhileInvalid);
  return may && MaySend() && (!pending_.empty() || !unresolved_.empty());
}

Task<Status> Owners::Drain(Duration limit) {
  accepting_ = false;
  const MonoTime deadline = env_.MonoNow() + limit;
  auto drained = [this] {
    if (broken_.on(BrokenModel::kDrainIgnoresPending)) return holds_.empty();
    return holds_.empty() && pending() == 0 && !AcquisitionsInFlight();
  };
  // Holds can still appear from acquisitions that were past their checks when the drain
  // began (at most one attempt timeout later): release until none is left. Each release
  // starts only before the deadline, so a slow bucket cannot stretch the drain (nor the
  // clean stop, whose lease-level cut then ends what is left: docs/node-lease.md, "Clean stop").
  while (env_.MonoNow() < deadline && lease_.IsValid()) {
    // Tenants' actors in memory first, one at a time, then sleeping holds, kPendingConcurrency
    // at once, system actors (alarm shards) last: the phase is bounded, and an actor in memory
    // is what clients wait for at its next owner; a sleeping one is idle (and a node may hold
    // 100,000 of them, which one at a time would never fit: what the bound leaves is freed by
    // `released` or the next process under this id: docs/node-lease.md, "Sleeping holds"); a
    // shard's release only delays the scan of its alarms (docs/alarms.md). No release starts
    // after the deadline, so the order decides which holds the bound reaches.
    std::vector<ActorId> awake, system;
    auto asleep = std::make_shared<std::deque<ActorId>>();
    for (auto& [a, h] : holds_) {
      if (IsSystemActor(a)) {
        system.push_back(a);
      } else if (h->sleeping) {
        asleep->push_back(a);
      } else {
        awake.push_back(a);
      }
    }
    for (auto& a : awake) {
      if (env_.MonoNow() >= deadline) break;
      (void)co_await Release(a);  // parked ones are awaited below
    }
    if (!asleep->empty() && env_.MonoNow() < deadline) {
      std::vector<TaskHandle> workers = SpawnReleasers(asleep, deadline);
      bool cancelled = false;
      for (TaskHandle& w : workers) {
        if (!co_await w.Join()) cancelled = true;
      }
      if (cancelled) {
        for (TaskHandle& w : workers) w.Cancel();
        co_return Cancelled("drain cancelled");
      }
    }
    for (auto& a : system) {
      if (env_.MonoNow() >= deadline) break;
      (void)co_await Release(a);
    }
    if (drained()) co_return Status::Ok();
    // Retries pause while the lease is invalid: then nothing more can land, and the
    // released write (or a fence) frees what is left.
    if (env_.MonoNow() >= deadline) break;
    if (!co_await env_.SleepFor(std::min<Duration>(kBackgroundTick, deadline - env_.MonoNow()))) break;
  }
  if (drained()) co_return Status::Ok();
  co_return UnknownOutcome(std::to_string(holds_.size() + pending()) + " holds or releases still pending");
}

Task<void> Owners::ReleaseWorker(std::shared_ptr<std::deque<ActorId>> queue, MonoTime deadline) {
  std::weak_ptr<LockTable> alive = locks_;
  while (!queue->empty() && env_.MonoNow() < deadline) {
    ActorId a = std::move(queue->front());
    queue->pop_front();
    (void)co_await Release(std::move(a));  // parked ones are awaited by the drain
    if (alive.expired()) co_return;
  }
}

// A plain function, not a coroutine: GCC 12 miscompiled a coroutine that spawns several
// tasks (docs/DEVELOPING.md).
std::vector<TaskHandle> Owners::SpawnReleasers(const std::shared_ptr<std::deque<ActorId>>& queue, MonoTime deadline) {
  std::vector<TaskHandle> workers;
  const std::size_t n = std::min<std::size_t>(kPendingConcurrency, queue->size());
  for (std::size_t i = 0; i < n; ++i) workers.push_back(env_.Spawn(ReleaseWorker(queue, deadline), "stop release"));
  return workers;
}

Task<Result<std::optional<OwnerRecord>>> Owners::OtherOwner(ActorId actor) {
  // One GET within the admission wait (docs/node-lease.md, "Actors"): a slow bucket answers this
  // request 503, it does not hold it.
  const Duration wait = broken_.on(BrokenModel::kRoutingReadUnbounded) ? timing_.ttl : kAdmissionWait;
  auto got = co_await StoreOf(actor).Get(OwnerKey(actor), CallOptions{wait});
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return std::optional<OwnerRecord>();
    co_return got.status();
  }
  auto rec = DecodeOwnerRecord(got->body);
  if (!rec.ok()) co_return rec.status();
  if (rec->names_nobody() || rec->node_id == lease_.identity().node_id) co_return std::optional<OwnerRecord>();
  // Trusted only if the view shows the named process live; otherwise acquire here (the
  // acquisition reads nodes/<A> fresh before taking it).
  if (membership_.IsLive(rec->node_id, rec->instance) || broken_.on(BrokenModel::kRouteToAnyOwner)) {
    co_return std::optional<OwnerRecord>(*rec);
  }
  co_return std::optional<OwnerRecord>();
}

}  // namespace wk
