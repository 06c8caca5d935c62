#include "serving.h"

#include <algorithm>
#include <map>
#include <set>

#include "alarms/alarm_index.h"
#include "alarms/shard_scanner.h"
#include "base/digest.h"
#include "cluster/hand_over.h"
#include "control/class_versions.h"
#include "control/quarantine_cache.h"
#include "control/quarantine_strikes.h"
#include "control/quota_cache.h"
#include "replica/provider.h"
#include "routing/forwarder.h"
#include "routing/front.h"
#include "routing/owner_changes.h"
#include "routing/quarantine_hold_source.h"
#include "routing/tenant_limits.h"
#include "store/store_wrapper.h"

namespace wk::sim {
namespace {

// Each node listens twice, as `wasmkeep serve` does: the client API, which the clients
// use, and the peer listener, which its node record names and other nodes forward to.
std::string AddressOf(int slot) { return SlotNodeId(slot).str() + ":7000"; }
std::string PeerAddressOf(int slot) { return SlotNodeId(slot).str() + ":7001"; }

// The test tenant: one token, one class. Free coroutines with every argument by value
// (docs/DEVELOPING.md, "Coroutines"); the lambdas that call them capture only strings.
Task<Result<std::string>> Authenticate(std::string token, std::string authorization) {
  if (authorization == token) co_return std::string(kServingTenant);
  co_return NotFound("unknown token");
}

Task<Status> LoadClass(std::vector<std::string> class_names, std::string tenant, std::string name) {
  if (tenant == kServingTenant && std::find(class_names.begin(), class_names.end(), name) != class_names.end()) {
    co_return Status::Ok();
  }
  co_return NotFound("no class " + tenant + "/" + name);
}

// The node's view of the bucket for its quarantine records: reports every read it sends, and
// its end (a listing of quarantine/ as a read of that prefix). Once the process has exited (its lease lost: `wasmkeep serve` exits), a strike
// still in flight sends nothing more, as the real process's would not.
class QuarantineStore final : public StoreWrapper {
 public:
  QuarantineStore(ObjectStore& inner, const Process& process, std::function<void(const std::string&, bool)> on_get)
      : StoreWrapper(inner), process_(process), on_get_(std::move(on_get)) {}
  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    if (on_get_) on_get_(key, false);
    const std::string observed = key;
    Result<GetOutput> got = co_await StoreWrapper::Get(std::move(key), options);
    if (on_get_) on_get_(observed, true);
    co_return got;
  }
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override {
    const std::string prefix = options.prefix;
    if (on_get_) on_get_(prefix, false);
    Result<ListPage> page = co_await StoreWrapper::List(std::move(options), call);
    if (on_get_) on_get_(prefix, true);
    co_return page;
  }
  Task<Result<Version>> Put(std::string key, std::string body, Precondition precondition,
                            CallOptions options) override {
    if (process_.end) return Exited();
    return StoreWrapper::Put(std::move(key), std::move(body), std::move(precondition), options);
  }
  Task<Status> Delete(std::string key, Precondition precondition, CallOptions options) override {
    if (process_.end) return ExitedDelete();
    return StoreWrapper::Delete(std::move(key), std::move(precondition), options);
  }
  std::string Describe() const override { return "quarantine:" + inner().Describe(); }

 private:
  static Task<Result<Version>> Exited() { co_return Cancelled("the process exited"); }
  static Task<Status> ExitedDelete() { co_return Cancelled("the process exited"); }

