// The replica tests' fixture (replica_test.cc, history_test.cc): one simulated host
// (SimWorld virtual time, a MemStore with scripted faults) and helpers to open replicas of
// one actor and write to them. Tests only.
#pragma once

#include <gtest/gtest.h>

#include "base/log.h"
#include "cluster/testing/harness.h"
#include "replica/replica.h"

namespace wk::replica::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

inline actor::Batch Put(std::string key, std::string value) {
  actor::Batch b;
  b.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, std::move(key), std::move(value)});
  return b;
}

class ReplicaTest : public ::testing::Test {
 protected:
  ReplicaTest() {
    log::SetLevel(log::Level::kOff);
  }

  OpFault Fault(const OpInfo& op) {
    OpFault f;
    f.request_delay = milliseconds(5);
    f.reply_delay = milliseconds(5);
    if (op.key.starts_with(kWalPrefix) && op.op == StoreOp::kPut) {
      f.request_delay = wal_put_delay_;
      if (fail_wal_puts_) f.fail_before_apply = Retryable("test: refused");
    }
    if (op.op == StoreOp::kGet) f.request_delay = get_delay_;
    if (op.key.starts_with(kSnapshotPrefix) && op.op == StoreOp::kPut) f.request_delay = snapshot_put_delay_;
    return f;
  }

  // By default the switches WASMKEEP_BROKEN_MODELS names (scripts/check-proofs.sh).
  std::unique_ptr<Replica> Open(Generation gen, ReplicaOptions options = {},
                                BrokenModels broken = BrokenModels::FromEnvironment().value()) {
    auto r = TryOpen(gen, options, broken);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }
  Result<std::unique_ptr<Replica>> TryOpen(Generation gen, ReplicaOptions options = {},
                                          BrokenModels broken = BrokenModels::FromEnvironment().value()) {
    Replica::Deps deps{env_, *store_, [this](std::function<void()> fn) { env_.Post(std::move(fn)); }, nullptr, broken};
    Replica::Hold hold{gen, [this] { return valid_; }};
    auto r = RunTask(world_, env_, Replica::Open(std::move(deps), actor_, std::move(hold), options));
    if (!r) return Fatal("open did not finish");
    return std::move(*r);
  }

  // Commits and records the answer of WhenReleasable.
  std::shared_ptr<std::optional<Status>> Write(Replica& r, std::string key, std::string value) {
    auto answer = std::make_shared<std::optional<Status>>();
    const std::uint64_t seq = r.Commit(Put(std::move(key), std::move(value)));
    r.WhenReleasable(seq, [answer](Status s) { *answer = std::move(s); });
    return answer;
  }
  void Settle() { world_.RunFor(seconds(1)); }

  bool Has(const std::string& key) const { return bucket_->objects().count(key) > 0; }
  std::size_t Count(std::string_view prefix) const {
    std::size_t n = 0;
    for (const auto& [k, v] : bucket_->objects()) n += k.starts_with(prefix);
    return n;
  }

  SimWorld world_{7};
  std::shared_ptr<MemBucket> bucket_ = std::make_shared<MemBucket>();
  // One simulated host (cluster/testing/harness.h): its Env and its MemStore view of the bucket.
  cluster_testing::SimHost host_{
      world_, bucket_, {.fault = [this](const OpInfo& op) { return Fault(op); }, .origin_ms = 1'700'000'000'000}};
  SimEnv& env_ = host_.env();
  MemStore* store_ = &host_.store();
  ActorId actor_{"t", "c", "a"};
  bool valid_ = true;
  Duration wal_put_delay_ = milliseconds(5);
  Duration get_delay_ = milliseconds(5);
  Duration snapshot_put_delay_ = milliseconds(5);
  bool fail_wal_puts_ = false;
};

}  // namespace wk::replica::testing
