// Owners: this node's ownership records and holds, releases that outlive their first try
// (pending releases), acquisitions whose outcome is unknown (unresolved acquires), and the
// drain (docs/node-lease.md, "Actors", "Pending releases", "Unresolved acquires", "Drain").
// Guarantees: an acquisition writes only while the node lease is valid, conditioned on the
// version it read, at a generation above it, so every hold has a generation of its own; a
// record naming another node is taken only once a fresh read shows that process gone; a
// released hold stops acting before its release is written. Threading: Env loop thread
// only; HoldView::IsValid is a few loads. Details (acquire, unknown outcomes, closing,
// release, lapse, loss, the lock): docs/internals.md, "Owners".
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/membership.h"
#include "cluster/node_lease.h"
#include "cluster/owner_record.h"
#include "env/env.h"

namespace wk {

class TenantStores;

// docs/node-lease.md, "Bounds".
inline constexpr int kPendingConcurrency = 32;          // pending entries worked at once
inline constexpr int kMaxRefusalsInARow = 32;           // then the pass stops
inline constexpr Duration kReleaseTries = std::chrono::seconds(1);  // foreground release
inline constexpr Duration kAdmissionWait = std::chrono::milliseconds(250);  // routing read

// Where the storage of a sleeping hold resumes (docs/node-lease.md, "Sleeping holds"): kept
// by Owners, opaque to it, given back by Wake. The replica's last segment of this hold and
// its last batch number, so a woken replica continues the hold's log exactly after them.
struct HoldResume {
  std::uint64_t segment = 0;
  std::uint64_t batch = 0;
};

// How long and how many sleeping holds a node keeps ([actors] sleeping_hold_ms and
// max_sleeping_holds; docs/configuration.md). keep_for 0: none (a hibernating actor's hold
// is released, as before sleeping holds existed).
struct SleepPolicy {
  Duration keep_for = std::chrono::hours(1);
  std::size_t max_sleeping = 100'000;
};

// The state of one hold, shared with whoever acts on it (the actor runtime, later).
struct HoldState {
  ActorId actor;
  Generation generation;
  Version version;  // the acquire's version: the record's version while the hold lasts
  std::uint64_t epoch = 0;
  bool alive = true;  // false once released, lapsed or dropped
  // Owners' own (loop thread): set while the hold sleeps (its actor is not in memory).
  std::optional<HoldResume> sleeping;
  std::uint64_t sleep_serial = 0;
};

// What the actor runtime keeps: cheap, copyable, valid-or-not.
class HoldView {
 public:
  HoldView() = default;
  HoldView(std::shared_ptr<const HoldState> s, const NodeLease* lease) : s_(std::move(s)), lease_(lease) {}
  // LeaseView::is_valid: this hold exists and the node lease is valid with no lapse since
  // it was acquired.
  bool IsValid() const { return s_ && s_->alive && lease_->IsValid() && lease_->epoch() == s_->epoch; }
  Generation generation() const { return s_ ? s_->generation : Generation{}; }
  // The acquire's version: the record's version while the hold lasts.
  Version version() const { return s_ ? s_->version : Version(); }
  const ActorId& actor() const { return s_->actor; }
  bool empty() const { return !s_; }

 private:
  std::shared_ptr<const HoldState> s_;
  const NodeLease* lease_ = nullptr;
};

struct AcquireResult {
  enum class Kind {
    kAcquired,      // hold is set
    kHeldElsewhere, // owner names the holder (route there) or a node not yet free
    kNotValid,      // our node lease is not valid: nothing was written
    kUnknown,       // the write's outcome is unknown: an unresolved acquire was kept
    kError,         // the bucket failed or a record is corrupt: nothing was acquired
  };
  Kind kind = Kind::kNotValid;
  HoldView hold;
  OwnerRecord owner;  // for kHeldElsewhere
  std::string why;
};

// How a hold of this node ended (Owners::set_on_hold_ended), for the hand-overs
// (hand_over.h), which wait for it.
enum class HoldEnd : std::uint8_t {
  kReleased,  // the release landed: `version` is the record's new version (naming nobody)
  kParked,    // the release is pending (its write did not land in the foreground)
  kLapsed,    // the node lease ran out: pending, like a parked release
  kDropped,   // the lease was lost: nothing is released (the fence frees the record)
};
struct HoldEnded {
  ActorId actor;
  Generation generation;
  HoldEnd how = HoldEnd::kReleased;
  Version version;  // kReleased only
};

struct OwnersStats {
  std::uint64_t resolver_closed = 0;     // unresolved acquires ended by the closing write
  std::uint64_t max_entries_in_flight = 0;  // pending entries worked at once, at most (kPendingConcurrency)
  std::uint64_t acquisitions = 0;        // holds registered
  std::uint64_t acquire_conflicts = 0;   // held elsewhere
  std::uint64_t releases_ok = 0;         // landed in the foreground
  std::uint64_t releases_parked = 0;     // became pending
  std::uint64_t pending_landed = 0;      // pending releases that landed later
  std::uint64_t pending_ended = 0;       // ended by a read (no longer ours at g)
  std::uint64_t unresolved = 0;          // unresolved acquires recorded
  std::uint64_t resolver_released = 0;   // resolved: it had landed, released
  std::uint64_t resolver_dropped = 0;    // resolved: not ours, or a hold exists
  std::uint64_t dropped_holds = 0;       // dropped on a lost lease
  std::uint64_t markers_written = 0;     // leases/ markers written by first acquisitions
                                         // (docs/node-lease.md, "Upgrading from per-actor leases")
  std::uint64_t old_lease_refusals = 0;  // first acquisitions refused by a live old per-actor lease
  std::uint64_t slept = 0;               // holds kept as their actor left memory
  std::uint64_t woken = 0;               // sleeping holds continued by a wake (no acquisition)
  std::uint64_t sleep_released_idle = 0;   // sleeping holds released after keep_for
  std::uint64_t sleep_released_limit = 0;  // sleeping holds released past max_sleeping (oldest first)
};

class Owners {
 public:
  Owners(Env& env, ObjectStore& store, NodeLease& lease, const Membership& membership, LeaseTiming timing);
  ~Owners();
  Owners(const Owners&) = delete;
  Owners& operator=(const Owners&) = delete;

