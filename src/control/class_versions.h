// Class versions and their rollout (docs/tenants.md, "Deploying"): every deploy of a class
// is a numbered version, kept under classes/<t>/<c>/versions/<n> (`wasmkeep-class_version
// 1`, create-only: the number is taken by the write that creates it), and which actors run
// which version is the class's rollout record classes/<t>/<c>/rollout (`wasmkeep-rollout 1`,
// changed only with If-Match). The pointer classes/<t>/<c>/current (control/classes.h) keeps
// naming the stable version's module, so a node that predates versions runs it.
//
// Guarantees: a version's module is stored before its record names it, and its record
// before a rollout names it; two deploys never take one number; the choice of an actor's
// version (ChooseVersion) is a pure function of the rollout, the actor's name and the version
// its state last committed, stable in the name (raising a rollout's share only adds actors).
// Threading: the given store's Env loop; simulator-clean (no clock, thread or socket).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/broken_models.h"
#include "base/status.h"
#include "base/time.h"
#include "control/classes.h"
#include "control/common.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

// Version numbers: 1 for a class's first deploy, one more for each deploy after.
using VersionNumber = std::uint32_t;
inline constexpr VersionNumber kMaxVersion = 999'999'999;
// Pins and broken marks a rollout record holds at most (it is read on every class refresh).
inline constexpr std::size_t kMaxPins = 1000;
inline constexpr std::size_t kMaxBroken = 100;
// Migration failures of a version after which its rollout pauses itself, unless set.
inline constexpr std::uint32_t kDefaultFailureLimit = 10;

std::string VersionKey(std::string_view tenant, std::string_view class_name, VersionNumber n);
std::string VersionsPrefix(std::string_view tenant, std::string_view class_name);
std::string RolloutKey(std::string_view tenant, std::string_view class_name);

// One deploy of a class.
struct VersionRecord {
  VersionNumber number = 0;
  ModuleDigest module;
  std::uint64_t size_bytes = 0;
  WallTime deployed_at{};
  std::string deployed_by;           // 1..64 of [A-Za-z0-9._@+-] (ValidateDeployer)
  bool migrates = false;             // it exports wk_on_upgrade: actors it runs were converted
  std::vector<std::string> imports;  // the host calls it imports (module "wasmkeep"), sorted
  friend bool operator==(const VersionRecord&, const VersionRecord&) = default;
};
Status ValidateDeployer(std::string_view by);
std::string EncodeVersionRecord(std::string_view tenant, std::string_view class_name, const VersionRecord& v);
Result<VersionRecord> DecodeVersionRecord(std::string_view body, std::string_view tenant, std::string_view class_name,
                                          VersionNumber n);

// Which actors of a class run which version.
struct Rollout {
  std::uint64_t revision = 0;     // one more on every write
  VersionNumber stable = 0;       // every actor not on the candidate or pinned
  VersionNumber candidate = 0;    // 0: none
  std::uint32_t percent = 0;      // the candidate's share of the class's actors, 1..99 with one
  // Paused (by the failure limit, or an operator): no actor moves to the candidate any more;
  // those whose state the candidate committed stay on it.
  bool paused = false;
  std::string paused_reason;      // set when paused
  std::uint32_t failure_limit = kDefaultFailureLimit;
  std::map<VersionNumber, std::uint64_t> failures;  // failed migrations by target version
  std::map<std::string, VersionNumber> pins;        // actor name -> the version it runs
  // A version marked broken: the actors whose state it committed run `run` instead (their
  // state as it left it; docs/tenants.md, "Rolling back").
  std::map<VersionNumber, VersionNumber> broken;
  WallTime updated_at{};
  friend bool operator==(const Rollout&, const Rollout&) = default;
};
// The rules above (stable set, candidate share, pins and broken within bounds).
Status ValidateRollout(const Rollout& r);
std::string EncodeRollout(std::string_view tenant, std::string_view class_name, const Rollout& r);
Result<Rollout> DecodeRollout(std::string_view body, std::string_view tenant, std::string_view class_name);

// An actor's place in its class's rollout: 0..9999, from the SHA-256 of its name, so the
// same actor has the same place on every node and at every share.
std::uint32_t RolloutPlace(std::string_view actor_name);

