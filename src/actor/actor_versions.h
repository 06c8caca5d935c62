// Class versions inside an executor (docs/tenants.md, "Class versions"): what a chooser picks
// for an actor (VersionPick), and ActorVersions, one resident actor's bookkeeping of it: the
// version its state is at, the version it runs, whether a migration (wk_on_upgrade) runs
// before its next event, and what a failed migration leaves. Every executor keeps its own
// code (a V8 module, the simulator's native classes) and applies the rule through this one
// home, so the simulator runs the rule the nodes run.
//
// Guarantees: a state is never run by a version older than its mark unless the chooser says
// its version is broken; a migration's mark commits in the migration's batch (Upgraded); a
// migration that failed in a residency is not tried again in it; a broken version's state
// whose migration failed runs nowhere (blocked) until the choice changes.
// Threading: the executor's, as its other per-actor fields (the loop between the actor's
// jobs, or the actor's own job).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "actor/storage.h"
#include "base/broken_models.h"

namespace wk::actor {

// What an actor of a versioned class runs (the rule is control::ChooseVersion): given its
// name, the version that last committed its state (kClassVersionKey; 0: none) and whether it
// stores nothing.
struct VersionPick {
  std::uint32_t run = 0;
  // wk_on_upgrade(from) of `run` converts the state first; if it fails, the actor runs
  // `from`, its state's version, unless no_fallback (`from` is marked broken): then its
  // events are refused until the migration succeeds.
  std::optional<std::uint32_t> upgrade_from;
  bool no_fallback = false;
};
using VersionChooser = std::function<VersionPick(std::string_view name, std::uint32_t mark, bool empty)>;

// Whether a version's code is loaded on this node.
using VersionLoaded = std::function<bool(std::uint32_t version)>;

// The state stores nothing (no key, no alarm): a first write needs no migration.
bool StoresNothing(const ActorStorage& storage);

// The versions a pick needs that are not loaded: the one it runs and the one a failed
// migration falls back to (Executor::VersionsMissing).
std::vector<std::uint32_t> VersionsNeeded(const VersionPick& pick, const VersionLoaded& loaded);

struct ActorVersions {
  std::uint32_t mark = 0;  // the version that last committed its state (0: none recorded)
  bool empty = true;       // its state stores nothing
  std::uint32_t run = 0;   // the version it runs (after Apply; 0: none chosen yet)
  std::optional<std::uint32_t> upgrade_from;  // wk_on_upgrade(from) of `run` runs before its next event
  bool no_fallback = false;                   // upgrade_from is marked broken
  std::set<std::uint32_t> failed;  // versions whose migration failed in this residency
  std::uint32_t converted = 0;     // what a migration of this residency converted to (upgrade-outside-batch only)
  // The version chosen is not loaded here: its events wait while the core loads it. 0: none.
  std::uint32_t missing = 0;
  // Its migration to this version failed and its state's version is broken: its events are
  // refused (nothing may run that state) until the choice changes. 0: none.
  std::uint32_t blocked = 0;

  // The actor's storage (re)opened: its mark and emptiness read, no failure remembered.
  void Start(const ActorStorage& storage);
  // The chooser's pick, after what this residency saw (a failed migration is not tried
  // again, a conversion already made not made again): sets run, upgrade_from, no_fallback,
  // missing and blocked. Returns whether the actor can run (nothing missing or blocked).
  // `broken`: broken-state-runs ignores no_fallback (the broken version runs the state).
  bool Apply(VersionPick pick, const VersionLoaded& loaded, BrokenModels broken);
  // The state of a class known unversioned: a marked state waits for its version (the core
  // loads it, which reads the class again). Returns whether it can run.
  bool ApplyUnversioned();
  // A batch of the running version is about to commit: its first one carries the mark.
  void Mark(Batch& batch);
  // After any commit (emptiness may change).
  void Committed(const ActorStorage& storage) { empty = StoresNothing(storage); }
  // The migration to `run` succeeded: its batch gets the new mark (upgrade-outside-batch:
  // not; the mark waits for the next batch, and a restart before it converts again).
  void Upgraded(Batch& batch, BrokenModels broken);
  // It failed (nothing it wrote kept): true if the actor runs its state's version instead
  // (run set to it), false if blocked (its state's version is broken).
  bool UpgradeFailed();
};

}  // namespace wk::actor
