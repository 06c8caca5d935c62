// S3Store: the s3:// ObjectStore for any S3-compatible service (AWS S3, Ceph RGW, MinIO, R2)
// over HTTP(S), SigV4, path-style URLs. Guarantees: every reply and transport failure maps to
// the outcome object_store.h defines, and a write whose fate is unknown is kUnknownOutcome,
// never re-sent; only replies that say nothing was applied (409 ConditionalRequestConflict,
// 503, 429) are retried, within the call's deadline. Threading: every method on the
// RealEnv's loop thread; calls run concurrently up to S3Config::max_connections. REQUIRES:
// the RealEnv outlives the store and its calls' tasks. Details (the request and reply
// mapping, retries, lifetime): docs/internals.md, "S3Store".
#pragma once

#include <memory>
#include <string>

#include "base/metrics.h"
#include "env/real_env.h"
#include "net/http_client.h"
#include "store/object_store.h"
#include "store/s3/s3_config.h"

namespace wk {

// Attempts per call for replies that are retried inside the call (see above). With the
// default delays the sleeps add up to at most about 1.6 s.
inline constexpr int kS3MaxAttempts = 6;

class S3Store final : public ObjectStore {
 public:
  // kInvalidArgument for a config that cannot work (no bucket, bad endpoint,
  // virtual-hosted style requested, missing credentials). Does no I/O.
  static Result<std::unique_ptr<S3Store>> Create(RealEnv& env, S3Config cfg,
                                                 HttpClientOptions http_options = {});
  ~S3Store() override;

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override;
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                            CallOptions options) override;
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override;
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override;
  std::string Describe() const override;
  bool SupportsConditionalDelete() const override;
  // From the Date header of a HEAD of the bucket: [Date, Date + 1 s + the round trip].
  Task<Result<BucketClock>> BucketTime(CallOptions options) override;
  // Names the if_match_quoted setting and the value to try (the probe of
  // store/bucket_check.h calls it when the bucket refused its own version).
  std::string IfMatchRefusedHint() const override;

  // PUT /bucket, for tests and tools. Ok if the bucket already exists and is ours.
  Task<Status> CreateBucket(CallOptions options = {});

  HttpClientStats http_stats() const;

  struct Shared;  // s3_store.cc

 private:
  explicit S3Store(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  std::shared_ptr<Shared> shared_;
};

// How many of the pool's connections are kept for urgent requests (BucketPurposeIsUrgent:
// lease, listing, fence, owner records): an eighth, at least one when the pool has two or
// more (64 by default: 8). Bulk requests (segments, snapshots, restores, GC, alarms,
// classes) share the rest, so a slow bucket flooded with uploads still carries the lease
// write and the routing read without a wait for a connection ("Lanes",
// net/http_client.h; docs/storage-backends.md).
int ReservedUrgentConnections(int max_connections);

// wasmkeep_bucket_connections{state}, wasmkeep_bucket_connection_waits_total{lane} and
// wasmkeep_bucket_connection_wait_timeouts_total{lane} from the store's pool.
// REQUIRES: store outlives every RenderText(), which runs on the store's loop thread.
void PublishS3StoreMetrics(MetricsRegistry& registry, const S3Store& store);

// The config of the test bucket named by the environment, as scripts/rgw.sh writes it:
// WASMKEEP_S3_ENDPOINT, WASMKEEP_S3_BUCKET, optional WASMKEEP_S3_REGION (us-east-1),
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional AWS_SESSION_TOKEN. If-Match is sent
// unquoted (RGW) unless WASMKEEP_S3_IF_MATCH_QUOTED=true. kInvalidArgument naming the
// missing variable.
Result<S3Config> S3ConfigFromEnv(const GetenvFn& getenv);

// Opens that store and creates its bucket if missing (the conformance suites use it).
// A Task because creating the bucket is I/O on the loop: call it inside the loop, or
// from outside with env.RunMain(OpenS3StoreFromEnv(env)).
Task<Result<std::unique_ptr<ObjectStore>>> OpenS3StoreFromEnv(RealEnv& env,
                                                             GetenvFn getenv = SystemGetenv());

}  // namespace wk
