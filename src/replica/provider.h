// ReplicaProvider: the actor runtime's StorageProvider over durable replicas. Opening an
// actor wakes its sleeping hold or acquires a hold of it (HoldSource) and restores a Replica
// under that hold's generation; closing it waits until its writes are durable, then keeps
// the hold sleeping (an actor that only left memory: docs/node-lease.md, "Sleeping holds")
// or releases it. A replica that fails (an upload failed or was Late, or the hold ended)
// abandons its hold at once: the hold source releases it, or drops it if the lease is gone.
//
// A woken hold continues its log where it slept (Replica::Open's resume). Otherwise each
// Open gets a hold of its own: a hold whose generation already served a replica and is not
// sleeping is released and a new one acquired, since a generation's segment keys are
// written once. An Open while the actor's previous replica still closes waits for that
// close (bounded by the close limit), so a quick return wakes the hold it slept in.
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
#include "store/tenant_store.h"

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
  // Sleeping holds (docs/node-lease.md, "Sleeping holds"). Sleep: the replica of that
  // generation closed with every write durable and its actor left memory; true if the hold
  // is kept (false: release it). Wake: the actor's sleeping hold, awake again, with where its
  // log resumes; nullopt: acquire. A source without sleeping holds keeps none.
  virtual bool Sleep(const ActorId& actor, Generation generation, HoldResume resume) {
    (void)actor, (void)generation, (void)resume;
    return false;
  }
  virtual Task<std::optional<std::pair<Replica::Hold, HoldResume>>> Wake(ActorId actor) {
    (void)actor;
    co_return std::nullopt;
  }
};

// Holds from the ownership records (docs/node-lease.md, "Actors"): Acquire is Owners::Acquire (which returns
// the hold this node already has), validity is HoldView::IsValid, Release is
// Owners::Release (a release that cannot land stays pending).
class OwnersHoldSource final : public HoldSource {
 public:
  explicit OwnersHoldSource(Owners& owners) : owners_(owners) {}
  Task<Result<Replica::Hold>> Acquire(ActorId actor) override;
  Task<void> Release(ActorId actor, Generation generation) override;
  bool Sleep(const ActorId& actor, Generation generation, HoldResume resume) override;
  Task<std::optional<std::pair<Replica::Hold, HoldResume>>> Wake(ActorId actor) override;

 private:
  Owners& owners_;
};

class ReplicaProvider final : public actor::StorageProvider {
 public:
  ReplicaProvider(Replica::Deps deps, HoldSource& holds, ReplicaOptions options, Duration close_limit);
  ~ReplicaProvider() override;

  Task<Result<std::unique_ptr<actor::ActorStorage>>> Open(const ActorId& id) override;
  void Close(const ActorId& id, std::unique_ptr<actor::ActorStorage> storage, actor::CloseIntent intent) override;

  // A replica of id under a hold its caller took itself through the ownership protocol (an
  // operator's restore or fork, server/actor_admin.h), with this provider's deps (the alarm
  // index among them) and options; never one of the open replicas. The caller commits,
  // closes it and releases the hold; the actor must not be open here meanwhile.
  Task<Result<std::unique_ptr<Replica>>> OpenOwned(ActorId id, Replica::Hold hold);

  // Usage per tenant (store/tenant_store.h): when set, each replica that Open makes sends its
  // requests (segments, snapshots, restore, garbage collection) through stores->Of(actor),
  // attributed to the actor's tenant; null (the default): through deps.store. OpenOwned (an
  // operator's restore or fork) stays on deps.store: the operator's, not the tenant's.
  // REQUIRES: stores outlives every replica this provider opens.
  void set_tenant_stores(TenantStores* stores) { tenant_stores_ = stores; }

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
                               std::unique_ptr<Replica> replica, Duration limit, actor::CloseIntent intent);
  // Returns once no replica of id is closing (or after limit).
  Task<void> WaitClosed(ActorId id, Duration limit);
  Task<Result<std::unique_ptr<actor::ActorStorage>>> OpenUnder(ActorId id, Replica::Hold hold,
                                                              std::optional<HoldResume> resume, MonoTime started);

  // deps_ with the store of id's tenant (tenant_stores_), or deps_.
  Replica::Deps DepsFor(const ActorId& id);

  Replica::Deps deps_;
  TenantStores* tenant_stores_ = nullptr;
  HoldSource& holds_;
  ReplicaOptions options_;
  Duration close_limit_;
  std::map<ActorId, Replica*> open_;
  // The last generation each open actor used (generations only grow, so anything at or
  // below it was used); erased once its hold is released.
  std::map<ActorId, Generation> last_generation_;
  // Actors whose replica is closing now, and the Opens waiting for that close.
  std::map<ActorId, std::vector<Latch<bool>>> closing_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk::replica
