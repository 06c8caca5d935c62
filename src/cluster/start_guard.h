// StartGuard: a new node does not start while an old version may still run against the
// bucket (ADR 0020 §6, "Start guard").
//
// Concept. Old (per-actor-lease) and new nodes must never run together: an old binary
// writes its heartbeat unconditionally and takes actors by its own rules. Before its first
// lease write a new node therefore lists nodes/ and reads every body; it waits (it does
// not exit) while any heartbeat in an old format (`wasmkeep-node 1` or `2`) is fresh:
//
//   fresh     written less than horizon + ttl + grace + max_skew ago on this node's clock
//             (the horizon is three heartbeat periods: the per-actor-lease versions counted
//             a node live while its heartbeat was younger than that, and its per-actor
//             leases last ttl + grace more; 25 s with the defaults)
//   dated     a heartbeat whose written_at is in the future, or unreadable, lapses at the
//   ahead     latest that same long after this node first read that same body, measured on
//             this node's monotonic clock, with a warning naming the object: a retired
//             node's wrong clock cannot hold the cluster for ever
//   rewritten an old-format body that changes (or appears) between two of the guard's
//             listings means an old node is running: the start is refused (kOldVersionRunning)
//
// It re-reads every half heartbeat period and logs how long is left. It runs beside the
// start check (node_lease.h), so a new node serves about ttl + grace after it starts when
// the old nodes stopped at least 10 s before. The same freshness test decides whether
// `cluster status` shows an old-format heartbeat as an old version running or a retired
// node's, whether nodes log it as an error, and whether `cluster forget` may delete it.
//
// Threading: Env loop thread; Run is one task. Simulator-clean.
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
