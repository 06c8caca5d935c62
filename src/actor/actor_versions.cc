#include "actor/actor_versions.h"

#include <string>

namespace wk::actor {

bool StoresNothing(const ActorStorage& storage) { return storage.StoredBytes() == 0 && !storage.Alarm().has_value(); }

std::vector<std::uint32_t> VersionsNeeded(const VersionPick& pick, const VersionLoaded& loaded) {
  std::vector<std::uint32_t> missing;
  if (!loaded(pick.run)) missing.push_back(pick.run);
  if (pick.upgrade_from && !pick.no_fallback && !loaded(*pick.upgrade_from)) missing.push_back(*pick.upgrade_from);
  return missing;
}

void ActorVersions::Start(const ActorStorage& storage) {
  mark = ParseClassVersion(storage.GetSystem(kClassVersionKey));
  empty = StoresNothing(storage);
  failed.clear();
  converted = 0;
}

bool ActorVersions::Apply(VersionPick pick, const VersionLoaded& loaded, BrokenModels broken) {
  blocked = 0;
  // Broken: the state of a broken version falls back to it when its migration fails.
  if (broken.on(BrokenModel::kBrokenStateRuns)) pick.no_fallback = false;
  // A migration that failed in this residency is not tried again until the actor restarts
  // (or the rollout changes what it chooses): it runs the version its state is at, unless
  // that one is marked broken (its events are refused meanwhile).
  if (pick.upgrade_from && failed.contains(pick.run)) {
    if (pick.no_fallback) {
      blocked = pick.run;
      return false;
    }
    pick = VersionPick{*pick.upgrade_from, std::nullopt, false};
  }
  // Converted already, its mark to follow (only under upgrade-outside-batch: otherwise the
  // mark is the new version's at once).
  if (pick.upgrade_from && converted == pick.run) pick.upgrade_from.reset();
  // Not loaded here (dropped since the start loaded it, say): a version older than its
  // state's is never run instead. Its events wait while the core loads it.
  if (const std::vector<std::uint32_t> need = VersionsNeeded(pick, loaded); !need.empty()) {
    missing = need.front();
    return false;
  }
  missing = 0;
  run = pick.run;
  upgrade_from = pick.upgrade_from;
  no_fallback = pick.no_fallback;
  return true;
}

bool ActorVersions::ApplyUnversioned() {
  blocked = 0;
  upgrade_from.reset();
  // A state a version committed, of a class this node still knows unversioned (read before
  // the first rollout): never run on the unversioned module. Its events wait for the version.
  missing = mark;
  if (missing != 0) return false;
  run = 0;
  return true;
}

void ActorVersions::Mark(Batch& batch) {
  // The first batch a version commits says so (kClassVersionKey): the next start knows what
  // the state was written by, and whether it must be converted.
  if (run == 0 || mark == run || batch.empty()) return;
  batch.system.push_back(Mutation{Mutation::Kind::kPut, std::string(kClassVersionKey), std::to_string(run)});
  mark = run;
}

void ActorVersions::Upgraded(Batch& batch, BrokenModels broken) {
  upgrade_from.reset();
  if (broken.on(BrokenModel::kUpgradeOutsideBatch)) {
    // Broken: the converted state commits without its mark, which waits for the next batch;
    // a restart before it converts the state again.
    converted = run;
    return;
  }
  batch.system.push_back(Mutation{Mutation::Kind::kPut, std::string(kClassVersionKey), std::to_string(run)});
  mark = run;
}

bool ActorVersions::UpgradeFailed() {
  const std::uint32_t from = *upgrade_from;
  upgrade_from.reset();
  failed.insert(run);
  if (no_fallback) {
    blocked = run;
    return false;
  }
  run = from;
  return true;
}

}  // namespace wk::actor
