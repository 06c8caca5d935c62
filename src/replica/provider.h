// ReplicaProvider: the actor runtime's StorageProvider over durable replicas. Opening an
// actor acquires a hold of it (HoldSource) and restores a Replica under that hold's
// generation; closing it waits until its writes are durable, then releases the hold. A
// replica that fails (an upload failed or was Late, or the hold ended) abandons its hold at
// once: the hold source releases it, or drops it if the lease is gone.
//
// Each Open gets a hold of its own: a hold whose generation already served a replica is
// released and a new one acquired, since a generation's segment keys are written once.
//
// Threading: Env loop thread (the runtime calls Open and Close there).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "actor/storage.h"
#include "cluster/owners.h"
#include "replica/replica.h"

namespace wk::replica {

class HoldSource {
 public:
  virtual ~HoldSource() = default;
  // A hold of actor for this node (acquired now, or the one it has).
  virtual Task<Result<Replica::Hold>> Acquire(ActorId actor) = 0;
  // Ends the hold of that generation, if it is still the one this node has (a replica
  // closing late must never release a newer hold of the same actor). Stop acting first;
  // the release may stay pending (docs/node-lease.md, "Pending releases").
  virtual Task<void> Release(ActorId actor, Generation generation) = 0;
};

// Holds from the ownership records (docs/node-lease.md, "Actors"): Acquire is Owners::Acquire (which returns
// the hold this node already has), validity is HoldView::IsValid, Release is
// Owners::Release (a release that cannot land stays pending).
class OwnersHoldSource final : public HoldSource {
 public:
  explicit OwnersHoldSource(Owners& owners) : owners_(owners) {}
  Task<Result<Replica::Hold>> Acquire(ActorId actor) override;
  Task<void> Release(ActorId actor, Generation generation) override;

 private:
  Owners& owners_;
};

class ReplicaProvider final : public actor::StorageProvider {
 public:
  ReplicaProvider(Replica::Deps deps, HoldSource& holds, ReplicaOptions options, Duration close_limit);
  ~ReplicaProvider() override;

  Task<Result<std::unique_ptr<actor::ActorStorage>>> Open(const ActorId& id) override;
  void Close(const ActorId& id, std::unique_ptr<actor::ActorStorage> storage) override;

  // Hold ends observed by the cluster (lapse, loss): cut every resident replica of actor.
  void Cut(const ActorId& id, std::string why);
  std::size_t open_replicas() const { return open_.size(); }
  // The replica open for id, or null. Valid until the runtime closes it: use it before the
  // next suspension (its reads take the replica's own lock, replica.h).
  const Replica* Find(const ActorId& id) const;
  // Every actor with an open replica.
  std::vector<ActorId> OpenActors() const;

 private:
  static Task<void> ReleaseLater(std::shared_ptr<bool> alive, HoldSource* holds, ActorId id, Generation generation);
  static Task<void> CloseLater(std::shared_ptr<bool> alive, ReplicaProvider* self, ActorId id,
                               std::unique_ptr<Replica> replica, Duration limit);

  Replica::Deps deps_;
  HoldSource& holds_;
  ReplicaOptions options_;
  Duration close_limit_;
  std::map<ActorId, Replica*> open_;
  // The last generation each open actor used (generations only grow, so anything at or
  // below it was used); erased once its hold is released.
  std::map<ActorId, Generation> last_generation_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk::replica
