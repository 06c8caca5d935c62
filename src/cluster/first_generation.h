// The first generation of an actor without an ownership record (an upgraded actor, a new
// one, one whose record was lost): seeded above every generation its log and its leases/
// object carry, marked in leases/, and refused while a live old per-actor lease holds it
// (docs/node-lease.md, "Upgrading from per-actor leases"). Guarantees: the record the caller
// then creates (seed + 1, If-None-Match: *) is above everything a restore will find; a
// crash between marker and record seeds the same way again. Threading: Env loop thread;
// simulator-clean. Details (the steps, the cost): docs/internals.md, "The first generation".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/broken_models.h"
#include "base/ids.h"
#include "cluster/lease_marker.h"
#include "cluster/timing.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

// An actor's log, as far as the ownership code needs it: the key prefixes its holds write
// under. The same layout as replica/format.h (SegmentKey, SnapshotKey), which the replica's
// tests check against these.
std::string LogWalPrefix(const ActorId& actor);
std::string LogSnapshotPrefix(const ActorId& actor);
// The generation in a log key "<prefix><20 digits>-<20 digits>"; kFatal naming the key for
// anything else (a log we cannot read is never seeded below).
Result<Generation> GenerationOfLogKey(std::string_view prefix, std::string_view key);

// Bound on the pages of one log listing (1000 keys a page): a log this long is garbage that
// collection should have removed long ago; refuse rather than list for ever.
inline constexpr int kMaxLogListingPages = 1000;

// The highest generation among the actor's wal/ and snapshot/ keys (Generation{0}: none).
Task<Result<Generation>> HighestLogGeneration(ObjectStore& store, ActorId actor, CallOptions call);

struct FirstGeneration {
  // Set when a live old lease holds the actor: nothing was written, refuse as held.
  std::optional<OldLease> held_by_old_lease;
  // Otherwise the seed: the first record is written at seed + 1.
  Generation seed;
  bool marker_written = false;  // this call created or replaced leases/<actor>
};

// Steps 1-3 above for actor, by node `self`. Errors: the bucket's (reads), kFatal for an
// unreadable leases/ object or log key, kRetryable when the marker's write did not land or
// its outcome is unknown (nothing was acquired; the next acquisition reads again).
// broken: tests only (unseeded-first-generation, old-lease-ignored). may_write, if set, is
// asked right before the marker's write: false (the node's lease was lost meanwhile: it
// sends nothing more) writes nothing and answers kRetryable.
Task<Result<FirstGeneration>> SeedFirstGeneration(Env& env, ObjectStore& store, ActorId actor, NodeId self,
                                                  LeaseTiming timing, CallOptions call, BrokenModels broken = {},
                                                  std::function<bool()> may_write = {});

}  // namespace wk
