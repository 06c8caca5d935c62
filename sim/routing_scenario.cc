// The `routing` scenario: the actor API end to end on three simulated nodes. Each node runs
// its real ClusterNode (lease, listing, fence watch, ownership), the real ReplicaProvider
// (durable replicas on the simulated bucket, holds from the ownership records), the real
// Forwarder over the simulated peer network (sim_peer_network.h) and the real Front, with
// native list actors (native_actor_host.h) in place of WebAssembly. Clients send appends
// and reads to random nodes; the checker judges the acknowledged history of each actor
// (linearizable, see CheckActor). Faults: kill -9 and restart, a node frozen past its lease
// and then resumed with its memory (a zombie owner), partitions between nodes and between a
// node and the bucket, slow and lost bucket replies and lost peer replies. See
// docs/simulation.md, "routing".
//
// The `move` scenario is the same world with operators at work: actors moved between nodes
// (HandOvers::HandOver with a target: closed, durable, released, then taken and restored by
// the target, told over the peer network) and nodes drained (HandOvers::Drain), racing the
// kills, the frozen nodes and the lost replies. Besides the linearizability checker (no
// acknowledged append lost), it checks after every event that no two nodes act for one
// actor (checker 8), that every acquisition writes a generation above the last (9), and
// that a drain reports drained only when no record names its process (10). See
// docs/simulation.md, "move".
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "base/digest.h"
#include "cluster/hand_over.h"
#include "cluster/owner_record.h"
#include "cluster/cluster_node.h"
#include "env/sim_env.h"
#include "native_actor_host.h"
#include "replica/format.h"
#include "replica/provider.h"
#include "scenario.h"
#include "server/forwarder.h"
#include "server/front.h"
#include "sim_peer_network.h"
#include "store/mem/mem_store.h"

namespace wk::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kSlots = 3;
constexpr int kActors = 3;
constexpr int kClients = 4;
constexpr std::int64_t kOriginMs = 1'764'000'000'000;
constexpr Duration kChaosFor = seconds(75);
// Clients keep going into the healing period; then the final reads, then the checks.
constexpr Duration kClientsFor = seconds(95);
constexpr Duration kHealFor = seconds(45);
constexpr Duration kClientTimeout = seconds(30);
constexpr std::string_view kToken = "Bearer routing-test-token";
constexpr std::string_view kTenant = "t";
constexpr std::string_view kClass = "list";
// What the clients' transport is called on the peer network (no node has this id).
constexpr std::string_view kClientId = "client";

// Each node has two listeners, as `wasmkeep serve` does: the client API, which the clients
// use, and the peer listener, which its node record names and other nodes forward to.
std::string AddressOf(int slot) { return SlotNodeId(slot).str() + ":7000"; }
std::string PeerAddressOf(int slot) { return SlotNodeId(slot).str() + ":7001"; }

