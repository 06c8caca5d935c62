// The stored-bytes ledger on mem:// in virtual time (control/stored_ledger.h): the record's
// strict format; a node writes only what changed, continues its own record after a restart
// instead of overwriting it, and sums the other nodes' records for a tenant with a quota;
// the records' sum is the tenant's stored bytes (what `tenant quotas` prints).
#include "control/stored_ledger.h"

#include <gtest/gtest.h>

#include "control/testing/fixture.h"

namespace wk::control {
namespace {

// One node's counts as the runtime keeps them (actor/stored_quota.h), reduced to the hooks.
struct Counts {
  std::map<std::string, StoredLedgerHooks::Own> own;
  std::map<std::string, std::int64_t> others;
  std::vector<std::string> limited;
  StoredLedgerHooks Hooks() {
    StoredLedgerHooks h;
    h.own = [this] { return own; };
    h.load_base = [this](const std::string& t, std::int64_t base) {
      auto& o = own[t];
      if (o.base_loaded) return;
      o.bytes += base;
      o.base_loaded = true;
    };
    h.set_others = [this](const std::string& t, std::int64_t b) { others[t] = b; };
    h.limited = [this] { return limited; };
    return h;
  }
};

using StoredLedgerTest = ControlTest;

TEST_F(StoredLedgerTest, TheRecordIsStrict) {
  StoredRecord r{"acme", "node-a", -42, FromUnixMs(1'764'000'000'000)};
  const std::string body = EncodeStored(r);
  EXPECT_EQ(body, "wasmkeep-stored 1\ntenant acme\nnode node-a\nbytes -42\nupdated_at 1764000000000\n");
  auto back = DecodeStored(body, "acme", "node-a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  ExpectRefused([](std::string_view b) { return DecodeStored(b, "acme", "node-a"); },
                {{"wasmkeep-stored 1\ntenant beta\nnode node-a\nbytes 1\nupdated_at 1\n", "another tenant"},
                 {"wasmkeep-stored 1\ntenant acme\nnode node-b\nbytes 1\nupdated_at 1\n", "another node"},
                 {"wasmkeep-stored 1\ntenant acme\nnode node-a\nbytes lots\nupdated_at 1\n", "bytes"},
                 {"wasmkeep-stored 1\ntenant acme\nnode node-a\nbytes 1\nupdated_at 1\nextra 1\n", "unexpected"}});
}

TEST_F(StoredLedgerTest, ANodeWritesWhatChangedAndContinuesItsRecordAfterARestart) {
  Counts a;
  a.own["acme"] = {1000, false};
  {
    StoredLedger ledger(env, store, "node-a", std::chrono::seconds(5), std::chrono::seconds(60), a.Hooks());
    ASSERT_TRUE(Run(ledger.Tick()).ok());
    EXPECT_EQ(ledger.stats().writes, 1u);
    ASSERT_TRUE(Run(ledger.Tick()).ok());  // nothing changed: nothing written
    EXPECT_EQ(ledger.stats().writes, 1u);
  }
  EXPECT_EQ(Run(ReadStoredBytes(store, "acme")).value(), 1000);
  // A new process of node-a counts 250 more: its record continues at 1250.
  Counts again;
  again.own["acme"] = {250, false};
  StoredLedger ledger(env, store, "node-a", std::chrono::seconds(5), std::chrono::seconds(60), again.Hooks());
  ASSERT_TRUE(Run(ledger.Tick()).ok());
  EXPECT_EQ(Run(ReadStoredBytes(store, "acme")).value(), 1250);
  EXPECT_TRUE(again.own["acme"].base_loaded);
  EXPECT_EQ(again.own["acme"].bytes, 1250);
}

TEST_F(StoredLedgerTest, ATenantWithAQuotaLearnsTheOtherNodesSum) {
  Counts a, b;
  a.own["acme"] = {700, true};
  b.own["acme"] = {-200, true};  // b deleted some of what a wrote
  b.limited = {"acme"};
  StoredLedger la(env, store, "node-a", std::chrono::seconds(5), std::chrono::seconds(60), a.Hooks());
  StoredLedger lb(env, store, "node-b", std::chrono::seconds(5), std::chrono::seconds(60), b.Hooks());
  ASSERT_TRUE(Run(la.Tick()).ok());
  ASSERT_TRUE(Run(lb.Tick()).ok());
  EXPECT_EQ(b.others["acme"], 700);
  EXPECT_EQ(Run(ReadStoredBytes(store, "acme")).value(), 500);
  // A tenant without a quota is written at most every quiet period.
  a.own["acme"].bytes = 900;
  ASSERT_TRUE(Run(la.Tick()).ok());
  EXPECT_EQ(Run(ReadStoredBytes(store, "acme")).value(), 500);
  world.RunFor(std::chrono::seconds(61));
  ASSERT_TRUE(Run(la.Tick()).ok());
  EXPECT_EQ(Run(ReadStoredBytes(store, "acme")).value(), 700);
  ASSERT_TRUE(Run(lb.Tick()).ok());
  EXPECT_EQ(b.others["acme"], 900);
  // A corrupt record is left out of the sum and counted.
  Corrupt(StoredKey("acme", "node-c"), "wasmkeep-stored 1\ntenant acme\n");
  ASSERT_TRUE(Run(lb.Tick()).ok());
  EXPECT_EQ(b.others["acme"], 900);
  EXPECT_EQ(lb.stats().corrupt, 1u);
}

}  // namespace
}  // namespace wk::control
