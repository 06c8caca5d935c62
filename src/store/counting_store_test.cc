// CountingStore over mem:// in virtual time: each purpose's view counts its own requests by
// operation and outcome, with the bytes of bodies, and the published series read the same
// numbers.
#include "store/counting_store.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "store/testing/mem_fixture.h"

namespace wk {
namespace {

using std::chrono::milliseconds;

struct Fixture : MemStoreFixture {
  Fixture() : MemStoreFixture(11) {}
  const CallOptions call{milliseconds(100)};
};

// The sample of one series in a scrape ("" when the series is absent).
std::string Sample(const std::string& text, const std::string& series) {
  const std::size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return "";
  const std::size_t start = at + 1 + series.size() + 1;
  return text.substr(start, text.find('\n', start) - start);
}

TEST(CountingStoreTest, EachPurposeCountsItsOwnRequestsByOperationAndOutcome) {
  Fixture f;
  // Replies of the key "lost" never arrive: its put's outcome is unknown.
  MemStore inner(f.env, f.bucket, [](const OpInfo& op) {
    OpFault fault;
    fault.lose_reply = op.key == "lost";
    return fault;
  });
  CountingStore counting(inner);
  ObjectStore& lease = counting.ForPurpose(BucketPurpose::kLease);
  ObjectStore& listing = counting.ForPurpose(BucketPurpose::kListing);
  EXPECT_EQ(&lease, &counting.ForPurpose(BucketPurpose::kLease)) << "one view per purpose";
  EXPECT_EQ(&listing, &lease.ForPurpose(BucketPurpose::kListing)) << "a view hands out its siblings";

  f.Run([&]() -> Task<int> {
    auto created = co_await lease.Put("nodes/a", "12345", Precondition::IfNoneMatchAny(), f.call);
    EXPECT_TRUE(created.ok());
    auto conflict = co_await lease.Put("nodes/a", "123", Precondition::IfNoneMatchAny(), f.call);
    EXPECT_EQ(conflict.code(), Code::kPreconditionFailed);
    auto unknown = co_await lease.Put("lost", "xy", Precondition::None(), f.call);
    EXPECT_EQ(unknown.code(), Code::kUnknownOutcome);
    auto invalid = co_await lease.Put("", "never sent", Precondition::None(), f.call);
    EXPECT_EQ(invalid.code(), Code::kInvalidArgument);
    ListOptions options;  // named: GCC 12 mishandles a braced temporary in a co_await
    options.prefix = "nodes/";
    auto page = co_await listing.List(options, f.call);
    EXPECT_TRUE(page.ok());
    auto body = co_await listing.Get("nodes/a", f.call);
    EXPECT_TRUE(body.ok());
    auto missing = co_await listing.Get("nodes/b", f.call);
    EXPECT_EQ(missing.code(), Code::kNotFound);
    auto head = co_await counting.Head("nodes/a", f.call);  // the root's own: other
    EXPECT_TRUE(head.ok());
    Status gone = co_await counting.ForPurpose(BucketPurpose::kGc).Delete("nodes/a", Precondition::None(), f.call);
    EXPECT_TRUE(gone.ok());
    co_return 0;
  }());

  const BucketRequestStats& s = counting.stats();
  EXPECT_EQ(s.Requests(BucketOp::kPut, BucketPurpose::kLease, BucketOutcome::kOk), 1u);
  EXPECT_EQ(s.Requests(BucketOp::kPut, BucketPurpose::kLease, BucketOutcome::kConflict), 1u);
  EXPECT_EQ(s.Requests(BucketOp::kPut, BucketPurpose::kLease, BucketOutcome::kUnknown), 1u);
  EXPECT_EQ(s.Requests(BucketOp::kPut, BucketPurpose::kLease, BucketOutcome::kError), 1u) << "refused before sending";
  EXPECT_EQ(s.Requests(BucketOp::kList, BucketPurpose::kListing, BucketOutcome::kOk), 1u);
  EXPECT_EQ(s.Requests(BucketOp::kGet, BucketPurpose::kListing, BucketOutcome::kOk), 1u);
  EXPECT_EQ(s.Requests(BucketOp::kGet, BucketPurpose::kListing, BucketOutcome::kNotFound), 1u);
  EXPECT_EQ(s.Requests(BucketOp::kHead, BucketPurpose::kOther), 1u);
  EXPECT_EQ(s.Requests(BucketOp::kDelete, BucketPurpose::kGc, BucketOutcome::kOk), 1u);
  EXPECT_EQ(s.Requests(BucketPurpose::kLease), 4u);
  EXPECT_EQ(s.Requests(BucketPurpose::kOwner), 0u);
  EXPECT_EQ(s.Total(), 9u);
  // Bodies: 5 + 3 + 2 bytes sent (the invalid put sent nothing); the listing's one key (7
  // bytes) and the 5-byte body received.
  EXPECT_EQ(s.sent_bytes[static_cast<std::size_t>(BucketPurpose::kLease)], 10u);
  EXPECT_EQ(s.received_bytes[static_cast<std::size_t>(BucketPurpose::kListing)], 12u);

  MetricsRegistry registry;
  PublishBucketMetrics(registry, s);
  const std::string text = registry.RenderText();
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="put",purpose="lease",outcome="conflict"})"), "1");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="put",purpose="lease",outcome="unknown"})"), "1");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="get",purpose="listing",outcome="not_found"})"), "1");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="head",purpose="other",outcome="ok"})"), "1");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="delete",purpose="gc",outcome="ok"})"), "1");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="put",purpose="segment",outcome="ok"})"), "0");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_sent_bytes_total{purpose="lease"})"), "10");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_received_bytes_total{purpose="listing"})"), "12");
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="list",purpose="listing",outcome="conflict"})"), "")
      << "outcomes an operation cannot have are not published";
  EXPECT_EQ(Sample(text, R"(wasmkeep_bucket_requests_total{op="get",purpose="lease",outcome="conflict"})"), "");
}

