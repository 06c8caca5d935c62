// The `lease` scenario: node leases, the listing and the fence watch of three nodes,
// under a faulty bucket, clock skew at the bound, kills, restarts, twins, partitions,
// outages and clean stops. The `ownership` scenario adds actors acquired, used and released
// on every node (ADR 0020 §3, §4); the `storage` scenario runs the durable replica on those
// holds (docs/architecture.md, "Durable storage"). One harness, LeaseSim, runs all three, so
// the storage scenario gets every fault and ownership checker of the other two. See
// docs/simulation.md for the fault model and checkers.
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "cluster/cluster_node.h"
#include "env/sim_env.h"
#include "replica/replica.h"
#include "replica/restore.h"
#include "scenario.h"
#include "storage_history.h"
#include "store/mem/mem_store.h"
#include "store/store_wrapper.h"

namespace wk::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kSlots = 3;
constexpr std::int64_t kOriginMs = 1'764'000'000'000;
constexpr Duration kChaosFor = seconds(200);
constexpr Duration kHealFor = seconds(60);
// After the run, requests still in transit (a late segment takes up to 20 s) land before
// the final audit reads the bucket.
constexpr Duration kTransitDrain = seconds(30);
// A checker's slack for millisecond truncation of wall clocks.
constexpr Duration kTolerance = milliseconds(2);

// Forwards to a store and reports every put and delete as it is sent.
class RecordingStore final : public StoreWrapper {
 public:
  using OnSend = std::function<void(const std::string& key, const std::string& body)>;
  using OnDelete = std::function<void(const std::string& key)>;
  RecordingStore(ObjectStore& inner, OnSend on_send, OnDelete on_delete = nullptr)
      : StoreWrapper(inner), on_send_(std::move(on_send)), on_delete_(std::move(on_delete)) {}
  Task<Result<Version>> Put(std::string key, std::string body, Precondition c, CallOptions o) override {
    on_send_(key, body);
    return StoreWrapper::Put(std::move(key), std::move(body), std::move(c), o);
  }
  Task<Status> Delete(std::string key, Precondition c, CallOptions o) override {
    if (on_delete_) on_delete_(key);
    return StoreWrapper::Delete(std::move(key), std::move(c), o);
  }
  std::string Describe() const override { return "recording:" + inner().Describe(); }

 private:
  OnSend on_send_;
  OnDelete on_delete_;
};

struct Process {
  int number = 0;
  int slot = 0;
  bool twin = false;
  std::string node_id;
  std::string instance;
  Duration skew{0};
  std::unique_ptr<SimEnv> env;
  std::unique_ptr<MemStore> mem;
  std::unique_ptr<RecordingStore> store;
  // The replicas' own view of the bucket (storage scenario): what they write and delete.
  std::unique_ptr<RecordingStore> replica_store;
  std::unique_ptr<ClusterNode> node;
  // Actors a workload of this process is using: one replica per resident actor, as in the
  // actor runtime (a second Open under the same hold would write its fence twice).
  std::set<ActorId> in_use;
  // Generations that already served a replica here, per actor: a hold that went invalid
  // (the replica was cut) can become valid again in the same lease epoch, and its log keys
  // are taken. As ReplicaProvider::Open does, such a hold is released, not reused.
  std::map<ActorId, std::set<std::uint64_t>> used_generations;
  bool running = false;
  bool stopping = false;
  bool draining = false;
  MonoTime started{};
  std::optional<LeaseEnd> end;
};

// What the checkers know of a fence sent by a node, keyed by its body.
struct FenceSend {
  int sender = 0;
  MonoTime sent{};
  WallTime sender_wall{};
  bool sender_valid = false;
  std::optional<MonoTime> sender_valid_since;
};

enum class Mode {
  kLease,      // node leases only
  kOwnership,  // plus actors acquired, used and released (ADR 0020 §3, §4)
  kStorage,    // plus a durable replica on every hold, writing (docs/architecture.md, "Durable storage")
};

class LeaseSim {
 public:
  LeaseSim(const RunOptions& options, Mode mode)
      : ownership_(mode != Mode::kLease), storage_(mode == Mode::kStorage), options_(options), world_(options.seed),
        rng_(options.seed ^ 0x9e3779b97f4a7c15ULL), bucket_env_(world_, FromUnixMs(kOriginMs)),
        bucket_(std::make_shared<MemBucket>()) {
    timing_ = LeaseTiming{};
    chaos_for_ = kChaosFor;
    // Few actors in the storage scenario, so that holds move between nodes often.
    actors_ = storage_ ? kStorageActors : kActors;
    for (int i = 0; i < actors_; ++i) actor_ids_.push_back(ActorId{"t", "c", "a" + std::to_string(i)});
    bucket_->set_put_observer([this](const std::string& key, const std::string& body, const Version&) {
      OnLanded(key, body);
    });
    for (int s = 0; s < kSlots; ++s) {
      // Skew at the bound half of the time, anywhere within it otherwise.
      const auto max = timing_.max_skew;
      switch (Uniform(0, 3)) {
        case 0: slot_skew_[s] = max; break;
        case 1: slot_skew_[s] = -max; break;
        default: slot_skew_[s] = milliseconds(Uniform(-Ms(max), Ms(max)));
      }
    }
    if (storage_) ConfigureStorage();
  }

  RunResult Run() {
    for (int s = 0; s < kSlots; ++s) StartProcess(s, false);
    ScheduleChaos();
    if (storage_) ScheduleMoves();
    const MonoTime chaos_end = MonoTime(chaos_for_);
    const MonoTime end = chaos_end + kHealFor;
    while (world_.Now() < end && result_.violations.empty()) {
      if (!world_.RunOne()) break;
      if (!healed_ && world_.Now() >= chaos_end) Heal();
      CheckEveryStep();
    }
    if (result_.violations.empty()) FinalChecks();
    for (auto& [n, p] : processes_) Teardown(*p);
    if (storage_ && result_.violations.empty()) FinalAudit();
    result_.ok = result_.violations.empty();
    result_.history_digest = digest_;
    result_.trace.assign(trace_.begin(), trace_.end());
    return std::move(result_);
  }

