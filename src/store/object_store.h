// ObjectStore: the bucket, WasmKeep's only shared state: keys (ValidateKey) to bodies with
// opaque versions and conditional writes, through which nodes coordinate. Guarantees: every
// outcome a real bucket can give is a distinct Code (base/status.h); kUnknownOutcome means a
// write may have been applied (the caller reads back), kRetryable that it was not; a call
// ends by its deadline (CallOptions::timeout); a version is compared only with one a call on
// the same object returned, never ordered. Threading: every method on the owning Env's loop
// thread, its Task completing there; any number in flight. Details (the outcome table,
// versions and ETags, purposes): docs/internals.md, "ObjectStore".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "env/task.h"

namespace wk {

// An opaque version token of one object (an ETag on S3).
class Version {
 public:
  Version() = default;
  explicit Version(std::string token) : token_(std::move(token)) {}
  const std::string& token() const { return token_; }
  bool empty() const { return token_.empty(); }
  friend bool operator==(const Version&, const Version&) = default;

 private:
  std::string token_;
};

// The condition a write is applied under.
class Precondition {
 public:
  enum class Kind : std::uint8_t { kNone, kIfNoneMatchAny, kIfMatch };

  static Precondition None() { return Precondition(Kind::kNone, {}); }
  // Create-only: applies only if no object exists under the key.
  static Precondition IfNoneMatchAny() { return Precondition(Kind::kIfNoneMatchAny, {}); }
  // Applies only if the object exists at exactly this version.
  static Precondition IfMatch(Version v) { return Precondition(Kind::kIfMatch, std::move(v)); }

  Kind kind() const { return kind_; }
  const Version& version() const { return version_; }
  std::string ToString() const;

