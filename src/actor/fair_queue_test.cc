// FairQueue (docs/tenants.md, "Fair shares"): a tenant that floods a worker delays another's
// job by at most one job, busy tenants share by weight, each tenant's jobs stay in order, and
// idleness is not saved up. The broken model fair-share-off (first come, first served) fails
// the first.
#include "actor/fair_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace wk::actor {
namespace {

using std::chrono::milliseconds;

BrokenModels FromEnvironment() {
  auto b = BrokenModels::FromEnvironment();
  return b.ok() ? *b : BrokenModels{};
}

// Runs every queued job (each costs `cost` of its tenant's), recording who ran, in order.
std::vector<std::string> Drain(FairQueue<int>& q, const std::map<std::string, Duration>& cost) {
  std::vector<std::string> order;
  while (auto next = q.Pop()) {
    order.push_back(next->tenant);
    q.Charge(next->tenant, cost.at(next->tenant));
  }
  return order;
}

TEST(FairQueueTest, AFloodingTenantDelaysAnothersJobByAtMostOneOfItsOwn) {
  FairQueue<int> q(FromEnvironment());
  for (int i = 0; i < 200; ++i) q.Push("noisy", 1, i);  // queued first, all of them
  // One of noisy's jobs runs; then quiet's arrives behind 199.
  auto first = q.Pop();
  ASSERT_TRUE(first.has_value());
  q.Charge(first->tenant, milliseconds(20));
  q.Push("quiet", 1, 0);
  const std::vector<std::string> order = Drain(q, {{"noisy", milliseconds(20)}, {"quiet", milliseconds(1)}});
  const auto at = std::find(order.begin(), order.end(), "quiet") - order.begin();
  EXPECT_LE(at, 1) << "quiet's job ran after " << at << " of noisy's";
}

// What wasmkeep_fair_share_jobs_ahead counts: the jobs that ran before a job of an idle
// tenant, at most one of each other busy tenant; none measured for a tenant's backlog.
TEST(FairQueueTest, AnIdleTenantsJobCountsTheJobsThatRanAheadOfIt) {
  FairQueue<int> q(FromEnvironment());
  for (int i = 0; i < 50; ++i) q.Push("a", 1, i);
  for (int i = 0; i < 50; ++i) q.Push("b", 1, i);
  auto running = q.Pop();  // a's first runs; quiet arrives behind 99
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->ahead, 0u) << "a's first job met an empty queue";
  q.Push("quiet", 1, 0);
  q.Charge(running->tenant, milliseconds(20));
  std::optional<std::size_t> quiet_ahead;
  std::size_t measured = 0;
  while (auto next = q.Pop()) {
    if (next->ahead) ++measured;
    if (next->tenant == "quiet") quiet_ahead = next->ahead;
    q.Charge(next->tenant, milliseconds(next->tenant == "quiet" ? 1 : 20));
  }
  ASSERT_TRUE(quiet_ahead.has_value());
  EXPECT_LE(*quiet_ahead, 2u) << "quiet waited behind " << *quiet_ahead << " jobs of the two busy tenants";
  // a's and b's first jobs met their tenant's empty queue; the rest were backlog.
  EXPECT_EQ(measured, 2u);
}

TEST(FairQueueTest, BusyTenantsShareByWeightAndKeepTheirOrder) {
  FairQueue<int> q(FromEnvironment());
  for (int i = 0; i < 400; ++i) {
    q.Push("a", 3, i);
    q.Push("b", 1, i);
  }
  std::map<std::string, int> ran;
  std::map<std::string, int> last{{"a", -1}, {"b", -1}};
  for (int k = 0; k < 400; ++k) {
    auto next = q.Pop();
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->job, last[next->tenant] + 1) << "a tenant's jobs out of order";
    last[next->tenant] = next->job;
    ++ran[next->tenant];
    q.Charge(next->tenant, milliseconds(10));
  }
  // Of the first 400 jobs (equal cost), a weight of 3 against 1 runs three in four.
  EXPECT_NEAR(ran["a"], 300, 2);
  EXPECT_NEAR(ran["b"], 100, 2);
}

TEST(FairQueueTest, IdlenessIsNotSavedUpAsCredit) {
  FairQueue<int> q(FromEnvironment());
  // "early" runs alone for a while; "late" then arrives and must not get the whole worker
  // until it has caught up with the time early used.
  for (int i = 0; i < 50; ++i) q.Push("early", 1, i);
  for (int i = 0; i < 25; ++i) {
    auto next = q.Pop();
    q.Charge(next->tenant, milliseconds(10));
  }
  for (int i = 0; i < 50; ++i) q.Push("late", 1, i);
  std::map<std::string, int> ran;
  for (int k = 0; k < 20; ++k) {
    auto next = q.Pop();
    ++ran[next->tenant];
    q.Charge(next->tenant, milliseconds(10));
  }
  EXPECT_NEAR(ran["late"], 10, 1) << "the newcomer took " << ran["late"] << " of 20";
  EXPECT_EQ(q.size(), 55u);
}

}  // namespace
}  // namespace wk::actor
