#include "routing/owner_changes.h"

#include <algorithm>
#include <array>

#include "base/log.h"
#include "cluster/owner_record.h"
#include "replica/format.h"
#include "replica/replica.h"

namespace wk {
namespace {

// Waiting for a resident actor to leave memory (its writes made durable and its hold
// released): at most this, polled every kUnloadPoll.
constexpr Duration kUnloadWait = std::chrono::seconds(15);
constexpr Duration kUnloadPoll = std::chrono::milliseconds(20);
constexpr Duration kHoldWithoutReplica = std::chrono::seconds(2);
// The change's batch: durable within this, and its replica closed within this.
constexpr Duration kWriteLimit = std::chrono::seconds(30);

Status Stopping() { return Cancelled("node stopping"); }

// s's code with `what: ` before its message.
Status In(const Status& s, const std::string& what) { return Status(s.code(), what + ": " + s.message()); }

OwnerChange Failed(Status s, bool conflict = false) {
  OwnerChange out;
  out.status = std::move(s);
  out.conflict = conflict;
  return out;
}

// Another live node holds the actor: the change is its to make, and the actor stays blocked
// here while the caller asks it.
OwnerChange HeldElsewhere(NodeId holder, std::shared_ptr<BlockedActor> blocked) {
  OwnerChange out;
  out.holder = std::move(holder);
  out.blocked = std::move(blocked);
  return out;
}

}  // namespace

// ---- DeletionGuard.

Task<Result<replica::Replica::Hold>> DeletionGuard::Acquire(ActorId actor) {
  if (blocked(actor)) co_return Retryable(actor.ToString() + " is being changed by its owner here (deleted, restored or forked)");
  co_return co_await inner_.Acquire(std::move(actor));
}

Task<void> DeletionGuard::Release(ActorId actor, Generation generation) {
  co_await inner_.Release(std::move(actor), generation);
}

bool DeletionGuard::Sleep(const ActorId& actor, Generation generation, HoldResume resume) {
  return !blocked(actor) && inner_.Sleep(actor, generation, resume);
}

Task<std::optional<std::pair<replica::Replica::Hold, HoldResume>>> DeletionGuard::Wake(ActorId actor) {
  if (blocked(actor)) co_return std::nullopt;
  co_return co_await inner_.Wake(std::move(actor));
}

// ---- OwnerChanges.

namespace {
// For the log: the point a change took its state from.
std::string PointName(const OwnerChange& c) {
  if (c.point) return c.point->ToString();
  if (c.point_snapshot) return "snapshot " + c.point_snapshot->ToString();
  return "empty";
}
}  // namespace

replica::HistoryOptions OwnerChanges::HistoryNow(std::string_view tenant) const {
  replica::HistoryOptions o;
  o.now_ms = ToUnixMs(deps_.env.WallNow());
  o.retention = deps_.retention.For(tenant);
  o.read.broken = deps_.broken;
  return o;
}

Task<Result<bool>> OwnerChanges::AnythingStored(ActorId id) {
  auto record = co_await deps_.store.Head(OwnerKey(id), CallOptions{std::chrono::seconds(5)});
  if (record.ok()) co_return true;
  if (record.code() != Code::kNotFound) co_return record.status();
  const std::array<std::string, 2> prefixes{replica::WalPrefix(id), replica::SnapshotPrefix(id)};
  for (const std::string& prefix : prefixes) {
    ListOptions lo;
    lo.prefix = prefix;
    lo.page_size = 1;
    auto page = co_await deps_.store.List(std::move(lo), CallOptions{std::chrono::seconds(5)});
    if (!page.ok()) co_return page.status();
    if (!page->entries.empty()) co_return true;
  }
  co_return false;
}

Task<Result<bool>> OwnerChanges::HasState(ActorId id) {
  ListOptions so;
  so.prefix = replica::SnapshotPrefix(id);
  so.page_size = 1;
  auto snaps = co_await deps_.store.List(std::move(so), CallOptions{std::chrono::seconds(5)});
  if (!snaps.ok()) co_return snaps.status();
  if (!snaps->entries.empty()) co_return true;
  // Fences (<generation>-0) carry no batch: a hold that wrote nothing else, such as a fork
  // that failed before its batch was durable, left the state empty.
  const std::string prefix = replica::WalPrefix(id);
  ListOptions lo;
  lo.prefix = prefix;
  auto page = co_await deps_.store.List(std::move(lo), CallOptions{std::chrono::seconds(5)});
  if (!page.ok()) co_return page.status();
  for (const ListEntry& e : page->entries) {
    auto p = replica::ParseKeyPosition(prefix, e.key);
    if (!p.ok() || p->seq > 0) co_return true;  // a batch, or an object we do not know: not empty
  }
  // A page of fences only and more after it: not worth following for a fork; say it exists.
  co_return page->next_continuation.has_value();
}

Task<OwnerChanges::Taken> OwnerChanges::TakeAsOwner(ActorId id, bool must_exist) {
  std::shared_ptr<bool> alive = alive_;
  Owners& owners = deps_.owners;
  Taken out;
  auto fail = [&out](Status s) {
    out.status = std::move(s);
    return out;
  };
  // 1. Out of memory here first: its writes made durable, its hold released (the replica's
  // close releases it). A hold left without a replica (a release that has not run after
  // kHoldWithoutReplica) is released here, so the acquisition below starts a hold of its
  // own, at a generation no replica ever wrote.
  if (deps_.host.IsResident(id)) deps_.host.Unload(id);
  const MonoTime give_up = deps_.env.MonoNow() + kUnloadWait;
  std::optional<MonoTime> replica_gone_at;
  for (;;) {
    const bool resident = deps_.host.IsResident(id) || deps_.provider.Find(id) != nullptr;
    const bool held = !owners.Find(id).empty();
    if (!resident && !held) break;
    const MonoTime now = deps_.env.MonoNow();
    if (now > give_up) co_return fail(Retryable(id.ToString() + " did not leave memory in time"));
    if (!resident) {
      if (!replica_gone_at) replica_gone_at = now;
      // A sleeping hold (docs/node-lease.md, "Sleeping holds") has no replica by design:
      // released at once.
      if (owners.IsSleeping(id) || now - *replica_gone_at > kHoldWithoutReplica) {
        (void)co_await owners.Release(id);
        if (!*alive) co_return fail(Stopping());
        continue;
      }
    }
    if (!co_await deps_.env.SleepFor(kUnloadPoll) || !*alive) co_return fail(Stopping());
  }
  // 2. The owner, if another live node holds it, makes the change itself.
  if (!owners.accepting()) co_return fail(Retryable("this node is draining"));
  auto other = co_await owners.OtherOwner(id);
  if (!*alive) co_return fail(Stopping());
  if (!other.ok()) co_return fail(In(other.status(), "the owner record of " + id.ToString()));
  if (other->has_value()) {
    out.holder = (*other)->node_id;
    co_return out;
  }
  if (must_exist) {
    // Nothing stored (no ownership record, no log): nothing to change, and acquiring would
    // write a record for a name nobody used (a tenant could fill owners/ with made-up
    // names). An actor created right after this check was created after the change.
    auto stored = co_await AnythingStored(id);
    if (!*alive) co_return fail(Stopping());
    if (!stored.ok()) co_return fail(In(stored.status(), "looking for what " + id.ToString() + " stored"));
    if (!*stored) co_return fail(NotFound("nothing is stored for " + id.ToString()));
  }
  out.acquired = co_await owners.Acquire(id);
  if (!*alive) co_return fail(Stopping());
  if (out.acquired.kind == AcquireResult::Kind::kHeldElsewhere && !out.acquired.owner.node_id.empty() &&
      out.acquired.owner.node_id != deps_.node_id) {
    out.holder = out.acquired.owner.node_id;
    co_return out;
  }
  if (out.acquired.kind != AcquireResult::Kind::kAcquired) {
    co_return fail(Retryable("cannot acquire " + id.ToString() + ": " + out.acquired.why));
  }
  co_return out;
}

Task<Result<Generation>> OwnerChanges::WriteAsOwner(ActorId id, AcquireResult acquired, actor::StateMap target,
                                                    bool require_empty) {
  std::shared_ptr<bool> alive = alive_;
  Owners& owners = deps_.owners;
  const Generation generation = acquired.hold.generation();
  replica::Replica::Hold hold{generation, [h = acquired.hold] { return h.IsValid(); }};
  auto opened = co_await deps_.provider.OpenOwned(id, std::move(hold));
  if (!*alive) co_return Stopping();
  if (!opened.ok()) {
    (void)co_await owners.Release(id, generation);
    co_return opened.status();
  }
  std::unique_ptr<replica::Replica> replica = std::move(*opened);
  Status outcome = Status::Ok();
  // A fork's target must hold no state: no snapshot and no segment but fences (a hold that
  // wrote nothing, e.g. an earlier fork that failed before its batch was durable).
  const auto& listed = replica->restored();
  const bool has_state = !listed.listed_snapshots.empty() ||
                         std::any_of(listed.listed_segments.begin(), listed.listed_segments.end(),
                                     [](const replica::Position& p) { return p.seq > 0; });
  if (require_empty && has_state) {
    outcome = PreconditionFailed(id.ToString() + " exists (it was created meanwhile)");
  } else {
    const std::uint64_t seq = replica->Commit(replica::ReplacementBatch(target));
    Latch<Status> durable(deps_.env, [] { return Stopping(); });
    // Asked on this loop thread, so answered on it (replica/hold_gate.h); the latch resumes
    // us through Env::Post.
    replica->WhenReleasable(seq, [durable](Status s) { durable.Set(std::move(s)); });
    const Env::TimerId timer = deps_.env.StartTimer(deps_.env.MonoNow() + kWriteLimit, [durable] {
      durable.Set(Retryable("the batch was not durable in time"));
    });
    outcome = co_await durable.Wait();
    if (!*alive) co_return Stopping();
    deps_.env.CancelTimer(timer);
    // Not known durable (too slow, an upload whose outcome is unknown, the hold lost): the
    // batch may still land, or have landed, on the chain (the close below keeps uploading
    // while the hold is valid). Never "nothing changed": the caller reads the history
    // before asking again, or a second restore would hide the first one's undo point.
    if (!outcome.ok()) {
      outcome = UnknownOutcome("the change may have taken effect (its batch was not known durable: " +
                               outcome.message() + "); read the actor's history before asking again");
    }
  }
  Status closed = co_await replica->Close(kWriteLimit);
  if (!*alive) co_return Stopping();
  replica.reset();
  (void)co_await owners.Release(id, generation);
  if (!*alive) co_return Stopping();
  if (!outcome.ok()) co_return outcome;
  // The batch is durable: the change is made, whatever the close says (a failed close only
  // leaves the hold to end by itself).
  if (!closed.ok()) {
    WK_LOG_WARN("a change's replica did not close cleanly after its batch was durable",
                {{"actor", id.ToString()}, {"error", closed.ToString()}});
  }
  co_return generation;
}

Task<OwnerChange> OwnerChanges::Restore(ActorId id, replica::PointSpec point) {
  if (deps_.broken.on(BrokenModel::kRestoreWithoutAcquire)) co_return co_await RestoreWithoutAcquire(id, point);
  std::shared_ptr<bool> alive = alive_;
  if (!deps_.guard.Block(id)) {
    co_return Failed(PreconditionFailed("a deletion or restore of " + id.ToString() + " is under way on this node"), true);
  }
  auto blocked = std::make_shared<BlockedActor>(deps_.guard, id, alive);
  Taken taken = co_await TakeAsOwner(id, true);
  if (!*alive) co_return Failed(Stopping());
  if (taken.holder) co_return HeldElsewhere(*taken.holder, std::move(blocked));
  if (!taken.status.ok()) co_return Failed(taken.status);
  // Under our own hold the log cannot change: the point's state, and the newest batch (the
  // point that undoes this restore).
  const replica::HistoryOptions o = HistoryNow(id.tenant);
  auto state = co_await replica::StateAt(deps_.env, deps_.store, id, point, o);
  if (!*alive) co_return Failed(Stopping());
  replica::HistoryOptions newest = o;
  newest.limit = 1;
  Result<replica::History> before = Cancelled("not read");
  if (state.ok()) before = co_await replica::ReadHistory(deps_.env, deps_.store, id, newest);
  if (!*alive) co_return Failed(Stopping());
  if (!state.ok() || !before.ok()) {
    (void)co_await deps_.owners.Release(id, taken.acquired.hold.generation());
    if (!*alive) co_return Failed(Stopping());
    co_return Failed(In(state.ok() ? before.status() : state.status(), "restoring " + id.ToString()));
  }
  OwnerChange out;
  out.point = state->last;
  out.point_snapshot = state->snapshot;
  out.point_ms = state->time_ms;
  if (!before->batches.empty()) out.undo = before->batches.back().id;
  auto written = co_await WriteAsOwner(id, taken.acquired, std::move(state->state), false);
  if (!*alive) co_return Failed(Stopping());
  if (!written.ok()) co_return Failed(In(written.status(), "restoring " + id.ToString()));
  out.generation = *written;
  out.batch = replica::BatchId{replica::Position{*written, 1}, 1};
  WK_LOG_INFO("actor restored", {{"node", deps_.node_id.str()},
                                 {"actor", id.ToString()},
                                 {"to", PointName(out)},
                                 {"generation", std::to_string(written->value)},
                                 {"undo", out.undo ? out.undo->ToString() : ""}});
  co_return out;
}

// Broken model: the point's state written into the log straight after its tip, under the
// newest generation there, by a node that holds nothing.
Task<OwnerChange> OwnerChanges::RestoreWithoutAcquire(ActorId id, replica::PointSpec point) {
  std::shared_ptr<bool> alive = alive_;
  const replica::HistoryOptions o = HistoryNow(id.tenant);
  auto state = co_await replica::StateAt(deps_.env, deps_.store, id, point, o);
  if (!*alive) co_return Failed(Stopping());
  if (!state.ok()) co_return Failed(In(state.status(), "the state of " + id.ToString()));
  auto listing = co_await replica::ListLog(deps_.env, deps_.store, id, o.read);
  if (!*alive) co_return Failed(Stopping());
  if (!listing.ok() || listing->segments.empty()) co_return Failed(Retryable("cannot list the log"));
  const replica::Position tip = listing->segments.rbegin()->first;
  std::string payload;
  replica::AppendBatch(replica::ReplacementBatch(state->state), payload);
  const replica::Position at{tip.generation, tip.seq + 1};
  auto put = co_await deps_.store.Put(replica::SegmentKey(id, at), replica::EncodeDataSegment(id, at, 1, payload, false),
                                      Precondition::IfNoneMatchAny(), CallOptions{std::chrono::seconds(10)});
  if (!*alive) co_return Failed(Stopping());
  if (!put.ok()) co_return Failed(In(put.status(), "writing the restore"));
  OwnerChange out;
  out.batch = replica::BatchId{at, 1};
  out.generation = at.generation;
  out.point = state->last;
  out.point_snapshot = state->snapshot;
  out.point_ms = state->time_ms;
  co_return out;
}

Task<OwnerChange> OwnerChanges::Fork(ActorId from, replica::PointSpec point, ActorId to) {
  std::shared_ptr<bool> alive = alive_;
  auto exists = co_await HasState(to);
  if (!*alive) co_return Failed(Stopping());
  if (!exists.ok()) co_return Failed(In(exists.status(), "looking for " + to.ToString()));
  if (*exists) co_return Failed(PreconditionFailed(to.ToString() + " exists: a fork makes a new actor"), true);
  // The source's state from the bucket: a point of its history needs no hold of it.
  auto state = co_await replica::StateAt(deps_.env, deps_.store, from, point, HistoryNow(from.tenant));
  if (!*alive) co_return Failed(Stopping());
  if (!state.ok()) co_return Failed(In(state.status(), "the state of " + from.ToString()));
  if (!deps_.guard.Block(to)) {
    co_return Failed(PreconditionFailed("a change of " + to.ToString() + " is under way on this node"), true);
  }
  auto blocked = std::make_shared<BlockedActor>(deps_.guard, to, alive);
  Taken taken = co_await TakeAsOwner(to, false);
  if (!*alive) co_return Failed(Stopping());
  if (taken.holder) co_return HeldElsewhere(*taken.holder, std::move(blocked));
  if (!taken.status.ok()) co_return Failed(taken.status);
  OwnerChange out;
  out.point = state->last;
  out.point_snapshot = state->snapshot;
  out.point_ms = state->time_ms;
  auto written = co_await WriteAsOwner(to, taken.acquired, std::move(state->state), true);
  if (!*alive) co_return Failed(Stopping());
  if (!written.ok()) {
    if (written.code() == Code::kPreconditionFailed) co_return Failed(written.status(), true);
    co_return Failed(In(written.status(), "forking " + from.ToString()));
  }
  out.generation = *written;
  out.batch = replica::BatchId{replica::Position{*written, 1}, 1};
  WK_LOG_INFO("actor forked", {{"node", deps_.node_id.str()},
                               {"actor", from.ToString()},
                               {"to", to.ToString()},
                               {"from", PointName(out)}});
  co_return out;
}

}  // namespace wk