 private:
  // ---- randomness and tracing
  std::int64_t Uniform(std::int64_t lo, std::int64_t hi) {  // inclusive
    return lo + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool Chance(double p) { return static_cast<double>(rng_() % 1'000'000) < p * 1'000'000; }
  static std::int64_t Ms(Duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }
  std::string Now() const { return std::to_string(Ms(world_.Now().time_since_epoch())) + "ms"; }

  void Trace(const std::string& line) {
    std::string full = Now() + " " + line;
    for (char c : full) digest_ = (digest_ ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    trace_.push_back(std::move(full));
    while (trace_.size() > options_.trace_lines) trace_.pop_front();
  }
  void Violation(const std::string& what) {
    Trace("VIOLATION " + what);
    result_.violations.push_back(Now() + " " + what);
  }

  // ---- processes
  void StartProcess(int slot, bool twin) {
    auto p = std::make_unique<Process>();
    p->number = next_process_++;
    p->slot = slot;
    p->twin = twin;
    p->node_id = "n" + std::to_string(slot);
    p->skew = slot_skew_[slot];
    p->env = std::make_unique<SimEnv>(world_, FromUnixMs(kOriginMs), p->skew);
    p->instance = p->env->RandomHex(8);
    instance_skew_[p->instance] = p->skew;
    instance_process_[p->instance] = p->number;
    const int number = p->number;
    p->mem = std::make_unique<MemStore>(*p->env, bucket_, [this, slot](const OpInfo& op) { return Fault(slot, op); },
                                        &bucket_env_);
    p->store = std::make_unique<RecordingStore>(*p->mem, [this, number](const std::string& k, const std::string& b) {
      OnSend(number, k, b);
    });
    if (storage_) {
      p->replica_store = std::make_unique<RecordingStore>(
          *p->mem, [this, number](const std::string& k, const std::string& b) { OnReplicaSend(number, k, b); },
          [this, number](const std::string& k) { OnReplicaDelete(number, k); });
    }
    p->node = std::make_unique<ClusterNode>(*p->env, *p->store, NodeIdentity{p->node_id, "sim", "sim", ""}, timing_,
                                            p->instance);
    LeaseMutants lm;
    lm.validity_from_reply = options_.mutant == "validity-from-reply";
    p->node->lease().set_mutants(lm);
    FenceMutants fm;
    fm.unconditional_fence = options_.mutant == "unconditional-fence";
    fm.no_watch_wait = options_.mutant == "no-watch-wait";
    p->node->fence_watch().set_mutants(fm);
    OwnersMutants om;
    om.wake_reuses_generation = options_.mutant == "wake-reuses-generation";
    om.resolver_without_lock = options_.mutant == "resolver-without-lock";
    om.free_on_view = options_.mutant == "free-on-view";
    om.free_on_absent_node = options_.mutant == "free-on-absent-node";
    p->node->owners().set_mutants(om);
    p->node->lease().AddObserver({
        [this, number](std::uint64_t e) { Trace("p" + std::to_string(number) + " valid epoch " + std::to_string(e)); },
        [this, number](std::uint64_t) {
          ++result_.lapses;
          Trace("p" + std::to_string(number) + " lapsed");
        },
        [this, number](const std::string& why) { Trace("p" + std::to_string(number) + " lost: " + why); },
    });
    p->running = true;
    p->started = world_.Now();
    Trace("start p" + std::to_string(number) + " as " + p->node_id + (twin ? " (twin)" : "") + " instance " +
          p->instance + " skew " + std::to_string(Ms(p->skew)) + "ms");
    Process* raw = p.get();
    processes_[number] = std::move(p);
    raw->env->Spawn(RunProcess(raw), "process");
    if (storage_) {
      for (int w = 0; w < kWorkers; ++w) raw->env->Spawn(StorageWorkload(raw), "storage workload");
    } else if (ownership_) {
      for (int w = 0; w < kWorkers; ++w) raw->env->Spawn(Workload(raw), "workload");
    }
  }

  Task<void> RunProcess(Process* p) {
    LeaseEnd end = co_await p->node->Run();
    p->end = end;
    p->running = false;
    if (end.reason != LeaseEndReason::kStopped) ++result_.lost_leases;
    Trace("p" + std::to_string(p->number) + " exits: " + std::string(LeaseEndReasonName(end.reason)) + " " +
          end.message);
    // The supervisor restarts a node that exited (systemd Restart=on-failure); a twin is
    // a mistake nobody restarts. Teardown happens outside the process's own stack.
    // A clean stop is reaped by StopProcess once `released` is written.
    if (end.reason == LeaseEndReason::kStopped) co_return;
    const int number = p->number;
    const int slot = p->slot;
    bucket_env_.Post([this, number] { Reap(number); });
    ScheduleRestart(slot, milliseconds(Uniform(500, 5000)));
  }

  void Teardown(Process& p) {
    // Killing a process: its frames go with its Env (while the node they point into still
    // exists); requests it sent stay in transit.
    if (p.node) p.node->owners().StopBackground();
    p.env.reset();
    p.node.reset();
    p.store.reset();
    p.replica_store.reset();
    p.mem.reset();
    p.running = false;
  }

  void Reap(int number) {
    auto it = processes_.find(number);
    if (it == processes_.end()) return;
    if (it->second->stopping) pending_start_.erase(it->second->slot);
    Teardown(*it->second);
    processes_.erase(it);
  }

  // The running process of a slot (a twin that took over counts: the supervisor cannot
  // tell them apart either).
  Process* Primary(int slot) {
    for (auto& [n, p] : processes_)
      if (p->slot == slot && p->running && !p->stopping) return p.get();
    return nullptr;
  }
  int Running(int slot) const {
    int n = 0;
    for (auto& [num, p] : processes_)
      if (p->slot == slot && p->running) ++n;
    return n;
  }

  void ScheduleRestart(int slot, Duration after) {
    bucket_env_.StartTimer(world_.Now() + after, [this, slot] {
      if (!finished_ && Running(slot) == 0 && !pending_start_.count(slot)) StartProcess(slot, false);
    });
  }

  // ---- the actor workload (ownership scenario)
  static constexpr int kActors = 6;
  static constexpr int kStorageActors = 3;
  static constexpr int kWorkers = 2;  // concurrent workers per process

  // Built once: the two-owner check asks for every actor after every event.
  const ActorId& ActorAt(std::int64_t i) const { return actor_ids_.at(static_cast<std::size_t>(i)); }

  // Acquires a random actor, "uses" it (checking validity) for a while, then hibernates
  // it (releases) or keeps it until its lease ends. Stops while the process drains.
  Task<void> Workload(Process* p) {
    for (;;) {
      if (!co_await p->env->SleepFor(milliseconds(Uniform(50, 1500)))) co_return;
      if (p->stopping || p->draining || !p->node->lease().IsValid()) continue;
      const ActorId actor = ActorAt(Uniform(0, actors_ - 1));
      AcquireResult r = co_await p->node->owners().Acquire(actor);
      ++result_.acquire_attempts;
      // A request whose acquire had an unknown outcome is retried at once, as a client
      // would: the second acquisition races the first one's write and the resolver.
      for (int retry = 0; retry < 3 && r.kind == AcquireResult::Kind::kUnknown; ++retry) {
        r = co_await p->node->owners().Acquire(actor);
        ++result_.acquire_attempts;
      }
      if (r.kind != AcquireResult::Kind::kAcquired) continue;
      ++result_.holds;
      const MonoTime until = world_.Now() + milliseconds(Uniform(100, 6000));
      while (world_.Now() < until && r.hold.IsValid()) {
        if (!co_await p->env->SleepFor(milliseconds(Uniform(20, 400)))) co_return;
      }
      if (r.hold.IsValid() && Chance(0.7)) {
        Status s = co_await p->node->owners().Release(actor);
        if (!s.ok()) ++result_.pending_releases;
      }
    }
  }

  Task<void> DrainProcess(Process* p) {
    p->draining = true;
    Trace("drain p" + std::to_string(p->number));
    Status s = co_await p->node->owners().Drain(seconds(20));
    if (s.ok()) {
      ++result_.drains;
      // A drain never reports drained with a release pending: no record names it now.
      for (const auto& [key, obj] : bucket_->objects()) {
        if (!key.starts_with(kOwnersPrefix)) continue;
        auto rec = DecodeOwnerRecord(obj.body);
        if (rec.ok() && rec->instance == p->instance) {
          Violation("p" + std::to_string(p->number) + " reported drained while " + key + " still names it");
        }
      }
    }
    Trace("p" + std::to_string(p->number) + " drain: " + s.ToString());
    p->draining = false;
    p->node->owners().SetAccepting(true);  // the operator puts it back in service
  }

  // ---- the durable storage workload (storage scenario)
  //
  // Each worker acquires an actor, opens its replica (restore, then the fence), and writes:
  // rounds of 1-4 batches committed back to back (group commit), each reading "log",
  // appending a fresh id and putting "e/<id>" (storage_history.h says why). Every write
  // asks WhenReleasable; an Ok is an acknowledgement the checkers hold the design to. Then the
  // worker hibernates the actor (Close, then release), or it keeps writing until the hold
  // ends (the lost-lease cut), or the replica fails (release if still valid, else drop), or
  // the process dies under it.

  void ConfigureStorage() {
    // Small bounds, so that snapshots and garbage collection happen a lot.
    replica_options_.snapshot_every_segments = static_cast<std::uint32_t>(Uniform(3, 5));
    replica_options_.segment_max_batches = static_cast<std::uint32_t>(Uniform(2, 6));
    replica_options_.gc_max_deletes_per_pass = 8;
    // The fencing bound: an older hold's upload may still be in flight until then.
    replica_options_.gc_off_chain_after = timing_.takeover_after();
    WK_CHECK(replica::ValidateReplicaOptions(replica_options_).ok(), "bad simulator replica options");
    replica_mutants_.ack_before_durable = options_.mutant == "ack-before-durable";
    replica_mutants_.ack_late_upload = options_.mutant == "ack-late-upload";
    replica_mutants_.restore_ignores_fence = options_.mutant == "restore-ignores-fence";
    replica_mutants_.gc_deletes_chain = options_.mutant == "gc-deletes-chain";
    replica_mutants_.release_without_validity = options_.mutant == "release-without-validity";
  }

  Task<void> StorageWorkload(Process* p) {
    for (;;) {
      if (!co_await p->env->SleepFor(milliseconds(Uniform(50, 1500)))) co_return;
      // No new uses once the faults stop: the healing minute is for liveness, and the
      // final audit judges what the chaos left.
      if (healed_) co_return;
      if (p->stopping || p->draining || !p->node->lease().IsValid()) continue;
      const ActorId actor = ActorAt(Uniform(0, actors_ - 1));
      if (p->in_use.count(actor)) continue;
      p->in_use.insert(actor);
      AcquireResult r = co_await p->node->owners().Acquire(actor);
      ++result_.acquire_attempts;
      for (int retry = 0; retry < 3 && r.kind == AcquireResult::Kind::kUnknown; ++retry) {
        r = co_await p->node->owners().Acquire(actor);
        ++result_.acquire_attempts;
      }
      if (r.kind == AcquireResult::Kind::kAcquired && p->used_generations[actor].count(r.hold.generation().value)) {
        Trace("p" + std::to_string(p->number) + " " + actor.name + "@g" + std::to_string(r.hold.generation().value) +
              " served a replica already: released");
        co_await ReleaseHold(p, actor);
        r = co_await p->node->owners().Acquire(actor);
        ++result_.acquire_attempts;
        Trace("p" + std::to_string(p->number) + " " + actor.name + " acquired again: kind " +
              std::to_string(static_cast<int>(r.kind)) + " g" + std::to_string(r.hold.generation().value) + " " + r.why);
      }
      if (r.kind == AcquireResult::Kind::kAcquired && !p->used_generations[actor].count(r.hold.generation().value)) {
        ++result_.holds;
        p->used_generations[actor].insert(r.hold.generation().value);
        co_await UseActor(p, actor, r.hold);
      }
      p->in_use.erase(actor);
    }
  }

  Task<void> ReleaseHold(Process* p, ActorId actor) {
    Status s = co_await p->node->owners().Release(actor);
    if (!s.ok()) ++result_.pending_releases;
    Trace("p" + std::to_string(p->number) + " released " + actor.name + ": " + s.ToString());
  }

  // What a replica's failure callback leaves for its worker.
  struct ReplicaFailure {
    bool failed = false;
    Status why;
  };

  Task<void> UseActor(Process* p, ActorId actor, HoldView hold) {
    const std::uint64_t generation = hold.generation().value;
    const std::string who = "p" + std::to_string(p->number) + " " + actor.name + "@g" + std::to_string(generation);
    Trace(who + " acquired: restoring");
    Env* env = p->env.get();
    std::function<void(std::function<void()>)> post = [env](std::function<void()> fn) { env->Post(std::move(fn)); };
    replica::Replica::Deps deps{*p->env, *p->replica_store, std::move(post), nullptr, replica_mutants_};
    replica::Replica::Hold replica_hold{hold.generation(), [hold] { return hold.IsValid(); }};
    auto opened = co_await replica::Replica::Open(std::move(deps), actor, std::move(replica_hold), replica_options_);
    if (!opened.ok()) {
      ++result_.restore_failures;
      Trace(who + " restore failed: " + opened.status().ToString());
      if (opened.code() == Code::kFatal) {
        Violation(who + " restore failed: " + opened.status().ToString());
      } else if (opened.code() == Code::kPreconditionFailed) {
        Violation(who + " restore found a log of its own generation or later: " + opened.status().ToString());
      }
      if (hold.IsValid()) co_await ReleaseHold(p, actor);
      co_return;
    }
    std::unique_ptr<replica::Replica> replica = std::move(*opened);
    ++result_.restores;
    auto& newest = opened_generation_[actor.ToString()];
    newest = std::max(newest, generation);
    {
      const replica::Restored& r = replica->restored();
      const std::string log = replica->Get("log").value_or("");
      Trace(who + " restored " + std::to_string(StorageHistory::SplitLog(log).size()) + " writes from base " +
            (r.chain.base ? r.chain.base->ToString() : "none") + " + " + std::to_string(r.chain.run.size()) +
            " segments (" + std::to_string(r.listed_segments.size()) + " listed)");
    }
    // Open checked the hold right before returning; a restore that finished after its hold
    // ended was refused there and is never judged.
    if (hold.IsValid()) CheckRestore(who, actor, *replica);

    auto failure = std::make_shared<ReplicaFailure>();
    replica->set_on_failed([failure](Status s) {
      failure->failed = true;
      failure->why = std::move(s);
    });
    // Mostly short uses (hibernation); some long ones that see lapses, fences and drains.
    const MonoTime until = world_.Now() + (Chance(0.25) ? milliseconds(Uniform(8000, 30000))
                                                        : milliseconds(Uniform(300, 6000)));
    // Half of the uses watch the hold and cut the replica as soon as it ends; the others
    // leave it to the replica's own checks (the output gate must be right without the cut):
    // an upload then completes after the hold ended, Late.
    const bool watch_hold = Chance(0.5);
    while (!failure->failed && world_.Now() < until) {
      if (watch_hold && !hold.IsValid()) {
        // The lost-lease cut: nothing unacknowledged will be; the replica fails.
        Trace(who + " hold ended: cut");
        ++result_.cuts;
        replica->Cut("the hold ended");
        co_return;
      }
      const auto writes = Uniform(1, 3);
      for (std::int64_t i = 0; i < writes; ++i) Write(*replica, actor, who);
      Read(*replica, hold, who);
      if (!co_await p->env->SleepFor(milliseconds(Uniform(50, 600)))) co_return;
    }
    if (failure->failed) {
      ++result_.replica_failures;
      if (replica->stats().late) ++result_.late_uploads;
      Trace(who + " replica failed: " + failure->why.ToString());
      if (hold.IsValid()) co_await ReleaseHold(p, actor);
      co_return;
    }
    // Hibernate: everything committed durable, then the hold is released. A Close that
    // fails or runs out of time abandons the hold all the same.
    Status closed = co_await replica->Close(seconds(5));
    Trace(who + " closed: " + closed.ToString());
    if (hold.IsValid()) co_await ReleaseHold(p, actor);
  }

  void Write(replica::Replica& replica, const ActorId& actor, const std::string& who) {
    const std::string id = "w" + std::to_string(++writes_issued_);
    const std::string before = replica.Get("log").value_or("");
    std::string log = before.empty() ? id : before + "," + id;
    actor::Batch batch;
    batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", log});
    batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "e/" + id, ""});
    const std::uint64_t seq = replica.Commit(std::move(batch));
    ++result_.writes;
    replica.WhenReleasable(seq, [this, key = actor.ToString(), id, log = std::move(log), who](Status s) {
      if (!s.ok()) return;  // not acknowledged: its outcome is unknown, either way is fine
      ++result_.acked_writes;
      Trace(who + " acknowledged " + id);
      for (const auto& v : history_.OnAcknowledged(key, log)) Violation(who + " acknowledged " + id + ": " + v);
    });
  }