std::vector<std::string> SplitList(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

// The test tenant's authentication: one token.
Task<Result<std::string>> Authenticate(std::string authorization) {
  if (authorization == kToken) co_return std::string(kTenant);
  co_return NotFound("unknown token");
}

Task<Status> LoadClass(std::string tenant, std::string class_name) {
  if (tenant == kTenant && class_name == kClass) co_return Status::Ok();
  co_return NotFound("no class " + tenant + "/" + class_name);
}

struct Node {
  int number = 0;
  int slot = 0;
  NodeId node_id;
  std::string address;
  std::string peer_address;
  InstanceToken instance;
  std::string cert_pin;
  std::unique_ptr<SimEnv> env;
  std::unique_ptr<MemStore> store;
  std::unique_ptr<ClusterNode> cluster;
  std::unique_ptr<replica::OwnersHoldSource> holds;
  std::unique_ptr<replica::ReplicaProvider> provider;
  std::unique_ptr<NativeActorHost> host;
  std::unique_ptr<PeerTransport> transport;
  std::unique_ptr<Forwarder> forwarder;
  std::unique_ptr<Front> front;
  bool running = false;
  bool draining = false;
};

// One client operation as the client saw it.
struct Op {
  int actor = 0;
  bool append = false;
  std::string value;  // appends: the value sent
  MonoTime invoked{};
  MonoTime completed{};
  bool done = false;
  bool ok = false;  // 200: acknowledged (an append) or answered (a read)
  std::vector<std::string> list;  // reads: what was returned
  int status = 0;
  int slot = 0;
};

class RoutingSim {
 public:
  RoutingSim(const RunOptions& options, bool moves)
      : moves_(moves),
        options_(options),
        world_(options.seed),
        rng_(options.seed ^ 0x5851f42d4c957f2dULL),
        bucket_env_(world_, FromUnixMs(kOriginMs)),
        client_env_(world_, FromUnixMs(kOriginMs)),
        bucket_(std::make_shared<MemBucket>()),
        network_(world_, [this](const NodeId& from, const NodeId& to) { return PeerFault(from, to); }) {
    secret_.bytes.fill(0x5a);
    replica_options_.gc_off_chain_after = timing_.takeover_after();
    replica_options_.segment_max_batches = static_cast<std::uint32_t>(Uniform(2, 8));
    replica_options_.snapshot_every_segments = static_cast<std::uint32_t>(Uniform(3, 6));
    WK_CHECK(replica::ValidateReplicaOptions(replica_options_).ok(), "bad simulator replica options");
    broken_ = options_.broken();
    host_options_.broken = broken_;
    // Long enough that a node frozen past its lease usually still has its actors in memory
    // when it resumes: the zombie case.
    host_options_.idle_hibernate = milliseconds(Uniform(20000, 40000));
    client_transport_ = network_.TransportFor(NodeId(kClientId), client_env_);
    if (moves_) {
      bucket_->set_put_observer([this](const std::string& key, const std::string& body, const Version&) {
        OnLanded(key, body);
      });
    }
  }

  ~RoutingSim() {
    for (auto& [n, p] : nodes_) Teardown(*p);
    client_transport_.reset();
  }

  RunResult Run() {
    for (int s = 0; s < kSlots; ++s) StartNode(s);
    for (int c = 0; c < kClients; ++c) client_env_.Spawn(Client(), "client");
    ScheduleChaos();
    if (moves_) {
      ScheduleMoves();
      ScheduleDrains();
    }
    const MonoTime chaos_end = MonoTime(kChaosFor);
    const MonoTime end = chaos_end + kHealFor;
    while (world_.Now() < end && (!moves_ || result_.violations.empty())) {
      if (!world_.RunOne()) break;
      if (!healed_ && world_.Now() >= chaos_end) Heal();
      if (moves_) CheckOwners();
    }
    // (The move scenario stops at its first violation: the final reads would only add noise.)
    if (result_.violations.empty()) {
      FinalReads();
      for (int a = 0; a < kActors; ++a) CheckActor(a);
    }
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
  static std::string At(MonoTime t) { return std::to_string(Ms(t.time_since_epoch())) + "ms"; }

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

  // ---- nodes
  void StartNode(int slot) {
    auto p = std::make_unique<Node>();
    p->number = next_number_++;
    p->slot = slot;
    p->node_id = SlotNodeId(slot);
    p->address = AddressOf(slot);
    p->peer_address = PeerAddressOf(slot);
    // Clock skew within the bound: the forwarder's timestamps and the leases both see it.
    p->env = std::make_unique<SimEnv>(world_, FromUnixMs(kOriginMs), milliseconds(Uniform(-1000, 1000)));
    p->instance = InstanceToken(p->env->RandomHex(8));
    // A fresh pin per process, as a node's fresh TLS key gives one (no randomness drawn:
    // derived from the instance).
    p->cert_pin = Sha256Hex("simulated key of " + p->instance.str());
    p->store = std::make_unique<MemStore>(*p->env, bucket_, [this, slot](const OpInfo& op) { return BucketFault(slot, op); },
                                          &bucket_env_);
    p->cluster = std::make_unique<ClusterNode>(*p->env, *p->store, NodeIdentity{p->node_id, p->peer_address, "sim", p->cert_pin},
                                               timing_, p->instance);
    p->cluster->set_broken_models(broken_);
    p->holds = std::make_unique<replica::OwnersHoldSource>(p->cluster->owners());
    Env* env = p->env.get();
    replica::Replica::Deps deps{*p->env, *p->store, [env](std::function<void()> fn) { env->Post(std::move(fn)); },
                                nullptr, broken_};
    p->provider = std::make_unique<replica::ReplicaProvider>(std::move(deps), *p->holds, replica_options_, seconds(10));
    p->host = std::make_unique<NativeActorHost>(*p->env, *p->provider, host_options_);
    const int number = p->number;
    p->host->set_on_closed([this, number](const ActorId& id, const std::string& why) {
      Trace("p" + std::to_string(number) + " " + id.name + " left memory: " + why);
    });
    p->transport = network_.TransportFor(p->node_id, *p->env, p->cert_pin);
    ForwarderOptions fo;
    fo.timeout = seconds(20);
    p->forwarder =
        std::make_unique<Forwarder>(*p->env, *p->transport, ForwarderIdentity{p->node_id, p->instance}, secret_, fo);
    FrontDeps deps_front{*p->host, p->cluster->owners(), p->cluster->membership(), *p->forwarder,
                         [](std::string authorization) { return Authenticate(std::move(authorization)); },
                         [](std::string tenant, std::string class_name) {
                           return LoadClass(std::move(tenant), std::move(class_name));
                         }};
    deps_front.hand_overs = &p->cluster->hand_overs();
    FrontOptions front_options;
    front_options.node_id = p->node_id;
    front_options.check_peer_pins = true;
    p->front = std::make_unique<Front>(std::move(deps_front), front_options);
    // Drains and moves close resident actors as hibernation does; a move's target is told
    // over the peer network (as ActorHost wires a real node).
    HandOverHost hand_over;
    hand_over.unload = [host = p->host.get()](const ActorId& id) {
      if (!host->IsResident(id)) return false;
      host->Unload(id);
      return true;
    };
    hand_over.take = [front = p->front.get()](NodeId to, ActorId actor, Version released, Generation g) {
      return front->SendTake(std::move(to), std::move(actor), std::move(released), g);
    };
    p->cluster->hand_overs().set_host(std::move(hand_over));
    p->cluster->lease().AddObserver({
        [this, number](std::uint64_t e) { Trace("p" + std::to_string(number) + " valid epoch " + std::to_string(e)); },
        [this, number](std::uint64_t) { Trace("p" + std::to_string(number) + " lapsed"); },
        [this, number](const std::string& why) { Trace("p" + std::to_string(number) + " lost: " + why); },
    });
    Front* front = p->front.get();
    network_.Listen(p->address, p->node_id, p->env.get(),
                    [front](ServerRequest r) { return front->Handle(std::move(r), Via::kClient); });
    network_.Listen(p->peer_address, p->node_id, p->env.get(),
                    [front](ServerRequest r) { return front->Handle(std::move(r), Via::kPeer); });
    p->running = true;
    Trace("start p" + std::to_string(number) + " as " + p->node_id.str() + " instance " + p->instance.str());
    Node* raw = p.get();
    nodes_[number] = std::move(p);
    raw->env->Spawn(RunNode(raw), "node");
  }

  Task<void> RunNode(Node* p) {
    LeaseEnd end = co_await p->cluster->Run();
    p->running = false;
    ++result_.lost_leases;
    Trace("p" + std::to_string(p->number) + " exits: " + std::string(LeaseEndReasonName(end.reason)) + " " + end.message);
    const int number = p->number;
    const int slot = p->slot;
    // The supervisor restarts it; teardown happens outside the node's own stack.
    bucket_env_.Post([this, number] { Reap(number); });
    ScheduleRestart(slot, milliseconds(Uniform(500, 5000)));
  }

  void Teardown(Node& p) {
    // kill -9: nothing more is answered or sent; requests already in flight stay in flight.
    network_.Close(p.address, p.env.get());
    network_.Close(p.peer_address, p.env.get());
    if (p.cluster) p.cluster->owners().StopBackground();
    // The host first, while its Env still works: its replicas answer what they owe (into
    // frames that never resume).
    p.host.reset();
    p.transport.reset();
    p.env.reset();
    p.front.reset();
    p.forwarder.reset();
    p.provider.reset();
    p.holds.reset();
    p.cluster.reset();
    p.store.reset();
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
  Task<void> Client() {
    for (;;) {
      if (!co_await client_env_.SleepFor(milliseconds(Uniform(50, 700)))) co_return;
      if (world_.Now() >= MonoTime(kClientsFor)) co_return;
      Op op;
      op.actor = static_cast<int>(Uniform(0, kActors - 1));
      op.slot = static_cast<int>(Uniform(0, kSlots - 1));
      op.append = Chance(0.6);
      if (op.append) op.value = "v" + std::to_string(++next_value_);
      const std::size_t index = ops_.size();
      const bool ok = co_await Send(op, index);
      (void)ok;
    }
  }

  ServerRequest RequestFor(const Op& op) const {
    ServerRequest r;
    r.method = op.append ? "POST" : "GET";
    r.target = std::string(kActorsPrefix) + std::string(kTenant) + "/" + std::string(kClass) + "/a" +
               std::to_string(op.actor) + (op.append ? "/append" : "");
    r.headers.emplace_back("Authorization", std::string(kToken));
    r.body = op.value;
    return r;
  }

  // Sends op (recorded at index) and records its outcome. True if answered 200.
  Task<bool> Send(Op op, std::size_t index) {
    op.invoked = world_.Now();
    ServerRequest request = RequestFor(op);
    const std::string what = std::string(op.append ? "append " + op.value : "read") + " a" + std::to_string(op.actor) +
                             " via n" + std::to_string(op.slot);
    ops_.push_back(std::move(op));
    if (ops_[index].append) ++result_.appends; else ++result_.reads;
    PeerTarget node{SlotNodeId(ops_[index].slot), InstanceToken(), AddressOf(ops_[index].slot)};
    auto got = co_await client_transport_->Send(std::move(node), std::move(request), kClientTimeout);
    Op& done = ops_[index];
    done.completed = world_.Now();
    done.done = true;
    if (!got.ok()) {
      Trace("client " + what + " (sent " + At(done.invoked) + "): " + got.status().ToString());
      co_return false;
    }
    done.status = got->status;
    done.ok = got->status == 200;
    if (done.ok && !done.append) done.list = SplitList(got->body);
    if (done.ok) {
      if (done.append) ++result_.acked_appends; else ++result_.ok_reads;
    }
    std::string body = got->body;
    if (body.size() > 200) body = "..." + body.substr(body.size() - 200);
    while (!body.empty() && body.back() == '\n') body.pop_back();
    Trace("client " + what + " (sent " + At(done.invoked) + "): " + std::to_string(got->status) + " " + body);
    co_return done.ok;
  }

  // After healing: each actor read through a healthy node until one answers (every
  // acknowledged append must be in it: CheckActor judges it like any read).
  void FinalReads() {
    finished_ = true;
    for (int a = 0; a < kActors; ++a) {
      bool answered = false;
      for (int attempt = 0; attempt < 10 && !answered; ++attempt) {
        Op op;
        op.actor = a;
        op.slot = (a + attempt) % kSlots;
        const std::size_t index = ops_.size();
        auto ran = RunTask(world_, client_env_, Send(op, index), kClientTimeout + seconds(5));
        answered = ran.has_value() && *ran;
        if (!answered) world_.RunFor(seconds(2));
      }
      if (!answered) Violation("a" + std::to_string(a) + ": no healthy node answered a read after healing");
    }
  }

  // ---- the checker
  //
  // Per actor, over the operations the clients saw: the list is append-only, so in a
  // linearizable history every answered read is a prefix of the longest one (M), and:
  //   1. a read holds no value twice, and none that was not sent before the read ended;
  //   2. a read holds every append acknowledged before the read was sent;
  //   3. an append acknowledged before another was sent precedes it (if the later one is
  //      anywhere in M, the earlier one is, before it);
  //   4. a read that ended before another was sent is not longer than it (with 0, reads
  //      are prefix-ordered in real time).
  // The final reads are reads like any other, sent after everything was acknowledged.
  // Broken models that make it fail: --mutant answer-without-gate (2, at seed 1: an append
  // answered before durable is lost with its node; a zombie's read is stale once the front's
  // own validity checks are gone) and --mutant release-without-validity (2: a zombie's read
  // released by the gate without the hold's validity; it takes effect with the hold gate,
  // replica/hold_gate.h).
  void CheckActor(int a) {
    const std::string name = "a" + std::to_string(a);
    std::vector<const Op*> reads, acked, sent;
    for (const Op& op : ops_) {
      if (op.actor != a) continue;
      if (op.append) {
        sent.push_back(&op);
        if (op.ok) acked.push_back(&op);
      } else if (op.ok) {
        reads.push_back(&op);
      }
    }
    std::map<std::string, const Op*> by_value;
    for (const Op* op : sent) by_value[op->value] = op;
    const Op* longest = nullptr;
    for (const Op* r : reads)
      if (!longest || r->list.size() > longest->list.size()) longest = r;
    std::vector<std::string> m = longest ? longest->list : std::vector<std::string>{};
    std::map<std::string, std::size_t> pos;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!pos.emplace(m[i], i).second) {
        Violation(name + ": the read sent at " + At(longest->invoked) + " holds " + m[i] + " twice");
        return;
      }
      if (!by_value.count(m[i])) {
        Violation(name + ": the read sent at " + At(longest->invoked) + " holds " + m[i] + ", never sent");
        return;
      }
    }
    // The latest send time among M's first i values, so a read of length n ended after
    // every value it holds was sent.
    std::vector<MonoTime> sent_by(m.size() + 1, MonoTime{});
    for (std::size_t i = 0; i < m.size(); ++i) sent_by[i + 1] = std::max(sent_by[i], by_value[m[i]]->invoked);
    for (const Op* r : reads) {
      // 0. prefix of M.
      for (std::size_t i = 0; i < r->list.size(); ++i) {
        if (r->list[i] != m[i]) {
          Violation(name + ": the reads sent at " + At(r->invoked) + " and " + At(longest->invoked) +
                    " disagree at position " + std::to_string(i) + " (" + r->list[i] + " vs " + m[i] + ")");
          return;
        }
      }
      // 1. nothing from the future.
      if (sent_by[r->list.size()] > r->completed) {
        Violation(name + ": the read sent at " + At(r->invoked) + " holds a value sent after it ended");
        return;
      }
    }
    // 2. every append acknowledged before a read was sent is in it.
    std::vector<const Op*> by_ack = acked;
    std::sort(by_ack.begin(), by_ack.end(), [](const Op* x, const Op* y) { return x->completed < y->completed; });
    for (const Op* r : reads) {
      for (const Op* w : by_ack) {
        if (w->completed >= r->invoked) break;
        auto it = pos.find(w->value);
        if (it == pos.end() || it->second >= r->list.size()) {
          Violation(name + ": the read sent at " + At(r->invoked) + " via n" + std::to_string(r->slot) + " (" +
                    std::to_string(r->list.size()) + " values) misses " + w->value + ", acknowledged at " +
                    At(w->completed) + " via n" + std::to_string(w->slot));
          return;
        }
      }
    }
    // 3. acknowledgement order.
    for (const Op* b : sent) {
      auto pb = pos.find(b->value);
      if (pb == pos.end()) continue;
      for (const Op* w : by_ack) {
        if (w->completed >= b->invoked) break;
        auto pw = pos.find(w->value);
        if (pw == pos.end() || pw->second > pb->second) {
          Violation(name + ": " + w->value + " was acknowledged at " + At(w->completed) + ", before " + b->value +
                    " was sent, but " + (pw == pos.end() ? std::string("is missing") : std::string("comes after it")));
          return;
        }
      }
    }
    // 4. reads in real time never shrink.
    for (const Op* r1 : reads) {
      for (const Op* r2 : reads) {
        if (r1->completed < r2->invoked && r1->list.size() > r2->list.size()) {
          Violation(name + ": the read sent at " + At(r2->invoked) + " (" + std::to_string(r2->list.size()) +
                    " values) is older than the one answered at " + At(r1->completed) + " (" +
                    std::to_string(r1->list.size()) + ")");
          return;
        }
      }
    }
  }

  // ---- faults
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
      // Applied late: a segment often past its upload timeout.
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
    bucket_env_.StartTimer(world_.Now() + milliseconds(Uniform(2000, 8000)), [this] {
      if (world_.Now() >= MonoTime(kChaosFor)) return;
      ChaosStep();
      ScheduleChaos();
    });
  }

  void ChaosStep() {
    const auto roll = Uniform(0, 99);
    const int slot = static_cast<int>(Uniform(0, kSlots - 1));
    if (roll < 20) {
      if (Node* p = Live(slot)) {
        ++result_.kills;
        Trace("kill -9 p" + std::to_string(p->number));
        Reap(p->number);
        ScheduleRestart(slot, milliseconds(Uniform(500, 10000)));
      }
    } else if (roll < 45) {
      // Frozen past its lease (ttl + grace: another node may take its actors), then resumed
      // with its memory as it was.
      Node* p = Live(slot);
      if (p && !p->env->frozen()) {
        ++result_.freezes;
        const Duration d = milliseconds(Uniform(Ms(timing_.takeover_after()) + 2000, Ms(timing_.takeover_after()) + 12000));
        Trace("freeze p" + std::to_string(p->number) + " for " + std::to_string(Ms(d)) + "ms");
        p->env->Freeze();
        const int number = p->number;
        bucket_env_.StartTimer(world_.Now() + d, [this, number] { ThawNode(number); });
      }
    } else if (roll < 65) {
      const int other = static_cast<int>((slot + Uniform(1, kSlots - 1)) % kSlots);
      const NodeId a = SlotNodeId(std::min(slot, other));
      const NodeId b = SlotNodeId(std::max(slot, other));
      const Duration d = milliseconds(Uniform(2000, 20000));
      peer_cut_until_[{a, b}] = world_.Now() + d;
      ++result_.partitions;
      Trace("partition " + a.str() + " | " + b.str() + " for " + std::to_string(Ms(d)) + "ms");
    } else if (roll < 85) {
      const Duration d = milliseconds(Uniform(2000, 20000));
      bucket_cut_until_[slot] = world_.Now() + d;
      ++result_.outages;
      Trace("partition n" + std::to_string(slot) + " | bucket for " + std::to_string(Ms(d)) + "ms");
    } else {
      const Duration d = milliseconds(Uniform(3000, 15000));
      slow_until_ = world_.Now() + d;
      Trace("slow bucket for " + std::to_string(Ms(d)) + "ms");
    }
  }

  // ---- the move scenario: operators moving actors and draining nodes
  //
  // Every 0.5-2 s of chaos, a node moves one of the actors it holds to another live node; every
  // 8-20 s, a node is drained (10 s at most), then put back in service 1-5 s later.
  void ScheduleMoves() {
    bucket_env_.StartTimer(world_.Now() + milliseconds(Uniform(500, 2000)), [this] {
      if (world_.Now() >= MonoTime(kChaosFor)) return;
      const int slot = static_cast<int>(Uniform(0, kSlots - 1));
      const int to = static_cast<int>((slot + Uniform(1, kSlots - 1)) % kSlots);
      Node* p = Live(slot);
      // As `wasmkeep actor move` does, only to a node that is live (in the source's view).
      auto target = p != nullptr ? p->cluster->membership().view().find(SlotNodeId(to))
                                 : std::map<NodeId, NodeView>::const_iterator();
      if (p != nullptr && !p->env->frozen() && target != p->cluster->membership().view().end() &&
          target->second.live()) {
        std::vector<ActorId> held = p->cluster->owners().HeldActors();
        if (!held.empty()) {
          const ActorId actor = held[static_cast<std::size_t>(Uniform(0, static_cast<std::int64_t>(held.size()) - 1))];
          ++result_.moves;
          Trace("move " + actor.name + " from p" + std::to_string(p->number) + " to n" + std::to_string(to));
          p->env->Spawn(Move(p, actor, SlotNodeId(to)), "move");
          Burst(std::stoi(actor.name.substr(1)));
        }
      }
      ScheduleMoves();
    });
  }

  // A moved actor is often a busy one: 6 more requests for it, to random nodes, within the
  // next 300 ms, so requests race every step of the hand-over (the source's close, its
  // release, the target's take) from every node.
  void Burst(int actor) {
    for (int k = 0; k < 6; ++k) {
      Op op;
      op.actor = actor;
      op.slot = static_cast<int>(Uniform(0, kSlots - 1));
      op.append = Chance(0.6);
      if (op.append) op.value = "v" + std::to_string(++next_value_);
      client_env_.StartTimer(world_.Now() + milliseconds(Uniform(0, 300)),
                             [this, op] { client_env_.Spawn(BurstSend(op), "burst"); });
    }
  }
  Task<void> BurstSend(Op op) {
    const std::size_t index = ops_.size();
    (void)co_await Send(std::move(op), index);
  }

  Task<void> Move(Node* p, ActorId actor, NodeId to) {
    const int number = p->number;
    HandOverResult r = co_await p->cluster->hand_overs().HandOver(actor, to, kHandOverLimit);
    if (r.kind == HandOverResult::Kind::kMoved) ++result_.moved;
    Trace("p" + std::to_string(number) + " move of " + actor.name + ": " + std::string(HandOverKindName(r.kind)) + " " +
          r.detail);
  }

  void ScheduleDrains() {
    bucket_env_.StartTimer(world_.Now() + milliseconds(Uniform(8000, 20000)), [this] {
      if (world_.Now() >= MonoTime(kChaosFor)) return;
      Node* p = Live(static_cast<int>(Uniform(0, kSlots - 1)));
      if (p != nullptr && !p->env->frozen() && !p->draining) {
        p->draining = true;
        Trace("drain p" + std::to_string(p->number));
        p->env->Spawn(Drain(p), "drain");
      }
      ScheduleDrains();
    });
  }

  Task<void> Drain(Node* p) {
    const int number = p->number;
    Status s = co_await p->cluster->hand_overs().Drain(seconds(10));
    Trace("p" + std::to_string(number) + " drain: " + s.ToString());
    if (s.ok()) {
      ++result_.drains;
      // 10. A drain never reports drained with a release pending: no record names it.
      for (const auto& [key, obj] : bucket_->objects()) {
        if (!key.starts_with(kOwnersPrefix)) continue;
        auto rec = DecodeOwnerRecord(obj.body);
        if (rec.ok() && rec->instance == p->instance) {
          Violation("p" + std::to_string(number) + " reported drained while " + key + " still names it");
        }
      }
    }
    // The operator puts it back in service a little later.
    bucket_env_.StartTimer(world_.Now() + milliseconds(Uniform(1000, 5000)), [this, number] {
      auto it = nodes_.find(number);
      if (it == nodes_.end() || !it->second->cluster) return;
      it->second->cluster->owners().SetAccepting(true);
      it->second->draining = false;
      Trace("undrain p" + std::to_string(number));
    });
  }

  // 8. Never two owners acting for one actor, after every event.
  void CheckOwners() {
    for (int a = 0; a < kActors; ++a) {
      const ActorId actor{std::string(kTenant), std::string(kClass), "a" + std::to_string(a)};
      int owners = 0;
      for (auto& [n, p] : nodes_) {
        if (!p->running || !p->cluster) continue;
        if (p->cluster->owners().Find(actor).IsValid() && ++owners > 1) {
          Violation("two owners act for " + actor.ToString() + " (one is p" + std::to_string(n) + ")");
          return;
        }
      }
    }
  }

  // 9. Never one generation for two holds: every record naming a node lands above the last.
  void OnLanded(const std::string& key, const std::string& body) {
    if (!key.starts_with(kOwnersPrefix)) return;
    auto rec = DecodeOwnerRecord(body);
    if (!rec.ok() || rec->names_nobody()) return;
    Generation& last = last_generation_[key];
    if (rec->generation <= last) {
      Violation(key + " acquired at generation " + std::to_string(rec->generation.value) + " by " + rec->node_id.str() +
                ", not above " + std::to_string(last.value) + ": one generation for two holds");
    }
    last = std::max(last, rec->generation);
    Trace(key + " -> " + rec->node_id.str() + " g" + std::to_string(rec->generation.value));
  }

  void ThawNode(int number) {
    auto it = nodes_.find(number);
    if (it == nodes_.end() || !it->second->env->frozen()) return;
    // Half of the thaws serve what arrived (requests, replies) before the timers that came
    // due (the lease's own checks among them): the zombie answers before it notices.
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
    for (int s = 0; s < kSlots; ++s)
      if (Live(s) == nullptr) ScheduleRestart(s, milliseconds(100));
  }

  const bool moves_;  // the `move` scenario: moves, drains and checkers 8-10
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
  BrokenModels broken_;
  NativeActorHostOptions host_options_;
  std::map<int, std::unique_ptr<Node>> nodes_;
  int next_number_ = 0;
  std::uint64_t next_value_ = 0;
  std::deque<Op> ops_;
  MonoTime bucket_cut_until_[kSlots]{};
  std::map<std::pair<NodeId, NodeId>, MonoTime> peer_cut_until_;
  MonoTime slow_until_{};
  bool healed_ = false;
  bool finished_ = false;
  std::map<std::string, Generation> last_generation_;
  std::deque<std::string> trace_;
  std::uint64_t digest_ = 1469598103934665603ULL;
  RunResult result_;
};

}  // namespace

RunResult RunRoutingScenario(const RunOptions& options) { return RoutingSim(options, /*moves=*/false).Run(); }

RunResult RunMoveScenario(const RunOptions& options) { return RoutingSim(options, /*moves=*/true).Run(); }

}  // namespace wk::sim
