// The `alarms` scenario: alarm delivery on three simulated nodes (docs/alarms.md,
// docs/simulation.md "alarms"). Each node is the routing scenario's (its real ClusterNode,
// ReplicaProvider, Forwarder and Front, native actors in place of WebAssembly) plus the
// real alarm subsystem: the AlarmIndex under its replicas, the AlarmService (owner and
// wake timers, deliveries, retries, hand-overs through the front's /v1/alarms/) and the
// ShardScanner (shards held through ownership records). The actors are the native host's
// "alarm" class: a log of what happened to the alarm (s<ms> set, d deleted,
// f<due>:<retry>:<now> fired), kept in the actor's durable state.
//
// Workload. Busy actors get sets, deletes and reads from clients all run long; lonely
// actors get exactly one set each during the chaos and nothing more, so an alarm lost by
// the index is lost for good (no later request restores them). Handlers fail at random
// (retries), always for poisoned times (given up), and sometimes re-arm.
//
// Checkers (violations name the actor, the alarm and the node):
//   A1 (online) no handler runs before its time on its node's clock;
//   A2 (online) no index entry is removed while the actor's durable state (what a restore
//      sees at that instant) holds its alarm with no other entry for it: the handler's
//      writes, or the change that replaced the alarm, are durable before the entry goes;
//   A3 (online) no segment that sets an alarm lands on the newest chain without an index
//      entry for it (the invariant, rule 1);
//   at the end, from each actor's durable log (restored from the bucket):
//   A4 every alarm set, not replaced or deleted, fired at least once (or was given up after
//      its last retry failed, observed), unless it is not yet due;
//   A5 none fired after a delete or replacement: each f<due> follows its own s<due>;
//   A6 while the cluster is healthy every alarm fires within scan_period + scan_lag + 3 s
//      of its time (plus its retries' back-off);
//   A7 an alarm the durable state still holds has an index entry; and every acknowledged
//      set is in the log.
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "alarms/alarm_index.h"
#include "alarms/alarm_service.h"
#include "alarms/format.h"
#include "alarms/shard_scanner.h"
#include "base/digest.h"
#include "cluster/cluster_node.h"
#include "env/sim_env.h"
#include "native_actor_host.h"
#include "replica/format.h"
#include "replica/provider.h"
#include "replica/restore.h"
#include "scenario.h"
#include "routing/forwarder.h"
#include "routing/front.h"
#include "sim_peer_network.h"
#include "store/mem/mem_store.h"
#include "world.h"

namespace wk::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kNodes = 3;
constexpr int kBusy = 6;
constexpr int kLonely = 16;
constexpr int kClients = 3;
constexpr std::int64_t kOrigin = 1'764'000'000'000;
constexpr Duration kChaos = seconds(100);
constexpr Duration kBusyClientsFor = seconds(150);
constexpr Duration kLonelyUntil = seconds(85);
constexpr Duration kEnd = seconds(220);
// From here the cluster is healthy (every node restarted, every handed alarm rechecked).
constexpr Duration kHealthyFrom = seconds(140);
// Alarms due later than this before the end need not have fired yet.
constexpr Duration kNotYetDue = seconds(40);
constexpr Duration kClientTimeout = seconds(30);
constexpr std::string_view kToken = "Bearer alarms-test-token";
constexpr std::string_view kTenant = "t";
constexpr std::string_view kClass = "alarm";
constexpr std::string_view kClientId = "client";

std::string AddressOf(int slot) { return SlotNodeId(slot).str() + ":7000"; }
std::string PeerAddressOf(int slot) { return SlotNodeId(slot).str() + ":7001"; }

Task<Result<std::string>> Authenticate(std::string authorization) {
  if (authorization == kToken) co_return std::string(kTenant);
  co_return NotFound("unknown token");
}

Task<Status> LoadClass(std::string tenant, std::string class_name) {
  if (tenant == kTenant && class_name == kClass) co_return Status::Ok();
  co_return NotFound("no class " + tenant + "/" + class_name);
}

