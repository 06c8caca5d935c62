// Quarantine: the bucket record of an actor whose events keep killing its worker's
// instance or its node, refused cluster-wide while quarantined (docs/security.md,
// "Poisoned actors"), and the operations on it; nodes consult it through
// quarantine_cache.h. Format wasmkeep-quarantine 1, FROZEN (strict decoder: kFatal, never
// "absent"). Guarantees: strikes from racing nodes all count (If-Match, re-read and retry);
// an unknown outcome is resolved by the strike's random id; a lift (delete) clears strikes
// and quarantine together. Threading: the given store's Env loop; simulator-clean. Details:
// docs/internals.md, "Quarantine records".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "base/time.h"
#include "control/common.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

inline constexpr std::string_view kQuarantinePrefix = "quarantine/";
std::string QuarantineKey(const ActorId& actor);

// Bounds the strike lines of one record, and so the setting actors.quarantine_strikes: a
// record read on the request path stays small (about 50 bytes a strike).
inline constexpr std::uint32_t kMaxStrikes = 100;
// A reason is cut to this many bytes (the line codec allows 1024): enough for an engine's
// message naming the limit, short enough for a log line and a 503 body.
inline constexpr std::size_t kMaxReasonBytes = 300;

// When strikes become a quarantine ([actors] quarantine_*; docs/configuration.md).
struct QuarantinePolicy {
  // Strikes within `window` that quarantine an actor; 0 turns quarantine off (no strikes
  // are recorded, no record is read).
  std::uint32_t strikes = 3;
  Duration window = std::chrono::minutes(10);
  // How long a quarantine lasts.
  Duration duration = std::chrono::minutes(10);
  bool enabled() const { return strikes > 0; }
};
// kInvalidArgument naming the setting: strikes 0..kMaxStrikes, window and duration 1 ms
// to 7 days.
Status ValidateQuarantinePolicy(const QuarantinePolicy& policy);

struct Strike {
  WallTime at{};
  std::string node;  // a valid node id
  std::string id;    // 16 lowercase hex characters
  friend bool operator==(const Strike&, const Strike&) = default;
};

struct QuarantineRecord {
  ActorId actor;
  WallTime until{};    // epoch (0): never quarantined
  std::string reason;  // printable ASCII, 1..kMaxReasonBytes, no space at either end
  std::vector<Strike> strikes;  // 1..kMaxStrikes, in the order they were recorded

  bool QuarantinedAt(WallTime now) const { return now < until; }
  // The oldest strike's time (the window's start).
  WallTime window_start() const;
  friend bool operator==(const QuarantineRecord&, const QuarantineRecord&) = default;
};

// The reason as the record stores it: bytes outside printable ASCII become '?', spaces at
// either end are dropped, then cut to kMaxReasonBytes; an empty result is "unknown".
std::string CleanReason(std::string_view reason);

// REQUIRES (checked): a valid record (the decoder's rules below).
std::string EncodeQuarantineRecord(const QuarantineRecord& record);
// kFatal("corrupt ...") unless a valid record naming `actor`: the header, the fields in
// order, 1..kMaxStrikes strike lines with valid node ids and distinct 16-hex ids, nothing
// after them.
Result<QuarantineRecord> DecodeQuarantineRecord(std::string_view body, const ActorId& actor);

// The record (nullopt when there is none).
Task<Result<std::optional<QuarantineRecord>>> ReadQuarantine(ObjectStore& store, ActorId actor,
                                                             CallOptions call = {});
// The same, with the version read (empty when there is no record): what a listing's entry
// for the key is compared with (quarantine_cache.h).
struct VersionedQuarantine {
  std::optional<QuarantineRecord> record;
  Version version;
};
Task<Result<VersionedQuarantine>> ReadQuarantineVersioned(ObjectStore& store, ActorId actor, CallOptions call = {});

struct StrikeOutcome {
  QuarantineRecord record;  // as stored after the call
  bool counted = false;      // this strike is in the record (false: it was already quarantined)
  bool quarantined_now = false;  // this strike started the quarantine
};
// Records one strike against `actor` by `node` (see "Strikes" above). REQUIRES: an enabled
// policy. kInvalidArgument for a bad actor or node id; kFatal for a corrupt record (never
// overwritten); kRetryable after kMaxUpdateAttempts conflicts or failures; kUnknownOutcome
// if the last write may have landed and could not be read back.
Task<Result<StrikeOutcome>> RecordStrike(ObjectStore& store, Env& env, ActorId actor, std::string node,
                                         std::string reason, QuarantinePolicy policy, CallOptions call = {});

// Deletes the record: the actor may start again at once on a node that has not cached
// its quarantine (each node within QuarantineCache's ttl). kNotFound if there was none.
Task<Status> LiftQuarantine(ObjectStore& store, ActorId actor, CallOptions call = {});

// How long past the end of its effect a record is kept before a sweep may delete it: more
// than any clock skew between the nodes that strike (their strikes carry their own clocks).
inline constexpr Duration kSpentMargin = std::chrono::minutes(5);
// True when the record does nothing any more: not quarantined for kSpentMargin, and none of
// its strikes would count towards the next quarantine (each is spent by the quarantine that
// ended, or older than the window by kSpentMargin).
bool QuarantineSpent(const QuarantineRecord& record, WallTime now, const QuarantinePolicy& policy);
// Deletes every spent record, If-Match the version read (a strike that lands meanwhile
// keeps it); corrupt records are left for an operator. The number deleted. Nothing on a
// bucket without conditional deletes (a delete could then erase a new strike).
Task<Result<std::size_t>> DeleteSpentQuarantines(ObjectStore& store, Env& env, QuarantinePolicy policy,
                                                 CallOptions call = {});

struct QuarantineSummary {
  ActorId actor;
  std::optional<QuarantineRecord> record;  // absent when error is set
  std::string error;                       // a corrupt record: listed, never skipped
};
// Every record (of one tenant, or all), by key. Records past their quarantine are listed
// too; the caller filters with QuarantinedAt.
Task<Result<std::vector<QuarantineSummary>>> ListQuarantine(ObjectStore& store, std::optional<std::string> tenant,
                                                            CallOptions call = {});

// "2026-01-31T12:00:00.000Z": the UTC time an operator reads in a 503 body or a listing.
std::string FormatUtc(WallTime t);
// What a refused request is told (one line): the actor, until when (UTC and unix ms), its
// strikes, the last reason, and how an operator lifts it.
std::string DescribeQuarantine(const QuarantineRecord& record);
// Whole seconds until the quarantine ends, rounded up, at least 1: a 503's Retry-After.
std::int64_t RetryAfterSeconds(const QuarantineRecord& record, WallTime now);

}  // namespace wk::control
