// OwnerChanges: an operator's change to an actor's state made by this node as the actor's
// owner (docs/storage.md, "History and point-in-time restore"; docs/console.md, "How deleting
// is safe"). Taking an actor as owner: it is kept from starting here (DeletionGuard), taken
// out of memory (its writes durable, its hold released, a sleeping hold too), then a hold of
// our own is acquired through the ownership protocol (generation + 1) — unless another live
// node holds it: that node is named, and the change is its to make (the caller asks it once).
// Writing as owner: a replica opened under that hold (ReplicaProvider::OpenOwned: the current
// chain restored, our fence), the state written as one batch after the chain, durable, the
// replica closed and the hold released. Restore and Fork are such changes; the node's HTTP
// routes (server/actor_admin.h) and the simulator's history operators (sim/history_operators.h)
// call them.
//
// Guarantees: nothing is written without a hold of our own (never two owners); the point's
// state is read under that hold (the log cannot change meanwhile); the state before stays in
// the history (the batch follows the chain); an answer means durable. Broken model
// restore-without-acquire (base/broken_models.h): Restore writes the point's state straight
// after the log's tip under the newest generation there, holding nothing.
//
// Threading: the Env loop thread. Simulator-clean.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "actor/event_host.h"
#include "base/broken_models.h"
#include "cluster/owners.h"
#include "replica/history.h"
#include "replica/provider.h"
#include "store/object_store.h"

namespace wk {

// The actors an owner's change (a deletion, a restore, a fork) holds on this node: a
// HoldSource decorator that refuses to start them (kRetryable: a request gets 503 and may
// retry), so no replica of theirs opens here while the change is made.
class DeletionGuard final : public replica::HoldSource {
 public:
  explicit DeletionGuard(replica::HoldSource& inner) : inner_(inner) {}
  Task<Result<replica::Replica::Hold>> Acquire(ActorId actor) override;
  Task<void> Release(ActorId actor, Generation generation) override;
  bool Sleep(const ActorId& actor, Generation generation, HoldResume resume) override;
  // A blocked actor is not woken (its Acquire then refuses it).
  Task<std::optional<std::pair<replica::Replica::Hold, HoldResume>>> Wake(ActorId actor) override;
  // False if a change of actor is already under way here.
  bool Block(const ActorId& actor) { return blocked_.insert(actor).second; }
  void Unblock(const ActorId& actor) { blocked_.erase(actor); }
  bool blocked(const ActorId& actor) const { return blocked_.count(actor) > 0; }

 private:
  replica::HoldSource& inner_;
  std::set<ActorId> blocked_;
};

// Keeps an actor blocked on a DeletionGuard (Block said true) until it goes out of scope,
// unless the guard's owner is gone by then (alive false).
class BlockedActor {
 public:
  BlockedActor(DeletionGuard& guard, ActorId id, std::shared_ptr<bool> alive)
      : guard_(guard), id_(std::move(id)), alive_(std::move(alive)) {}
  ~BlockedActor() {
    if (*alive_) guard_.Unblock(id_);
  }
  BlockedActor(const BlockedActor&) = delete;
  BlockedActor& operator=(const BlockedActor&) = delete;

 private:
  DeletionGuard& guard_;
  ActorId id_;
  std::shared_ptr<bool> alive_;
};

struct OwnerChangesDeps {
  Env& env;
  ObjectStore& store;  // what the changes read and write with (a node's: the purpose `admin`)
  Owners& owners;
  actor::EventHost& host;              // resident actors: IsResident, Unload
  replica::ReplicaProvider& provider;  // a replica still open or closing (Find); OpenOwned
  DeletionGuard& guard;                // the provider's hold source goes through it
  NodeId node_id;
  // storage.retention_ms (and per tenant): the history window of restores and forks (0:
  // none kept).
  replica::Retention retention;
  // restore-without-acquire; history-ignores-fence through the history reads.
  BrokenModels broken;
};

// What an owner's change came to. Exactly one of: `holder` set (another live node holds the
// actor: ask it), `status` not OK (nothing changed; its message is the whole story), or made.
struct OwnerChange {
  std::optional<NodeId> holder;
  // While holder is set: the actor stays blocked here until this goes (keep it while asking).
  std::shared_ptr<BlockedActor> blocked;
  Status status;
  // A refusal the caller resolves (HTTP 409): a change of the actor already under way here,
  // or a fork's target that exists.
  bool conflict = false;
  // Made: the batch written (the state after the change) and its hold's generation.
  replica::BatchId batch;
  Generation generation;
  std::optional<replica::BatchId> point;  // the point's last batch; nullopt: the empty state, or
  std::optional<replica::Position> point_snapshot;  // a snapshot's state with no batch after it
  std::int64_t point_ms = 0;
  std::optional<replica::BatchId> undo;   // a restore's: the newest batch before it
  bool made() const { return !holder && status.ok(); }
};

class OwnerChanges {
 public:
  explicit OwnerChanges(OwnerChangesDeps deps) : deps_(std::move(deps)) {}
  ~OwnerChanges() { *alive_ = false; }
  OwnerChanges(const OwnerChanges&) = delete;
  OwnerChanges& operator=(const OwnerChanges&) = delete;

  struct Taken {
    std::optional<NodeId> holder;  // another live node holds it
    Status status;                 // not OK: not taken (kNotFound: must_exist and nothing stored)
    AcquireResult acquired;        // kAcquired when neither
  };
  // The actor out of memory here and its hold released; then the live holder elsewhere, or a
  // hold of our own (generation + 1). must_exist: kNotFound when nothing is stored (acquiring
  // would write a record for a name nobody used). REQUIRES: the caller blocked id.
  Task<Taken> TakeAsOwner(ActorId id, bool must_exist);
  // Writes target's module entries and alarm as one batch under `acquired` (a replica of our
  // own, restored first), waits until durable, closes and releases. require_empty:
  // kPreconditionFailed if the log held anything. Returns the batch's generation.
  Task<Result<Generation>> WriteAsOwner(ActorId id, AcquireResult acquired, actor::StateMap target,
                                        bool require_empty);
  // Makes the state at `point` the actor's current one, as its owner.
  Task<OwnerChange> Restore(ActorId id, replica::PointSpec point);
  // A new actor `to` (nothing stored under it) with from's state at `point`: from is only
  // read, `to` written as its owner.
  Task<OwnerChange> Fork(ActorId from, replica::PointSpec point, ActorId to);

  // Whether the actor has an ownership record or any object of its log (one HEAD, up to two
  // one-entry LISTs).
  Task<Result<bool>> AnythingStored(ActorId id);
  // Whether the actor has a state: a snapshot, or a segment that is not a fence (two LISTs).
  // A name whose log holds fences only (a fork that failed before its batch was durable) is
  // empty, so a fork onto it may be asked again.
  Task<Result<bool>> HasState(ActorId id);
  // The history reads' options now: this node's clock, the tenant's retention window.
  replica::HistoryOptions HistoryNow(std::string_view tenant) const;
  const NodeId& node_id() const { return deps_.node_id; }

 private:
  Task<OwnerChange> RestoreWithoutAcquire(ActorId id, replica::PointSpec point);

  OwnerChangesDeps deps_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