std::vector<std::string> Split(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

struct Node {
  int number = 0;
  int slot = 0;
  NodeId node_id;
  InstanceToken instance;
  std::string cert_pin;
  std::unique_ptr<SimEnv> env;
  std::unique_ptr<MemStore> raw_store;
  std::unique_ptr<RecordingStore> store;
  std::unique_ptr<ClusterNode> cluster;
  std::unique_ptr<alarms::AlarmIndex> index;
  std::unique_ptr<replica::OwnersHoldSource> holds;
  std::unique_ptr<replica::ReplicaProvider> provider;
  std::unique_ptr<NativeActorHost> host;
  std::unique_ptr<PeerTransport> transport;
  std::unique_ptr<Forwarder> forwarder;
  std::unique_ptr<Front> front;
  std::unique_ptr<alarms::AlarmService> service;
  std::unique_ptr<alarms::ShardScanner> scanner;
  bool running = false;
};

class AlarmsSim {
 public:
  explicit AlarmsSim(const RunOptions& options)
      : options_(options),
        world_(options.seed),
        rng_(options.seed ^ 0x2545f4914f6cdd1dULL),
        bucket_env_(world_, FromUnixMs(kOrigin)),
        client_env_(world_, FromUnixMs(kOrigin)),
        bucket_(std::make_shared<MemBucket>()),
        network_(world_, [this](const NodeId& from, const NodeId& to) { return PeerFault(from, to); }) {
    secret_.bytes.fill(0x3c);
    broken_ = options_.broken();
    replica_options_.gc_off_chain_after = timing_.takeover_after();
    replica_options_.segment_max_batches = static_cast<std::uint32_t>(Uniform(1, 6));
    replica_options_.snapshot_every_segments = static_cast<std::uint32_t>(Uniform(3, 8));
    alarm_options_.scan_period = seconds(3);
    alarm_options_.scan_lag = seconds(1);
    alarm_options_.first_retry = seconds(1);
    alarm_options_.max_retries = 3;
    alarm_options_.handed_recheck = 2 * timing_.ttl + timing_.grace;
    WK_CHECK(alarms::ValidateAlarmOptions(alarm_options_, timing_).ok(), "bad simulator alarm options");
    host_options_.broken = broken_;
    host_options_.idle_hibernate = milliseconds(Uniform(1500, 6000));
    host_options_.alarm_failure_percent = static_cast<int>(Uniform(5, 20));
    host_options_.on_alarm_run = [this](const ActorId& a, std::int64_t due, std::int64_t now, int retry, bool failed,
                                        bool last) { OnAlarmRun(a, due, now, retry, failed, last); };
    for (int i = 0; i < kBusy; ++i) actors_.push_back(ActorId{std::string(kTenant), std::string(kClass), "b" + std::to_string(i)});
    for (int i = 0; i < kLonely; ++i) actors_.push_back(ActorId{std::string(kTenant), std::string(kClass), "l" + std::to_string(i)});
    bucket_->set_put_observer([this](const std::string& key, const std::string& body, const Version&) {
      if (key.starts_with(replica::kWalPrefix)) OnSegmentLanded(key, body);
    });
    client_transport_ = network_.TransportFor(NodeId(kClientId), client_env_);
  }

  ~AlarmsSim() {
    for (auto& [n, p] : nodes_) Teardown(*p);
    client_transport_.reset();
  }

  RunResult Run() {
    for (int s = 0; s < kNodes; ++s) StartNode(s);
    for (int c = 0; c < kClients; ++c) client_env_.Spawn(BusyClient(), "busy client");
    for (int i = 0; i < kLonely; ++i) {
      const Duration at = milliseconds(Uniform(3000, World::Ms(kLonelyUntil)));
      client_env_.Spawn(LonelyClient(kBusy + i, at), "lonely client");
    }
    ScheduleChaos();
    while (world_.Now() < MonoTime(kEnd)) {
      if (!world_.RunOne()) break;
      if (!healed_ && world_.Now() >= MonoTime(kChaos)) Heal();
    }
    finished_ = true;
    FinalChecks();
    result_.ok = result_.violations.empty();
    result_.history_digest = digest_;
    result_.trace.assign(trace_.begin(), trace_.end());
    return std::move(result_);
  }

 private:
  std::int64_t Uniform(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool Chance(double p) { return static_cast<double>(rng_() % 1'000'000) < p * 1'000'000; }
  static std::string At(MonoTime t) { return std::to_string(World::Ms(t.time_since_epoch())) + "ms"; }
  std::int64_t TrueMs() const { return kOrigin + World::Ms(world_.Now().time_since_epoch()); }

  void Trace(const std::string& line) {
    std::string full = At(world_.Now()) + " " + line;
    for (char c : full) digest_ = (digest_ ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    trace_.push_back(std::move(full));
    while (trace_.size() > options_.trace_lines) trace_.pop_front();
  }
  void Violation(const std::string& what) {
    Trace("VIOLATION " + what);
    result_.violations.push_back(At(world_.Now()) + " " + what);
  }

  // ---- the durable state, as a restore at this instant would see it
  std::optional<actor::StateMap> DurableState(const ActorId& actor) {
    auto copy = std::make_shared<MemBucket>();
    const std::string wal = replica::WalPrefix(actor), snap = replica::SnapshotPrefix(actor);
    for (auto it = bucket_->objects().lower_bound(wal); it != bucket_->objects().end() && it->first.starts_with(wal); ++it) {
      copy->ApplyPut(it->first, it->second.body, Precondition::None()).status().IgnoreError();
    }
    for (auto it = bucket_->objects().lower_bound(snap); it != bucket_->objects().end() && it->first.starts_with(snap); ++it) {
      copy->ApplyPut(it->first, it->second.body, Precondition::None()).status().IgnoreError();
    }
    SimWorld w(1);
    SimEnv env(w, FromUnixMs(kOrigin));
    MemStore store(env, copy);
    auto r = RunTask(w, env, replica::Restore(env, store, actor, Generation{UINT64_MAX - 1}, {}));
    if (!r || !r->ok()) return std::nullopt;
    return std::move((*r)->state);
  }
  // Index entries of (actor, due) in the bucket, but `except`.
  std::size_t EntriesFor(const ActorId& actor, std::int64_t due, const std::string& except = "") const {
    const std::string prefix = alarms::AlarmPrefix(actor, due);
    std::size_t n = 0;
    for (auto it = bucket_->objects().lower_bound(prefix); it != bucket_->objects().end() && it->first.starts_with(prefix);
         ++it) {
      n += it->first != except;
    }
    return n;
  }

  // ---- online checkers
  // A1: never before its time, on the running node's clock.
  void OnAlarmRun(const ActorId& actor, std::int64_t due, std::int64_t now, int retry, bool failed, bool last) {
    ++result_.alarm_runs;
    if (failed) ++result_.alarm_failed_runs;
    Trace(actor.name + " alarm " + std::to_string(due) + " runs at " + std::to_string(now) + " retry " +
          std::to_string(retry) + (failed ? " FAILS" : "") + (last ? " (last attempt)" : ""));
    if (now < due) {
      Violation("A1: the alarm of " + actor.name + " due at " + std::to_string(due) + " ran at " + std::to_string(now) +
                " on its node's clock, " + std::to_string(due - now) + " ms early");
    }
    if (failed && last) gave_up_.insert({actor, due});
  }

  // A2: an entry goes only once the durable state no longer needs it.
  void OnDelete(int number, const std::string& key) {
    auto e = alarms::ParseEntryKey(key);
    if (!e.ok()) return;
    ++result_.alarm_entries_deleted;
    auto state = DurableState(e->actor);
    if (!state) return;  // a restore in the middle of a chain's change: judged at the end
    if (state->alarm() == std::optional<std::int64_t>(e->due_ms) && EntriesFor(e->actor, e->due_ms, key) == 0) {
      Violation("A2: p" + std::to_string(number) + " deletes the last index entry of " + e->actor.name + " at " +
                std::to_string(e->due_ms) + " (generation " + std::to_string(e->generation.value) + ", batch " +
                std::to_string(e->batch) + ") while the durable state still holds that alarm");
    }
  }

  // A3: a segment setting an alarm lands on the newest chain only with an index entry.
  void OnSegmentLanded(const std::string& key, const std::string& body) {
    auto seg = replica::DecodeSegment(body);
    if (!seg.ok() || seg->position.seq == 0) return;
    std::optional<std::optional<std::int64_t>> alarm;
    for (const actor::Batch& b : seg->batches) {
      if (b.alarm.has_value()) alarm = b.alarm;
    }
    if (!alarm || !alarm->has_value()) return;
    // Off the chain if a later hold's fence exists already (it restored without this).
    const std::string wal = replica::WalPrefix(seg->actor);
    for (auto it = bucket_->objects().lower_bound(wal); it != bucket_->objects().end() && it->first.starts_with(wal); ++it) {
      auto p = replica::ParseKeyPosition(wal, it->first);
      if (p.ok() && p->seq == 0 && p->generation > seg->position.generation) return;
    }
    if (EntriesFor(seg->actor, **alarm) == 0) {
      Violation("A3: segment " + key + " sets the alarm of " + seg->actor.name + " to " + std::to_string(**alarm) +
                " and landed with no index entry for it");
    }
  }

  // ---- nodes
  void StartNode(int slot) {
    auto p = std::make_unique<Node>();
    p->number = next_number_++;
    p->slot = slot;
    p->node_id = SlotNodeId(slot);
    p->env = std::make_unique<SimEnv>(world_, FromUnixMs(kOrigin), milliseconds(Uniform(-1000, 1000)));
    p->instance = InstanceToken(p->env->RandomHex(8));
    p->cert_pin = Sha256Hex("simulated key of " + p->instance.str());
    p->raw_store = std::make_unique<MemStore>(*p->env, bucket_, [this, slot](const OpInfo& op) { return BucketFault(slot, op); },
                                              &bucket_env_);
    const int number = p->number;
    p->store = std::make_unique<RecordingStore>(
        *p->raw_store, [](const std::string&, const std::string&) {},
        [this, number](const std::string& key) {
          if (key.starts_with(alarms::kAlarmsPrefix)) OnDelete(number, key);
        });
    p->cluster = std::make_unique<ClusterNode>(*p->env, *p->store,
                                               NodeIdentity{p->node_id, PeerAddressOf(slot), "sim", p->cert_pin}, timing_,
                                               p->instance);
    p->cluster->set_broken_models(broken_);
    p->index = std::make_unique<alarms::AlarmIndex>(*p->env, *p->store, alarms::AlarmIndexOptions{.broken = broken_});
    p->holds = std::make_unique<replica::OwnersHoldSource>(p->cluster->owners());
    Env* env = p->env.get();
    replica::Replica::Deps deps{*p->env, *p->store, [env](std::function<void()> fn) { env->Post(std::move(fn)); },
                                nullptr, broken_, p->index.get()};
    p->provider = std::make_unique<replica::ReplicaProvider>(std::move(deps), *p->holds, replica_options_, seconds(10));
    p->host = std::make_unique<NativeActorHost>(*p->env, *p->provider, host_options_);
    p->host->set_on_closed([this, number](const ActorId& id, const std::string& why) {
      Trace("p" + std::to_string(number) + " " + id.name + " left memory: " + why);
    });
    p->transport = network_.TransportFor(p->node_id, *p->env, p->cert_pin);
    ForwarderOptions fo;
    fo.timeout = seconds(20);
    p->forwarder =
        std::make_unique<Forwarder>(*p->env, *p->transport, ForwarderIdentity{p->node_id, p->instance}, secret_, fo);
    Node* raw = p.get();
    FrontDeps front_deps{*p->host, p->cluster->owners(), p->cluster->membership(), *p->forwarder,
                         [](std::string authorization) { return Authenticate(std::move(authorization)); },
                         [](std::string tenant, std::string class_name) {
                           return LoadClass(std::move(tenant), std::move(class_name));
                         },
                         nullptr,
                         [this, raw](ActorId actor, std::string_view body) {
                           ++result_.alarm_handovers;
                           Trace("p" + std::to_string(raw->number) + " receives the alarm of " + actor.name);
                           return raw->service->ReceiveHandOver(actor, body);
                         }};
    FrontOptions front_options;
    front_options.node_id = p->node_id;
    front_options.check_peer_pins = true;
    p->front = std::make_unique<Front>(std::move(front_deps), front_options);
    alarms::AlarmServiceDeps alarm_deps{*p->env, p->cluster->owners(), p->cluster->membership(), *p->host, *p->index,
                                        p->forwarder.get(),
                                        [](std::string tenant, std::string class_name) {
                                          return LoadClass(std::move(tenant), std::move(class_name));
                                        },
                                        broken_};
    p->service = std::make_unique<alarms::AlarmService>(std::move(alarm_deps), alarm_options_, timing_);
    p->scanner = std::make_unique<alarms::ShardScanner>(*p->env, *p->store, p->cluster->owners(),
                                                        p->cluster->membership(), p->cluster->lease(), *p->service);
    p->cluster->lease().AddObserver({
        [this, number](std::uint64_t e) { Trace("p" + std::to_string(number) + " valid epoch " + std::to_string(e)); },
        [this, number](std::uint64_t) { Trace("p" + std::to_string(number) + " lapsed"); },
        [this, number](const std::string& why) { Trace("p" + std::to_string(number) + " lost: " + why); },
    });
    Front* front = p->front.get();
    network_.Listen(AddressOf(slot), p->node_id, p->env.get(),
                    [front](ServerRequest r) { return front->Handle(std::move(r), Via::kClient); });
    network_.Listen(PeerAddressOf(slot), p->node_id, p->env.get(),
                    [front](ServerRequest r) { return front->Handle(std::move(r), Via::kPeer); });
    p->running = true;
    Trace("start p" + std::to_string(number) + " as " + p->node_id.str() + " instance " + p->instance.str());
    nodes_[number] = std::move(p);
    raw->scanner->Start();
    raw->env->Spawn(RunNode(raw), "node");
  }

  Task<void> RunNode(Node* p) {
    LeaseEnd end = co_await p->cluster->Run();
    p->running = false;
    ++result_.lost_leases;
    Trace("p" + std::to_string(p->number) + " exits: " + std::string(LeaseEndReasonName(end.reason)) + " " + end.message);
    const int number = p->number;
    const int slot = p->slot;
    bucket_env_.Post([this, number] { Reap(number); });
    ScheduleRestart(slot, milliseconds(Uniform(500, 5000)));
  }

  void Teardown(Node& p) {
    network_.Close(AddressOf(p.slot), p.env.get());
    network_.Close(PeerAddressOf(p.slot), p.env.get());
    if (p.scanner) p.scanner->Stop();
    if (p.service) p.service->Stop();
    if (p.cluster) p.cluster->owners().StopBackground();
    p.host.reset();
    p.scanner.reset();
    p.service.reset();
    p.transport.reset();
    p.env.reset();
    p.front.reset();
    p.forwarder.reset();
    p.provider.reset();
    p.holds.reset();
    p.index.reset();
    p.cluster.reset();
    p.store.reset();
    p.raw_store.reset();
    p.running = false;
  }

  void Reap(int number) {
    auto it = nodes_.find(number);
    if (it == nodes_.end()) return;
    Teardown(*it->second);
    nodes_.erase(it);
  }

  Node* Live(int slot) {
    for (auto& [n, p] : nodes_)
      if (p->slot == slot && p->running) return p.get();
    return nullptr;
  }

  void ScheduleRestart(int slot, Duration after) {
    bucket_env_.StartTimer(world_.Now() + after, [this, slot] {
      if (Live(slot) == nullptr && !finished_) StartNode(slot);
    });
  }

  // ---- clients
  ServerRequest RequestFor(const ActorId& actor, const std::string& method, const std::string& path,
                           const std::string& query) const {
    ServerRequest r;
    r.method = method;
    r.target = std::string(kActorsPrefix) + actor.ToString() + path + (query.empty() ? "" : "?" + query);
    r.headers.emplace_back("Authorization", std::string(kToken));
    return r;
  }

  // Sends one request to a random node; true if answered 200.
  Task<bool> Send(int actor, std::string method, std::string path, std::string query) {
    const int slot = static_cast<int>(Uniform(0, kNodes - 1));
    ServerRequest request = RequestFor(actors_[static_cast<std::size_t>(actor)], method, path, query);
    PeerTarget node{SlotNodeId(slot), InstanceToken(), AddressOf(slot)};
    auto got = co_await client_transport_->Send(std::move(node), std::move(request), kClientTimeout);
    const bool ok = got.ok() && got->status == 200;
    Trace("client " + method + " " + actors_[static_cast<std::size_t>(actor)].name + path + "?" + query + " via n" +
          std::to_string(slot) + ": " + (got.ok() ? std::to_string(got->status) : got.status().ToString()));
    co_return ok;
  }

  Task<bool> SetAlarm(int actor, std::int64_t due) {
    ++result_.alarm_sets;
    const bool ok = co_await Send(actor, "POST", "/set", "t=" + std::to_string(due));
    if (ok) {
      ++result_.alarm_acked_sets;
      acked_sets_[actors_[static_cast<std::size_t>(actor)]].insert(due);
    }
    co_return ok;
  }

  Task<void> BusyClient() {
    for (;;) {
      if (!co_await client_env_.SleepFor(milliseconds(Uniform(300, 1500)))) co_return;
      if (world_.Now() >= MonoTime(kBusyClientsFor)) co_return;
      const int actor = static_cast<int>(Uniform(0, kBusy - 1));
      const auto roll = Uniform(0, 99);
      if (roll < 50) {
        std::int64_t due = TrueMs() + Uniform(300, 15000);
        // Now and then the same time again: a key of its own per set keeps it apart.
        auto last = last_due_.find(actor);
        if (Chance(0.2) && last != last_due_.end() && last->second > TrueMs()) due = last->second;
        last_due_[actor] = due;
        const bool ok = co_await SetAlarm(actor, due);
        (void)ok;
      } else if (roll < 65) {
        const bool ok = co_await Send(actor, "POST", "/del", "");
        (void)ok;
      } else {
        const bool ok = co_await Send(actor, "GET", "", "");
        (void)ok;
      }
    }
  }

  // One set, retried until answered 200 (at most 5 tries), then nothing more.
  Task<void> LonelyClient(int actor, Duration at) {
    if (!co_await client_env_.SleepUntil(MonoTime(at))) co_return;
    const std::int64_t due = TrueMs() + Uniform(1000, 30000);
    for (int attempt = 0; attempt < 5; ++attempt) {
      const bool ok = co_await SetAlarm(actor, due);
      if (ok) co_return;
      if (!co_await client_env_.SleepFor(seconds(2))) co_return;
    }
  }

  // ---- the checkers at the end
  void FinalChecks() {
    const std::int64_t end_ms = TrueMs();
    const std::int64_t healthy_ms = kOrigin + World::Ms(kHealthyFrom);
    const std::int64_t bound_ms = World::Ms(alarm_options_.scan_period + alarm_options_.scan_lag + seconds(3));
    for (const ActorId& actor : actors_) {
      auto state = DurableState(actor);
      if (!state) {
        Violation(actor.name + ": its durable state cannot be restored");
        continue;
      }
      const std::vector<std::string> log = Split(state->Get("log").value_or(""));
      const std::optional<std::int64_t> final_alarm = state->alarm();
      std::optional<std::int64_t> pending;
      std::set<std::int64_t> logged_sets;
      for (const std::string& op : log) {
        if (op.empty()) continue;
        if (op[0] == 's') {
          pending = std::stoll(op.substr(1));
          logged_sets.insert(*pending);
        } else if (op == "d") {
          pending.reset();
        } else if (op[0] == 'f') {
          const std::string f = op.substr(1);
          const auto c1 = f.find(':'), c2 = f.rfind(':');
          const std::int64_t due = std::stoll(f.substr(0, c1));
          const int retry = std::stoi(f.substr(c1 + 1, c2 - c1 - 1));
          const std::int64_t now = std::stoll(f.substr(c2 + 1));
          ++result_.alarm_fired;
          if (pending != std::optional<std::int64_t>(due)) {
            Violation("A5: " + actor.name + " fired its alarm of " + std::to_string(due) + " after it was " +
                      (pending ? "replaced by " + std::to_string(*pending) : std::string("deleted")));
          }
          if (now < due) Violation("A1: " + actor.name + "'s log shows its alarm of " + std::to_string(due) + " fired early");
          if (retry > alarm_options_.max_retries) {
            Violation(actor.name + ": alarm of " + std::to_string(due) + " ran at retry " + std::to_string(retry));
          }
          const std::int64_t backoff =
              World::Ms(alarm_options_.first_retry) * ((std::int64_t{1} << std::min(retry, 20)) - 1);
          if (due >= healthy_ms && now - due > bound_ms + backoff) {
            Violation("A6: " + actor.name + "'s alarm of " + std::to_string(due) + " fired " +
                      std::to_string(now - due) + " ms late while the cluster was healthy (bound " +
                      std::to_string(bound_ms + backoff) + " ms)");
          }
          pending.reset();
        }
      }
      if (pending) {
        const std::int64_t due = *pending;
        if (final_alarm == pending) {
          if (due <= end_ms - World::Ms(kNotYetDue)) {
            ++result_.alarm_lost;
            Violation("A4: " + actor.name + "'s alarm of " + std::to_string(due) + " (due " +
                      std::to_string((end_ms - due) / 1000) + " s before the end) never fired; index entries: " +
                      std::to_string(EntriesFor(actor, due)));
          }
        } else if (!gave_up_.count({actor, due})) {
          Violation("A4: " + actor.name + "'s alarm of " + std::to_string(due) +
                    " was cleared without firing and without a failed last attempt");
        } else {
          ++result_.alarm_given_up;
        }
      }
      if (final_alarm && EntriesFor(actor, *final_alarm) == 0) {
        Violation("A7: " + actor.name + "'s durable state holds the alarm " + std::to_string(*final_alarm) +
                  " with no index entry");
      }
      for (std::int64_t due : acked_sets_[actor]) {
        if (!logged_sets.count(due)) {
          Violation(actor.name + ": the acknowledged set of its alarm to " + std::to_string(due) + " is not in its log");
        }
      }
    }
  }

  // ---- faults (as the routing scenario's)
  OpFault BucketFault(int slot, const OpInfo& op) {
    OpFault f;
    const MonoTime now = world_.Now();
    if (now < bucket_cut_until_[slot]) {
      f.request_delay = milliseconds(Uniform(1, 20));
      f.fail_before_apply = Retryable("simulated: bucket unreachable");
      return f;
    }
    f.request_delay = milliseconds(Uniform(1, 30));
    f.reply_delay = milliseconds(Uniform(1, 30));
    if (healed_) return f;
    const auto roll = Uniform(0, 999);
    const bool segment = op.op == StoreOp::kPut && op.key.starts_with(replica::kWalPrefix);
    if (roll < 20) {
      f.request_delay = segment ? milliseconds(Uniform(3000, 15000)) : milliseconds(Uniform(500, 4000));
    } else if (roll < 40) {
      f.lose_reply = true;
    } else if (roll < 55) {
      f.fail_before_apply = Retryable("simulated: SlowDown");
    } else if (roll < 105 || now < slow_until_) {
      f.reply_delay = milliseconds(Uniform(500, 3000));
    }
    return f;
  }

  SimPeerNetwork::MessageFault PeerFault(const NodeId& from, const NodeId& to) {
    SimPeerNetwork::MessageFault f;
    f.request_delay = milliseconds(Uniform(1, 10));
    f.reply_delay = milliseconds(Uniform(1, 10));
    if (healed_ || from.str() == kClientId || to.empty()) return f;
    auto cut = peer_cut_until_.find(from < to ? std::make_pair(from, to) : std::make_pair(to, from));
    if (cut != peer_cut_until_.end() && world_.Now() < cut->second) {
      f.drop_request = true;
      return f;
    }
    if (Chance(0.01)) f.lose_reply = true;
    return f;
  }

  void ScheduleChaos() {
    bucket_env_.StartTimer(world_.Now() + milliseconds(Uniform(2000, 7000)), [this] {
      if (world_.Now() >= MonoTime(kChaos)) return;
      ChaosStep();
      ScheduleChaos();
    });
  }

  void ChaosStep() {
    const auto roll = Uniform(0, 99);
    const int slot = static_cast<int>(Uniform(0, kNodes - 1));
    if (roll < 25) {
      if (Node* p = Live(slot)) {
        ++result_.kills;
        Trace("kill -9 p" + std::to_string(p->number));
        Reap(p->number);
        ScheduleRestart(slot, milliseconds(Uniform(500, 10000)));
      }
    } else if (roll < 50) {
      Node* p = Live(slot);
      if (p && !p->env->frozen()) {
        ++result_.freezes;
        const Duration d = milliseconds(Uniform(World::Ms(timing_.takeover_after()) + 2000,
                                                World::Ms(timing_.takeover_after()) + 12000));
        Trace("freeze p" + std::to_string(p->number) + " for " + std::to_string(World::Ms(d)) + "ms");
        p->env->Freeze();
        const int number = p->number;
        bucket_env_.StartTimer(world_.Now() + d, [this, number] { ThawNode(number); });
      }
    } else if (roll < 65) {
      const int other = static_cast<int>((slot + Uniform(1, kNodes - 1)) % kNodes);
      const NodeId a = SlotNodeId(std::min(slot, other));
      const NodeId b = SlotNodeId(std::max(slot, other));
      const Duration d = milliseconds(Uniform(2000, 20000));
      peer_cut_until_[{a, b}] = world_.Now() + d;
      ++result_.partitions;
      Trace("partition " + a.str() + " | " + b.str() + " for " + std::to_string(World::Ms(d)) + "ms");
    } else if (roll < 85) {
      const Duration d = milliseconds(Uniform(2000, 20000));
      bucket_cut_until_[slot] = world_.Now() + d;
      ++result_.outages;
      Trace("partition n" + std::to_string(slot) + " | bucket for " + std::to_string(World::Ms(d)) + "ms");
    } else {
      const Duration d = milliseconds(Uniform(3000, 15000));
      slow_until_ = world_.Now() + d;
      Trace("slow bucket for " + std::to_string(World::Ms(d)) + "ms");
    }
  }

  void ThawNode(int number) {
    auto it = nodes_.find(number);
    if (it == nodes_.end() || !it->second->env->frozen()) return;
    const bool posts_first = Chance(0.5);
    Trace("thaw p" + std::to_string(number) + (posts_first ? " (arrivals first)" : ""));
    it->second->env->Thaw(posts_first);
  }

  void Heal() {
    healed_ = true;
    Trace("heal: no more faults");
    for (auto& t : bucket_cut_until_) t = MonoTime{};
    peer_cut_until_.clear();
    slow_until_ = MonoTime{};
    std::vector<int> frozen;
    for (auto& [n, p] : nodes_)
      if (p->env && p->env->frozen()) frozen.push_back(n);
    for (int n : frozen) ThawNode(n);
    for (int s = 0; s < kNodes; ++s)
      if (Live(s) == nullptr) ScheduleRestart(s, milliseconds(100));
  }

  RunOptions options_;
  SimWorld world_;
  std::mt19937_64 rng_;
  SimEnv bucket_env_;
  SimEnv client_env_;
  std::shared_ptr<MemBucket> bucket_;
  SimPeerNetwork network_;
  std::unique_ptr<PeerTransport> client_transport_;
  LeaseTiming timing_;
  control::ClusterSecret secret_;
  replica::ReplicaOptions replica_options_;
  alarms::AlarmOptions alarm_options_;
  BrokenModels broken_;
  NativeActorHostOptions host_options_;
  std::vector<ActorId> actors_;
  std::map<int, std::unique_ptr<Node>> nodes_;
  int next_number_ = 0;
  std::map<int, std::int64_t> last_due_;
  std::map<ActorId, std::set<std::int64_t>> acked_sets_;
  std::set<std::pair<ActorId, std::int64_t>> gave_up_;
  MonoTime bucket_cut_until_[kNodes]{};
  std::map<std::pair<NodeId, NodeId>, MonoTime> peer_cut_until_;
  MonoTime slow_until_{};
  bool healed_ = false;
  bool finished_ = false;
  std::deque<std::string> trace_;
  std::uint64_t digest_ = 1469598103934665603ULL;
  RunResult result_;
};

}  // namespace

RunResult RunAlarmsScenario(const RunOptions& options) { return AlarmsSim(options).Run(); }

}  // namespace wk::sim
