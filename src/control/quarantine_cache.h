// QuarantineCache: what one node knows of actors' quarantine records (quarantine.h), so
// the request path asks the bucket about an actor at most once per `ttl` — not once per
// request — and a quarantined actor is refused without a read at all.
//
// Each answer read from the bucket (a record, or none) is remembered for `ttl`: the bound on
// how late this node learns of another node's quarantine or of an operator's lift. Records
// this node writes itself (a strike) are remembered at once (Remember). Entries are bounded
// (`max_entries`): when full, stale entries are dropped, and if that frees nothing the whole
// cache is cleared — it holds only what one read can find again, so forgetting costs a GET,
// never a wrong answer.
//
// Errors are not remembered: a corrupt record (kFatal) is read again by the next request,
// and a bucket that did not answer is asked again.
//
// Threading: the Env loop thread. Simulator-clean (Env and ObjectStore only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/broken_models.h"
#include "base/metrics.h"
#include "control/quarantine.h"

namespace wk::control {

struct QuarantineCacheOptions {
  // How long an answer read from the bucket is trusted. Short, because it is also how long
  // an operator's lift takes to reach every node; long enough that a busy actor costs one
  // GET a while, not one per request.
  Duration ttl = std::chrono::seconds(2);
  // Actors remembered at once: bounded, since any client can name actors that do not exist.
  std::size_t max_entries = 10'000;
  // One read on the request path. The caller decides what a timeout means (the front lets
  // the request through: quarantine is a brake, not a lock).
  CallOptions read{std::chrono::seconds(1)};
  // quarantine-cache-keeps-late-answer: an answer is remembered as of its arrival and
  // replaces whatever is remembered (a late reply hides a newer quarantine).
  BrokenModels broken;
};

// When Check reads the record.
enum class QuarantineRead : std::uint8_t {
  kNever,   // a fresh remembered answer, else "not quarantined": no I/O (a resident actor)
  kOnMiss,  // a fresh remembered answer, else one GET (a request for an actor not resident)
  kAlways,  // one GET whatever is remembered (right before this node acquires the actor)
};

struct QuarantineCacheStats {
  std::uint64_t cached = 0;  // answered from memory (or kNever without an entry)
  std::uint64_t reads = 0;   // answered by a GET
  std::uint64_t read_failures = 0;
  std::uint64_t clears = 0;  // times the cache was full and cleared
};

class QuarantineCache {
 public:
  QuarantineCache(Env& env, ObjectStore& store, QuarantineCacheOptions options = {});
  QuarantineCache(const QuarantineCache&) = delete;
  QuarantineCache& operator=(const QuarantineCache&) = delete;

  // The actor's record if it is quarantined now; nullopt if not. `read` says when the
  // bucket is asked (above); an answer read is remembered for ttl. kNever without a fresh
  // entry answers nullopt: the caller knows no more than before (a resident actor, whose
  // start was checked). Errors: the read's (kRetryable, kUnknownOutcome, kCancelled: the
  // bucket did not answer; kFatal: a corrupt record).
  Task<Result<std::optional<QuarantineRecord>>> Check(ActorId actor, QuarantineRead read);
  // Without I/O: the remembered record if the entry is fresh and quarantines the actor now.
  std::optional<QuarantineRecord> Peek(const ActorId& actor) const;
  // Remembers a record this node wrote (or read elsewhere), as read at `asked_at`: when the
  // request that learned it was sent (default: now). An answer is only as fresh as its
  // request, and an entry is never replaced by an answer to an earlier request, so a strike
  // whose reply came late cannot hide a quarantine a later strike or read saw.
  void Remember(const QuarantineRecord& record, std::optional<MonoTime> asked_at = std::nullopt);
  // Forgets the actor (the next Check with kOnMiss reads).
  void Forget(const ActorId& actor);

  // This node's wall clock (what a quarantine's end is compared with).
  WallTime Now() const { return env_.WallNow(); }
  std::size_t size() const { return entries_.size(); }
  const QuarantineCacheStats& stats() const { return stats_; }
  const QuarantineCacheOptions& options() const { return options_; }

 private:
  struct Entry {
    MonoTime read_at{};
    std::optional<QuarantineRecord> record;  // the record as read (quarantining or not); none: absent
  };
  const Entry* Fresh(const std::string& key) const;
  void Insert(std::string key, Entry entry);

  Env& env_;
  ObjectStore& store_;
  QuarantineCacheOptions options_;
  std::unordered_map<std::string, Entry> entries_;
  QuarantineCacheStats stats_;
};

// Publishes wasmkeep_quarantine_checks_total{answer} over the cache's stats (base/metrics.h,
// "How WasmKeep publishes"). REQUIRES: cache outlives every RenderText() (loop thread).
void PublishQuarantineCacheMetrics(MetricsRegistry& registry, const QuarantineCache& cache);

}  // namespace wk::control