  const Process& process_;
  std::function<void(const std::string&, bool)> on_get_;
};

// The hold source under QuarantineHoldSource: reports every acquisition that got past it.
class ObservedHolds final : public replica::HoldSource {
 public:
  ObservedHolds(replica::HoldSource& inner, std::function<void(const ActorId&)> on_acquire)
      : inner_(inner), on_acquire_(std::move(on_acquire)) {}
  Task<Result<replica::Replica::Hold>> Acquire(ActorId actor) override {
    if (on_acquire_) on_acquire_(actor);
    return inner_.Acquire(std::move(actor));
  }
  Task<void> Release(ActorId actor, Generation generation) override {
    return inner_.Release(std::move(actor), generation);
  }
  bool Sleep(const ActorId& actor, Generation generation, HoldResume resume) override {
    return inner_.Sleep(actor, generation, resume);
  }
  // A wake is a start too: reported when it got past the quarantine check above.
  Task<std::optional<std::pair<replica::Replica::Hold, HoldResume>>> Wake(ActorId actor) override {
    auto woken = co_await inner_.Wake(actor);
    if (woken && on_acquire_) on_acquire_(actor);
    co_return woken;
  }

 private:
  replica::HoldSource& inner_;
  std::function<void(const ActorId&)> on_acquire_;
};

// A node's loading of the versioned native classes (ServingOptions::versioned_classes), as
// ActorHost::LoadClass and LoadVersion load modules: a class's rollout read from the bucket
// at most every class_check, the versions it names loaded and its chooser set in one step
// (never an older revision over a newer one); a version a state needs read on demand. Its
// coroutines are free functions over this shared state; a kill ends them (alive).
struct VersionLoader {
  SimEnv* env = nullptr;
  ObjectStore* store = nullptr;
  BrokenModels broken;
  Duration class_check{};
  NativeVersions versions;
  std::map<std::string, MonoTime> checked;        // by class: when its rollout was last read
  std::map<std::string, std::uint64_t> revision;  // by class: the rollout revision set
  std::set<std::string> refreshing;
  bool alive = true;
};

Task<Status> LoadVersionedClass(std::shared_ptr<VersionLoader> l, std::string tenant, std::string class_name,
                                bool force) {
  const auto it = l->checked.find(class_name);
  if (!force && it != l->checked.end() && l->env->MonoNow() - it->second < l->class_check) co_return Status::Ok();
  const MonoTime at = l->env->MonoNow();
  auto read = co_await control::ReadRollout(*l->store, tenant, class_name, CallOptions{std::chrono::seconds(5)});
  if (!l->alive) co_return Cancelled("node stopping");
  if (!read.ok()) co_return read.status();
  if (!read->has_value()) co_return NotFound("no class " + tenant + "/" + class_name);
  const control::Rollout rollout = **read;
  l->checked[class_name] = std::max(at, l->checked[class_name]);
  if (auto r = l->revision.find(class_name); r != l->revision.end() && r->second > rollout.revision) {
    co_return Status::Ok();  // a newer revision was set meanwhile
  }
  l->revision[class_name] = rollout.revision;
  const BrokenModels broken = l->broken;
  l->versions.Set(
      class_name,
      [rollout, broken](std::string_view name, std::uint32_t mark, bool empty) {
        const control::VersionChoice c = control::ChooseVersion(rollout, name, mark, empty, broken);
        return actor::VersionPick{c.run, c.upgrade_from, c.no_fallback};
      },
      control::VersionsInPlay(rollout));
  co_return Status::Ok();
}

Task<Status> LoadClassVersion(std::shared_ptr<VersionLoader> l, ActorId id, std::uint32_t version) {
  if (!l->versions.Versioned(id.class_name)) co_return co_await LoadVersionedClass(l, id.tenant, id.class_name, true);
  auto record = co_await control::ReadVersion(*l->store, id.tenant, id.class_name, version,
                                              CallOptions{std::chrono::seconds(5)});
  if (!l->alive) co_return Cancelled("node stopping");
  if (!record.ok()) co_return record.status();
  l->versions.AddLoaded(id.class_name, version);
  co_return Status::Ok();
}

Task<void> RefreshVersionedClass(std::shared_ptr<VersionLoader> l, std::string tenant, std::string class_name) {
  (void)co_await LoadVersionedClass(l, tenant, class_name, false);
  if (l->alive) l->refreshing.erase(class_name);
}

}  // namespace