  // A read-only event's answer: nothing written (seq 0), so only the hold's validity decides.
  // An Ok while the hold is not valid is a read answered by a node that no longer holds the
  // actor (checker 17; broken model release-without-validity).
  void Read(replica::Replica& replica, HoldView hold, const std::string& who) {
    replica.WhenReleasable(0, [this, hold, who](Status s) {
      if (s.ok() && !hold.IsValid()) Violation(who + " released a read after its hold ended");
    });
  }

  // Judges a restored state (a replica's, or the final audit's StateMap: same reads).
  template <typename State>
  void CheckRestore(const std::string& who, const ActorId& actor, const State& state) {
    const std::string log = state.Get("log").value_or("");
    std::set<std::string> entries;
    actor::ListQuery query;
    query.start = "e/";
    query.prefix = true;
    state.List(query, [&entries](std::string_view key, std::string_view) {
      entries.emplace(key.substr(2));
      return true;
    });
    for (const auto& v : history_.OnRestored(actor.ToString(), log, entries)) Violation(who + " restored: " + v);
  }

  static bool IsLogKey(std::string_view key) {
    return key.starts_with(replica::kWalPrefix) || key.starts_with(replica::kSnapshotPrefix);
  }

  // What a replica sends. Puts face the "lost means gone" check like the node's own; a
  // segment put sometimes gets its process killed before the reply (mid-upload).
  void OnReplicaSend(int number, const std::string& key, const std::string& body) {
    OnSend(number, key, body);
    if (!key.starts_with(replica::kWalPrefix) || healed_ || !Chance(0.01)) return;
    const Duration after = milliseconds(Uniform(1, 60));
    bucket_env_.StartTimer(world_.Now() + after, [this, number] {
      auto it = processes_.find(number);
      if (finished_ || healed_ || it == processes_.end() || !it->second->running || it->second->stopping) return;
      ++result_.kills;
      ++result_.upload_kills;
      const int slot = it->second->slot;
      Trace("kill p" + std::to_string(number) + " mid-upload");
      Reap(number);
      ScheduleRestart(slot, milliseconds(Uniform(500, 15000)));
    });
  }

