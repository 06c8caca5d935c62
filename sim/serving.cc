#include "serving.h"

#include <algorithm>

#include "alarms/alarm_index.h"
#include "alarms/shard_scanner.h"
#include "base/digest.h"
#include "cluster/hand_over.h"
#include "replica/provider.h"
#include "routing/forwarder.h"
#include "routing/front.h"

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
    // The host first, while its Env still works: its replicas answer what they owe (into
    // frames that never resume).
    host.reset();
    scanner.reset();
    service.reset();
    transport.reset();
  }

  SimPeerNetwork& network;
  const int slot;
  SimEnv* env = nullptr;
  std::unique_ptr<alarms::AlarmIndex> index;
  std::unique_ptr<replica::OwnersHoldSource> holds;
  std::unique_ptr<replica::ReplicaProvider> provider;
  std::unique_ptr<Forwarder> forwarder;
  std::unique_ptr<Front> front;
  std::unique_ptr<PeerTransport> transport;
  std::unique_ptr<NativeActorHost> host;
  std::unique_ptr<alarms::AlarmService> service;
  std::unique_ptr<alarms::ShardScanner> scanner;
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
  raw->holds = std::make_unique<replica::OwnersHoldSource>(owners);
  replica::Replica::Deps deps{*env, store, [env](std::function<void()> fn) { env->Post(std::move(fn)); }, nullptr,
                              broken, raw->index.get()};
  raw->provider = std::make_unique<replica::ReplicaProvider>(std::move(deps), *raw->holds, options_.replica,
                                                             std::chrono::seconds(10));
  raw->host = MakeActorHost(*env, *raw->provider, options_.host);
  const int number = p.number;
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
  auto load_class = [class_names = options_.class_names](std::string tenant, std::string name) {
    return LoadClass(class_names, std::move(tenant), std::move(name));
  };
  FrontDeps front_deps{*raw->host, owners, p.node->membership(), *raw->forwarder, authenticate, load_class};
  front_deps.hand_overs = &p.node->hand_overs();
  if (options_.alarms) {
    front_deps.alarm_handover = [this, raw, number](ActorId actor, std::string_view body) {
      ++w_.result().alarm_handovers;
      w_.Trace("p" + std::to_string(number) + " receives the alarm of " + actor.name);
      return raw->service->ReceiveHandOver(actor, body);
    };
  }
  FrontOptions front_options;
  front_options.node_id = p.node_id;
  front_options.check_peer_pins = true;
  raw->front = std::make_unique<Front>(std::move(front_deps), front_options);
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
                                        raw->forwarder.get(), load_class, nullptr, broken};
    raw->service = std::make_unique<alarms::AlarmService>(std::move(alarm_deps), *options_.alarms, w_.timing());
    raw->scanner = std::make_unique<alarms::ShardScanner>(*env, store, owners, p.node->membership(), p.node->lease(),
                                                          p.node->drain_control(), *raw->service);
    raw->scanner->set_broken_models(broken);
  }
  Front* front = raw->front.get();
  network_.Listen(AddressOf(p.slot), p.node_id, env,
                  [front](ServerRequest r) { return front->Handle(std::move(r), Via::kClient); });
  network_.Listen(PeerAddressOf(p.slot), p.node_id, env,
                  [front](ServerRequest r) { return front->Handle(std::move(r), Via::kPeer); });
  p.parts = std::move(parts);
  if (raw->scanner) raw->scanner->Start();
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
