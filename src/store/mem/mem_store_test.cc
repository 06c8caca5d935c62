// Unit tests of mem:// specific behaviour: fault injection in virtual time. The shared
// semantics (conditions, listing) are in the conformance suite (store/conformance_test.cc).
#include "store/mem/mem_store.h"

#include <gtest/gtest.h>

#include "store/testing/mem_fixture.h"

namespace wk {
namespace {

using std::chrono::milliseconds;

using Fixture = MemStoreFixture;

TEST(MemStoreTest, DelayedWriteIsAppliedAfterTheCallerGaveUp) {
  Fixture f;
  f.store.set_fault_hook([](const OpInfo& op) {
    OpFault fault;
    if (op.op == StoreOp::kPut) fault.request_delay = milliseconds(500);
    return fault;
  });
  CallOptions call{milliseconds(100)};
  auto put = f.env.Spawn(
      [](Fixture* fx, CallOptions c) -> Task<void> {
        auto r = co_await fx->store.Put("k", "late", Precondition::IfNoneMatchAny(), c);
        EXPECT_EQ(r.code(), Code::kUnknownOutcome);
        // At the deadline the write has not been applied yet...
        EXPECT_EQ(fx->bucket->objects().count("k"), 0u);
      }(&f, call),
      "put");
  f.world.RunUntilIdle();
  EXPECT_TRUE(put.done());
  // ...but it lands later: a lost caller does not mean a lost write.
  ASSERT_EQ(f.bucket->objects().count("k"), 1u);
  EXPECT_EQ(f.bucket->objects().at("k").body, "late");
}

TEST(MemStoreTest, LostReplyMeansAppliedButUnknown) {
  Fixture f;
  f.store.set_fault_hook([](const OpInfo&) {
    OpFault fault;
    fault.lose_reply = true;
    return fault;
  });
  auto r = f.Run(f.store.Put("k", "v", Precondition::None(), CallOptions{milliseconds(250)}));
  EXPECT_EQ(r.code(), Code::kUnknownOutcome);
  EXPECT_EQ(f.world.Now().time_since_epoch(), milliseconds(250));  // waited to the deadline
  EXPECT_EQ(f.bucket->objects().count("k"), 1u);
}

TEST(MemStoreTest, FailureBeforeApplyChangesNothing) {
  Fixture f;
  f.store.set_fault_hook([](const OpInfo&) {
    OpFault fault;
    fault.fail_before_apply = Retryable("throttled");
    return fault;
  });
  auto r = f.Run(f.store.Put("k", "v", Precondition::None(), {}));
  EXPECT_EQ(r.code(), Code::kRetryable);
  EXPECT_TRUE(f.bucket->objects().empty());
}

TEST(MemStoreTest, ReplyDelayWithinDeadlineDelivers) {
  Fixture f;
  f.store.set_fault_hook([](const OpInfo&) {
    OpFault fault;
    fault.request_delay = milliseconds(10);
    fault.reply_delay = milliseconds(20);
    return fault;
  });
  auto r = f.Run(f.store.Put("k", "v", Precondition::None(), CallOptions{milliseconds(100)}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(f.world.Now().time_since_epoch(), milliseconds(30));
  auto g = f.Run(f.store.Get("k", {}));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->version, *r);
}

TEST(MemStoreTest, CancelledWriteIsUnknownCancelledReadIsCancelled) {
  Fixture f;
  f.store.set_fault_hook([](const OpInfo&) {
    OpFault fault;
    fault.request_delay = milliseconds(50);
    return fault;
  });
  Code write_code = Code::kOk, read_code = Code::kOk;
  auto w = f.env.Spawn([](Fixture* fx, Code* c) -> Task<void> {
    *c = (co_await fx->store.Put("k", "v", Precondition::None(), {})).code();
  }(&f, &write_code), "w");
  auto r = f.env.Spawn([](Fixture* fx, Code* c) -> Task<void> {
    *c = (co_await fx->store.Get("k", {})).code();
  }(&f, &read_code), "r");
  f.world.RunFor(milliseconds(1));
  w.Cancel();
  r.Cancel();
  f.world.RunUntilIdle();
  EXPECT_EQ(write_code, Code::kUnknownOutcome);
  EXPECT_EQ(read_code, Code::kCancelled);
  EXPECT_EQ(f.bucket->objects().count("k"), 1u);  // the cancelled write still landed
}

TEST(MemStoreTest, VersionsNeverReusedAcrossDeleteAndRecreate) {
  Fixture f;
  std::set<std::string> seen;
  for (int i = 0; i < 5; ++i) {
    auto v = f.Run(f.store.Put("k", "x", Precondition::IfNoneMatchAny(), {}));
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(seen.insert(v->token()).second);
    ASSERT_TRUE(f.Run(f.store.Delete("k", Precondition::IfMatch(*v), {})).ok());
  }
}

TEST(MemStoreTest, CountsRequestsByKind) {
  Fixture f;
  (void)f.Run(f.store.Put("a", "1", Precondition::None(), {}));
  (void)f.Run(f.store.Put("a", "1", Precondition::IfNoneMatchAny(), {}));
  (void)f.Run(f.store.Get("a", {}));
  (void)f.Run(f.store.List(ListOptions{}, {}));
  EXPECT_EQ(f.bucket->counts().put, 2u);
  EXPECT_EQ(f.bucket->counts().precondition_failed, 1u);
  EXPECT_EQ(f.bucket->counts().get, 1u);
  EXPECT_EQ(f.bucket->counts().list, 1u);
}

// A listing reports the bucket's (virtual) wall time at which each write landed, so a write
// delayed in transit carries its landing time, not its sending time.
TEST(MemStoreTest, ListingsCarryTheTimeTheWriteLanded) {
  Fixture f;
  const std::int64_t first = ToUnixMs(f.env.WallNow());
  ASSERT_TRUE(f.Run(f.store.Put("a", "1", Precondition::None(), {})).ok());
  f.store.set_fault_hook([](const OpInfo& op) {
    OpFault fault;
    if (op.op == StoreOp::kPut) fault.request_delay = milliseconds(500);
    return fault;
  });
  ASSERT_TRUE(f.Run(f.store.Put("b", "2", Precondition::None(), {})).ok());
  auto page = f.Run(f.store.List(ListOptions{}, {}));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[0].modified_ms, first);
  EXPECT_EQ(page->entries[1].modified_ms, first + 500);
  EXPECT_EQ(f.bucket->objects().at("b").modified_ms, first + 500);
}

TEST(MemStoreTest, TwoNodesShareOneBucket) {
  SimWorld world(3);
  SimEnv a(world, FromUnixMs(0)), b(world, FromUnixMs(0), milliseconds(900));
  auto bucket = std::make_shared<MemBucket>();
  MemStore sa(a, bucket), sb(b, bucket);
  std::vector<Code> codes;
  for (MemStore* s : {&sa, &sb}) {
    Env& e = s == &sa ? static_cast<Env&>(a) : static_cast<Env&>(b);
    e.Spawn([](MemStore* st, std::vector<Code>* out) -> Task<void> {
      out->push_back((co_await st->Put("nodes/x", "me", Precondition::IfNoneMatchAny(), {})).code());
    }(s, &codes), "race");
  }
  world.RunUntilIdle();
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kPreconditionFailed), 1);
}

}  // namespace
}  // namespace wk
