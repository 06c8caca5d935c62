// TenantStoredBytes: each tenant's stored bytes (keys plus values of all its actors' state,
// cluster-wide) as this node knows them, and the stored_bytes quota checked against them on
// the event path (docs/tenants.md, "Quotas"). A node counts what its own events change
// (own: the sum of their committed changes, continued across restarts from the node's
// ledger record) and learns the sum of every other node's from the bucket (others); the
// ledger records are kept by server/stored_ledger.h. An event whose writes would take its
// tenant past the quota fails at the storage_put that would, naming the quota, and commits
// nothing; writes that shrink the state are never refused.
//
// Guarantees: events of one tenant running at once on several workers reserve their growth
// under one mutex before it is theirs, so on one node the quota is never exceeded; across
// nodes it can be exceeded by at most what the other nodes added since the last of their
// records this node read (the ledger's period twice, docs/tenants.md states the bound).
// Threading: any thread (one mutex, held for a map lookup).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "base/broken_models.h"
#include "base/status.h"

namespace wk::actor {

class TenantStoredBytes {
 public:
  // Broken models (base/broken_models.h): tests only.
  explicit TenantStoredBytes(BrokenModels broken = {}) : broken_(broken) {}
  void set_broken_models(BrokenModels broken) { broken_ = broken; }

  struct Figures {
    std::int64_t own = 0;     // this node's events' changes (with its ledger's base)
    std::int64_t others = 0;  // the other nodes' records, as last read
    std::uint64_t reserved = 0;  // growth of events running now, not settled yet
    std::optional<std::uint64_t> limit;  // the stored_bytes quota; nullopt: unlimited
    bool base_loaded = false;  // own includes this node's record as found in the bucket
    std::int64_t total() const { return own + others; }
  };

  // The tenant's quota (nullopt: unlimited), as the quota cache last read it.
  void SetLimit(const std::string& tenant, std::optional<std::uint64_t> limit);
  // The sum of the other nodes' ledger records for the tenant.
  void SetOthers(const std::string& tenant, std::int64_t bytes);
  // This node's ledger record for the tenant as found in the bucket (once per tenant, before
  // the node's first write of it): added to what this process counted.
  void LoadBase(const std::string& tenant, std::int64_t bytes);

  // An event of the tenant is about to grow the state by `growth` more bytes than it has
  // reserved: reserved, or kInvalidArgument naming the quota, as the actor's own
  // max_stored_bytes is (what = the host call).
  Status Reserve(const std::string& tenant, std::uint64_t growth, const char* what);
  // The event ended: its reservation goes, and what it committed (`change`, negative when the
  // state shrank) joins the node's count.
  void Settle(const std::string& tenant, std::uint64_t reserved, std::int64_t change);

  std::optional<Figures> Get(const std::string& tenant) const;
  std::map<std::string, Figures> All() const;
  std::uint64_t refusals() const;

 private:
  BrokenModels broken_;
  mutable std::mutex mu_;
  std::map<std::string, Figures> tenants_;  // guarded by mu_
  std::uint64_t refusals_ = 0;              // guarded by mu_
};

// What an EventTxn charges its growth to: the node's figures and the event's tenant. Empty
// (null): no tenant quota (tests, tools).
struct StoredQuotaScope {
  TenantStoredBytes* tenants = nullptr;
  std::string tenant;
};

}  // namespace wk::actor
