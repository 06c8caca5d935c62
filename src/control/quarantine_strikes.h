// QuarantineStrikes: records a node's strikes against its actors (quarantine.h's
// RecordStrike), remembers each answer in the node's QuarantineCache, unloads a resident
// actor its strike quarantined, and sweeps spent records (docs/security.md, "Poisoned
// actors"). What counts as a strike is not decided here: the real node's QuarantineService
// (src/server/quarantine_service.h) classifies the V8 runtime's event outcomes and its
// crash journal and calls Strike; the simulator's poisoned native actors call it the same
// way (sim/poison_clients.h).
//
// Every strike and every quarantine is one log line (warn) and counted in stats() (the
// server publishes them as metrics).
//
// Threading: the Env loop thread. Simulator-clean (Env and ObjectStore only).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/ids.h"
#include "control/quarantine.h"
#include "control/quarantine_cache.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

struct QuarantineStrikesOptions {
  NodeId node_id;
  QuarantinePolicy policy;
  // One attempt of a strike's read or write.
  CallOptions call{std::chrono::seconds(10)};
};

// Counts kept by the loop thread.
struct QuarantineStats {
  std::uint64_t instance_strikes = 0;  // counted strikes from events that ended their instance
  std::uint64_t crash_strikes = 0;     // counted strikes from the journal of a crashed process
  std::uint64_t quarantines = 0;       // quarantines imposed by this node's strikes
  std::uint64_t not_counted = 0;       // strikes that found the actor already quarantined
  std::uint64_t strike_failures = 0;   // strikes the bucket did not take
  std::uint64_t records_deleted = 0;   // spent records the sweeps deleted
};

// How often each node sweeps spent quarantine records (DeleteSpentQuarantines); the first
// sweep comes at a random point of the first period, so nodes spread out.
inline constexpr Duration kQuarantineSweepPeriod = std::chrono::hours(1);

class QuarantineStrikes {
 public:
  // store: the node's store (its control-plane view is taken here).
  QuarantineStrikes(Env& env, ObjectStore& store, QuarantineCache& cache, QuarantineStrikesOptions options);
  ~QuarantineStrikes();
  QuarantineStrikes(const QuarantineStrikes&) = delete;
  QuarantineStrikes& operator=(const QuarantineStrikes&) = delete;

  // How to unload a resident actor that got quarantined (the runtime's Unload).
  void set_unload(std::function<void(const ActorId&)> unload) { unload_ = std::move(unload); }

  // One strike, on its own task: counted in the record (If-Match, retried), remembered in
  // the cache, and if the record quarantines the actor now, the actor unloaded. `crash`:
  // the previous process died while an event of the actor ran (counted apart). Nothing
  // when the policy is off.
  void Strike(const ActorId& actor, std::string reason, bool crash);

  // Deletes spent records every `period`; stops with this object. Nothing when the policy
  // is off.
  void StartSweeps(Duration period = kQuarantineSweepPeriod);

  const QuarantineStrikesOptions& options() const { return options_; }
  const QuarantineStats& stats() const { return stats_; }
  // Strike tasks not finished yet (tests wait for them).
  int in_flight() const { return in_flight_; }

 private:
  Task<void> RunStrike(ActorId actor, std::string reason, bool crash);
  void ScheduleSweep(Duration after, Duration period);
  Task<void> Sweep();

  Env& env_;
  ObjectStore& store_;
  QuarantineCache& cache_;
  QuarantineStrikesOptions options_;
  std::function<void(const ActorId&)> unload_;
  QuarantineStats stats_;
  int in_flight_ = 0;
  TaskHandle sweep_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk::control
