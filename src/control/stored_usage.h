// Stored byte-seconds (docs/tenants.md, "Usage"): the integral over time of each tenant's
// stored bytes (the sum of its stored-bytes ledger records, control/stored_ledger.h), kept
// per tenant and UTC hour as stored-usage/<tenant>/<YYYYMMDDHH> (`wasmkeep-stored_usage 1`,
// strict decoder): the byte-seconds of that hour so far and the instant they run to (`as_of`,
// the cursor).
//
// Contract: StoredUsageIntegrator::Integrate adds, per tenant, the ledger's sum times the
// time from the record's as_of to now, with a conditional write (If-Match the version read,
// or If-None-Match for a new hour), so every instant is integrated at most once however many
// nodes integrate at once: a write that loses the race is dropped (the winner covered that
// time). An interval that crosses an hour is split at the hour. A tenant whose latest record
// is older than the previous hour (a new tenant, or a cluster stopped that long) starts at
// now: time with no integrator at all for over an hour is not counted. One integrator at a
// time is the cheap case (usage_meter.h chooses the lowest live node id); any number is safe.
// Accuracy: the ledger's records lag their nodes by at most the ledger's quiet period (a
// minute by default), and a node killed with -9 loses its last period (stored_ledger.h).
//
// Threading: the given store's Env loop; simulator-clean (the caller says what time it is).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/broken_models.h"
#include "base/status.h"
#include "base/time.h"
#include "control/usage.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

inline constexpr std::string_view kStoredUsagePrefix = "stored-usage/";
std::string StoredUsageKey(std::string_view tenant, UsageHour hour);

struct StoredUsageRecord {
  std::string tenant;
  UsageHour hour = 0;
  std::uint64_t byte_seconds = 0;
  WallTime as_of{};  // inside [HourStart(hour), HourStart(hour + 1)]
  friend bool operator==(const StoredUsageRecord&, const StoredUsageRecord&) = default;
};

// REQUIRES (checked): a valid tenant name, an hour not before 1970.
std::string EncodeStoredUsage(const StoredUsageRecord& r);
// kFatal("corrupt ...: line N: ...") unless it is the record of (tenant, hour) with as_of
// inside its hour.
Result<StoredUsageRecord> DecodeStoredUsage(std::string_view body, std::string_view tenant, UsageHour hour);

// A tenant's stored byte-seconds by hour (hours at or after since; every hour if nullopt).
// A key that is not stored-usage/<tenant>/<YYYYMMDDHH> or a corrupt record fails with kFatal
// naming it.
Task<Result<std::map<UsageHour, std::uint64_t>>> ReadStoredUsage(ObjectStore& store, std::string tenant,
                                                                 std::optional<UsageHour> since, CallOptions call = {});

struct StoredUsageStats {
  std::uint64_t passes = 0;
  std::uint64_t failed = 0;     // passes with a read or write that failed (the next pass covers it)
  std::uint64_t written = 0;    // records written
  std::uint64_t conflicts = 0;  // writes another integrator won (its write covered the time)
  std::uint64_t corrupt = 0;    // ledger or stored-usage records that did not decode (left alone)
};

class StoredUsageIntegrator {
 public:
  // Broken models (base/broken_models.h): tests and the simulator only.
  explicit StoredUsageIntegrator(ObjectStore& store, BrokenModels broken = {});

  // One pass at wall time now: every tenant with ledger records is integrated up to now.
  // Returns the first failure (the other tenants are still integrated).
  Task<Status> Integrate(WallTime now, CallOptions call = {});
  const StoredUsageStats& stats() const { return stats_; }

 private:
  // The ledger's sum per tenant: one listing of stored/, reading only records whose version
  // changed since the last pass.
  Task<Result<std::map<std::string, std::int64_t>>> ReadLedger(CallOptions call);
  Task<Result<std::optional<std::pair<StoredUsageRecord, Version>>>> ReadRecord(const std::string& tenant,
                                                                                 UsageHour hour, CallOptions call);
  // kPreconditionFailed (counted as a conflict) when another integrator wrote first.
  Task<Status> WriteRecord(StoredUsageRecord r, Precondition condition, CallOptions call);
  Task<Status> IntegrateTenant(const std::string& tenant, std::int64_t bytes, WallTime now, CallOptions call);

  ObjectStore& store_;
  BrokenModels broken_;
  // stored/<tenant>/<node> -> (version, bytes) as last read.
  std::map<std::string, std::pair<Version, std::int64_t>> ledger_;
  StoredUsageStats stats_;
};

}  // namespace wk::control
