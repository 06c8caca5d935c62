// The bucket check (store/bucket_check.h) against buckets that behave, that refuse their
// own version in If-Match (Ceph RGW sent a quoted ETag), that ignore conditions (a server
// without conditional writes), and that leave it undecided (lost replies, another writer).
// The s3:// case with real headers is in s3/s3_store_scripted_test.cc.
#include "store/bucket_check.h"

#include <gtest/gtest.h>

#include "store/testing/mem_fixture.h"
#include "store/store_wrapper.h"

namespace wk {
namespace {

constexpr char kKey[] = "control/bucket-check/a";

// A bucket whose conditional writes misbehave in one way, over a real mem:// bucket.
class Misbehaving : public StoreWrapper {
 public:
  enum class Mode { kRefuseIfMatch, kIgnoreIfMatch, kIgnoreIfNoneMatch };
  Misbehaving(ObjectStore& inner, Mode mode) : StoreWrapper(inner), mode_(mode) {}
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override {
    if (condition.kind() == Precondition::Kind::kIfMatch && mode_ == Mode::kRefuseIfMatch) {
      return Refused();
    }
    const bool ignore = (condition.kind() == Precondition::Kind::kIfMatch && mode_ == Mode::kIgnoreIfMatch) ||
                        (condition.kind() == Precondition::Kind::kIfNoneMatchAny && mode_ == Mode::kIgnoreIfNoneMatch);
    return inner().Put(std::move(key), std::move(body), ignore ? Precondition::None() : std::move(condition), options);
  }
  std::string IfMatchRefusedHint() const override { return "set if_match_quoted=false"; }

 private:
  static Task<Result<Version>> Refused() { co_return PreconditionFailed("412"); }
  Mode mode_;
};

TEST(BucketCheckTest, ABucketWithConditionalWritesPasses) {
  MemStoreFixture f;
  EXPECT_TRUE(f.Run(CheckBucketOnce(f.store, kKey, "n1", {})).ok());
  // Again on the object a previous start left: the probe starts with an unconditional write.
  EXPECT_TRUE(f.Run(CheckBucketOnce(f.store, kKey, "n2", {})).ok());
  EXPECT_EQ(f.bucket->objects().at(kKey).body, "wasmkeep-bucket-check 1\nnonce n2\nstep 2\n");
}

TEST(BucketCheckTest, ABucketThatRefusesItsOwnVersionIsUnfitAndTheHintNamesTheSetting) {
  MemStoreFixture f;
  Misbehaving bucket(f.store, Misbehaving::Mode::kRefuseIfMatch);
  Status s = f.Run(CheckBucketOnce(bucket, kKey, "n", {}));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("refused a write conditioned (If-Match) on the version it had just returned"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("set if_match_quoted=false"), std::string::npos) << s.message();
}

TEST(BucketCheckTest, ABucketThatIgnoresConditionsIsUnfit) {
  for (auto mode : {Misbehaving::Mode::kIgnoreIfMatch, Misbehaving::Mode::kIgnoreIfNoneMatch}) {
    MemStoreFixture f;
    Misbehaving bucket(f.store, mode);
    Status s = f.Run(CheckBucketOnce(bucket, kKey, "n", {}));
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find(mode == Misbehaving::Mode::kIgnoreIfMatch ? "ignores If-Match" : "ignores If-None-Match"),
              std::string::npos)
        << s.message();
  }
}

// A refusal is a proof only if nobody wrote in between: another writer's change leaves the
// check undecided (kRetryable), never unfit.
TEST(BucketCheckTest, AnotherWriterLeavesItUndecided) {
  MemStoreFixture f;
  int puts = 0;
  // Another process under the same id writes between our first and second probe writes
  // (the hook runs before the second one applies).
  f.store.set_fault_hook([&](const OpInfo& op) {
    OpFault fault;
    if (op.op == StoreOp::kPut && ++puts == 2) (void)f.bucket->ApplyPut(kKey, "someone else", Precondition::None());
    return fault;
  });
  EXPECT_EQ(f.Run(CheckBucketOnce(f.store, kKey, "n", {})).code(), Code::kRetryable);
}

// Lost replies are settled by reading the probe back (its body names the step), so a
// bucket that loses replies is still judged in one probe.
TEST(BucketCheckTest, LostRepliesAreSettledByReadingBack) {
  MemStoreFixture f;
  f.store.set_fault_hook([](const OpInfo& op) {
    OpFault fault;
    if (op.op == StoreOp::kPut) fault.lose_reply = true;
    return fault;
  });
  EXPECT_TRUE(f.Run(CheckBucketOnce(f.store, kKey, "n", {})).ok());
  // A write still in transit at its deadline proves nothing: undecided.
  MemStoreFixture g;
  g.store.set_fault_hook([](const OpInfo& op) {
    OpFault fault;
    if (op.op == StoreOp::kPut) fault.request_delay = std::chrono::seconds(5);
    return fault;
  });
  EXPECT_EQ(g.Run(CheckBucketOnce(g.store, kKey, "n", CallOptions{std::chrono::seconds(1)})).code(), Code::kRetryable);
}

}  // namespace
}  // namespace wk
