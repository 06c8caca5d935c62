// Garbage collection of an actor's log (docs/storage.md, "Garbage collection"):
// which objects the owner may delete, as a pure function of what it listed and what it
// knows of the chain.
//
// Deletable:
//   - segments at or before the newest acknowledged snapshot on the chain (covered by it),
//     except the owner's own fence <G>-0: restore finds the chain through the newest fence,
//     so it stays until a later hold has written its own;
//   - snapshots older than that snapshot;
//   - segments and snapshots of older generations that are not on the chain (late uploads
//     of fenced or lapsed holds), but only once the hold is older than the fencing bound
//     (`off_chain_ripe`): before that an upload sent by the previous owner may still be in
//     flight, and deleting its key early would only let the late write create it again.
// Never: anything of generation G after the snapshot, anything on the chain after it, and
// nothing outside this actor's wal/ and snapshot/ prefixes (the caller checks the keys).
//
// Retention (docs/storage.md, "History and point-in-time restore"): with `keep_from` set,
// the snapshot above is that one instead, the oldest base the retention window still needs
// (the caller picks it: at or before the newest acknowledged snapshot, from the chain
// followed back through the older fences, which `chain` then holds whole): every chain
// segment after it and every snapshot at or after it on the chain stay.
//
// Threading: pure.
#pragma once

#include <optional>
#include <set>
#include <vector>

#include "base/broken_models.h"
#include "replica/format.h"

namespace wk::replica {

struct GcInput {
  Generation generation;                 // the owner's
  std::optional<Position> snapshot;      // newest acknowledged snapshot on the chain
  std::set<Position> chain;              // chain positions after the restore's base, and ours
  std::optional<Position> keep_from;     // retention: the oldest base to keep (see above)
  bool off_chain_ripe = false;
  std::vector<Position> segments;        // listed
  std::vector<Position> snapshots;       // listed
  BrokenModels broken;                   // gc-deletes-chain (base/broken_models.h)
};

struct GcPlan {
  std::vector<Position> segments;
  std::vector<Position> snapshots;
  bool waiting_for_bound = false;  // off-chain objects left for a later pass
};

GcPlan PlanGc(const GcInput& input);

}  // namespace wk::replica