  // Acquires actor (or returns the hold this node already has).
  Task<AcquireResult> Acquire(ActorId actor);
  // Acquires actor handed over by its previous holder (hand_over.h, "Move"): that holder's
  // release left the record naming nobody at `generation`, at version `released`, so the
  // write goes out at once, If-Match `released`, at generation + 1, with no read first. If
  // the record changed since (someone else took the actor), the condition fails and the
  // outcome is decided as for any acquisition whose write did not succeed (read back).
  Task<AcquireResult> AcquireHandedOver(ActorId actor, Version released, Generation generation);
  // The hold this node has for actor, if any (valid or not: ask IsValid()).
  HoldView Find(const ActorId& actor) const;
  // Releases actor's hold (hibernation, drain, move, abandoned upload). Returns OK once
  // the release landed, kUnknownOutcome once it is parked as pending. With `only`, just the
  // hold of that generation, checked under the actor's lock (a later hold acquired while
  // this call waited for the lock is left alone); OK if that hold is gone.
  Task<Status> Release(ActorId actor, std::optional<Generation> only = std::nullopt);
  // Stops taking new actors, releases every hold (including any an acquisition in flight
  // registers meanwhile; tenants' actors in memory one at a time, then sleeping holds
  // kPendingConcurrency at once, then system actors), then waits until no release or
  // unresolved acquire is pending, up to limit. OK only then ("drained"). The node keeps refusing new actors until
  // SetAccepting(true).
  Task<Status> Drain(Duration limit);
  void SetAccepting(bool accepting) { accepting_ = accepting; }
  bool accepting() const { return accepting_; }
  // Actors being handed over (hand_over.h): Acquire refuses them (kNotValid), even the
  // hold this node still has, so no new event starts on an actor that is leaving.
  void SetLeaving(const ActorId& actor, bool leaving);
  bool leaving(const ActorId& actor) const { return leaving_.count(actor) > 0; }
  // Every actor this node holds now (sleeping holds included).
  std::vector<ActorId> HeldActors() const;