  // Garbage collection deletes only the actor's own log, never nodes/, owners/ or leases/.
  void OnReplicaDelete(int number, const std::string& key) {
    ++result_.gc_deletes;
    Trace("p" + std::to_string(number) + " gc deletes " + key);
    if (!IsLogKey(key)) Violation("p" + std::to_string(number) + " deleted " + key + ", outside every actor's log");
  }

  // A segment or snapshot landed. Returns false for other keys.
  bool OnLogLanded(const std::string& key) {
    if (!IsLogKey(key)) return false;
    const std::size_t slash = key.rfind('/');
    const std::string prefix = key.substr(0, slash + 1);
    auto position = replica::ParseKeyPosition(prefix, key);
    if (!position.ok()) {
      Violation(key + " landed with a malformed key");
      return true;
    }
    if (key.starts_with(replica::kSnapshotPrefix)) {
      ++result_.snapshots;
      Trace(key + " landed");
      return true;
    }
    ++result_.segments;
    const std::string actor = prefix.substr(replica::kWalPrefix.size(), prefix.size() - replica::kWalPrefix.size() - 1);
    auto opened = opened_generation_.find(actor);
    if (opened != opened_generation_.end() && position->generation < opened->second) {
      // A later hold already restored without it: off the chain, garbage (the output gate
      // acknowledged nothing of it).
      ++result_.off_chain_segments;
      Trace(key + " landed late, off the chain (g" + std::to_string(opened->second) + " restored already)");
    } else {
      Trace(key + " landed");
    }
    return true;
  }

