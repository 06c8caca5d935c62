// CountingStore: every request a node sends to its bucket, counted by operation, purpose
// and outcome, with the body bytes sent and received (docs/storage-backends.md, "What the
// bucket is asked, and why"). It is what `wasmkeep cluster cost` and the soak read.
//
// How the purpose reaches the count. The root CountingStore wraps the node's one store;
// ForPurpose(p) hands out one counting view per purpose (a StoreWrapper tagged with p, all
// sharing the root's stats). Each subsystem asks for its view once, in its constructor or
// at the call, where it knows what its calls are for (NodeLease: kLease, Membership:
// kListing, the replica: kSegment, kSnapshot, kRestore, kGc...). Why a view per purpose
// rather than a tag on every call (a field of CallOptions): the tag would have to be set at
// about a hundred call sites, and a site that forgets it compiles; a view is chosen at a
// handful of places, one per subsystem, and the subsystem's code stays as it was. Why the
// view is asked of the store (ObjectStore::ForPurpose) rather than handed in by whoever
// wires the subsystem: the replica alone has four purposes, and only it knows which of its
// requests is a snapshot; and stores that count nothing (the simulator's, the tests',
// the operator tools') answer ForPurpose with themselves, so nothing else changes.
//
// What is counted. One request per ObjectStore call, at its completion, under its outcome:
//   ok         kOk
//   conflict   kPreconditionFailed (a failed If-Match or If-None-Match: *; R2 bills it)
//   not_found  kNotFound
//   unknown    kUnknownOutcome, kCancelled (it may have reached the bucket)
//   error      everything else (throttled, unavailable, fatal, refused before sending)
// An S3 call that the backend retried internally (409, 503 within the call's deadline,
// store/s3/s3_store.h) counts once. Bytes are bodies at this interface: a put's body sent
// (whatever the outcome, unless refused as invalid), a get's body received, a listing's
// keys received; not headers, XML or TLS. BucketTime (operator tools only) is not counted.
// Requests made on the root itself count under kOther.
//
// Put the root outermost: a decorator over it (a fault injector) counts as kOther, since a
// decorator answers ForPurpose with itself.
//
// Threading: as every ObjectStore, the Env's loop thread; the stats are plain integers read
// by the metrics scrape on that same thread. Lifetime: the views live as long as the root;
// a call in flight keeps a pointer to the root's stats, so the root must outlive its calls
// (destroy it after the Env's tasks, or after they ended).
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
