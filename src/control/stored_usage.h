// Stored byte-seconds (docs/tenants.md, "Usage"): the integral over time of each tenant's
// stored bytes (the sum of its stored-bytes ledger records, control/stored_ledger.h), kept
// per tenant and UTC hour as stored-usage/<tenant>/<YYYYMMDDHH> (`wasmkeep-stored_usage 1`,
// strict decoder): the byte-seconds of that hour so far and the instant they run to (`as_of`,
// the cursor).
//
// Contract: StoredUsageIntegrator::Integrate adds, per tenant, the ledger's sum times the
// time from the record's as_of to now. A write replaces the record's cumulative count and
// cursor (it never adds to what is stored), so integrators racing never count an instant
// twice; each write is conditional (If-Match the version read, If-None-Match for a new hour),
// so a slower integrator's write never replaces a newer count: it is dropped, the winner
// having covered that time (unconditional, it would move the cursor back, and past a closed
// hour lose that hour's tail for good). An interval that crosses an hour is split at the hour.
// Cost: an integrator remembers what it wrote (version, count, the sum it saw), so a tenant
// whose sum has not changed is written only every `refresh` (the time between is counted at
// that sum when it is), and a changed sum is counted from the pass that first saw it; a
// tenant's first pass of an hour reads the hour before. A tenant whose sum is 0 or less and
// that has no record yet gets none. Gaps: time with no integrator is counted at the next pass
// when the tenant's last record is of this hour or the one before; an older record (a new
// tenant, or no node running for over an hour) starts the count at the pass.
// Accuracy: the ledger's records lag their nodes by at most the ledger's quiet period (a
// minute by default), and a node killed with -9 loses its last period (stored_ledger.h).
//
// Threading: the given store's Env loop; simulator-clean (the caller says what time it is).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
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
  std::uint64_t unchanged = 0;  // tenants left unwritten in a pass (sum unchanged, refresh not due)
  std::uint64_t conflicts = 0;  // writes another integrator won (its write covered the time)
  std::uint64_t corrupt = 0;    // ledger or stored-usage records that did not decode (left alone; each once)
};

class StoredUsageIntegrator {
 public:
  // refresh: how long an unchanged sum goes unwritten at most. Broken models
  // (base/broken_models.h): tests and the simulator only.
  explicit StoredUsageIntegrator(ObjectStore& store, Duration refresh = std::chrono::minutes(10),
                                 BrokenModels broken = {});

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
  // Its new version, or kPreconditionFailed (counted as a conflict) when another integrator
  // wrote first.
  Task<Result<Version>> WriteRecord(StoredUsageRecord r, Precondition condition, CallOptions call);
  // Writes r on `condition` and remembers it, or forgets what it knew of the tenant when the
  // outcome is not a clear success. A lost race is no failure: the winner covered the time.
  Task<Status> WriteAndRemember(const std::string& tenant, std::int64_t bytes, WallTime now, StoredUsageRecord r,
                                Precondition condition, CallOptions call);
  Task<Status> IntegrateTenant(const std::string& tenant, std::int64_t bytes, WallTime now, CallOptions call);
  // Counts a corrupt record once per key (a pass meets it again every time).
  void Corrupt(const std::string& key, const Status& why);

  // What this integrator last wrote for a tenant: the record, its version, the sum it counted
  // up to as_of, and the last pass that saw that sum (the sum is taken as changed after it).
  struct Known {
    StoredUsageRecord record;
    Version version;
    std::int64_t sum = 0;
    WallTime seen{};
  };

  ObjectStore& store_;
  Duration refresh_;
  BrokenModels broken_;
  std::map<std::string, Known> known_;  // by tenant
  std::set<std::string> corrupt_keys_;
  // stored/<tenant>/<node> -> (version, bytes) as last read.
  std::map<std::string, std::pair<Version, std::int64_t>> ledger_;
  StoredUsageStats stats_;
};

}  // namespace wk::control