  // Segment puts: lost replies after landing, throttling, slow answers, and uploads that
  // take 3-20 s to reach the bucket (past the 10 s upload timeout half of the time), so
  // that a fenced or lapsed hold's segment lands after the next owner restored. Other log
  // requests (reads, lists, snapshots, deletes) get the lease scenario's mix.
  OpFault StorageFault(const OpInfo& op) {
    OpFault f;
    f.request_delay = milliseconds(Uniform(1, 40));
    f.reply_delay = milliseconds(Uniform(1, 40));
    const auto roll = Uniform(0, 999);
    if (op.op == StoreOp::kPut && op.key.starts_with(replica::kWalPrefix)) {
      if (roll < 40) {
        f.request_delay = milliseconds(Uniform(3000, 20000));
      } else if (roll < 60) {
        f.lose_reply = true;
      } else if (roll < 80) {
        f.fail_before_apply = Retryable("simulated: SlowDown");
      } else if (roll < 130) {
        f.reply_delay = milliseconds(Uniform(500, 3000));
      }
      return f;
    }
    if (roll < 20) {
      f.request_delay = milliseconds(Uniform(500, 4000));
    } else if (roll < 40) {
      f.lose_reply = true;
    } else if (roll < 60) {
      f.fail_before_apply = Retryable("simulated: SlowDown");
    } else if (roll < 110) {
      f.reply_delay = milliseconds(Uniform(500, 3000));
    }
    return f;
  }

