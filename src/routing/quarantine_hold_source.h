// QuarantineHoldSource: the hold source a node's replicas acquire through, so every start of
// an actor on the node passes it (a request's, a move's, an alarm's, a sleeping hold's wake,
// and the core's restart of an actor whose storage failed while events were queued for it).
// It refuses an actor the node's QuarantineCache says is quarantined, asking the bucket when
// the cache knows nothing younger than its ttl (QuarantineRead::kOnMiss: a read, or the
// listing of quarantine/): so no start trusts knowledge older than the cache's bound
// (docs/security.md, "Poisoned actors"). The front and the alarm delivery make the same
// check right before they start an actor, so on their paths this costs no request. A read
// that fails lets the start go on, as the front's does (a brake, not a lock).
// The real node (src/server/actor_host.h) and the simulator's serving nodes (sim/serving.h)
// wrap their OwnersHoldSource in it.
//
// Threading: the Env loop thread. Simulator-clean.
#pragma once

#include "base/broken_models.h"
#include "control/quarantine_cache.h"
#include "replica/provider.h"

namespace wk {

class QuarantineHoldSource final : public replica::HoldSource {
 public:
  // cache null: quarantine is off, every acquisition is the inner source's. broken:
  // start-skips-quarantine-read (only the cache is peeked, no read on a miss).
  QuarantineHoldSource(replica::HoldSource& inner, control::QuarantineCache* cache, BrokenModels broken = {})
      : inner_(inner), cache_(cache), broken_(broken) {}
  Task<Result<replica::Replica::Hold>> Acquire(ActorId actor) override;
  Task<void> Release(ActorId actor, Generation generation) override;
  bool Sleep(const ActorId& actor, Generation generation, HoldResume resume) override;
  // A wake is a start: checked as Acquire is; a quarantined actor is not woken (its Acquire
  // then refuses it; the sleeping hold ends with the sleep policy, a drain or a stop).
  Task<std::optional<std::pair<replica::Replica::Hold, HoldResume>>> Wake(ActorId actor) override;

 private:
  replica::HoldSource& inner_;
  control::QuarantineCache* cache_;
  BrokenModels broken_;
};

}  // namespace wk
