// StoreWrapper and FaultyStore over mem:// in virtual time: the wrapper forwards what a
// decorator does not override, and FaultyStore's faults reach the caller while the write
// underneath lands (or not) as its spec says.
#include "store/faulty_store.h"

#include <gtest/gtest.h>

#include "env/sim_env.h"
#include "store/mem/mem_store.h"
#include "store/store_wrapper.h"

namespace wk {
namespace {

using std::chrono::milliseconds;

struct Fixture {
  SimWorld world{7};
  SimEnv env{world, FromUnixMs(1'700'000'000'000)};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();

  template <typename T>
  T Run(Task<T> task) {
    auto out = RunTask(world, env, std::move(task));
    EXPECT_TRUE(out.has_value());
    return std::move(*out);
  }
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
  MemStore mem(f.env, f.bucket);
  PutCounter counter(mem);
  const CallOptions call{milliseconds(100)};
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
  auto spec = ParseFaultSpec("lose_put_reply=2");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  FaultyStore store(f.env, std::make_unique<MemStore>(f.env, f.bucket), *spec);
  const CallOptions call{milliseconds(100)};
  EXPECT_TRUE(f.Run(store.Put("a", "1", Precondition::None(), call)).ok());
  EXPECT_EQ(f.Run(store.Put("b", "2", Precondition::None(), call)).code(), Code::kUnknownOutcome);
  EXPECT_EQ(f.bucket->objects().count("b"), 1u);  // applied all the same
  EXPECT_EQ(store.lost_replies(), 1u);
  EXPECT_NE(store.Describe().find("injected faults"), std::string::npos);
}

TEST(FaultyStoreTest, LostFirstPutIsNotAppliedAndItsReadFailsOnce) {
  Fixture f;
  auto spec = ParseFaultSpec("lost_first_put=owners/");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  FaultyStore store(f.env, std::make_unique<MemStore>(f.env, f.bucket), *spec);
  const CallOptions call{milliseconds(100)};
  EXPECT_EQ(f.Run(store.Put("owners/x", "1", Precondition::IfNoneMatchAny(), call)).code(),
            Code::kUnknownOutcome);
  EXPECT_EQ(f.bucket->objects().count("owners/x"), 0u);
  EXPECT_EQ(f.Run(store.Get("owners/x", call)).code(), Code::kRetryable);
  EXPECT_EQ(f.Run(store.Get("owners/x", call)).code(), Code::kNotFound);
}

TEST(FaultyStoreTest, BadSpecNamesTheItem) {
  auto spec = ParseFaultSpec("lose_put_reply=x");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().ToString().find("lose_put_reply"), std::string::npos);
}

}  // namespace
}  // namespace wk
