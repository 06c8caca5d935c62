// The scale mode of the lease and ownership scenarios (docs/scaling.md): the real cluster
// code of N nodes (10, 100, 1,000: `wasmkeep-sim --nodes N`) on a model of an S3 bucket, to
// see what the protocol costs per node and per cluster, how long a failover takes, and
// what breaks first as the cluster grows.
//
// The bucket model (BucketModel) wraps the simulated bucket; the cluster and storage code
// run unchanged:
//   - latency like S3 Standard's for small objects (assumed, docs/scaling.md), a per-cent
//     tail, a LIST slower with its page;
//   - S3's request-rate limits per prefix (the key up to its last '/'): kS3WritesPerPrefix
//     PUT/COPY/POST/DELETE and kS3ReadsPerPrefix GET/HEAD (LIST counted with them, under
//     the listed prefix) per second; a request over them is refused before it is applied
//     with a 503 SlowDown, kRetryable, as the s3:// store reports one;
//   - the s3:// client's retries of a 503 inside the call (ScaleStore, as
//     src/store/s3/s3_store.cc does: up to kS3MaxAttempts, backoff from 50 ms doubling to
//     2 s with equal jitter, within the call's deadline);
//   - every request counted by purpose (the real tags: CountingStore's views set
//     CallOptions::purpose, the label of wasmkeep_bucket_requests_total) and operation,
//     priced at S3 Standard's request prices.
//
// A scale run: N node slots started over kStartSpread, a warm-up, a measured window with a
// few kills (each restarted after kRestartAfter, so its fence is measured), then a minute
// without kills for the liveness checks. The safety checkers (1-6, 8-10) judge it as in
// the scenario; in large worlds they run every kCheckEvery of virtual time rather than
// after every event. Liveness after healing (7, 7b) is a line of the report, a violation
// only with --require-liveness. No other fault: the measure is the protocol's own.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkers.h"
#include "faults.h"
#include "store/counting_store.h"
#include "world.h"

namespace wk::sim {

// S3 Standard request prices, US East (N. Virginia): the `aws-s3` table of
// src/cli/cost.h (what `wasmkeep cluster cost` prices with), in dollars per 1,000 requests.
inline constexpr double kS3PutCopyPostListPer1000 = 0.005;  // PUT, COPY, POST, LIST
inline constexpr double kS3GetAndOtherPer1000 = 0.0004;     // GET, HEAD and the rest
// DELETE is free in that table.
// S3's request rates per prefix per second, before it answers 503 SlowDown.
inline constexpr int kS3WritesPerPrefix = 3500;  // PUT, COPY, POST, DELETE
inline constexpr int kS3ReadsPerPrefix = 5500;   // GET, HEAD (and here LIST)
// The s3:// client's attempts of one call (src/store/s3/s3_store.h, kS3MaxAttempts).
inline constexpr int kS3Attempts = 6;
// What a refused request's status says (the s3:// store's text for a 503 reply).
inline constexpr std::string_view kSlowDownText = "HTTP 503 SlowDown: Please reduce your request rate";

// The shape of a scale run (ScaleShape(nodes) gives the defaults).
struct ScaleShape {
  int nodes = 3;
  int actors = 0;            // the ownership scenario: two per node
  Duration start_spread{};   // slot s starts at s * start_spread / nodes
  Duration warm_up{};        // from 0 to the measured window
  Duration measure{};        // the measured window
  int kills = 0;             // during the window, evenly spaced
  Duration restart_after{};  // a killed node's supervisor restarts it then
  Duration check_every{};    // 0: the safety checkers after every event
};
ScaleShape DefaultScaleShape(int nodes, bool owners, int measure_seconds);

// One request's fate at the bucket and its count; the report.
class BucketModel {
 public:
  BucketModel(World& world, const ScaleShape& shape);

  // World::Hooks::fault: the request's latency, or a 503 over its prefix's rate.
  OpFault Fault(int slot, const OpInfo& op);
  // ScaleStore: one attempt of a call sent (counted), one call answered 503 after its
  // retries (by purpose), the backoff before attempt `attempt` + 1.
  void Sent(BucketPurpose purpose, BucketOp op);
  void Refused(BucketPurpose purpose, BucketOp op);
  Duration Backoff(int attempt);
  // World::Hooks::on_landed, after the checkers: fences and acquisitions after a kill.
  void OnLanded(const std::string& key, const std::string& body);
  // A scale run's kill: what the killed instance held, and when.
  void OnKill(Process& p);
  // Every check: node-seconds, the listing's duration, lapses.
  void Sample(Duration since_last);
  // The report (RunResult::scale_report, scale_row), after the run.
  void Report(const Checkers& checkers, RunResult& result) const;

  bool Measuring() const;

 private:
  struct Window {  // one second's admitted requests of a prefix
    int reads = 0, writes = 0;
  };
  struct PrefixStats {
    std::uint64_t refused = 0, refused_in_window = 0;
    std::uint64_t reads_in_window = 0, writes_in_window = 0;
    int peak_reads = 0, peak_writes = 0;  // the busiest second of the window
    std::map<std::int64_t, Window> seconds;  // the last few seconds' admitted requests
  };
  struct Kill {
    MonoTime at{};
    NodeId node;
    InstanceToken instance;
    std::vector<std::string> held;  // owner keys naming the instance at the kill
    std::optional<MonoTime> fenced;
    std::map<std::string, MonoTime> taken;  // owner key -> when a record naming another landed
    std::uint64_t fence_requests_before = 0;
  };
  using Counts = std::array<std::array<std::uint64_t, kBucketOps>, kBucketPurposes>;

  Duration Latency(const OpInfo& op);
  static std::uint64_t Sum(const Counts& c, std::optional<BucketPurpose> purpose, std::optional<BucketOp> op);
  static double DollarsPerRequest(BucketOp op);

  World& w_;
  ScaleShape shape_;
  MonoTime window_from_{}, window_to_{};
  Counts sent_{}, sent_in_window_{}, refused_{}, refused_in_window_{};
  std::map<std::string, PrefixStats> prefixes_;
  std::vector<Kill> kills_;
  std::map<InstanceToken, std::size_t> kill_of_;
  std::uint64_t fences_landed_ = 0, fences_of_killed_ = 0, fences_of_others_ = 0;
  double node_seconds_ = 0;  // in the window: running processes, valid or not
  double valid_node_seconds_ = 0;
  Duration listing_max_{0};
  std::uint64_t lapses_seen_ = 0, lapses_in_window_ = 0;
  std::optional<MonoTime> first_refusal_;
  std::string first_refusal_what_;
};

// The stores between a scale run's node and its recording store: the real CountingStore
// outermost (its views tag each call's purpose), then this one, which counts each attempt
// and retries a 503 inside the call as the s3:// client does.
class ScaleStore final : public StoreWrapper {
 public:
  ScaleStore(ObjectStore& inner, BucketModel& model, Env& env) : StoreWrapper(inner), model_(model), env_(env) {}
  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override;
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override;
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override;
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override;
  std::string Describe() const override { return "s3-model:" + inner().Describe(); }

 private:
  // Whether a refused attempt is tried again; sleeps its backoff. False: answer `last`.
  Task<bool> Again(const Status& last, BucketPurpose purpose, BucketOp op, int attempt, MonoTime deadline);

  BucketModel& model_;
  Env& env_;
};

// Runs the lease (owners false) or ownership scenario in scale mode. `workload` (the
// ownership scenario's) is spawned on every process that starts.
RunResult RunScaled(const RunOptions& options, bool owners,
                    std::function<void(World& world, Process& p)> workload);

}  // namespace wk::sim
