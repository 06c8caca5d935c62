#include "store/counting_store.h"

#include <string>

namespace wk {

std::string_view BucketOpName(BucketOp op) {
  switch (op) {
    case BucketOp::kPut: return "put";
    case BucketOp::kGet: return "get";
    case BucketOp::kHead: return "head";
    case BucketOp::kList: return "list";
    case BucketOp::kDelete: return "delete";
    case BucketOp::kCount: break;
  }
  return "?";
}

std::string_view BucketOutcomeName(BucketOutcome out) {
  switch (out) {
    case BucketOutcome::kOk: return "ok";
    case BucketOutcome::kConflict: return "conflict";
    case BucketOutcome::kNotFound: return "not_found";
    case BucketOutcome::kError: return "error";
    case BucketOutcome::kUnknown: return "unknown";
    case BucketOutcome::kCount: break;
  }
  return "?";
}

BucketOutcome OutcomeOf(Code code) {
  switch (code) {
    case Code::kOk: return BucketOutcome::kOk;
    case Code::kPreconditionFailed: return BucketOutcome::kConflict;
    case Code::kNotFound: return BucketOutcome::kNotFound;
    case Code::kUnknownOutcome:
    case Code::kCancelled: return BucketOutcome::kUnknown;
    case Code::kRetryable:
    case Code::kFatal:
    case Code::kInvalidArgument: return BucketOutcome::kError;
  }
  return BucketOutcome::kError;
}

std::uint64_t BucketRequestStats::Requests(BucketOp op, BucketPurpose purpose) const {
  std::uint64_t n = 0;
  for (std::uint64_t v : requests[static_cast<std::size_t>(op)][static_cast<std::size_t>(purpose)]) n += v;
  return n;
}

std::uint64_t BucketRequestStats::Requests(BucketPurpose purpose) const {
  std::uint64_t n = 0;
  for (std::size_t op = 0; op < kBucketOps; ++op) n += Requests(static_cast<BucketOp>(op), purpose);
  return n;
}

std::uint64_t BucketRequestStats::Total() const {
  std::uint64_t n = 0;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) n += Requests(static_cast<BucketPurpose>(p));
  return n;
}

namespace {

void Count(BucketRequestStats& s, BucketOp op, BucketPurpose purpose, Code code) {
  ++s.requests[static_cast<std::size_t>(op)][static_cast<std::size_t>(purpose)][static_cast<std::size_t>(OutcomeOf(code))];
}

// The counting calls, shared by the root (kOther) and the views. Each is a coroutine of its
// own: it holds the stats pointer (the root outlives its calls) and the purpose, tags the
// call with it (CallOptions::purpose: the store below may schedule by it), and counts once
// the inner call completed.
Task<Result<GetOutput>> CountedGet(ObjectStore& inner, BucketRequestStats* s, BucketPurpose p, std::string key,
                                   CallOptions options) {
  options.purpose = p;
  auto got = co_await inner.Get(std::move(key), options);
  Count(*s, BucketOp::kGet, p, got.code());
  if (got.ok()) s->received_bytes[static_cast<std::size_t>(p)] += got->body.size();
  co_return got;
}

Task<Result<ObjectMeta>> CountedHead(ObjectStore& inner, BucketRequestStats* s, BucketPurpose p, std::string key,
                                     CallOptions options) {
  options.purpose = p;
  auto got = co_await inner.Head(std::move(key), options);
  Count(*s, BucketOp::kHead, p, got.code());
  co_return got;
}

Task<Result<Version>> CountedPut(ObjectStore& inner, BucketRequestStats* s, BucketPurpose p, std::string key,
                                 std::string body, Precondition condition, CallOptions options) {
  const std::size_t bytes = body.size();
  options.purpose = p;
  auto put = co_await inner.Put(std::move(key), std::move(body), std::move(condition), options);
  Count(*s, BucketOp::kPut, p, put.code());
  if (put.code() != Code::kInvalidArgument) s->sent_bytes[static_cast<std::size_t>(p)] += bytes;
  co_return put;
}

Task<Status> CountedDelete(ObjectStore& inner, BucketRequestStats* s, BucketPurpose p, std::string key,
                           Precondition condition, CallOptions options) {
  options.purpose = p;
  Status st = co_await inner.Delete(std::move(key), std::move(condition), options);
  Count(*s, BucketOp::kDelete, p, st.code());
  co_return st;
}

Task<Result<ListPage>> CountedList(ObjectStore& inner, BucketRequestStats* s, BucketPurpose p, ListOptions options,
                                   CallOptions call) {
  call.purpose = p;
  auto page = co_await inner.List(std::move(options), call);
  Count(*s, BucketOp::kList, p, page.code());
  if (page.ok()) {
    std::uint64_t bytes = 0;
    for (const auto& e : page->entries) bytes += e.key.size();
    s->received_bytes[static_cast<std::size_t>(p)] += bytes;
  }
  co_return page;
}

}  // namespace