  // Sleeping holds (docs/node-lease.md, "Sleeping holds"). Sleep: the actor of the hold at
  // `generation` left memory with every write durable; its hold is kept (its record
  // unchanged) with `resume`. False, and nothing kept, if that hold is not this node's valid
  // hold, the policy keeps none, the node drains or the actor is leaving: the caller then
  // releases it. Wake: the sleeping hold of actor, valid and not leaving, is awake again (the
  // same hold, the same generation: no write) and its resume point is given back; nullopt
  // otherwise (the caller acquires). Sleeping holds past the policy's time, or the oldest
  // past its count, are released in the background (32 at once).
  bool Sleep(const ActorId& actor, Generation generation, HoldResume resume);
  std::optional<std::pair<HoldView, HoldResume>> Wake(const ActorId& actor);
  bool IsSleeping(const ActorId& actor) const;
  void set_sleep_policy(SleepPolicy policy) { sleep_policy_ = policy; }
  const SleepPolicy& sleep_policy() const { return sleep_policy_; }
  // A sleeping hold for which this answers true is kept past the policy's time (it is
  // looked at again a keep_for later); the count's bound still applies. The WebSocket hub
  // keeps the holds of actors with open connections (docs/websockets.md, "Hibernation").
  void set_keep_sleeping(std::function<bool(const ActorId&)> fn) { keep_sleeping_ = std::move(fn); }
  // Sleeping holds now (of them, tenants' actors: system actors never sleep).
  std::size_t sleeping() const { return sleeping_; }
  // Called as each hold of this node ends (released, parked, lapsed, dropped): the hand-overs'
  // (set_on_hold_ended, one) and the WebSocket hub's (set_on_hold_ended_sockets, one), in
  // that order.
  void set_on_hold_ended(std::function<void(const HoldEnded&)> fn) { on_hold_ended_ = std::move(fn); }
  void set_on_hold_ended_sockets(std::function<void(const HoldEnded&)> fn) { on_hold_ended_sockets_ = std::move(fn); }
  // Usage per tenant (store/tenant_store.h): when set, the requests made for a tenant's actor
  // (its acquisition, release, pending release, resolver, routing read) go through
  // stores->Of(actor)'s view of kOwner, attributed to its tenant; null: all through the node's.
  // REQUIRES: stores outlives this Owners (or is reset to null first).
  void set_tenant_stores(TenantStores* stores) { tenant_stores_ = stores; }

  // The routing read (Owners::other_owner): one GET within kAdmissionWait. The holder if
  // the record names another node that the membership view shows live under the named
  // instance; nullopt to acquire here.
  Task<Result<std::optional<OwnerRecord>>> OtherOwner(ActorId actor);

  // The background work: pending releases and unresolved acquires, retried every 250 ms
  // while the lease is valid, at most one pass at a time.
  void StartBackground();
  void StopBackground();

  // Lease events (ClusterNode wires them).
  void OnLapse();
  void OnLost();

  std::size_t holds() const { return holds_.size(); }
  // Of those, the holds of system actors (alarm shards, base/ids.h): kept as holds come and
  // go (a metrics scrape reads it; walking 50,000 holds there held the loop for milliseconds).
  std::size_t system_holds() const { return system_holds_; }
  bool lease_valid() const { return lease_.IsValid(); }
  // Actors whose lock is held or awaited now (the lock table keeps nothing else).
  std::size_t locks_in_use() const { return locks_->entries.size(); }
  std::size_t pending() const { return pending_.size() + unresolved_.size(); }
  const OwnersStats& stats() const { return stats_; }
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }

 private:
  struct Pending {
    ActorId actor;
    Generation generation;
    Version version;  // the acquire's version (or a resolver's read): every retry uses it
    MonoTime next_try{};
    Duration backoff{};
    std::uint64_t serial = 0;  // which entry this is (see RunBatch)
  };
  struct Unresolved {
    ActorId actor;
    Generation generation;
    // The version the attempt was conditioned on (nullopt: no record then). While the
    // record is unchanged the write may still be in flight and land: keep reading.
    std::optional<Version> read_version;
    MonoTime next_try{};
    Duration backoff{};
    // Which entry this is: a second unknown acquire at the same generation replaces the
    // entry while the resolver may be working on the first; only the entry it worked on
    // may be erased (found by the simulator's `storage` scenario).
    std::uint64_t serial = 0;
    MonoTime created{};  // when the attempt was found undecided (the closing waits ttl + grace)
  };
  enum class Freed { kFree, kHeld, kUnknown };
  using EntryKey = std::pair<ActorId, Generation>;

  // The per-actor locks (docs/node-lease.md, "Actors"), FIFO, one entry per actor that is locked or
  // awaited: an entry is erased when its last holder unlocks with nobody waiting, so the table
  // never grows with the actors a node ever saw. Shared with the guards (weakly), so a
  // guard destroyed with a task frame after the Owners is harmless.
  struct LockTable {
    struct Entry {
      bool locked = false;
      std::deque<Latch<bool>> waiters;
    };
    std::map<ActorId, Entry> entries;
    void Unlock(const ActorId& actor);
  };
  class ActorLock {
   public:
    ActorLock() = default;
    ActorLock(std::weak_ptr<LockTable> table, ActorId actor) : table_(std::move(table)), actor_(std::move(actor)) {}
    ActorLock(ActorLock&& o) noexcept : table_(std::move(o.table_)), actor_(std::move(o.actor_)) { o.table_.reset(); }
    ActorLock& operator=(ActorLock&& o) noexcept;
    ~ActorLock() { Release(); }
    bool owns() const { return !table_.expired(); }