  // After the run: every process gone, every request in transit landed, each actor's log
  // restored once more from the bucket as it is (no faults) and judged like any restore.
  void FinalAudit() {
    finished_ = true;
    world_.RunFor(kTransitDrain);
    MemStore audit(bucket_env_, bucket_);
    for (std::int64_t i = 0; i < actors_ && result_.violations.empty(); ++i) {
      const ActorId actor = ActorAt(i);
      const std::string who = "final audit of " + actor.name;
      replica::RestoreOptions ro;
      auto restored = RunTask(world_, bucket_env_,
                              replica::Restore(bucket_env_, audit, actor, kAuditGeneration, ro), seconds(120));
      if (!restored) {
        Violation(who + ": the restore did not finish");
      } else if (!restored->ok()) {
        Violation(who + ": the restore failed: " + restored->status().ToString());
      } else {
        Trace(who + ": " + std::to_string(StorageHistory::SplitLog((*restored)->state.Get("log").value_or("")).size()) +
              " writes");
        CheckRestore(who, actor, (*restored)->state);
      }
    }
  }
  // Above every hold's generation: the audit only reads, and a restore refuses a log that
  // already holds its own generation or a later one.
  static constexpr std::uint64_t kAuditGeneration = ~std::uint64_t{0};

  // ---- faults
  OpFault Fault(int slot, const OpInfo& op) {
    OpFault f;
    const MonoTime now = world_.Now();
    if (now < outage_until_ || now < partitioned_until_[slot]) {
      // Cut off: refused before it reaches the bucket.
      f.request_delay = milliseconds(Uniform(1, 20));
      f.fail_before_apply = Retryable("simulated: bucket unreachable");
      return f;
    }
    if (healed_) {
      f.request_delay = milliseconds(Uniform(1, 30));
      f.reply_delay = milliseconds(Uniform(1, 30));
      return f;
    }
    if (storage_ && IsLogKey(op.key)) return StorageFault(op);
    f.request_delay = milliseconds(Uniform(1, 40));
    f.reply_delay = milliseconds(Uniform(1, 40));
    const auto roll = Uniform(0, 999);
    // Ownership records get more late writes: the unresolved-acquire paths live there.
    const int late = op.key.starts_with(kOwnersPrefix) ? 50 : 20;
    if (roll < late) {
      // Applied late: for records, mostly past the caller's deadline (an unknown outcome).
      f.request_delay = op.key.starts_with(kOwnersPrefix) ? milliseconds(Uniform(2000, 6000))
                                                           : milliseconds(Uniform(500, 4000));
    } else if (roll < late + 20) {
      f.lose_reply = true;  // landed, the caller never hears
    } else if (roll < late + 40) {
      f.fail_before_apply = Retryable("simulated: SlowDown");
    } else if (roll < late + 90) {
      f.reply_delay = milliseconds(Uniform(500, 3000));  // slow answer
    }
    return f;
  }

  void ScheduleChaos() {
    const Duration next = milliseconds(Uniform(2000, 12000));
    bucket_env_.StartTimer(world_.Now() + next, [this] {
      if (world_.Now() >= MonoTime(chaos_for_)) return;
      ChaosStep();
      ScheduleChaos();
    });
  }

  void ChaosStep() {
    const auto roll = Uniform(0, 99);
    const int slot = static_cast<int>(Uniform(0, kSlots - 1));
    if (roll < 25) {
      if (Process* p = Primary(slot)) {
        ++result_.kills;
        Trace("kill p" + std::to_string(p->number));
        Reap(p->number);
        ScheduleRestart(slot, milliseconds(Uniform(500, 25000)));
      }
    } else if (roll < 50) {
      ++result_.partitions;
      // Half of the cuts end near the fencing bound (ttl + grace), where a node coming back
      // races the peer deciding to fence it.
      const Duration d = Chance(0.5) ? milliseconds(Uniform(14000, 19000)) : milliseconds(Uniform(2000, 25000));
      partitioned_until_[slot] = world_.Now() + d;
      Trace("partition n" + std::to_string(slot) + " for " + std::to_string(Ms(d)) + "ms");
    } else if (roll < 60) {
      if (Running(slot) == 1) {
        ++result_.twins;
        StartProcess(slot, true);
      }
    } else if (roll < 70) {
      ++result_.outages;
      const Duration d = milliseconds(Uniform(5000, 30000));
      outage_until_ = world_.Now() + d;
      Trace("bucket outage for " + std::to_string(Ms(d)) + "ms");
    } else if (ownership_ && roll < 78) {
      if (Process* p = Primary(slot); p && !p->stopping && !p->draining) p->env->Spawn(DrainProcess(p), "drain");
    } else if (ownership_ && roll < 82) {
      // An operator's mistake: a heartbeat object deleted. It must free nothing. Not while
      // a second process under that id is in its start check: ADR §1's argument assumes
      // the deletion comes before the new process's first read, and a deletion during a
      // twin's check can leave two valid leases for one id (found at seed 1254; see
      // docs/simulation.md). That double mistake is outside the protocol's promise.
      bool recent_start = false;
      for (auto& [n, q] : processes_)
        if (q->slot == slot && q->running && world_.Now() - q->started < timing_.takeover_after() + seconds(5)) recent_start = true;
      if (recent_start || Running(slot) > 1) return;
      ++result_.deleted_heartbeats;
      Trace("delete nodes/n" + std::to_string(slot));
      (void)bucket_->ApplyDelete(NodeKey("n" + std::to_string(slot)), Precondition::None());
    } else if (roll < 85) {
      if (Process* p = Primary(slot); p && !p->stopping) {
        ++result_.clean_stops;
        p->stopping = true;
        Trace("clean stop p" + std::to_string(p->number));
        p->env->Spawn(StopProcess(p, slot), "stop");
      }
    }
  }

