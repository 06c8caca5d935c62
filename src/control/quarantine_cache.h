// QuarantineCache: what one node knows of actors' quarantine records (quarantine.h), so a
// check asks the bucket about an actor at most once per `ttl` — not once per request — a
// quarantined actor is refused without a read at all, and a busy node learns that an actor
// no node has quarantined is not quarantined without a GET (docs/security.md, "The check,
// and what it costs").
//
// It knows from two kinds of answers, each trusted for `ttl` from the moment its request
// was sent: that bound is how late this node learns of another node's quarantine or of an
// operator's lift, and every start (QuarantineRead::kOnMiss) is answered by knowledge
// within it.
//   - Entries: one record read (a GET), or one this node wrote itself (a strike: Remember,
//     seen at once). Bounded (`max_entries`): when full, stale entries are dropped, and if
//     that frees nothing the whole cache is cleared — forgetting costs a request, never a
//     wrong answer.
//   - The listing of quarantine/: its keys and versions. An actor absent from it has no
//     record; one present at the version of a remembered entry has that entry's record;
//     any other present one is read. Made only when a check needs it and none is fresh,
//     and only when it costs less than the GETs it spares (`list_after`).
// Later news always wins, and news is only as late as its request: a listing answers for
// an actor only if it was sent after this node learned what it remembers of that actor
// (or forgot it), so a strike answered while a listing was on its way is never hidden by it.
//
// Errors are not remembered: a corrupt record (kFatal) is read again by the next check, and
// a bucket that did not answer is asked again.
//
// Threading: the Env loop thread. Simulator-clean (Env and ObjectStore only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/broken_models.h"
#include "base/metrics.h"
#include "control/quarantine.h"

namespace wk::control {

// actors.quarantine_list_after (docs/configuration.md): the default is about the price of
// one LIST in GETs on S3 and R2 (12.5), and the setting's largest value.
inline constexpr std::uint32_t kDefaultQuarantineListAfter = 12;
inline constexpr std::uint32_t kMaxQuarantineListAfter = 10'000;

struct QuarantineCacheOptions {
  // How long an answer (a read, a strike, a listing) is trusted, from its request's sending.
  // Short, because it is also how long an operator's lift or another node's quarantine
  // takes to reach every node; long enough that a busy actor costs one GET a while, not one
  // per request, and a busy node one LIST a while, not one GET per start.
  Duration ttl = std::chrono::seconds(2);
  // Actors remembered at once, and records a listing may hold: bounded, since any client can
  // name actors that do not exist. A listing of more records is not used.
  std::size_t max_entries = 10'000;
  // One request (a GET, or one page of a listing). The caller decides what a timeout means
  // (the front lets the request through: quarantine is a brake, not a lock).
  CallOptions read{std::chrono::seconds(1)};
  // quarantine-cache-keeps-late-answer: an answer (a read, a strike, a listing) is dated by
  // its arrival and replaces whatever is remembered (a late reply hides a newer quarantine).
  // quarantine-listing-outlives-ttl: a listing is trusted however old it is.
  BrokenModels broken;
  // A check that memory cannot answer lists quarantine/ instead of reading the actor's
  // record once it is at least the list_after-th such check within one ttl (times the pages
  // the last listing took): a LIST costs what 12.5 GETs cost on S3 and R2, so a quiet node
  // reads the record, and a busy one lists once a ttl and reads nothing for actors that
  // have no record. 0: never list; 1: list at every such check.
  std::uint32_t list_after = kDefaultQuarantineListAfter;
};

// When Check asks the bucket.
enum class QuarantineRead : std::uint8_t {
  kNever,   // what memory knows, else "not quarantined": no I/O (every request, before routing)
  kOnMiss,  // what memory knows (an entry, the listing), else one request: a GET, or a LIST
            // when it pays (right before an actor starts here)
  kAlways,  // one GET whatever is known (tests and tools)
};

struct QuarantineCacheStats {
  std::uint64_t cached = 0;  // answered by a remembered entry (or kNever without knowledge)
  std::uint64_t listed = 0;  // answered by the listing: no record, or the remembered one unchanged
  std::uint64_t reads = 0;   // answered by a GET
  std::uint64_t read_failures = 0;
  std::uint64_t listings = 0;         // LIST requests sent (one per page)
  std::uint64_t listing_failures = 0;  // listings that failed or held too many records
  std::uint64_t clears = 0;  // times the cache was full and cleared
};

class QuarantineCache {
 public:
  QuarantineCache(Env& env, ObjectStore& store, QuarantineCacheOptions options = {});
  QuarantineCache(const QuarantineCache&) = delete;
  QuarantineCache& operator=(const QuarantineCache&) = delete;