std::unique_ptr<NativeActorHost> MakeActorHost(Env& env, actor::StorageProvider& storage,
                                               const NativeActorHostOptions& options) {
  return std::make_unique<NativeActorHost>(env, storage, options);
}

// Declared in the order they are built; destroyed in reverse, after the process's Env
// (World::Teardown), except what BeforeEnvGoes drops while the Env still runs.
struct ServingCluster::Parts final : ProcessParts {
  Parts(SimPeerNetwork& network, int slot) : network(network), slot(slot) {}

  void BeforeEnvGoes() override {
    // kill -9: nothing more is answered or sent; requests already in flight stay in flight.
    network.Close(AddressOf(slot), env);
    network.Close(PeerAddressOf(slot), env);
    if (scanner) scanner->Stop();
    if (service) service->Stop();
    if (messages) messages->Stop();
    if (quotas) quotas->Stop();
    if (owners != nullptr) {
      owners->set_on_hold_ended_sockets(nullptr);
      owners->set_keep_sleeping(nullptr);
    }
    // The host first, while its Env still works: its replicas answer what they owe (into
    // frames that never resume). The hub after it (the host's directory).
    host.reset();
    if (versions) versions->alive = false;
    sockets.reset();
    messages.reset();
    scanner.reset();
    service.reset();
    transport.reset();
  }

  SimPeerNetwork& network;
  const int slot;
  SimEnv* env = nullptr;
  std::unique_ptr<alarms::AlarmIndex> index;
  std::unique_ptr<replica::OwnersHoldSource> holds;
  std::unique_ptr<QuarantineStore> quarantine_store;
  std::unique_ptr<ObservedHolds> observed_holds;
  std::unique_ptr<control::QuarantineCache> quarantine;
  std::unique_ptr<QuarantineHoldSource> quarantine_holds;
  std::unique_ptr<DeletionGuard> guard;  // on top of the hold sources, as on a real node
  std::unique_ptr<control::QuarantineStrikes> strikes;
  std::unique_ptr<replica::ReplicaProvider> provider;
  std::unique_ptr<Forwarder> forwarder;
  std::unique_ptr<Front> front;
  std::unique_ptr<PeerTransport> transport;
  std::unique_ptr<control::QuotaCache> quotas;  // before limits: they read it
  std::unique_ptr<TenantLimits> limits;         // before host: its core asks it
  Owners* owners = nullptr;
  std::unique_ptr<SocketHub> sockets;  // before host: destroyed after it
  std::shared_ptr<VersionLoader> versions;  // before host: its chooser outlives it
  std::unique_ptr<NativeActorHost> host;
  std::unique_ptr<alarms::AlarmService> service;
  std::unique_ptr<alarms::ShardScanner> scanner;
  std::unique_ptr<MessageDelivery> messages;  // after front and host: gone first
  std::unique_ptr<OwnerChanges> changes;      // restores and forks (history_operators.h)
};

ServingCluster::ServingCluster(World& world, Faults& faults, ServingOptions options)
    : w_(world),
      options_(std::move(options)),
      client_env_(world.sim(), FromUnixMs(kOriginMs)),
      network_(world.sim(), [&faults](const NodeId& from, const NodeId& to) { return faults.PeerFault(from, to); }) {
  secret_.bytes.fill(options_.secret_byte);
  WK_CHECK(replica::ValidateReplicaOptions(options_.replica).ok(), "bad simulator replica options");
  client_transport_ = network_.TransportFor(NodeId(std::string(kClientNodeId)), client_env_);
  world.hooks.fault = [&faults](int slot, const OpInfo& op) { return faults.Fault(slot, op); };
  world.hooks.identity = [](Process& p) {
    // A fresh pin per process, as a node's fresh TLS key gives one (no randomness drawn:
    // derived from the instance; TLS itself is not simulated).
    p.cert_pin = Sha256Hex("simulated key of " + p.instance.str());
    return NodeIdentity{p.node_id, PeerAddressOf(p.slot), "sim", p.cert_pin};
  };
  world.hooks.on_built = [this](Process& p) { Build(p); };
}

