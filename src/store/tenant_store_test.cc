// TenantStores over a CountingStore over mem:// in virtual time: a tenant's views report
// each completed request once (purpose, operation, outcome, bytes) under that tenant only,
// retries included; the node's counting sees every request exactly as without them; a
// system actor's store is the node's; a report after the sink is gone goes nowhere.
#include "store/tenant_store.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "store/testing/mem_fixture.h"

namespace wk {
namespace {

using std::chrono::milliseconds;

struct Seen {
  std::string tenant;
  BucketPurpose purpose;
  BucketOp op;
  Code code;
  std::uint64_t sent;
  std::uint64_t received;
};

struct Fixture : MemStoreFixture {
  Fixture() : MemStoreFixture(13) {}
  const CallOptions call{milliseconds(100)};
};

TEST(TenantStoresTest, ATenantsViewsReportEachCompletedRequestUnderItsPurpose) {
  Fixture f;
  // Replies of "lost" never arrive (unknown outcome); "flaky" fails before it is applied.
  MemStore inner(f.env, f.bucket, [](const OpInfo& op) {
    OpFault fault;
    fault.lose_reply = op.key == "lost";
    if (op.key == "flaky") fault.fail_before_apply = Retryable("throttled");
    return fault;
  });
  CountingStore counting(inner);
  TenantStores tenants(counting);
  std::vector<Seen> seen;
  tenants.set_sink([&seen](const TenantRequest& r) {
    seen.push_back(Seen{std::string(r.tenant), r.purpose, r.op, r.code, r.sent_bytes, r.received_bytes});
  });
  ObjectStore& acme = tenants.For("acme");
  EXPECT_EQ(&acme, &tenants.For("acme")) << "one store per tenant";
  ObjectStore& segment = acme.ForPurpose(BucketPurpose::kSegment);
  EXPECT_EQ(&segment, &acme.ForPurpose(BucketPurpose::kSegment));
  EXPECT_EQ(&segment.ForPurpose(BucketPurpose::kGc), &acme.ForPurpose(BucketPurpose::kGc)) << "siblings";
  EXPECT_NE(&tenants.For("beta").ForPurpose(BucketPurpose::kSegment), &segment);
  EXPECT_EQ(&tenants.Of(ActorId{"acme", "counter", "a"}), &acme);
  EXPECT_EQ(&tenants.Of(ActorId{"_alarms", "shard", "3"}), &counting) << "a system actor is the node's";

  f.Run([&]() -> Task<int> {
    auto put = co_await segment.Put("wal/acme/counter/a/1", "12345", Precondition::IfNoneMatchAny(), f.call);
    EXPECT_TRUE(put.ok());
    // A retry is a request of its own.
    for (int i = 0; i < 3; ++i) {
      auto flaky = co_await segment.Put("flaky", "xy", Precondition::None(), f.call);
      EXPECT_EQ(flaky.code(), Code::kRetryable);
    }
    auto unknown = co_await segment.Put("lost", "abc", Precondition::None(), f.call);
    EXPECT_EQ(unknown.code(), Code::kUnknownOutcome);
    ObjectStore& restore = acme.ForPurpose(BucketPurpose::kRestore);
    ListOptions options;  // named: GCC 12 mishandles a braced temporary in a co_await
    options.prefix = "wal/acme/";
    auto page = co_await restore.List(options, f.call);
    EXPECT_TRUE(page.ok());
    auto got = co_await restore.Get("wal/acme/counter/a/1", f.call);
    EXPECT_TRUE(got.ok());
    auto missing = co_await restore.Head("wal/acme/counter/a/2", f.call);
    EXPECT_EQ(missing.code(), Code::kNotFound);
    Status gone = co_await acme.ForPurpose(BucketPurpose::kGc).Delete("wal/acme/counter/a/1", Precondition::None(), f.call);
    EXPECT_TRUE(gone.ok());
    // The node's own request (the root's view of the lease): nobody's.
    auto lease = co_await counting.ForPurpose(BucketPurpose::kLease).Put("nodes/n", "x", Precondition::None(), f.call);
    EXPECT_TRUE(lease.ok());
    // Beta's.
    auto other = co_await tenants.For("beta").ForPurpose(BucketPurpose::kOwner).Get("owners/beta/c/x", f.call);
    EXPECT_EQ(other.code(), Code::kNotFound);
    co_return 0;
  }());

  ASSERT_EQ(seen.size(), 10u);
  std::map<std::string, std::map<BucketPurpose, int>> by;
  for (const Seen& s : seen) ++by[s.tenant][s.purpose];
  EXPECT_EQ(by["acme"][BucketPurpose::kSegment], 5) << "one put, three failed tries, one unknown";
  EXPECT_EQ(by["acme"][BucketPurpose::kRestore], 3);
  EXPECT_EQ(by["acme"][BucketPurpose::kGc], 1);
  EXPECT_EQ(by["beta"][BucketPurpose::kOwner], 1);
  EXPECT_EQ(by.size(), 2u) << "the lease write is no tenant's";
  // Outcomes and bytes as the call completed.
  EXPECT_EQ(seen[0].op, BucketOp::kPut);
  EXPECT_EQ(seen[0].code, Code::kOk);
  EXPECT_EQ(seen[0].sent, 5u);
  EXPECT_EQ(seen[1].code, Code::kRetryable);
  EXPECT_EQ(seen[4].code, Code::kUnknownOutcome);
  EXPECT_EQ(seen[5].op, BucketOp::kList);
  EXPECT_EQ(seen[5].received, std::string("wal/acme/counter/a/1").size());
  EXPECT_EQ(seen[6].op, BucketOp::kGet);
  EXPECT_EQ(seen[6].received, 5u);
  EXPECT_EQ(seen[7].op, BucketOp::kHead);
  EXPECT_EQ(seen[7].code, Code::kNotFound);
  EXPECT_EQ(seen[8].op, BucketOp::kDelete);

  // The node's counting is unchanged by the tenant views: every request under its purpose.
  const BucketRequestStats& stats = counting.stats();
  EXPECT_EQ(stats.Requests(BucketPurpose::kSegment), 5u);
  EXPECT_EQ(stats.Requests(BucketPurpose::kRestore), 3u);
  EXPECT_EQ(stats.Requests(BucketPurpose::kGc), 1u);
  EXPECT_EQ(stats.Requests(BucketPurpose::kLease), 1u);
  EXPECT_EQ(stats.Requests(BucketPurpose::kOwner), 1u);
  EXPECT_EQ(stats.Requests(BucketPurpose::kOther), 0u);
  EXPECT_EQ(stats.Total(), 11u);
}

TEST(TenantStoresTest, ACallCompletingAfterTheStoresWentIsNotReported) {
  Fixture f;
  CountingStore counting(f.store);
  std::vector<std::string> seen;
  auto tenants = std::make_unique<TenantStores>(counting);
  tenants->set_sink([&seen](const TenantRequest& r) { seen.emplace_back(r.tenant); });
  ObjectStore& snapshot = tenants->For("acme").ForPurpose(BucketPurpose::kSnapshot);
  f.Run([&]() -> Task<int> {
    auto first = co_await snapshot.Put("snapshot/acme/c/a/1", "s", Precondition::None(), f.call);
    EXPECT_TRUE(first.ok());
    // The call is made, then the TenantStores goes before it completes (the view it came
    // from included: the call keeps nothing of it).
    Task<Result<Version>> late = snapshot.Put("snapshot/acme/c/a/2", "s", Precondition::None(), f.call);
    tenants.reset();
    auto second = co_await std::move(late);
    EXPECT_TRUE(second.ok());
    co_return 0;
  }());
  EXPECT_EQ(seen, std::vector<std::string>{"acme"});
  EXPECT_EQ(counting.stats().Requests(BucketPurpose::kSnapshot), 2u) << "the node counted both";
}

}  // namespace
}  // namespace wk