  // Storage scenario: every 2-8 s of chaos, one hold of a random node is released under its
  // replica, as a lapse or an operator's move would end it: the next owner can restore at
  // once while this replica's upload is still in flight.
  void ScheduleMoves() {
    bucket_env_.StartTimer(world_.Now() + milliseconds(Uniform(2000, 8000)), [this] {
      if (world_.Now() >= MonoTime(chaos_for_)) return;
      if (Process* p = Primary(static_cast<int>(Uniform(0, kSlots - 1))); p && !p->stopping) {
        std::vector<ActorId> held;
        for (std::int64_t i = 0; i < actors_; ++i)
          if (p->node->owners().Find(ActorAt(i)).IsValid()) held.push_back(ActorAt(i));
        if (!held.empty()) {
          const ActorId actor = held[static_cast<std::size_t>(Uniform(0, static_cast<std::int64_t>(held.size()) - 1))];
          ++result_.moves;
          Trace("move " + actor.name + " away from p" + std::to_string(p->number));
          p->env->Spawn(ReleaseHold(p, actor), "move");
        }
      }
      ScheduleMoves();
    });
  }

  Task<void> StopProcess(Process* p, int slot) {
    pending_start_.insert(slot);
    Status s = co_await p->node->Stop(seconds(5));
    Trace("p" + std::to_string(p->number) + " stopped: " + s.ToString());
    pending_start_.erase(slot);
    const int number = p->number;
    bucket_env_.Post([this, number] { Reap(number); });
    ScheduleRestart(slot, milliseconds(Uniform(200, 10000)));
  }

  void Heal() {
    healed_ = true;
    outage_until_ = MonoTime{};
    for (auto& t : partitioned_until_) t = MonoTime{};
    Trace("heal: no more faults");
    for (int s = 0; s < kSlots; ++s)
      if (Running(s) == 0) ScheduleRestart(s, milliseconds(100));
  }

  // ---- what the bucket saw
  MonoTime SendTrue(const std::string& instance, WallTime written_at) const {
    auto it = instance_skew_.find(instance);
    const Duration skew = it == instance_skew_.end() ? Duration(0) : it->second;
    return MonoTime(milliseconds(ToUnixMs(written_at) - kOriginMs)) - skew;
  }

  void OnSend(int number, const std::string& key, const std::string& body) {
    auto it = processes_.find(number);
    if (it == processes_.end()) return;
    Process& p = *it->second;
    if (p.end && p.end->reason != LeaseEndReason::kStopped) {
      Violation("p" + std::to_string(number) + " sent a write to " + key + " after its lease was lost");
    }
    auto obj = DecodeNodeObject(body);
    if (!obj.ok() || !std::holds_alternative<NodeRecord>(*obj)) return;
    const auto& r = std::get<NodeRecord>(*obj);
    if (r.state == LeaseState::kFenced) {
      fence_sends_[body] = FenceSend{number, world_.Now(), p.env->WallNow(), p.node->lease().IsValid(),
                                     p.node->lease().valid_since()};
    }
  }

  void OnLanded(const std::string& key, const std::string& body) {
    if (storage_ && OnLogLanded(key)) return;
    if (key.starts_with(kOwnersPrefix)) {
      auto rec = DecodeOwnerRecord(body);
      if (!rec.ok()) {
        Violation(key + " written corrupt");
        return;
      }
      if (rec->names_nobody()) return;
      ++result_.acquisitions;
      auto& last = last_generation_[key];
      if (rec->generation.value <= last) {
        Violation(key + " acquired at generation " + std::to_string(rec->generation.value) + " by " + rec->node_id +
                  "/" + rec->instance + ", not above " + std::to_string(last) + ": one generation for two holds");
      }
      last = std::max(last, rec->generation.value);
      return;
    }
    if (!key.starts_with(kNodesPrefix)) return;
    auto obj = DecodeNodeObject(body);
    if (!obj.ok() || !std::holds_alternative<NodeRecord>(*obj)) return;
    const auto& r = std::get<NodeRecord>(*obj);
    const MonoTime bound = SendTrue(r.instance, r.written_at) + timing_.validity();
    if (r.state == LeaseState::kLive) {
      ++result_.lease_writes;
      auto& b = landed_bound_[r.instance];
      b = std::max(b, bound);
      return;
    }
    Trace(key + " " + std::string(LeaseStateName(r.state)) + " instance " + r.instance + " written_at " +
          std::to_string(ToUnixMs(r.written_at) - kOriginMs));
    if (r.state != LeaseState::kFenced) return;
    ++result_.fences;
    auto f = fence_bound_.find(r.instance);
    if (f == fence_bound_.end() || bound < f->second) fence_bound_[r.instance] = bound;
    auto sent = fence_sends_.find(body);
    if (sent == fence_sends_.end()) {
      Violation("a fence of " + key + " landed that no node sent");
      return;
    }
    const FenceSend& s = sent->second;
    const std::string who = "p" + std::to_string(s.sender);
    // No node treats another as free earlier than written_at + ttl + grace on its clock.
    if (s.sender_wall < r.written_at + timing_.takeover_after()) {
      Violation(who + " fenced " + key + " at its wall " + std::to_string(ToUnixMs(s.sender_wall) - kOriginMs) +
                "ms, before written_at + ttl + grace");
    }
    if (!s.sender_valid) Violation(who + " fenced " + key + " without a valid lease of its own");
    // Judged only from a full watch after its own first acknowledged write after a lapse.
    if (!s.sender_valid_since || s.sent - *s.sender_valid_since < timing_.fence_watch()) {
      Violation(who + " fenced " + key + " less than a lease period plus an attempt timeout after its own lease became valid");
    }
    // The fenced process must already have stopped acting.
    CheckProcessBound(r.instance);
  }

