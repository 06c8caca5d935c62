// Class versions in the runtime (docs/tenants.md, "Class versions"), with the upgrade probe
// (examples/testdata/upgrade_probe.h: one class in three versions, v2 and v3 migrating) run
// through the actor harness, the version each actor runs chosen by control::ChooseVersion:
// a rollout's share, each state migrated once in a batch of its own before its first event on
// the new version, a failed migration keeping nothing, a rollback and a version marked broken.
// The broken model upgrade-outside-batch (scripts/check-proofs.sh) fails
// ClassVersionsRuntimeTest.TheMarkCommitsWithTheMigrationSoARestartNeverMigratesAgain.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actor/storage.h"
#include "actor/testing/harness.h"
#include "control/class_versions.h"

#ifndef WK_ACTORS_DIR
#error "WK_ACTORS_DIR must name the directory of the built actors (examples/CMakeLists.txt)"
#endif

namespace wk {
namespace {

using actor::testing::Harness;
using actor::testing::MakeRequest;

std::string Wasm(const std::string& name) { return std::string(WK_ACTORS_DIR) + "/" + name + ".wasm"; }

class ClassVersionsRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (std::uint32_t v = 1; v <= 3; ++v) harness_.DeployVersion("probe", v, Wasm("upgrade_v" + std::to_string(v)));
    Rollout(1, 0, 0);
  }
  // The class's rollout, as the nodes apply it (control::ChooseVersion).
  void Rollout(control::VersionNumber stable, control::VersionNumber candidate, std::uint32_t percent,
               std::map<control::VersionNumber, control::VersionNumber> broken = {}) {
    control::Rollout r;
    r.stable = stable;
    r.candidate = candidate;
    r.percent = percent;
    r.broken = std::move(broken);
    ASSERT_TRUE(control::ValidateRollout(r).ok()) << control::ValidateRollout(r).ToString();
    harness_.SetChooser(
        "probe",
        [r](std::string_view name, std::uint32_t mark, bool empty) {
          const control::VersionChoice c = control::ChooseVersion(r, name, mark, empty);
          return actor::VersionPick{c.run, c.upgrade_from, c.no_fallback};
        },
        stable);
  }
  std::string Get(const std::string& name) {
    auto r = harness_.Call("acme/probe/" + name, MakeRequest("GET", "/"));
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    return r.ok() ? r->body : "";
  }
  void Inc(const std::string& name, int times) {
    for (int i = 0; i < times; ++i) {
      auto r = harness_.Call("acme/probe/" + name, MakeRequest("POST", "/inc"));
      EXPECT_TRUE(r.ok() && r->status == 200) << name << ": " << (r.ok() ? r->body : r.status().ToString());
    }
  }
  void Restart(const std::string& name) {
    const ActorId id{"acme", "probe", name};
    harness_.runtime().Unload(id);
    for (int i = 0; i < 400 && harness_.runtime().IsResident(id); ++i) harness_.RunFor(std::chrono::milliseconds(5));
    ASSERT_FALSE(harness_.runtime().IsResident(id));
  }
  Harness harness_;
};

TEST_F(ClassVersionsRuntimeTest, ARolloutMigratesEachStateOnceBeforeItsFirstEventOnTheNewVersion) {
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) names.push_back("a" + std::to_string(i));
  for (std::size_t i = 0; i < names.size(); ++i) Inc(names[i], static_cast<int>(i % 3) + 1);
  for (const auto& n : names) EXPECT_TRUE(Get(n).starts_with("v1 ")) << n;

  Rollout(1, 2, 50);
  int on_two = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string count = std::to_string(i % 3 + 1);
    const std::string got = Get(names[i]);
    if (got.starts_with("v2 ")) {
      ++on_two;
      // v2 reads only its own format: the count survived only through the migration.
      EXPECT_EQ(got, "v2 n=" + count + " migrations=1>2\n") << names[i];
    } else {
      EXPECT_EQ(got, "v1 n=" + count + " migrations=\n") << names[i];
    }
  }
  EXPECT_GT(on_two, 3);
  EXPECT_LT(on_two, 17);
  EXPECT_EQ(harness_.upgrades().size(), static_cast<std::size_t>(on_two));

  // All of them: the rest migrate now, the first ones not again (resident or restarted).
  for (std::size_t i = 0; i < names.size(); i += 2) Restart(names[i]);
  Rollout(2, 0, 0);
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(Get(names[i]), "v2 n=" + std::to_string(i % 3 + 1) + " migrations=1>2\n") << names[i];
  }
  EXPECT_EQ(harness_.upgrades().size(), names.size());
  for (const auto& u : harness_.upgrades()) EXPECT_TRUE(u.ok && u.from == 1 && u.to == 2) << u.error;
  // A new actor has nothing to migrate: it starts on v2.
  EXPECT_EQ(Get("fresh"), "v2 n=0 migrations=\n");
  EXPECT_EQ(harness_.upgrades().size(), names.size());
}