// What an actor runs (pure; the rule of docs/tenants.md, "Which version an actor runs"):
// `mark` is the version that last committed its state (0: none recorded; a state written
// before versions counts as version 1), `empty` whether it stores nothing.
struct VersionChoice {
  VersionNumber run = 0;
  // Set when the state must be converted first: wk_on_upgrade(from) of `run`, in one batch
  // with the new mark; if it fails, the actor runs `from` (its state's version) instead...
  std::optional<VersionNumber> upgrade_from;
  // ...unless `from` is marked broken: then its events are refused (503) until the
  // migration succeeds or the operator chooses otherwise.
  bool no_fallback = false;
};
// broken: rollout-unstable makes the place depend on the share (an actor may flip).
VersionChoice ChooseVersion(const Rollout& r, std::string_view actor_name, VersionNumber mark, bool empty,
                            BrokenModels broken = {});
// The versions a node may need to run the class's actors: stable, candidate, pins, and the
// broken marks' replacements (sorted, no duplicates).
std::vector<VersionNumber> VersionsInPlay(const Rollout& r);

// ---- The bucket

// Deploys a new version: the module stored (as DeployClass does), its record created under
// the next free number (none when the newest version is this module already: a deploy run
// again) (the first deploy of a class deployed before versions also records
// its current module as version 1), then the rollout: with `percent` nullopt or 100 (or no
// stable version yet) the new version becomes stable at once and `current` names it;
// otherwise it becomes the candidate at `percent`, the stable version staying.
struct DeployRequest {
  std::string tenant;
  std::string class_name;
  std::string wasm_bytes;
  std::string deployed_by;
  bool migrates = false;
  std::vector<std::string> imports;
  std::optional<std::uint32_t> percent;
};
struct Deployed {
  VersionRecord version;
  Rollout rollout;
};
Task<Result<Deployed>> DeployVersion(ObjectStore& store, Env& env, DeployRequest request, CallOptions call = {});

// The bytes of the modules a tenant's classes run: each class's versions in play
// (VersionsInPlay), or its `current` module if deployed before versions. What the
// module_bytes quota (control/quotas.h) bounds; DeployVersion refuses a new module past it.
Task<Result<std::uint64_t>> TenantModuleBytes(ObjectStore& store, std::string tenant, CallOptions call = {});

// The numbers of the class's versions (one listing, no record read).
Task<Result<std::set<VersionNumber>>> ListVersionNumbers(ObjectStore& store, std::string tenant,
                                                        std::string class_name, CallOptions call = {});
// Every version of the class, oldest first (a corrupt record is an error naming its key).
Task<Result<std::vector<VersionRecord>>> ListVersions(ObjectStore& store, std::string tenant, std::string class_name,
                                                      CallOptions call = {});
Task<Result<VersionRecord>> ReadVersion(ObjectStore& store, std::string tenant, std::string class_name,
                                        VersionNumber n, CallOptions call = {});
// The class's rollout, or nullopt for a class deployed only before versions (its actors run
// `current`, as version 1).
Task<Result<std::optional<Rollout>>> ReadRollout(ObjectStore& store, std::string tenant, std::string class_name,
                                                 CallOptions call = {});

// One change to a rollout, applied with If-Match (read again on a conflict). `change` gets
// the record as read and the numbers of the class's versions; it returns an error to refuse (nothing
// written) or false when there is nothing to write. Every written change gets revision + 1
// and updated_at = now; a change of stable also rewrites `current`.
using RolloutChange = std::function<Result<bool>(Rollout&, const std::set<VersionNumber>&)>;
Task<Result<Rollout>> UpdateRollout(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                    RolloutChange change, CallOptions call = {});

// The operator's changes (docs/cli.md, "wasmkeep class"); each a RolloutChange.
// VERSION at PERCENT: 100 makes it stable (no candidate); 1..99 makes it the candidate (the
// stable version staying); 0 ends the candidate. Clears a pause and the version's failures.
RolloutChange SetShare(VersionNumber version, std::uint32_t percent);
RolloutChange Pin(std::string actor_name, VersionNumber version);
RolloutChange Unpin(std::string actor_name);
// Marks `version` broken: its actors run `run` (0: the stable version at the time).
RolloutChange MarkBroken(VersionNumber version, VersionNumber run);
RolloutChange ClearBroken(VersionNumber version);
RolloutChange Pause(std::string reason);
// A node's report of one failed migration to `version`: counted, and the rollout paused once
// the count reaches the failure limit (when `version` is still the candidate).
RolloutChange CountFailure(VersionNumber version, std::string detail, std::uint64_t count = 1);

}  // namespace wk::control
