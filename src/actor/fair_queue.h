// FairQueue: one worker's queue of jobs, shared between tenants by weight (docs/tenants.md,
// "Fair shares"): start-time fair queueing. Each tenant's jobs keep their order (an actor is
// one tenant's, so its events stay in order); the next job is the first of the tenant whose
// virtual time is least; a job's worker time, once known, advances its tenant's virtual time
// by time / weight. A tenant that was idle starts at the virtual time of the job running, so
// idleness is not saved up as credit. So under saturation each busy tenant gets worker time
// in proportion to its weight, and a job of a tenant that was idle waits for at most one job
// of each other busy tenant (plus the one running), however many they queued. Pop reports,
// for such a job, how many jobs ran ahead of it (what wasmkeep_fair_share_jobs_ahead counts).
//
// Threading: none of its own; the caller serializes (the worker's mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "base/broken_models.h"
#include "base/time.h"

namespace wk::actor {

template <typename Job>
class FairQueue {
 public:
  // fair-share-off: first come, first served, whatever the tenant.
  explicit FairQueue(BrokenModels broken = {}) : fifo_(broken.on(BrokenModel::kFairShareOff)) {}

  struct Popped {
    std::string tenant;
    Job job;
    // For a job whose tenant had nothing queued and owed no time when it came (vtime at or
    // below the job running): the jobs that started between its arrival and its own start,
    // all of other tenants. The bound above: at most the number of other busy tenants.
    std::optional<std::size_t> ahead;
  };

  // REQUIRES: weight > 0.
  void Push(const std::string& tenant, double weight, Job job) {
    Flow& f = flows_[tenant];
    f.weight = weight;
    const bool fresh = f.jobs.empty() && f.vtime <= now_;
    if (f.jobs.empty()) f.vtime = std::max(f.vtime, now_);  // no credit for idleness
    f.jobs.push_back(Entry{next_seq_++, std::move(job), fresh ? std::optional<std::uint64_t>(pops_) : std::nullopt});
    ++size_;
  }

  // The next job and its tenant; nullopt if none.
  std::optional<Popped> Pop() {
    auto best = flows_.end();
    for (auto it = flows_.begin(); it != flows_.end(); ++it) {
      if (it->second.jobs.empty()) continue;
      if (best == flows_.end() || Before(it->second, best->second)) best = it;
    }
    if (best == flows_.end()) return std::nullopt;
    Flow& f = best->second;
    now_ = std::max(now_, f.vtime);
    Entry& e = f.jobs.front();
    Popped out{best->first, std::move(e.job), std::nullopt};
    if (e.pops_at_arrival) out.ahead = static_cast<std::size_t>(pops_ - *e.pops_at_arrival);
    ++pops_;
    f.jobs.pop_front();
    --size_;
    return out;
  }

  // The tenant's job just ran for `worker_time`.
  void Charge(const std::string& tenant, Duration worker_time) {
    auto it = flows_.find(tenant);
    if (it == flows_.end()) return;
    it->second.vtime += ToSeconds(worker_time) / it->second.weight;
    // An idle tenant with no credit left is forgotten (it would start at now_ anyway).
    if (it->second.jobs.empty() && it->second.vtime <= now_) flows_.erase(it);
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t tenants() const { return flows_.size(); }

 private:
  struct Entry {
    std::uint64_t seq = 0;  // arrival order (the FIFO of fair-share-off; ties)
    Job job;
    std::optional<std::uint64_t> pops_at_arrival;  // set for a fresh job (Popped::ahead)
  };
  struct Flow {
    std::deque<Entry> jobs;
    double vtime = 0;
    double weight = 1;
  };
  bool Before(const Flow& a, const Flow& b) const {
    if (!fifo_ && a.vtime != b.vtime) return a.vtime < b.vtime;
    return a.jobs.front().seq < b.jobs.front().seq;
  }

  const bool fifo_;
  std::map<std::string, Flow> flows_;
  double now_ = 0;  // the virtual time of the last job started
  std::uint64_t next_seq_ = 0;
  std::uint64_t pops_ = 0;  // jobs popped, in all
  std::size_t size_ = 0;
};

}  // namespace wk::actor