  // The actor's record if it is quarantined now; nullopt if not. `read` says when the
  // bucket is asked (above); an answer read is remembered for ttl. kNever without fresh
  // knowledge answers nullopt: the caller knows no more than before (a resident actor, whose
  // start was checked; or a request about to be routed to the node that runs the actor).
  // Errors: the read's (kRetryable, kUnknownOutcome, kCancelled: the bucket did not answer;
  // kFatal: a corrupt record).
  Task<Result<std::optional<QuarantineRecord>>> Check(ActorId actor, QuarantineRead read);
  // Without I/O: the record if what this node knows now says the actor is quarantined.
  std::optional<QuarantineRecord> Peek(const ActorId& actor) const;
  // Remembers a record this node wrote (or read elsewhere), as read at `asked_at`: when the
  // request that learned it was sent (default: now). An answer is only as fresh as its
  // request, and an entry is never replaced by an answer to an earlier request, so a strike
  // whose reply came late cannot hide a quarantine a later strike or read saw.
  void Remember(const QuarantineRecord& record, std::optional<MonoTime> asked_at = std::nullopt);
  // Forgets what it remembers of the actor: the next Check with kOnMiss asks the bucket,
  // unless a listing sent after this node learned what it forgot answers.
  void Forget(const ActorId& actor);

  // This node's wall clock (what a quarantine's end is compared with).
  WallTime Now() const { return env_.WallNow(); }
  std::size_t size() const { return entries_.size(); }
  const QuarantineCacheStats& stats() const { return stats_; }
  const QuarantineCacheOptions& options() const { return options_; }

 private:
  struct Entry {
    MonoTime read_at{};     // its request's sending: trusted until read_at + ttl
    MonoTime learned_at{};  // its answer's arrival: a listing sent after it has seen it
    std::optional<QuarantineRecord> record;  // the record as read (quarantining or not); none: absent
    Version version;  // the record's version as read; empty: unknown (a strike's) or absent
  };
  struct Listing {
    MonoTime sent_at{};
    std::unordered_map<std::string, Version> versions;  // actor (tenant/class/name) -> version
  };
  // What this node knows of the actor now, without I/O: {the record or none} when it knows,
  // nullopt when it must ask. `settle`: a fresh entry answers even when a later listing
  // shows its record changed since (kNever, Peek).
  std::optional<std::optional<QuarantineRecord>> Known(const std::string& key, bool settle, bool* from_listing) const;
  bool ListingFresh() const;
  void Insert(std::string key, Entry entry);
  void Dropped(const Entry& entry);
  // A start's check that no remembered entry answered (the listing may have): what a
  // listing spares, counted for list_after.
  void NoteDemand();
  // Whether listing pays now: at least list_after such checks (times the last listing's
  // pages) within the last ttl.
  bool ListingPays() const;
  // One listing of quarantine/ (every page), shared by the checks that need it meanwhile.
  // False when it failed, or held more than max_entries records (then not used).
  Task<bool> ListRecords();

  Env& env_;
  ObjectStore& store_;
  QuarantineCacheOptions options_;
  std::unordered_map<std::string, Entry> entries_;
  // The latest learned_at of an entry dropped (cleared, forgotten): a listing sent before it
  // answers for no actor without an entry, since one of them may be what was dropped.
  MonoTime forgotten_at_ = MonoTime::min();
  std::optional<Listing> listing_;
  bool listing_in_flight_ = false;
  std::vector<Latch<bool>> listing_waiters_;
  std::size_t last_listing_pages_ = 1;
  // After a listing of more than max_entries records, none for kTooManyPause ttls.
  static constexpr int kTooManyPause = 100;
  MonoTime no_listing_until_{};
  std::deque<MonoTime> demand_;  // NoteDemand's checks within the last ttl (at most what ListingPays needs)
  QuarantineCacheStats stats_;
};

// Publishes wasmkeep_quarantine_checks_total{answer} and wasmkeep_quarantine_listings_total
// over the cache's stats (base/metrics.h, "How WasmKeep publishes"). REQUIRES: cache
// outlives every RenderText() (loop thread).
void PublishQuarantineCacheMetrics(MetricsRegistry& registry, const QuarantineCache& cache);

}  // namespace wk::control
