// What the actor listing, the inspector and the deletion read and write in the bucket
// (docs/console.md, docs/http-api.md "Listing, inspecting and deleting actors"). The HTTP
// routes and the ownership steps around them are the server's (server/actor_admin.h); the
// bucket work is here, beside the formats and the restore it follows, so it runs in the
// simulator like the rest of the replica.
//
// Listing (ListStoredActors). The actors of a class are the ownership records under
// owners/<tenant>/<class>/: every actor that ever ran has one (an acquisition writes it
// before anything else), and it stays when the actor is deleted (see below). A page is one
// LIST of those records, in name order, after `after`; then, for each actor on the page,
// a GET of its record and a LIST of its wal/ and snapshot/ objects (stored size), at most
// `parallelism` actors at once. Nothing is acquired and nothing is written: listing never
// wakes an actor.
//
// Read-only restore (RestoreReadOnly). The state an actor's log holds, by restore.h's
// chain rules, restored without a hold: it only lists and reads (restore.h sends nothing
// else), so it never acquires the actor and never writes. It shows every acknowledged
// write of the newest chain; if an owner is writing meanwhile it may miss that owner's
// latest batches, and a chain object collected by the owner's garbage collection between
// the listing and the read fails it (kFatal "missing"): it is then run again, up to
// `attempts` times.
//
// Deletion (DeleteStoredActor): run under a hold of generation g acquired through the
// normal ownership protocol (cluster/owners.h), so no other node acts on the actor while
// it runs. In this order:
//   1. Write the fence <g>-0 naming an empty chain (If-None-Match: *). From the moment it
//      lands, every restore follows it (it is the newest fence) and finds no state: the
//      actor is logically empty before anything is deleted, so a deletion cut halfway
//      never leaves a log that restores to part of the old state, or to a corrupt chain.
//      Its outcome must be known before step 2 (unknown: stop, delete nothing).
//   2. Delete every other wal/ and snapshot/ object of the actor, each only while the hold
//      is still valid (checked right before sending). All of them belong to generations
//      below g (a listed object of generation >= g stops it: kFatal, it is not ours to
//      delete), so a delete that lands late can only remove what no later chain needs.
// The caller then releases the hold: the record names nobody at generation g. It is never
// deleted: generations only grow (ADR 0020 §3), so a new record at generation 1 could
// meet a late upload of an old hold at the same generation. A later acquisition takes g + 1,
// restores from the fence <g>-0 (empty), and its own fence names it; garbage collection
// removes <g>-0 once a snapshot covers it. A segment of an older hold that lands after the
// deletion (an upload of a fenced node, in flight) is off the chain and ignored.
//
// Threading: Env loop thread. Simulator-clean: only Env and ObjectStore.
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
