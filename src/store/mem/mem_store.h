// mem:// — an in-memory bucket for tests and the deterministic simulator.
//
// Two parts, because in the simulator several nodes share one bucket:
//   - MemBucket: the objects themselves (the shared state), with request counters.
//   - MemStore: one node's client of a MemBucket. It runs on that node's Env, so its
//     delays are that node's timers (virtual time in the simulator).
//
// Fault injection. A MemStore asks its FaultHook, for every call, what goes wrong with
// it (OpFault). The hook can delay the request (it is applied late, possibly after the
// caller gave up: "writes delayed and applied late"), fail it before it is applied
// (kRetryable or any status), lose the reply after applying (the caller sees
// kUnknownOutcome at its deadline), or delay the reply. The simulator drives these from
// its seed; tests script them.
//
// Semantics match S3 with conditional writes (object_store.h): versions are "m<N>" from
// one counter per bucket, so never reused, even after delete and re-create.
//
// Threading: a MemBucket is not thread-safe; every MemStore on it must run on one thread
// (true in the simulator and in single-loop tests).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "env/env.h"
#include "store/object_store.h"

namespace wk {

enum class StoreOp : std::uint8_t { kGet, kHead, kPut, kDelete, kList };
std::string_view StoreOpName(StoreOp op);

struct RequestCounts {
  std::uint64_t get = 0, head = 0, put = 0, del = 0, list = 0;
  std::uint64_t precondition_failed = 0;
};

class MemBucket {
 public:
  struct Object {
    std::string body;
    Version version;
    std::int64_t modified_ms = 0;  // when it was applied (ListEntry::modified_ms)
  };

  // Direct access for checkers and tests (no faults, no counting).
  const std::map<std::string, Object>& objects() const { return objects_; }
  const RequestCounts& counts() const { return counts_; }

  // Called after every applied put (simulator checkers watch what actually landed, and
  // when, as opposed to what a caller heard back).
  using PutObserver = std::function<void(const std::string& key, const std::string& body,
                                         const Version& version)>;
  void set_put_observer(PutObserver o) { put_observer_ = std::move(o); }

  // The operations as applied at the bucket (what MemStore calls once a request
  // "arrives"). Exposed so that checkers can reason about exactly what was applied.
  Result<GetOutput> ApplyGet(const std::string& key);
  Result<ObjectMeta> ApplyHead(const std::string& key);
  // modified_ms: the bucket's time of the write (MemStore passes its transit clock's).
  Result<Version> ApplyPut(const std::string& key, std::string body, const Precondition& cond,
                           std::int64_t modified_ms = 0);
  Status ApplyDelete(const std::string& key, const Precondition& cond);
  Result<ListPage> ApplyList(const ListOptions& options);

 private:
  Version NextVersion() { return Version("m" + std::to_string(++last_version_)); }

  std::map<std::string, Object> objects_;
  PutObserver put_observer_;
  std::uint64_t last_version_ = 0;
  RequestCounts counts_;
};

// What goes wrong with one call. The default is nothing.
struct OpFault {
  Duration request_delay{0};  // before the bucket applies the request
  Duration reply_delay{0};    // after it applied, before the caller hears
  // Fail before applying with this status (must not be ok). Nothing is applied.
  std::optional<Status> fail_before_apply;
  // Apply, then never answer: the caller gets kUnknownOutcome at its deadline.
  bool lose_reply = false;
};

struct OpInfo {
  StoreOp op;
  const std::string& key;  // the prefix for kList
};
using FaultHook = std::function<OpFault(const OpInfo&)>;

class MemStore final : public ObjectStore {
 public:
  // transit, if given, times the request's way to the bucket instead of env: in the
  // simulator it is the bucket's own clock, so a request in flight still lands after the
  // process that sent it died (as on a real bucket).
  MemStore(Env& env, std::shared_ptr<MemBucket> bucket, FaultHook hook = nullptr,
           Env* transit = nullptr);
  ~MemStore() override;

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override;
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                            CallOptions options) override;
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override;
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override;
  std::string Describe() const override { return "mem://"; }
  // The clock of the Env the store runs on (the simulated bucket has no clock of its own).
  Task<Result<BucketClock>> BucketTime(CallOptions options) override;

  void set_fault_hook(FaultHook hook) { hook_ = std::move(hook); }
  MemBucket& bucket() { return *bucket_; }

 private:
  // Runs apply under the fault plan for (op, key) and delivers its result to the caller,
  // honouring the deadline and cancellation. is_write decides what cancellation means.
  template <typename R>
  Task<R> Run(StoreOp op, std::string key, bool is_write, CallOptions options,
              std::function<R()> apply);

  Env& env_;
  Env& transit_;
  std::shared_ptr<MemBucket> bucket_;
  FaultHook hook_;
  // Cleared on destruction: requests still in transit land, but their replies go nowhere.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
