// StoreWrapper and FaultyStore over mem:// in virtual time: the wrapper forwards what a
// decorator does not override, and FaultyStore's faults reach the caller while the write
// underneath lands (or not) as its spec says.
#include "store/testing/faulty_store.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string_view>

#include "base/check.h"
#include "store/testing/mem_fixture.h"
#include "store/store_wrapper.h"

namespace wk {
namespace {

using std::chrono::milliseconds;

struct Fixture : MemStoreFixture {
  Fixture() : MemStoreFixture(7) {}

  // A FaultyStore with spec (REQUIRES, checked: a valid one) over a MemStore of the bucket.
  std::unique_ptr<FaultyStore> Faulty(std::string_view spec) {
    auto parsed = ParseFaultSpec(spec);
    WK_CHECK(parsed.ok(), parsed.status().ToString());
    return std::make_unique<FaultyStore>(env, std::make_unique<MemStore>(env, bucket), *parsed);
  }

  const CallOptions call{milliseconds(100)};
};

// Counts puts and changes nothing else.
class PutCounter final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                            CallOptions options) override {
    ++puts;
    return StoreWrapper::Put(std::move(key), std::move(body), std::move(condition), options);
  }
  int puts = 0;
};

TEST(StoreWrapperTest, ForwardsWhatTheDecoratorDoesNotOverride) {
  Fixture f;
  MemStore& mem = f.store;
  PutCounter counter(mem);
  const CallOptions call = f.call;
  auto put = f.Run(counter.Put("k", "v", Precondition::IfNoneMatchAny(), call));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(counter.puts, 1);
  auto got = f.Run(counter.Get("k", call));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->body, "v");
  auto head = f.Run(counter.Head("k", call));
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->version, put.value());
  auto list = f.Run(counter.List(ListOptions{}, call));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->entries.size(), 1u);
  EXPECT_TRUE(f.Run(counter.Delete("k", Precondition::IfMatch(put.value()), call)).ok());
  EXPECT_EQ(f.bucket->objects().count("k"), 0u);
  EXPECT_EQ(counter.Describe(), mem.Describe());
  EXPECT_EQ(counter.SupportsConditionalDelete(), mem.SupportsConditionalDelete());
}

TEST(FaultyStoreTest, LostReplyLandsTheWriteButReportsUnknown) {
  Fixture f;
  auto store = f.Faulty("lose_put_reply=2");
  EXPECT_TRUE(f.Run(store->Put("a", "1", Precondition::None(), f.call)).ok());
  EXPECT_EQ(f.Run(store->Put("b", "2", Precondition::None(), f.call)).code(), Code::kUnknownOutcome);
  EXPECT_EQ(f.bucket->objects().count("b"), 1u);  // applied all the same
  EXPECT_EQ(store->lost_replies(), 1u);
  EXPECT_NE(store->Describe().find("injected faults"), std::string::npos);
}

TEST(FaultyStoreTest, LostFirstPutIsNotAppliedAndItsReadFailsOnce) {
  Fixture f;
  auto store = f.Faulty("lost_first_put=owners/");
  EXPECT_EQ(f.Run(store->Put("owners/x", "1", Precondition::IfNoneMatchAny(), f.call)).code(), Code::kUnknownOutcome);
  EXPECT_EQ(f.bucket->objects().count("owners/x"), 0u);
  EXPECT_EQ(f.Run(store->Get("owners/x", f.call)).code(), Code::kRetryable);
  EXPECT_EQ(f.Run(store->Get("owners/x", f.call)).code(), Code::kNotFound);
}

TEST(FaultyStoreTest, AnOutageLimitedToABodyRefusesOnlyThosePuts) {
  Fixture f;
  const std::string file = "/tmp/wasmkeep-faulty-store-test-" + std::to_string(::getpid());
  auto store = f.Faulty("outage_file=" + file + ",outage_prefix=owners/,outage_body=owner nobody");
  { std::FILE* fp = std::fopen(file.c_str(), "w"); ASSERT_NE(fp, nullptr); std::fclose(fp); }
  EXPECT_TRUE(f.Run(store->Put("owners/x", "owner a i\n", Precondition::None(), f.call)).ok());
  EXPECT_EQ(f.Run(store->Put("owners/x", "owner nobody\n", Precondition::None(), f.call)).code(), Code::kRetryable);
  EXPECT_TRUE(f.Run(store->Get("owners/x", f.call)).ok());
  std::remove(file.c_str());
  EXPECT_TRUE(f.Run(store->Put("owners/x", "owner nobody\n", Precondition::None(), f.call)).ok());
}

TEST(FaultyStoreTest, AHeldPutIsSentWhenTheFileGoesAndASlowReplyLandsFirst) {
  Fixture f;
  const std::string file = "/tmp/wasmkeep-faulty-store-hold-" + std::to_string(::getpid());
  auto store = f.Faulty("hold_file=" + file + ",hold_prefix=nodes/,slow_reply_ms=500,slow_reply_prefix=owners/");
  { std::FILE* fp = std::fopen(file.c_str(), "w"); ASSERT_NE(fp, nullptr); std::fclose(fp); }
  std::optional<Result<Version>> held;
  f.env.Spawn([](FaultyStore* s, std::optional<Result<Version>>* out) -> Task<void> {
    out->emplace(co_await s->Put("nodes/a", "1", Precondition::None(), CallOptions{std::chrono::seconds(30)}));
  }(store.get(), &held), "held put");
  f.world.RunFor(milliseconds(300));
  EXPECT_FALSE(held.has_value());
  EXPECT_EQ(f.bucket->objects().count("nodes/a"), 0u) << "not sent while the file exists";
  std::remove(file.c_str());
  f.world.RunFor(milliseconds(100));
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(held->ok());
  std::optional<Result<Version>> slow;
  f.env.Spawn([](FaultyStore* s, std::optional<Result<Version>>* out) -> Task<void> {
    out->emplace(co_await s->Put("owners/x", "1", Precondition::None(), CallOptions{std::chrono::seconds(30)}));
  }(store.get(), &slow), "slow reply");
  f.world.RunFor(milliseconds(100));
  EXPECT_EQ(f.bucket->objects().count("owners/x"), 1u) << "applied at once";
  EXPECT_FALSE(slow.has_value()) << "answered later";
  f.world.RunFor(milliseconds(500));
  ASSERT_TRUE(slow.has_value());
  EXPECT_TRUE(slow->ok());
}

TEST(FaultyStoreTest, BadSpecNamesTheItem) {
  auto spec = ParseFaultSpec("lose_put_reply=x");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().ToString().find("lose_put_reply"), std::string::npos);
}

}  // namespace
}  // namespace wk