   private:
    void Release();
    std::weak_ptr<LockTable> table_;
    ActorId actor_;
  };
  // Waits for actor's lock; an empty ActorLock (owns() false) if cancelled meanwhile.
  Task<ActorLock> LockActor(ActorId actor);
  // Whether a record naming (node, instance) is free, from a read of nodes/<node> made now
  // (after the record's read).
  Task<Freed> IsFree(ActorId actor, OwnerRecord record);
  // The store for actor's requests: its tenant's view of kOwner, or store_.
  ObjectStore& StoreOf(const ActorId& actor);
  // Acquire and AcquireHandedOver: `hint` set skips the read (the record is expected to
  // name nobody at hint's generation, at hint's version).
  Task<AcquireResult> AcquireWith(ActorId actor, std::optional<std::pair<Version, Generation>> hint);
  void HoldEndedAs(const HoldState& hold, HoldEnd how, Version version = Version());
  HoldView Register(const ActorId& actor, Generation g, Version v, std::uint64_t epoch);
  void Park(const ActorId& actor, Generation g, Version v);
  // One try of a pending release. Returns true when the entry is finished.
  Task<bool> TryPending(Pending entry);
  Task<bool> TryUnresolved(Unresolved entry);
  Task<void> Pass();
  bool HasWork() const;
  // False once the lease was lost: nothing more may be sent (but for a broken model).
  bool MaySend() const;
  bool AcquisitionsInFlight() const;
  // Ends actor's hold (its lock held by the caller): stops acting, then writes nobody;
  // pending if that does not land within kReleaseTries.
  Task<Status> ReleaseHeld(ActorId actor);
  // The clean stop's releases (Drain): kPendingConcurrency workers over one queue.
  Task<void> ReleaseWorker(std::shared_ptr<std::deque<ActorId>> queue, MonoTime deadline);
  std::vector<TaskHandle> SpawnReleasers(const std::shared_ptr<std::deque<ActorId>>& queue, MonoTime deadline);
  // Releases what the sleep policy no longer keeps (at most kPendingConcurrency at once).
  void SweepSleeping();
  Task<void> ReleaseSleeping(ActorId actor, std::uint64_t serial, bool over_limit);
  // Broken models wake-acquires-nothing-after-release and sleeping-hold-survives-lease-loss:
  // a sleeping hold that ended is remembered, and a wake brings it back as valid.
  struct Ghost {
    Generation generation;
    Version version;
    HoldResume resume;
  };
  void KeepGhost(const HoldState& hold);
  Task<void> RunBatch(bool pendings, std::vector<EntryKey> keys, int* refusals);
  Task<void> TryPendingInto(Pending entry, std::shared_ptr<bool> done);
  Task<void> TryUnresolvedInto(Unresolved entry, std::shared_ptr<bool> done);
  void Backoff(Duration& backoff, MonoTime& next_try);
  void ScheduleTick();

  Env& env_;
  ObjectStore& store_;
  TenantStores* tenant_stores_ = nullptr;
  NodeLease& lease_;
  const Membership& membership_;
  const LeaseTiming timing_;
  // Changed only through PutHold, EraseHold and TakeAllHolds, which keep system_holds_.
  std::map<ActorId, std::shared_ptr<HoldState>> holds_;
  std::size_t system_holds_ = 0;
  // Sleeping holds: how many, and the order they fell asleep in (entries of holds that woke
  // or ended since are skipped, and compacted away when they outnumber the live ones).
  struct SleepEntry {
    ActorId actor;
    std::uint64_t serial = 0;
    MonoTime since{};
  };
  SleepPolicy sleep_policy_;
  std::function<bool(const ActorId&)> keep_sleeping_;
  std::size_t sleeping_ = 0;
  std::deque<SleepEntry> sleep_queue_;
  std::size_t sleep_releases_in_flight_ = 0;
  std::map<ActorId, Ghost> ghosts_;  // broken models only
  void PutHold(const ActorId& actor, std::shared_ptr<HoldState> state);
  void EraseHold(std::map<ActorId, std::shared_ptr<HoldState>>::iterator it);
  std::map<ActorId, std::shared_ptr<HoldState>> TakeAllHolds();
  std::shared_ptr<LockTable> locks_ = std::make_shared<LockTable>();
  std::map<EntryKey, Pending> pending_;
  std::map<EntryKey, Unresolved> unresolved_;
  OwnersStats stats_;
  BrokenModels broken_;
  std::uint64_t next_serial_ = 1;
  bool accepting_ = true;  // false from a drain on: Acquire refuses
  std::set<ActorId> leaving_;  // hand-overs in progress: Acquire refuses these
  std::function<void(const HoldEnded&)> on_hold_ended_;
  std::function<void(const HoldEnded&)> on_hold_ended_sockets_;
  bool background_on_ = false;
  bool lost_ = false;  // OnLost ran: nothing more is sent
  std::optional<Env::TimerId> tick_timer_;
  TaskHandle pass_;
  std::vector<TaskHandle> batch_;  // the entries the pass is working on now
};

}  // namespace wk
