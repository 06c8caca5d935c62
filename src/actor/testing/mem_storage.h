// MemStorage: the in-memory implementation of the storage interface, for the runtime's
// tests and benchmarks (not a product mode: nothing is durable). An actor's state survives
// hibernation and eviction (the provider keeps it) so tests can see restore work.
//
// Fault hooks for tests: FailOpens makes restores fail; FailDurability makes every batch
// committed while it is set fail, and (sticky, like the real replica's gate) fails that
// storage: nothing more of it is released, until the actor is restored; a restore sees
// only durable batches. EndHolds ends the hold of every storage open now (each refuses its
// next release, and fails, as the replica's gate does); storages opened later are valid.
//
// Threading: the provider on the runtime's loop thread; each storage per storage.h.
#pragma once

#include <atomic>
#include <map>
#include <mutex>

#include "actor/state_map.h"

namespace wk::actor {

struct MemActorState {
  StateMap map;
  std::uint64_t commits = 0;
  const StateMap::Entries& data() const { return map.entries(); }
};

class MemStorageProvider final : public StorageProvider {
 public:
  Task<Result<std::unique_ptr<ActorStorage>>> Open(const ActorId& id) override;
  void Close(const ActorId& id, std::unique_ptr<ActorStorage> storage, CloseIntent intent) override;

  void FailOpens(bool fail) { fail_opens_ = fail; }
  void FailDurability(bool fail) { fail_durability_->store(fail); }
  void EndHolds() {
    valid_->store(false);
    valid_ = std::make_shared<std::atomic<bool>>(true);
  }

  // Test inspection: the durable state of an actor (nullptr if never opened).
  std::shared_ptr<const MemActorState> State(const ActorId& id) const;
  int opens() const { return opens_; }
  int closes() const { return closes_; }

 private:
  std::map<std::string, std::shared_ptr<MemActorState>> states_;
  bool fail_opens_ = false;
  std::shared_ptr<std::atomic<bool>> fail_durability_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> valid_ = std::make_shared<std::atomic<bool>>(true);
  int opens_ = 0;
  int closes_ = 0;
};

}  // namespace wk::actor