TEST(CountingStoreTest, AStoreThatCountsNothingIsItsOwnViewOfEveryPurpose) {
  Fixture f;
  EXPECT_EQ(&f.store.ForPurpose(BucketPurpose::kSegment), &f.store);
  CountingStore counting(f.store);
  // A decorator over a counting store answers with itself: its requests are the root's
  // (other), which is why the counter goes outermost.
  struct Decorator final : StoreWrapper {
    using StoreWrapper::StoreWrapper;
  } decorator(counting);
  EXPECT_EQ(&decorator.ForPurpose(BucketPurpose::kLease), &decorator);
  f.Run([&]() -> Task<int> {
    (void)co_await decorator.ForPurpose(BucketPurpose::kLease).Get("x", f.call);
    co_return 0;
  }());
  EXPECT_EQ(counting.stats().Requests(BucketOp::kGet, BucketPurpose::kOther, BucketOutcome::kNotFound), 1u);
}

// Each view tags its calls with its purpose on the way down (CallOptions::purpose), which is
// what lets the S3 store give urgent purposes their reserved connections.
TEST(CountingStoreTest, EachViewTellsTheStoreBelowWhatTheCallIsFor) {
  Fixture f;
  struct Recorder final : StoreWrapper {
    using StoreWrapper::StoreWrapper;
    std::vector<BucketPurpose> seen;
    Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
      seen.push_back(options.purpose);
      return StoreWrapper::Get(std::move(key), options);
    }
    Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                              CallOptions options) override {
      seen.push_back(options.purpose);
      return StoreWrapper::Put(std::move(key), std::move(body), std::move(condition), options);
    }
    Task<Result<ListPage>> List(ListOptions options, CallOptions call) override {
      seen.push_back(call.purpose);
      return StoreWrapper::List(std::move(options), call);
    }
  } recorder(f.store);
  CountingStore counting(recorder);
  f.Run([&]() -> Task<int> {
    (void)co_await counting.ForPurpose(BucketPurpose::kOwner).Get("owners/x", f.call);
    (void)co_await counting.ForPurpose(BucketPurpose::kSegment).Put("wal/x", "b", Precondition::None(), f.call);
    ListOptions options;
    (void)co_await counting.ForPurpose(BucketPurpose::kListing).List(options, f.call);
    (void)co_await counting.Get("x", f.call);
    co_return 0;
  }());
  EXPECT_EQ(recorder.seen, (std::vector<BucketPurpose>{BucketPurpose::kOwner, BucketPurpose::kSegment,
                                                       BucketPurpose::kListing, BucketPurpose::kOther}));
  EXPECT_TRUE(BucketPurposeIsUrgent(BucketPurpose::kOwner));
  EXPECT_TRUE(BucketPurposeIsUrgent(BucketPurpose::kLease));
  EXPECT_FALSE(BucketPurposeIsUrgent(BucketPurpose::kSegment));
  EXPECT_FALSE(BucketPurposeIsUrgent(BucketPurpose::kRestore));
}

TEST(CountingStoreTest, EveryPurposeHasALabel) {
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    EXPECT_FALSE(BucketPurposeName(static_cast<BucketPurpose>(p)).empty());
  }
  EXPECT_EQ(BucketPurposeName(BucketPurpose::kListing), "listing");
  EXPECT_EQ(BucketPurposeName(BucketPurpose::kOther), "other");
  EXPECT_EQ(BucketOutcomeName(OutcomeOf(Code::kRetryable)), "error");
  EXPECT_EQ(BucketOutcomeName(OutcomeOf(Code::kCancelled)), "unknown");
}

}  // namespace
}  // namespace wk
