// CountingStore: every request a node sends to its bucket, counted by operation, purpose
// and outcome, with the body bytes sent and received (docs/storage-backends.md, "What the
// bucket is asked, and why"; `wasmkeep cluster cost` reads it). The root wraps the node's
// store; ForPurpose(p) hands out a counting view per purpose sharing the root's stats; a
// request counts once, at its completion. Put the root outermost. Threading: the Env's loop
// thread. REQUIRES: the root outlives its views and its calls in flight. Details (why a view
// per purpose, the outcome classes, bytes): docs/internals.md, "CountingStore".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "base/metrics.h"
#include "store/store_wrapper.h"

namespace wk {

enum class BucketOp : std::uint8_t { kPut, kGet, kHead, kList, kDelete, kCount };
enum class BucketOutcome : std::uint8_t { kOk, kConflict, kNotFound, kError, kUnknown, kCount };
inline constexpr std::size_t kBucketOps = static_cast<std::size_t>(BucketOp::kCount);
inline constexpr std::size_t kBucketOutcomes = static_cast<std::size_t>(BucketOutcome::kCount);

std::string_view BucketOpName(BucketOp op);            // "put", "get", "head", "list", "delete"
std::string_view BucketOutcomeName(BucketOutcome out);  // "ok", "conflict", "not_found", ...
// The outcome label of a call's code (table above).
BucketOutcome OutcomeOf(Code code);

struct BucketRequestStats {
  // requests[op][purpose][outcome]
  std::array<std::array<std::array<std::uint64_t, kBucketOutcomes>, kBucketPurposes>, kBucketOps> requests{};
  std::array<std::uint64_t, kBucketPurposes> sent_bytes{};
  std::array<std::uint64_t, kBucketPurposes> received_bytes{};

  std::uint64_t Requests(BucketOp op, BucketPurpose purpose, BucketOutcome outcome) const {
    return requests[static_cast<std::size_t>(op)][static_cast<std::size_t>(purpose)][static_cast<std::size_t>(outcome)];
  }
  // Every outcome of (op, purpose).
  std::uint64_t Requests(BucketOp op, BucketPurpose purpose) const;
  // Every op and outcome of purpose.
  std::uint64_t Requests(BucketPurpose purpose) const;
  std::uint64_t Total() const;
};

class CountingStore final : public StoreWrapper {
 public:
  explicit CountingStore(std::unique_ptr<ObjectStore> inner);
  explicit CountingStore(ObjectStore& inner);
  ~CountingStore() override;

  // The root's own calls: kOther.
  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override;
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override;
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override;
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override;

  ObjectStore& ForPurpose(BucketPurpose purpose) override;
  const BucketRequestStats& stats() const { return *stats_; }
  // The store it counts for (its backend's own metrics: PublishStoreMetrics).
  const ObjectStore& wrapped() const { return inner(); }

  class View;

 private:
  void MakeViews();

  std::unique_ptr<BucketRequestStats> stats_;
  std::array<std::unique_ptr<View>, kBucketPurposes> views_;
};

// Publishes the stats as wasmkeep_bucket_requests_total{op,purpose,outcome},
// wasmkeep_bucket_sent_bytes_total{purpose} and wasmkeep_bucket_received_bytes_total{purpose}
// (base/metrics.h, "How WasmKeep publishes"): only the outcomes an operation can have (a
// listing is never a conflict or not_found; a get, head or list never a conflict).
// REQUIRES: stats outlives every RenderText().
void PublishBucketMetrics(MetricsRegistry& registry, const BucketRequestStats& stats);

}  // namespace wk