  // ---- invariants
  void CheckProcessBound(const std::string& instance) {
    auto pn = instance_process_.find(instance);
    if (pn == instance_process_.end()) return;
    auto it = processes_.find(pn->second);
    if (it == processes_.end() || !it->second->running || !it->second->node) return;
    const NodeLease& lease = it->second->node->lease();
    if (!lease.IsValid()) return;
    const std::string who = "p" + std::to_string(pn->second);
    auto landed = landed_bound_.find(instance);
    if (landed == landed_bound_.end() || lease.valid_until() > landed->second + kTolerance) {
      Violation(who + " is valid until " + std::to_string(Ms(lease.valid_until().time_since_epoch())) +
                "ms, past send + ttl - safety of its last landed write");
    }
    auto fenced = fence_bound_.find(instance);
    if (fenced != fence_bound_.end() && lease.valid_until() > fenced->second + kTolerance) {
      Violation(who + " is valid until " + std::to_string(Ms(lease.valid_until().time_since_epoch())) +
                "ms, past the bound of the fence that names it (" +
                std::to_string(Ms(fenced->second.time_since_epoch())) + "ms)");
    }
  }

  void CheckEveryStep() {
    if (ownership_) {
      // Never two owners acting for one actor (validity in true time: the simulator's
      // monotonic clock is true time, and each node measures its validity on it).
      std::vector<int> owners(static_cast<std::size_t>(actors_), 0);
      for (auto& [n, p] : processes_) {
        if (!p->running || !p->node) continue;
        for (std::int64_t i = 0; i < actors_; ++i) {
          const ActorId& a = ActorAt(i);
          if (p->node->owners().Find(a).IsValid() && ++owners[static_cast<std::size_t>(i)] > 1) {
            Violation("two owners act for " + a.ToString() + " (one is p" + std::to_string(n) + ")");
          }
        }
      }
    }
    std::map<std::string, int> valid_per_id;
    for (auto& [n, p] : processes_) {
      if (!p->running || !p->node) continue;
      const NodeLease& lease = p->node->lease();
      result_.adoptions = std::max<std::uint64_t>(result_.adoptions, lease.stats().adoptions);
      if (!lease.IsValid()) continue;
      if (++valid_per_id[p->node_id] > 1) Violation("two processes hold a valid lease for " + p->node_id);
      CheckProcessBound(p->instance);
    }
  }

  void FinalChecks() {
    for (int s = 0; s < kSlots; ++s) {
      Process* p = Primary(s);
      const std::string id = "n" + std::to_string(s);
      if (p == nullptr) {
        Violation(id + " has no running process after " + std::to_string(Ms(kHealFor)) + "ms without faults");
        continue;
      }
      if (!p->node->lease().IsValid()) Violation("p" + std::to_string(p->number) + " (" + id + ") is not valid after healing");
      auto obj = bucket_->objects().find(NodeKey(id));
      if (obj == bucket_->objects().end()) {
        Violation(NodeKey(id) + " is missing after healing");
        continue;
      }
      auto decoded = DecodeNodeObject(obj->second.body);
      const auto* r = decoded.ok() ? std::get_if<NodeRecord>(&*decoded) : nullptr;
      if (!r || r->state != LeaseState::kLive || r->instance != p->instance) {
        Violation(NodeKey(id) + " does not name the running process p" + std::to_string(p->number) + " live");
      }
    }
    for (int s = 0; s < kSlots; ++s) {
      if (Running(s) > 1) Violation("n" + std::to_string(s) + " still has " + std::to_string(Running(s)) + " processes after healing");
    }
  }

  bool ownership_;
  bool storage_;
  Duration chaos_for_{};
  int actors_ = 0;
  std::vector<ActorId> actor_ids_;
  bool finished_ = false;  // the run is over: no more restarts
  // Storage scenario.
  replica::ReplicaOptions replica_options_;
  replica::ReplicaMutants replica_mutants_;
  StorageHistory history_;
  std::map<std::string, std::uint64_t> opened_generation_;  // the newest hold that restored each actor
  std::uint64_t writes_issued_ = 0;
  std::map<std::string, std::uint64_t> last_generation_;
  RunOptions options_;
  SimWorld world_;
  std::mt19937_64 rng_;
  SimEnv bucket_env_;
  std::shared_ptr<MemBucket> bucket_;
  LeaseTiming timing_;
  Duration slot_skew_[kSlots]{};
  MonoTime partitioned_until_[kSlots]{};
  MonoTime outage_until_{};
  bool healed_ = false;
  int next_process_ = 0;
  std::map<int, std::unique_ptr<Process>> processes_;
  std::set<int> pending_start_;
  std::map<std::string, Duration> instance_skew_;
  std::map<std::string, int> instance_process_;
  std::map<std::string, MonoTime> landed_bound_;
  std::map<std::string, MonoTime> fence_bound_;
  std::map<std::string, FenceSend> fence_sends_;
  std::deque<std::string> trace_;
  std::uint64_t digest_ = 1469598103934665603ULL;
  RunResult result_;
};

}  // namespace

RunResult RunLeaseScenario(const RunOptions& options) { return LeaseSim(options, Mode::kLease).Run(); }
RunResult RunOwnershipScenario(const RunOptions& options) { return LeaseSim(options, Mode::kOwnership).Run(); }
RunResult RunStorageScenario(const RunOptions& options) { return LeaseSim(options, Mode::kStorage).Run(); }

const std::vector<Scenario>& Scenarios() {
  static const std::vector<Scenario> all = {
      {"lease", "node leases, listing and fencing of 3 nodes (ADR 0020 §1, §2, §5)",
       {"unconditional-fence", "no-watch-wait", "validity-from-reply"}, &RunLeaseScenario},
      {"ownership", "3 nodes acquiring, using, hibernating and releasing 6 actors (ADR 0020 §3, §4)",
       {"wake-reuses-generation", "resolver-without-lock", "free-on-view", "free-on-absent-node"},
       &RunOwnershipScenario},
      {"storage", "3 nodes writing 3 actors through the durable replica as holds move (docs/architecture.md, Durable storage)",
       {"ack-before-durable", "ack-late-upload", "restore-ignores-fence", "gc-deletes-chain"}, &RunStorageScenario},
  };
  return all;
}

}  // namespace wk::sim