ServingCluster::~ServingCluster() { client_transport_.reset(); }

void ServingCluster::Build(Process& p) {
  auto parts = std::make_unique<Parts>(network_, p.slot);
  Parts* raw = parts.get();
  SimEnv* env = p.env();
  ObjectStore& store = *p.store;
  Owners& owners = p.node->owners();
  const BrokenModels broken = w_.options().broken();
  raw->env = env;
  if (options_.alarms) {
    raw->index = std::make_unique<alarms::AlarmIndex>(*env, store, alarms::AlarmIndexOptions{.broken = broken});
  }
  if (options_.sleep) owners.set_sleep_policy(*options_.sleep);
  raw->holds = std::make_unique<replica::OwnersHoldSource>(owners);
  replica::HoldSource* holds = raw->holds.get();
  const int number = p.number;
  NativeActorHostOptions host_options = options_.host;
  if (options_.quarantine) {
    raw->quarantine_store = std::make_unique<QuarantineStore>(store, p, [this, number](const std::string& key, bool done) {
      if (options_.on_quarantine_read) options_.on_quarantine_read(number, key, done);
    });
    // Nodes of an even process number list quarantine/ at every check memory cannot answer,
    // the others keep the default (they read records unless starts are frequent): both ways
    // are judged by Q1 in every run, and no draw of the world's randomness is spent on it.
    const std::uint32_t list_after = number % 2 == 0 ? 1 : control::kDefaultQuarantineListAfter;
    raw->quarantine = std::make_unique<control::QuarantineCache>(
        *env, *raw->quarantine_store, control::QuarantineCacheOptions{.broken = broken, .list_after = list_after});
    raw->observed_holds = std::make_unique<ObservedHolds>(*raw->holds, [this, number](const ActorId& id) {
      if (options_.on_actor_start) options_.on_actor_start(number, id);
    });
    raw->quarantine_holds = std::make_unique<QuarantineHoldSource>(*raw->observed_holds, raw->quarantine.get(), broken);
    holds = raw->quarantine_holds.get();
    raw->strikes = std::make_unique<control::QuarantineStrikes>(
        *env, *raw->quarantine_store, *raw->quarantine, control::QuarantineStrikesOptions{p.node_id, *options_.quarantine});
    host_options.strike = [this, strikes = raw->strikes.get(), number](const ActorId& id, std::string reason) {
      w_.Trace("p" + std::to_string(number) + " strikes " + id.name + ": " + reason);
      strikes->Strike(id, std::move(reason), false);
    };
  }
  // The guard an owner's change (a restore, a fork) blocks starts with, as ActorHost's.
  raw->guard = std::make_unique<DeletionGuard>(*holds);
  holds = raw->guard.get();
  replica::Replica::Deps deps{*env, store, [env](std::function<void()> fn) { env->Post(std::move(fn)); }, nullptr,
                              broken, raw->index.get()};
  raw->provider =
      std::make_unique<replica::ReplicaProvider>(std::move(deps), *holds, options_.replica, std::chrono::seconds(10));
  if (!options_.versioned_classes.empty()) {
    raw->versions = std::make_shared<VersionLoader>();
    raw->versions->env = env;
    raw->versions->store = &store;
    raw->versions->broken = broken;
    raw->versions->class_check = options_.class_check;
    host_options.versions = &raw->versions->versions;
    host_options.load_version = [l = raw->versions](ActorId id, std::uint32_t version) {
      return LoadClassVersion(l, std::move(id), version);
    };
    host_options.on_migration = [this, number](const ActorId& id, std::uint32_t from, std::uint32_t to, bool ok) {
      w_.Trace("p" + std::to_string(number) + " migrates " + id.name + " from v" + std::to_string(from) + " to v" +
               std::to_string(to) + (ok ? "" : ": fails"));
    };
  }
  if (options_.quotas) {
    raw->quotas = std::make_unique<control::QuotaCache>(*env, store);
    raw->limits = std::make_unique<TenantLimits>(*env, *raw->quotas, p.node->membership());
    host_options.resident_limit = [limits = raw->limits.get()](const std::string& tenant) {
      return limits->ResidentShare(tenant);
    };
  }
  raw->host = MakeActorHost(*env, *raw->provider, host_options);
  raw->owners = &owners;
  if (options_.sockets) {
    raw->sockets = std::make_unique<SocketHub>(*env, SocketHubOptions{.broken = broken});
    raw->host->SetSocketDirectory(raw->sockets.get());
  }
  if (raw->strikes) {
    raw->strikes->set_unload([host = raw->host.get()](const ActorId& id) { host->Unload(id); });
  }
  raw->host->set_on_closed([this, number](const ActorId& id, const std::string& why) {
    w_.Trace("p" + std::to_string(number) + " " + id.name + " left memory: " + why);
  });
  raw->transport = network_.TransportFor(p.node_id, *env, p.cert_pin);
  ForwarderOptions fo;
  fo.timeout = std::chrono::seconds(20);
  raw->forwarder =
      std::make_unique<Forwarder>(*env, *raw->transport, ForwarderIdentity{p.node_id, p.instance}, secret_, fo);
  auto authenticate = [token = options_.token](std::string authorization) {
    return Authenticate(token, std::move(authorization));
  };
  auto load_class = [class_names = options_.class_names, versioned = options_.versioned_classes,
                     l = raw->versions](std::string tenant, std::string name) {
    if (l && std::find(versioned.begin(), versioned.end(), name) != versioned.end()) {
      return LoadVersionedClass(l, std::move(tenant), std::move(name), false);
    }
    return LoadClass(class_names, std::move(tenant), std::move(name));
  };
  FrontDeps front_deps{*raw->host, owners, p.node->membership(), *raw->forwarder, authenticate, load_class};
  if (raw->versions) {
    front_deps.refresh_class = [l = raw->versions](const std::string& tenant, const std::string& class_name) {
      if (!l->versions.Versioned(class_name) || !l->refreshing.insert(class_name).second) return;
      l->env->Spawn(RefreshVersionedClass(l, tenant, class_name), "class refresh " + class_name);
    };
  }
  front_deps.hand_overs = &p.node->hand_overs();
  front_deps.limits = raw->limits.get();
  front_deps.quarantine = raw->quarantine.get();
  front_deps.sockets = raw->sockets.get();
  if (options_.alarms) {
    front_deps.alarm_handover = [this, raw, number](ActorId actor, std::string_view body) {
      ++w_.result().alarm_handovers;
      w_.Trace("p" + std::to_string(number) + " receives the alarm of " + actor.name);
      return raw->service->ReceiveHandOver(actor, body);
    };
  }
  FrontOptions front_options;
  front_options.broken = broken;
  front_options.node_id = p.node_id;
  front_options.check_peer_pins = true;
  raw->front = std::make_unique<Front>(std::move(front_deps), front_options);
  if (raw->sockets) {
    SocketHub* hub = raw->sockets.get();
    hub->SetRunEvent([front = raw->front.get()](ActorId id, actor::SocketEvent event) {
      return front->RunSocketEvent(std::move(id), std::move(event));
    });
    owners.set_on_hold_ended_sockets([this, hub, number](const HoldEnded& ended) {
      if (hub->HasConnections(ended.actor)) {
        w_.Trace("p" + std::to_string(number) + " closes the WebSockets of " + ended.actor.name + " (hold ended)");
      }
      hub->CloseActor(ended.actor, kCloseRestart, "the actor's owner changed: reconnect");
    });
    owners.set_keep_sleeping([hub](const ActorId& actor) { return hub->HasConnections(actor); });
  }
  // Drains and moves close resident actors as hibernation does; a move's target is told
  // over the peer network (as ActorHost wires a real node).
  HandOverHost hand_over;
  hand_over.unload = [host = raw->host.get()](const ActorId& id) {
    if (!host->IsResident(id)) return false;
    host->Unload(id);
    return true;
  };
  hand_over.take = [front = raw->front.get()](NodeId to, ActorId actor, Version released, Generation g) {
    return front->SendTake(std::move(to), std::move(actor), std::move(released), g);
  };
  p.node->hand_overs().set_host(std::move(hand_over));
  p.node->move_control().set_enabled(options_.move_requests);
  if (options_.alarms) {
    alarms::AlarmServiceDeps alarm_deps{*env, owners, p.node->membership(), *raw->host, *raw->index,
                                        raw->forwarder.get(), load_class, raw->quarantine.get(), broken};
    if (raw->limits) {
      alarm_deps.admit = [limits = raw->limits.get()](const std::string& tenant) {
        return limits->AdmitWork(control::Quota::kAlarmsPerSecond, tenant);
      };
    }
    raw->service = std::make_unique<alarms::AlarmService>(std::move(alarm_deps), *options_.alarms, w_.timing());
    raw->scanner = std::make_unique<alarms::ShardScanner>(*env, store, owners, p.node->membership(), p.node->lease(),
                                                          p.node->drain_control(), *raw->service);
    raw->scanner->set_broken_models(broken);
  }
  if (options_.messages) {
    raw->messages = std::make_unique<MessageDelivery>(
        *env, *raw->host,
        [front = raw->front.get()](ActorId to, actor::IncomingMessage m) {
          return front->DeliverMessage(std::move(to), std::move(m));
        },
        *options_.messages, broken);
    raw->host->SetOutboxListener([messages = raw->messages.get()](const ActorId& sender) { messages->Kick(sender); });
    if (raw->limits) {
      raw->messages->SetAdmission([limits = raw->limits.get()](const std::string& tenant) {
        return limits->AdmitWork(control::Quota::kMessagesPerSecond, tenant);
      });
    }
  }
  raw->changes = std::make_unique<OwnerChanges>(OwnerChangesDeps{*env, store, owners, *raw->host, *raw->provider,
                                                                   *raw->guard, p.node_id, options_.replica.retention,
                                                                   broken});
  p.changes = raw->changes.get();
  Front* front = raw->front.get();
  if (raw->quotas) raw->quotas->Start();
  network_.Listen(AddressOf(p.slot), p.node_id, env,
                  [front](ServerRequest r) { return front->Handle(std::move(r), Via::kClient); });
  network_.Listen(PeerAddressOf(p.slot), p.node_id, env,
                  [front](ServerRequest r) { return front->Handle(std::move(r), Via::kPeer); });
  p.parts = std::move(parts);
  if (raw->scanner) raw->scanner->Start();
}

SocketHub* ServingCluster::Hub(int number) const {
  auto it = w_.processes().find(number);
  if (it == w_.processes().end() || !it->second->parts) return nullptr;
  auto* parts = dynamic_cast<Parts*>(it->second->parts.get());
  return parts != nullptr ? parts->sockets.get() : nullptr;
}

ServerRequest ServingCluster::Request(std::string method, std::string path) const {
  ServerRequest r;
  r.method = std::move(method);
  r.target = std::string(kActorsPrefix) + std::move(path);
  r.headers.emplace_back("Authorization", options_.token);
  return r;
}

Task<Result<ServerResponse>> ServingCluster::Send(int slot, ServerRequest request) {
  // Not a coroutine: the transport's own task, so a client's send runs exactly as if it
  // called the transport itself.
  return client_transport_->Send(PeerTarget{SlotNodeId(slot), InstanceToken(), AddressOf(slot)}, std::move(request),
                                 kClientTimeout);
}

}  // namespace wk::sim
