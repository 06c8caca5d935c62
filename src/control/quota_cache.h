// QuotaCache: a node's view of every tenant's quotas (control/quotas.h), read with one listing
// of control/quotas/ per period and a GET of each record that is new or whose version
// changed, so a `wasmkeep tenant set --quota` reaches the node within a period (plus the
// listing's own time). A record that does not decode keeps the tenant's last good quotas in
// force (unlimited if none) and is counted; a failed listing keeps everything as it was.
// Reading it (For) never touches the bucket.
//
// Threading: the given Env's loop; simulator-clean.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "control/quotas.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

inline constexpr Duration kDefaultQuotaPeriod = std::chrono::seconds(5);

struct QuotaCacheStats {
  std::uint64_t refreshes = 0;       // listings that completed
  std::uint64_t failed_refreshes = 0;
  std::uint64_t corrupt_records = 0;  // reads of a record that did not decode
  std::uint64_t tenants_limited = 0;  // tenants with at least one quota, now
};

class QuotaCache {
 public:
  QuotaCache(Env& env, ObjectStore& store, Duration period = kDefaultQuotaPeriod);
  ~QuotaCache();
  QuotaCache(const QuotaCache&) = delete;
  QuotaCache& operator=(const QuotaCache&) = delete;

  // Reads now, then every period until Stop (or destruction).
  void Start();
  void Stop();
  // One listing and the reads it calls for (what Start runs each period).
  Task<Status> Refresh();

  // The tenant's quotas as last read; nullptr when it has none (unlimited).
  const TenantQuotas* For(std::string_view tenant) const;
  // The tenants with quota `q` set, with its value, as last read.
  std::map<std::string, std::uint64_t> With(Quota q) const;
  // Called after each refresh that completed (what reads quotas into other structures, as
  // the stored-bytes figures, follows a change within the same period).
  void set_on_refresh(std::function<void()> fn);
  QuotaCacheStats stats() const;

  struct State;  // shared with its refreshing task (quota_cache.cc)

 private:
  std::shared_ptr<State> state_;
  TaskHandle loop_;
};

}  // namespace wk::control
