// Usage, metered and durable (docs/tenants.md, "Usage"): what each tenant used on each node,
// hour by hour, as records usage/<tenant>/<node-id>/<YYYYMMDDHH> (`wasmkeep-usage 1`, FROZEN,
// strict decoder). A record holds one node's cumulative totals for that tenant and UTC hour:
// requests by outcome, CPU milliseconds, ingress and egress bytes, resident actor-seconds and
// bucket requests by purpose (store/object_store.h's names); its stored byte-seconds are 0
// (they are integrated cluster-wide: control/stored_usage.h).
//
// Contract: one writer per node and hour (the node's lease makes one process per node id),
// so a record is rewritten with an unconditional PUT at each flush; a cluster's usage is the
// sum over the records (SumTenantUsage). UsageBook keeps a process's totals and, at the
// first flush of a (tenant, hour) it did not start, adds the record already stored for it:
// a restarted node continues the hour's record instead of overwriting it, and a node killed
// with -9 loses what it counted since its last flush, nothing before.
// Threading: the given store's Env loop; simulator-clean (no clock, thread or socket: the
// caller says which hour it is).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "base/time.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

// How a request of the actor API ended, as usage counts it (docs/tenants.md, "Usage").
enum class UsageOutcome : std::uint8_t { kOk, kClientError, kThrottled, kActorFailed, kUnavailable, kCount };
inline constexpr std::size_t kUsageOutcomes = static_cast<std::size_t>(UsageOutcome::kCount);
// "ok", "client_error", "throttled", "actor_failed", "unavailable".
std::string_view UsageOutcomeName(UsageOutcome outcome);
// The outcome of an HTTP status: 2xx and 3xx ok, 429 throttled, other 4xx client_error,
// 502/503/504 unavailable, other 5xx actor_failed.
UsageOutcome UsageOutcomeOfStatus(int status);

struct UsageCounters {
  std::array<std::uint64_t, kUsageOutcomes> requests{};
  std::uint64_t cpu_ms = 0;
  // In a node's usage/ record: 0 (stored byte-seconds are integrated cluster-wide, in
  // stored-usage/ records: control/stored_usage.h; SumTenantUsage ignores what nodes of an
  // earlier version sampled here); in a sum: the tenant's.
  std::uint64_t stored_byte_seconds = 0;
  std::uint64_t ingress_bytes = 0;
  std::uint64_t egress_bytes = 0;
  std::uint64_t resident_actor_seconds = 0;
  std::array<std::uint64_t, kBucketPurposes> bucket_requests{};  // by BucketPurpose

  std::uint64_t Requests() const;
  std::uint64_t BucketRequests() const;
  UsageCounters& operator+=(const UsageCounters& other);
  friend bool operator==(const UsageCounters&, const UsageCounters&) = default;
};

// Hours since 1970-01-01T00 UTC.
using UsageHour = std::int64_t;
UsageHour HourOf(WallTime t);
WallTime HourStart(UsageHour hour);
// "2025112414" for 2025-11-24T14; ParseHourKey accepts exactly that form of a real hour.
std::string HourKey(UsageHour hour);
std::optional<UsageHour> ParseHourKey(std::string_view text);

inline constexpr std::string_view kUsagePrefix = "usage/";
std::string UsageKey(std::string_view tenant, std::string_view node, UsageHour hour);
inline std::string TenantUsagePrefix(std::string_view tenant) {
  return std::string(kUsagePrefix) + std::string(tenant) + "/";
}

struct UsageRecord {
  std::string tenant;
  std::string node;
  UsageHour hour = 0;
  UsageCounters counters;
  friend bool operator==(const UsageRecord&, const UsageRecord&) = default;
};

// REQUIRES (checked): a valid tenant name and node id, an hour not before 1970.
std::string EncodeUsageRecord(const UsageRecord& record);
// The record stored under UsageKey(tenant, node, hour), or kFatal("corrupt ...: line N: ...")
// for anything else (a record naming another tenant, node or hour included).
Result<UsageRecord> DecodeUsageRecord(std::string_view body, std::string_view tenant, std::string_view node,
                                      UsageHour hour);

// Writes the record (unconditional PUT: its node is its one writer).
Task<Status> WriteUsageRecord(ObjectStore& store, UsageRecord record, CallOptions call = {});
// The record of (tenant, node, hour); nullopt if none is stored.
Task<Result<std::optional<UsageRecord>>> ReadUsageRecord(ObjectStore& store, std::string tenant, std::string node,
                                                         UsageHour hour, CallOptions call = {});

// A tenant's usage summed over the cluster's nodes, by hour.
struct TenantUsage {
  std::map<UsageHour, UsageCounters> by_hour;
  std::set<std::string> nodes;  // the nodes with a record counted
  std::size_t records = 0;         // usage/ records (one per node and hour)
  std::size_t stored_records = 0;  // stored-usage/ records (one per hour)
  UsageCounters Total() const;
};
// Lists usage/<tenant>/ and sums the records of hours at or after since (every hour if
// nullopt; the hour is read from the key, so earlier records are not read), then adds the
// tenant's stored byte-seconds (stored-usage/<tenant>/, control/stored_usage.h). A key that is
// not <node>/<YYYYMMDDHH> or a corrupt record fails the sum with kFatal naming it: usage is
// never silently short.
Task<Result<TenantUsage>> SumTenantUsage(ObjectStore& store, std::string tenant, std::optional<UsageHour> since,
                                         CallOptions call = {});

// One process's usage, kept cumulatively per (tenant, hour) and flushed as this node's
// records. The caller adds to At(tenant, hour) and calls Flush periodically and at a clean
// stop; REQUIRES: one Flush at a time, and one UsageBook per node id at a time (the lease).
class UsageBook {
 public:
  explicit UsageBook(std::string node_id);

  // The process's totals of (tenant, hour), to add to; marks them for the next Flush.
  // REQUIRES: a valid tenant name (the caller counts only tenants it knows).
  UsageCounters& At(const std::string& tenant, UsageHour hour);
  // Writes every (tenant, hour) changed since its last write: at its first write, the
  // record already stored for it (a previous process's) is read and added. Afterwards,
  // hours before current_hour that are written are forgotten. Fails with the first error
  // (what failed stays marked and is written by the next Flush).
  Task<Status> Flush(ObjectStore& store, UsageHour current_hour, CallOptions call = {});

  // What this book would write for (tenant, hour) now (its base included once read).
  std::optional<UsageCounters> Totals(const std::string& tenant, UsageHour hour) const;
  std::size_t entries() const { return entries_.size(); }
  std::uint64_t flushes() const { return flushes_; }
  std::uint64_t flush_failures() const { return flush_failures_; }

 private:
  struct Entry {
    UsageCounters totals;
    bool based = false;  // the stored record (a previous process's) has been added
    bool dirty = false;
  };
  std::string node_id_;
  std::map<std::pair<std::string, UsageHour>, Entry> entries_;
  std::uint64_t flushes_ = 0;
  std::uint64_t flush_failures_ = 0;
};

}  // namespace wk::control
