// The first generation of an actor that has no ownership record (ADR 0020 §3 "With no
// record, see section 6", and §6 "First acquisition").
//
// Concept. Every hold has a generation of its own, and the actor's log (wal/ segments and
// snapshot/ snapshots, ADR 0007) carries the generation of the hold that wrote each object
// in its key; a restore refuses to run for a hold whose generation is not above every one
// in the log. So an actor without an owners/ record cannot simply start at generation 1:
//   - an actor of the per-actor-lease versions has a log (and maybe a leases/ object) but
//     no record yet: the upgrade;
//   - an actor whose record was lost (deleted by hand, a bucket lifecycle rule) has a log
//     at some generation N: starting at 1 would leave it unavailable for good ("already has
//     generation N").
// Its first acquisition therefore seeds the generation, in this order (ADR §6):
//   1. read leases/<actor> (lease_marker.h):
//        live old lease (expires_at + grace not passed on our clock), whatever node it
//          names, this node's own id included (an old record has no instance to tell a
//          predecessor from a past hold of this process)   -> refused: held by it
//        absent                              -> marker to create, If-None-Match: *
//        old lease, expired                  -> marker to write, If-Match its version
//        marker (a crash between marker and record, or a lost record) -> nothing to write
//        anything else                       -> kFatal: never taken
//   2. list the actor's wal/ and snapshot/ keys: seed = max(the old lease's or marker's
//      generation, every generation in those keys);
//   3. write the marker (when step 1 says so) carrying that seed.
// The caller then creates owners/ at seed + 1, If-None-Match: *. A crash between the two
// writes leaves the marker, from which the next acquisition seeds the same way.
//
// Cost, once per actor and for good: a GET, the log's LIST (two prefixes, all pages) and a
// PUT.
//
// Threading: Env loop thread. Simulator-clean (ObjectStore and Env only).
#pragma once

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
// broken: tests only (unseeded-first-generation, old-lease-ignored).
Task<Result<FirstGeneration>> SeedFirstGeneration(Env& env, ObjectStore& store, ActorId actor, NodeId self,
                                                  LeaseTiming timing, CallOptions call, BrokenModels broken = {});

}  // namespace wk
