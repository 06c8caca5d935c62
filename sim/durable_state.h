// DurableState: an actor's state as a restore from the simulated bucket would see it at
// this instant (its segments and snapshots copied into a bucket of their own and restored
// there, so nothing of the world is touched or drawn). The checkers of the alarms and
// messages workloads judge against it.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <optional>

#include "actor/state_map.h"
#include "base/ids.h"
#include "world.h"

namespace wk::sim {

// nullopt if the chain cannot be restored (a chain in the middle of a change).
std::optional<actor::StateMap> DurableState(World& world, const ActorId& actor);

}  // namespace wk::sim
