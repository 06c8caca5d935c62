// Quarantine: an actor whose events keep ending its worker's instance (V8 heap limit, out
// of memory) or its node's process is refused cluster-wide for a while, so one poisoned
// actor cannot walk through the cluster taking node after node with it
// (docs/security.md, "Poisoned actors"). This file is the record in the bucket and the
// operations on it; the cache nodes consult per request is quarantine_cache.h, and what
// turns events into strikes is src/server/quarantine_service.h.
//
// Object (the format is FROZEN: a change is a new header version; the decoder is strict
// and answers kFatal("corrupt ...") for anything else, never "absent"):
//
//   quarantine/<tenant>/<class>/<name>   wasmkeep-quarantine 1
//                                        actor <tenant>/<class>/<name>
//                                        until_ms <unix ms>   (0: never quarantined)
//                                        reason <the last strike's reason>
//                                        strikes <n>          (1..kMaxStrikes)
//                                        <at unix ms> <node id> <strike id>   (n lines)
//
// A strike line is one strike: when it was recorded (the writer's wall clock), by which
// node, and a random 16-hex id that makes it recognisable after a lost reply. The window's
// start is the oldest strike line's time. The actor is quarantined while now < until_ms.
//
// Strikes. RecordStrike reads the record, then writes it back with the new strike under
// If-Match the version read (If-None-Match: * to create it), re-reading and retrying on a
// conflict, so two nodes striking at once both count (bounded by kMaxUpdateAttempts).
// Before appending, strikes older than the window, and strikes at or before the end of an
// earlier quarantine (they were spent on it), are dropped. Once the strikes left reach the
// policy's count, until_ms becomes now + quarantine. While quarantined, a strike changes
// nothing (no write). An unknown outcome is resolved by re-reading and looking for the
// strike's id. Every write carries a fresh strike id, so its bytes differ from every earlier
// write's and an If-Match can never match a later write of identical bytes (object_store.h).
//
// Lifting. An operator deletes the record (LiftQuarantine, `wasmkeep actor unquarantine`):
// strikes and quarantine go together. A strike racing with the delete meets a precondition
// failure, re-reads, finds nothing and starts a new record.
//
// Threading: every function runs on the Env loop of the given store. No sockets, threads
// or clocks of their own: the same code runs on mem:// in unit tests and in the simulator.
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