TEST_F(ClassVersionsRuntimeTest, AFailedMigrationKeepsNothingAndTheActorAnswersOnItsVersion) {
  Inc("odd", 3);
  Inc("even", 2);
  Rollout(2, 0, 0);
  EXPECT_EQ(Get("odd"), "v2 n=3 migrations=1>2\n");
  EXPECT_EQ(Get("even"), "v2 n=2 migrations=1>2\n");
  // v3's migration fails on an odd count, after writing a key.
  Rollout(3, 0, 0);
  EXPECT_EQ(Get("odd"), "v2 n=3 migrations=1>2\n") << "on v2, its state as v2 left it";
  EXPECT_EQ(Get("even"), "v3 n=2 migrations=1>2,2>3\n");
  ASSERT_EQ(harness_.upgrades().size(), 4u);
  const actor::UpgradeReport& failed = harness_.upgrades()[2];
  EXPECT_EQ(failed.id.name, "odd");
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.error, "wk_on_upgrade returned 1");
  // Not tried again in this residency; still writable on v2, in v2's format.
  Inc("odd", 1);
  EXPECT_EQ(Get("odd"), "v2 n=4 migrations=1>2\n");
  EXPECT_EQ(harness_.upgrades().size(), 4u);
  // After a restart it is tried again, and an even count now migrates.
  Restart("odd");
  EXPECT_EQ(Get("odd"), "v3 n=4 migrations=1>2,2>3\n");
  auto state = harness_.storage().State(ActorId{"acme", "probe", "odd"});
  ASSERT_NE(state, nullptr);
  EXPECT_FALSE(state->map.Get("half-done").has_value()) << "the failed migration's write was kept";
}

TEST_F(ClassVersionsRuntimeTest, ARollbackKeepsMigratedActorsOnTheirVersionUnlessItIsMarkedBroken) {
  Inc("x", 2);
  Rollout(3, 0, 0);
  EXPECT_EQ(Get("x"), "v3 n=2 migrations=1>3\n");
  // Rolled back to 2: x's state was committed by 3, which still runs it.
  Rollout(2, 0, 0);
  EXPECT_EQ(Get("x"), "v3 n=2 migrations=1>3\n");
  EXPECT_EQ(Get("new"), "v2 n=0 migrations=\n");
  // 3 marked broken, its actors to run 2: x runs v2 on the state v3 left.
  Rollout(2, 0, 0, {{3, 2}});
  EXPECT_EQ(Get("x"), "v2 n=2 migrations=1>3\n");
  Inc("x", 1);
  EXPECT_EQ(Get("x"), "v2 n=3 migrations=1>3\n");
  EXPECT_EQ(harness_.upgrades().size(), 1u) << "a downgrade runs no migration";
}

// No broken model switches this rule off yet (docs/STATUS.md, "Class versions"): it holds by
// ChooseVersion's no_fallback and the executor's refusal.
TEST_F(ClassVersionsRuntimeTest, AFailedMigrationOfABrokenVersionsStateRunsNothing) {
  Inc("odd", 1);
  Rollout(2, 0, 0);
  EXPECT_EQ(Get("odd"), "v2 n=1 migrations=1>2\n");
  // 2 marked broken, its actors to run 3, whose migration fails on an odd count: nothing
  // may run that state (not 2: broken), so its events are refused.
  Rollout(1, 0, 0, {{2, 3}});
  auto r = harness_.Call("acme/probe/odd", MakeRequest("GET", "/"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("marked broken"), std::string::npos) << r.status().ToString();
  // The operator clears the mark: it answers on 2 again, its state as it was.
  Rollout(1, 0, 0);
  EXPECT_EQ(Get("odd"), "v2 n=1 migrations=1>2\n");
}

TEST_F(ClassVersionsRuntimeTest, TheMarkCommitsWithTheMigrationSoARestartNeverMigratesAgain) {
  Inc("m", 5);
  Rollout(2, 0, 0);
  EXPECT_EQ(Get("m"), "v2 n=5 migrations=1>2\n");  // the migration, then a read: nothing more committed
  Restart("m");
  EXPECT_EQ(Get("m"), "v2 n=5 migrations=1>2\n") << "migrated again after a restart";
  auto state = harness_.storage().State(ActorId{"acme", "probe", "m"});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->map.GetSystem(actor::kClassVersionKey), "2");
}

}  // namespace
}  // namespace wk