// One purpose's view: forwards to the root's inner store, counting under its purpose.
class CountingStore::View final : public StoreWrapper {
 public:
  View(CountingStore& root, BucketPurpose purpose)
      : StoreWrapper(root.inner()), root_(root), stats_(root.stats_.get()), purpose_(purpose) {}

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    return CountedGet(inner(), stats_, purpose_, std::move(key), options);
  }
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override {
    return CountedHead(inner(), stats_, purpose_, std::move(key), options);
  }
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override {
    return CountedPut(inner(), stats_, purpose_, std::move(key), std::move(body), std::move(condition), options);
  }
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override {
    return CountedDelete(inner(), stats_, purpose_, std::move(key), std::move(condition), options);
  }
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override {
    return CountedList(inner(), stats_, purpose_, std::move(options), call);
  }
  // Another purpose's view, from any view: a component handed the listing's view may still
  // ask for its own.
  ObjectStore& ForPurpose(BucketPurpose purpose) override { return root_.ForPurpose(purpose); }

 private:
  CountingStore& root_;
  BucketRequestStats* stats_;
  BucketPurpose purpose_;
};

CountingStore::CountingStore(std::unique_ptr<ObjectStore> inner)
    : StoreWrapper(std::move(inner)), stats_(std::make_unique<BucketRequestStats>()) {
  MakeViews();
}

CountingStore::CountingStore(ObjectStore& inner) : StoreWrapper(inner), stats_(std::make_unique<BucketRequestStats>()) {
  MakeViews();
}

CountingStore::~CountingStore() = default;

void CountingStore::MakeViews() {
  for (std::size_t p = 0; p < kBucketPurposes; ++p) views_[p] = std::make_unique<View>(*this, static_cast<BucketPurpose>(p));
}

ObjectStore& CountingStore::ForPurpose(BucketPurpose purpose) {
  const auto p = static_cast<std::size_t>(purpose);
  WK_CHECK(p < kBucketPurposes, "ForPurpose: not a purpose");
  return *views_[p];
}

Task<Result<GetOutput>> CountingStore::Get(std::string key, CallOptions options) {
  return CountedGet(inner(), stats_.get(), BucketPurpose::kOther, std::move(key), options);
}
Task<Result<ObjectMeta>> CountingStore::Head(std::string key, CallOptions options) {
  return CountedHead(inner(), stats_.get(), BucketPurpose::kOther, std::move(key), options);
}
Task<Result<Version>> CountingStore::Put(std::string key, std::string body, Precondition condition,
                                         CallOptions options) {
  return CountedPut(inner(), stats_.get(), BucketPurpose::kOther, std::move(key), std::move(body),
                    std::move(condition), options);
}
Task<Status> CountingStore::Delete(std::string key, Precondition condition, CallOptions options) {
  return CountedDelete(inner(), stats_.get(), BucketPurpose::kOther, std::move(key), std::move(condition), options);
}
Task<Result<ListPage>> CountingStore::List(ListOptions options, CallOptions call) {
  return CountedList(inner(), stats_.get(), BucketPurpose::kOther, std::move(options), call);
}

void PublishBucketMetrics(MetricsRegistry& r, const BucketRequestStats& stats) {
  // The outcomes each operation can have: reads never conflict, a listing never misses.
  auto possible = [](BucketOp op, BucketOutcome out) {
    if (out == BucketOutcome::kConflict) return op == BucketOp::kPut || op == BucketOp::kDelete;
    if (out == BucketOutcome::kNotFound) return op != BucketOp::kList;
    return true;
  };
  for (std::size_t op = 0; op < kBucketOps; ++op) {
    for (std::size_t p = 0; p < kBucketPurposes; ++p) {
      for (std::size_t o = 0; o < kBucketOutcomes; ++o) {
        if (!possible(static_cast<BucketOp>(op), static_cast<BucketOutcome>(o))) continue;
        const std::uint64_t& field = stats.requests[op][p][o];
        r.AddCallbackCounter("wasmkeep_bucket_requests_total",
                             "Requests this node sent to the bucket, by operation, purpose and outcome",
                             [&field] { return static_cast<double>(field); },
                             {{"op", std::string(BucketOpName(static_cast<BucketOp>(op)))},
                              {"purpose", std::string(BucketPurposeName(static_cast<BucketPurpose>(p)))},
                              {"outcome", std::string(BucketOutcomeName(static_cast<BucketOutcome>(o)))}});
      }
    }
  }
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    const std::string purpose(BucketPurposeName(static_cast<BucketPurpose>(p)));
    const std::uint64_t& sent = stats.sent_bytes[p];
    const std::uint64_t& received = stats.received_bytes[p];
    r.AddCallbackCounter("wasmkeep_bucket_sent_bytes_total", "Body bytes this node sent to the bucket, by purpose",
                         [&sent] { return static_cast<double>(sent); }, {{"purpose", purpose}});
    r.AddCallbackCounter("wasmkeep_bucket_received_bytes_total",
                         "Body bytes (and listed keys) this node received from the bucket, by purpose",
                         [&received] { return static_cast<double>(received); }, {{"purpose", purpose}});
  }
}

}  // namespace wk
