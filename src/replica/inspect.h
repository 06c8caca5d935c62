// The bucket work of the actor listing, the inspector and the deletion (docs/console.md;
// docs/http-api.md, "Listing, inspecting and deleting actors"); the routes and ownership
// steps around them are server/actor_admin.h's. Guarantees: listing and read-only restore
// never acquire, wake or write anything; a deletion runs under a hold and first writes an
// empty fence <g>-0, so a deletion cut anywhere restores to the old state or to nothing,
// and deletes only objects below its generation. Threading: Env loop thread;
// simulator-clean. Details: docs/internals.md, "Listing, inspecting and deleting actors".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/owner_record.h"
#include "env/env.h"
#include "replica/restore.h"
#include "store/object_store.h"

namespace wk::replica {

// The most actors one listing page may ask for (each costs a GET and two LISTs).
inline constexpr int kMaxListActorsLimit = 500;

struct ListActorsOptions {
  std::string prefix;  // only names starting with this
  std::string after;   // only names after this one (the previous page's next_after)
  int limit = 50;      // 1..kMaxListActorsLimit
  int parallelism = 8;
  Duration timeout = std::chrono::seconds(10);  // each request
  int attempts = 3;                             // each request, on kRetryable/kUnknownOutcome
};

struct StoredActor {
  std::string name;
  std::optional<OwnerRecord> record;  // absent with record_error set, or when gone since listed
  std::string record_error;           // a corrupt record: listed, never skipped
  std::uint64_t stored_bytes = 0;     // its wal/ and snapshot/ objects
  std::uint64_t segments = 0;
  std::uint64_t snapshots = 0;
  std::optional<Generation> newest_generation;  // of its log objects
};

struct ActorPage {
  std::vector<StoredActor> actors;
  // Pass as `after` for the next page; absent on the last page.
  std::optional<std::string> next_after;
};

// kInvalidArgument for a bad tenant, class, prefix or limit.
Task<Result<ActorPage>> ListStoredActors(Env& env, ObjectStore& store, std::string tenant, std::string class_name,
                                         ListActorsOptions options);

// See "Read-only restore" above.
Task<Result<Restored>> RestoreReadOnly(Env& env, ObjectStore& store, ActorId actor, RestoreOptions options,
                                       int attempts = 3);

struct Deleted {
  std::uint64_t objects = 0;  // deleted (the new fence not counted)
  std::uint64_t bytes = 0;
};

// See "Deletion" above. is_valid: the hold's validity (HoldView::IsValid), asked before the
// fence and before each delete. kRetryable when the hold stopped being valid (run it again
// under a new hold: what was deleted stays deleted, the fence of the new hold empties the
// log again); kUnknownOutcome when the fence's outcome is unknown (nothing was deleted);
// kFatal when the log holds generation >= hold_generation or is corrupt.
Task<Result<Deleted>> DeleteStoredActor(Env& env, ObjectStore& store, ActorId actor, Generation hold_generation,
                                        std::function<bool()> is_valid, Duration timeout = std::chrono::seconds(10));

}  // namespace wk::replica
