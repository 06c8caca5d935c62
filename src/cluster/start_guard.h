// StartGuard: a new node does not start while an old (per-actor-lease) version may still run
// against the bucket (docs/node-lease.md, "Upgrading from per-actor leases"). Before its
// first lease write it lists nodes/ and waits while an old-format heartbeat is fresh; one
// that changes between two of its listings refuses the start (kOldVersionRunning); a
// heartbeat dated ahead lapses after a bounded wait on this node's monotonic clock.
// Threading: Env loop thread; Run is one task; simulator-clean. Details (freshness, the
// bounds): docs/internals.md, "StartGuard".
#pragma once

#include <map>
#include <string>

#include "base/broken_models.h"
#include "cluster/node_record.h"
#include "cluster/timing.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

// The freshness test above, on the wall clock alone (no memory of earlier reads): an
// old-format heartbeat of unknown age, or dated ahead of now, counts as fresh.
bool OldHeartbeatFresh(const OldHeartbeat& old, WallTime now, const LeaseTiming& timing);
// How long an old-format heartbeat stays fresh after its written_at (and how long one dated
// ahead or unreadable may keep the guard waiting after it was first read).
Duration OldHeartbeatFreshFor(const LeaseTiming& timing);

struct StartGuardOutcome {
  enum class Kind {
    kGo,                 // no old-format heartbeat is fresh
    kOldVersionRunning,  // one was rewritten meanwhile: an old version runs (message says which)
    kStopped,            // cancelled
  };
  Kind kind = Kind::kStopped;
  std::string message;
};

struct StartGuardStats {
  std::uint64_t listings = 0;        // rounds of the guard (a listing and its reads)
  std::uint64_t waits = 0;           // rounds that found a fresh old-format heartbeat
  std::uint64_t listing_failures = 0;
};

class StartGuard {
 public:
  StartGuard(Env& env, ObjectStore& store, LeaseTiming timing);

  // Lists until no old-format heartbeat is fresh, one is rewritten, or the task is cancelled.
  Task<StartGuardOutcome> Run();

  const StartGuardStats& stats() const { return stats_; }
  // Broken models (base/broken_models.h): tests only (start-guard-off).
  void set_broken_models(BrokenModels b) { broken_ = b; }

 private:
  struct Seen {
    std::string body;
    MonoTime first_read{};
    bool warned_ahead = false;
  };
  // One round: kGo, kOldVersionRunning, or (kind kStopped meaning "wait") with *left set.
  Task<Result<StartGuardOutcome>> Round(bool first, Duration* left, std::string* waiting_for);

  Env& env_;
  ObjectStore& store_;
  const LeaseTiming timing_;
  std::map<NodeId, Seen> seen_;
  StartGuardStats stats_;
  BrokenModels broken_;
};

}  // namespace wk