 private:
  Precondition(Kind k, Version v) : kind_(k), version_(std::move(v)) {}
  Kind kind_;
  Version version_;
};

// What a request to the bucket is for: the `purpose` label of
// wasmkeep_bucket_requests_total (docs/storage-backends.md). kOther is a request no subsystem
// claimed (a call on the root of a counting store): a non-zero count names a missing tag.
enum class BucketPurpose : std::uint8_t {
  kLease,     // nodes/<self>: the start check, lease writes and their re-reads, `released`
  kListing,   // the listing of nodes/ and the bodies it reads
  kFence,     // a fence's deciding read and its write
  kOwner,     // owners/: acquire, release, pending releases, the resolver, the routing read
  kSegment,   // wal/ segment uploads (the owner fence <gen>-0 included)
  kSnapshot,  // snapshot/ uploads
  kRestore,   // an actor's restore: its listings and reads of wal/ and snapshot/
  kGc,        // garbage collection: its listings and deletes
  kAlarm,     // alarms/: index entries, their removal, shard scans (the shard holds are kOwner)
  kControl,   // control/ (tenants, the cluster secret, drains, moves), quarantine/
  kClass,     // classes/: class pointers and modules
  kAdmin,     // the admin routes and the console: actor listings, inspections, deletions, index reads
  kOther,
  kCount
};
inline constexpr std::size_t kBucketPurposes = static_cast<std::size_t>(BucketPurpose::kCount);
// "lease", "listing", ... (the label values).
std::string_view BucketPurposeName(BucketPurpose purpose);
// Whether a request of this purpose is urgent: late, it costs a lease (kLease), the view of
// who is live (kListing), a fence, or a client's request waiting on an ownership record
// (kOwner: the routing read, an acquisition, a release). A store with a bounded pool of
// connections (s3://) keeps a share of it for urgent requests, so bulk traffic (segment
// uploads, restores, garbage collection) cannot queue them (docs/storage-backends.md).
bool BucketPurposeIsUrgent(BucketPurpose purpose);

struct CallOptions {
  // Deadline of one call. The default suits interactive use; the cluster code passes the
  // ADR's bounds (for example a third of ttl - safety for a lease write).
  Duration timeout = std::chrono::seconds(30);
  // What the call is for. Set by the counting view it came through (CountingStore's
  // ForPurpose), not by callers; a store may schedule by it (BucketPurposeIsUrgent).
  BucketPurpose purpose = BucketPurpose::kOther;
};

struct ObjectMeta {
  Version version;
  std::uint64_t size = 0;
};

struct GetOutput {
  std::string body;
  Version version;
};

struct ListOptions {
  std::string prefix;
  // Only keys strictly after this one (S3 StartAfter). Ignored when continuation is set.
  std::string start_after;
  // 1..1000 entries per page (S3's maximum); anything else is kInvalidArgument.
  int page_size = 1000;
  // From a previous page's next_continuation; opaque.
  std::string continuation;
};

// One listed object. modified_ms: when it was last written, Unix ms by the bucket's clock
// (not the caller's; whole seconds on some S3 servers); 0 when the store cannot tell.
struct ListEntry {
  std::string key;
  Version version;
  std::uint64_t size = 0;
  std::int64_t modified_ms = 0;
};

struct ListPage {
  // Ascending by key, compared as bytes.
  std::vector<ListEntry> entries;
  // Set when more keys follow; pass it back in ListOptions::continuation.
  std::optional<std::string> next_continuation;
};

// The bucket's clock at the moment a BucketTime call returned, as an interval: S3's Date
// header has a resolution of one second and the reply took a while to come back, so the
// bucket's time then lies between `earliest` and `latest`.
struct BucketClock {
  WallTime earliest;
  WallTime latest;
};


// Limits shared by every backend, with their reasons.
inline constexpr std::size_t kMaxKeyBytes = 1024;     // S3's limit on a key
inline constexpr int kMaxListPageSize = 1000;         // S3's limit on max-keys

// OK, or kInvalidArgument naming what is wrong with key.
Status ValidateKey(std::string_view key);
// Validates page size and prefix/start_after.
Status ValidateListOptions(const ListOptions& options);

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  virtual Task<Result<GetOutput>> Get(std::string key, CallOptions options) = 0;
  virtual Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) = 0;
  // condition: None, IfNoneMatchAny or IfMatch.
  virtual Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                                    CallOptions options) = 0;
  // condition: None or IfMatch. An unconditional delete of a missing key is kOk (S3
  // cannot tell); a conditional one is kPreconditionFailed.
  virtual Task<Status> Delete(std::string key, Precondition condition, CallOptions options) = 0;
  virtual Task<Result<ListPage>> List(ListOptions options, CallOptions call) = 0;

  // The store's URL without secrets, for logs and errors.
  virtual std::string Describe() const = 0;

  // Whether Delete honours IfMatch atomically. S3 added conditional deletes late and
  // several S3-compatible servers ignore the header; callers that need it check first.
  virtual bool SupportsConditionalDelete() const { return true; }

  // The bucket's own clock (S3: the Date header of a request to the bucket; file:// and
  // mem://: this machine's clock, where the bucket lives). An operator's tool compares its
  // clock with it before dating anything the protocol relies on (`cluster fence` of an
  // absent node, docs/node-lease.md). kNotFound: this store cannot tell (the default).
  virtual Task<Result<BucketClock>> BucketTime(CallOptions options);

  // What to change when the bucket refuses an If-Match on the version it returned itself
  // (store/bucket_check.h): for s3://, the if_match_quoted setting. Empty: nothing to
  // suggest (the default; mem://, file:// and sqlite:// never refuse it).
  virtual std::string IfMatchRefusedHint() const { return {}; }

  // The view of this store whose requests count under `purpose` (see "Purposes" above).
  // The default, for stores that count nothing, is the store itself. The view lives as
  // long as this store; asking again gives the same view.
  virtual ObjectStore& ForPurpose(BucketPurpose purpose) {
    (void)purpose;
    return *this;
  }
};

}  // namespace wk
