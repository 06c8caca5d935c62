// QuarantineHoldSource: the hold source a node's replicas acquire through. It refuses to
// start an actor this node knows to be quarantined (QuarantineCache::Peek: no I/O; the
// front and the alarm delivery have already read the record afresh before a start), so
// events queued behind the one that got the actor quarantined do not start it again
// (docs/security.md, "Poisoned actors"). Otherwise the inner source's answer. The real
// node (src/server/actor_host.h) and the simulator's serving nodes (sim/serving.h) wrap
// their OwnersHoldSource in it.
//
// Threading: the Env loop thread. Simulator-clean.
#pragma once

#include "control/quarantine_cache.h"
#include "replica/provider.h"

namespace wk {

class QuarantineHoldSource final : public replica::HoldSource {
 public:
  QuarantineHoldSource(replica::HoldSource& inner, const control::QuarantineCache& cache)
      : inner_(inner), cache_(cache) {}
  Task<Result<replica::Replica::Hold>> Acquire(ActorId actor) override;
  Task<void> Release(ActorId actor, Generation generation) override;

 private:
  replica::HoldSource& inner_;
  const control::QuarantineCache& cache_;
};

}  // namespace wk
