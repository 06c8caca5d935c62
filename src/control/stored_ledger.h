// The stored-bytes ledger (docs/tenants.md, "Quotas"): what each node's events changed in each
// tenant's stored bytes (keys plus values of its actors' state), one record per tenant and
// node, stored/<tenant>/<node-id> (`wasmkeep-stored 1`, strict decoder). An actor's state
// changes only on the node holding it, and a residency starts from the size the last one
// left, so the sum of a tenant's records is its actors' state together, cluster-wide, with no
// per-actor index. A node's record counts since the node (by its id) first ran with the
// ledger: state written before that is not counted.
//
// StoredLedger keeps one node's side: each period it writes the record of every tenant
// whose count changed (at once for a tenant with a stored_bytes quota, at most every
// `quiet_period` for the others: the ledger then costs a PUT per tenant and node per
// minute), first adding the record already stored for that node (a restarted node continues
// its count); and for each tenant with a quota it lists the tenant's records and reads those
// that changed, so the node knows the other nodes' sum. One writer per record (the node's
// lease makes one process per node id): unconditional PUTs.
// Drift: a node killed with -9 loses what it counted since its last write (at most a period
// of its events' changes); the tenant's figure stays that much off. Restores, forks and
// deletions of actors by an operator are not counted (docs/tenants.md says so).
//
// Threading: the given Env's loop; simulator-clean.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/time.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

inline constexpr std::string_view kStoredPrefix = "stored/";
std::string StoredKey(std::string_view tenant, std::string_view node);

struct StoredRecord {
  std::string tenant;
  std::string node;
  std::int64_t bytes = 0;  // negative when the node's events removed more than they added
  WallTime updated_at{};
  friend bool operator==(const StoredRecord&, const StoredRecord&) = default;
};
std::string EncodeStored(const StoredRecord& r);
// kFatal("corrupt ...") unless it is the record of (tenant, node).
Result<StoredRecord> DecodeStored(std::string_view body, std::string_view tenant, std::string_view node);

// The sum of a tenant's records (every node's): its stored bytes.
Task<Result<std::int64_t>> ReadStoredBytes(ObjectStore& store, std::string tenant, CallOptions call = {});

struct StoredLedgerHooks {
  // This node's count per tenant (own, with the base once loaded) and whether its stored
  // record was added to it yet.
  struct Own {
    std::int64_t bytes = 0;
    bool base_loaded = false;
  };
  std::function<std::map<std::string, Own>()> own;
  // Adds this node's stored record (0 if none) to the tenant's count, once.
  std::function<void(const std::string& tenant, std::int64_t base)> load_base;
  // The other nodes' sum, for a tenant with a quota.
  std::function<void(const std::string& tenant, std::int64_t others)> set_others;
  // The tenants with a stored_bytes quota (read each period).
  std::function<std::vector<std::string>()> limited;
};

struct StoredLedgerStats {
  std::uint64_t writes = 0;
  std::uint64_t failed = 0;   // a period's reads or writes that failed (retried next period)
  std::uint64_t corrupt = 0;  // records that did not decode (left out of the sum)
};

class StoredLedger {
 public:
  StoredLedger(Env& env, ObjectStore& store, std::string node, Duration period, Duration quiet_period,
               StoredLedgerHooks hooks);
  ~StoredLedger();
  StoredLedger(const StoredLedger&) = delete;
  StoredLedger& operator=(const StoredLedger&) = delete;

  void Start();
  void Stop();
  // One period's work; `all`: write every changed record now (a clean stop).
  Task<Status> Tick(bool all = false);
  StoredLedgerStats stats() const;

  struct State;  // shared with its task (stored_ledger.cc)

 private:
  std::shared_ptr<State> state_;
  TaskHandle loop_;
};

}  // namespace wk::control
