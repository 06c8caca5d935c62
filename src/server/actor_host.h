// ActorHost: everything a node needs to serve actors — the engine, the classes it has
// loaded, the actor runtime over durable replicas (holds from the ownership records),
// tenant authentication, the forwarder and the front, the relay of WebSockets to their
// actor's owner (SocketRelay), the quarantine (QuarantineService,
// the running-events journal, the front's QuarantineCache checks) and the alarms (index,
// service, shard scanner). The node (node.h) makes one once the cluster secret is read and
// hands it both listeners' /v1/ requests; the peer transport is the node's.
//
// Guarantees: a class's `current` pointer is read at most once per `class_check` per class
// and a new version is compiled off the loop (one compile per version; a request waits at
// most actors.compile_timeout_ms, then 503); a redeploy reaches a resident actor from its
// first event once the node has read the new pointer (requests and alarms of resident
// actors refresh it in the background, at most once per `class_check`), and compiled
// modules are charged to their tenant and the memory budget (ActorRuntime::RegisterClass). Shutdown (the clean stop's first half: docs/node-lease.md, "Clean stop")
// refuses new events, lets running ones finish and unloads every actor (durable, then
// released) before the node releases its lease. How the parts meet: docs/architecture.md.
//
// Threading: the RealEnv's loop thread (the runtime's workers are its own).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "actor/module_compiler.h"
#include "actor/runtime.h"
#include "alarms/alarm_index.h"
#include "alarms/alarm_service.h"
#include "alarms/shard_scanner.h"
#include "base/metrics.h"
#include "cluster/cluster_node.h"
#include "control/class_versions.h"
#include "control/classes.h"
#include "control/cluster_secret.h"
#include "control/quarantine.h"
#include "control/operators.h"
#include "control/quarantine_cache.h"
#include "control/quota_cache.h"
#include "control/stored_ledger.h"
#include "control/tokens.h"
#include "engine/engine.h"
#include "env/real_env.h"
#include "net/peer_transport.h"
#include "net/peer_trust.h"
#include "net/tls_identity.h"
#include "replica/provider.h"
#include "server/actor_admin.h"
#include "routing/forwarder.h"
#include "routing/front.h"
#include "routing/message_delivery.h"
#include "routing/tenant_limits.h"
#include "server/quarantine_service.h"
#include "server/running_events.h"
#include "server/socket_relay.h"
#include "server/usage_meter.h"

namespace wk {

// Classes whose version (or absence) a node remembers; past it, remembered absences are
// forgotten first.
inline constexpr std::size_t kMaxRememberedClasses = 10'000;

struct ActorHostOptions {
  NodeId node_id;
  InstanceToken instance;  // this process's, as in its node record
  actor::RuntimeOptions runtime;
  replica::ReplicaOptions storage;
  // How long a class's `current` pointer is trusted before it is read again (the bound on
  // how late a deploy reaches actors that start on this node).
  Duration class_check = std::chrono::seconds(1);
  // How long a resident actor may take to make its writes durable when it is unloaded.
  Duration close_limit = std::chrono::seconds(10);
  // When strikes quarantine an actor ([actors] quarantine_*); strikes 0: off.
  control::QuarantinePolicy quarantine;
  // When a start's quarantine check lists quarantine/ rather than read one record
  // ([actors] quarantine_list_after; control/quarantine_cache.h).
  std::uint32_t quarantine_list_after = control::kDefaultQuarantineListAfter;
  // The node's running-events journal (node.data_dir), owned by the caller and outliving
  // the host; null: crashes during events are not counted as strikes.
  RunningEvents* journal = nullptr;
  // Actors whose events ran when the previous process died (the journal's leftovers): one
  // strike each.
  std::vector<ActorId> crashed_during_events;
  // Alarm delivery and shard scanning ([alarms], docs/alarms.md), and the lease timing it
  // is checked against.
  alarms::AlarmOptions alarms;
  // The delivery of messages between actors ([messages], docs/messages.md).
  MessageDeliveryOptions messages;
  // WebSockets held for the node's actors ([websockets], docs/websockets.md).
  SocketHubOptions sockets;
  LeaseTiming timing;
  // The node's requests to the bucket by purpose (the CountingStore's, outliving the host),
  // shown by /v1/admin/node; null: not shown.
  const BucketRequestStats* bucket_requests = nullptr;
  // How often the node writes its usage records (usage.flush_ms; server/usage_meter.h).
  Duration usage_flush = kDefaultUsageFlush;
  // The node's per-tenant stores (store/tenant_store.h; the node's, outliving the host and
  // every replica): the replicas and the alarm index send a tenant's actors' requests
  // through them, and the usage meter gets their reports. Null: bucket requests are no
  // tenant's (the records' bucket_* stay 0).
  TenantStores* tenant_stores = nullptr;
};

// Migrations on this node (docs/tenants.md, "Class versions").
struct UpgradeStats {
  std::uint64_t migrated = 0;
  std::uint64_t failed = 0;
};

class ActorHost {
 public:
  // replica_totals: the process's one (its owner publishes it). The runtime's, the
  // front's, the forwarder's, the relay's and the quarantine's metrics are published in
  // metrics here. peers, peer_identity (this node's TLS identity between nodes) and
  // peer_trust (the pins it accepts) must outlive the host: the relay connects to owners
  // with them.
  ActorHost(RealEnv& env, ObjectStore& store, ClusterNode& node, MetricsRegistry& metrics,
            replica::ReplicaTotals& replica_totals, const control::ClusterSecret& secret, PeerTransport& peers,
            const TlsIdentity& peer_identity, const PeerTrust& peer_trust, ActorHostOptions options);
  ~ActorHost();
  ActorHost(const ActorHost&) = delete;
  ActorHost& operator=(const ActorHost&) = delete;

  // One request, from the listener via names: the admin JSON routes (ActorAdmin::Matches:
  // /v1/classes..., /v1/admin/..., /v1/whoami) go to the ActorAdmin, the rest to the front
  // (/v1/actors/...; the client listener's are counted per class for the console).
  Task<ServerResponse> Handle(ServerRequest request, Via via);
  // A request whose body is not read yet (Front::CheckBeforeBody, or the admin routes').
  Task<std::optional<ServerResponse>> CheckBeforeBody(ServerRequest request);
  // See "Stopping" above. False if actors were still resident at the limit. Alarm delivery
  // and scanning stop first (the actors' shards are released with the node's holds).
  // The node's WebSockets are closed first, with 1012: their clients reconnect to the nodes
  // that take the actors (the relayed ones too: they reconnect through another node).
  Task<bool> Shutdown(Duration limit);
  // The clean stop's very end, after the node's holds and lease are released (so it delays
  // none of the ownership protocol's steps): the usage is flushed a last time
  // (server/usage_meter.h).
  // The stored-bytes ledger's records are written a last time too (control/stored_ledger.h).
  Task<Status> FlushUsage();
  // After each PeerTrust::Update: relayed WebSockets whose owner is no longer trusted as it
  // was are closed (SocketRelay::DropUntrusted).
  void DropUntrustedPeers() { relay_->DropUntrusted(); }
  void StopAlarms();

  actor::ActorRuntime& runtime() { return *runtime_; }
  const FrontStats& front_stats() const { return front_->stats(); }
  SocketHub& sockets() { return *sockets_; }
  const ForwarderStats& forwarder_stats() const { return forwarder_.stats(); }
  const SocketRelayStats& relay_stats() const { return relay_->stats(); }
  const QuarantineStats& quarantine_stats() const { return quarantine_.stats(); }
  const UpgradeStats& upgrade_stats() const { return upgrade_stats_; }
  const UsageMeter& usage() const { return *usage_; }
  alarms::AlarmService& alarms() { return *alarms_; }

 private:
  struct Loaded {
    control::ModuleDigest digest;  // an unversioned class's module
    MonoTime checked{};
    bool exists = false;
    std::uint64_t rollout_revision = 0;  // a versioned class's rollout as loaded
  };
  Task<Status> LoadClass(std::string tenant, std::string class_name);
  // One version of a versioned class (its record, its module, compiled and registered).
  Task<Status> LoadVersion(std::string tenant, std::string class_name, std::uint32_t version);
  // Reads one version's record, then CompileModule.
  Task<Result<std::shared_ptr<const engine::Module>>> CompileVersion(std::string tenant, std::string class_name,
                                                                     std::uint32_t version);
  // Reads, checks and compiles one module; `what` names the version in errors and logs.
  Task<Result<std::shared_ptr<const engine::Module>>> CompileModule(std::string tenant, std::string class_name,
                                                                    control::ModuleDigest digest, std::string what);
  void OnUpgrade(const actor::UpgradeReport& report);
  struct UpgradeFailures {
    std::map<std::uint32_t, std::uint64_t> pending;  // by target version, not yet written
    std::string last_error;
    bool writing = false;
  };
  // For a resident actor's event: if the class's pointer is older than class_check, loads
  // it again in the background (one at a time per class), so a redeploy reaches resident
  // actors without their events waiting for the bucket.
  void RefreshClass(const std::string& tenant, const std::string& class_name);
  // Whether LoadClass found tenant/class_name deployed (it stays known; a class is never
  // undeployed).
  bool ClassKnown(const std::string& tenant, const std::string& class_name) const;

  RealEnv& env_;
  ObjectStore& store_;
  ActorHostOptions options_;
  engine::Engine engine_;
  actor::ModuleCompiler compiler_;
  actor::ClassRegistry classes_;
  control::QuarantineCache quarantine_cache_;
  // The tenants' quotas (docs/tenants.md, "Quotas"): read every period, applied by the front
  // (rates) and charged after each event (CPU).
  control::QuotaCache quotas_;
  TenantLimits limits_;
  // The tenants' stored bytes as this node knows them, charged by every event's writes and
  // checked against stored_bytes (actor/stored_quota.h), and the ledger that publishes this
  // node's count and reads the others' (control/stored_ledger.h).
  actor::TenantStoredBytes stored_;
  std::unique_ptr<control::StoredLedger> ledger_;
  QuarantineService quarantine_;
  // Before the provider and the runtime: their replicas report to it until destroyed.
  alarms::AlarmIndex alarm_index_;
  replica::OwnersHoldSource owner_holds_;
  QuarantineHoldSource holds_;
  DeletionGuard deletions_{holds_};
  // Before the runtime, whose workers' hooks count into it: destroyed after it.
  std::unique_ptr<UsageMeter> usage_;
  // Before the runtime, whose SocketDirectory it is: destroyed after it.
  std::unique_ptr<SocketHub> sockets_;
  std::unique_ptr<replica::ReplicaProvider> provider_;
  std::unique_ptr<actor::ActorRuntime> runtime_;
  control::TenantAuth auth_;
  control::OperatorAuth operators_;
  Forwarder forwarder_;
  // Before the front, which relays through it.
  std::unique_ptr<SocketRelay> relay_;
  std::unique_ptr<Front> front_;
  // After the runtime: they deliver through it, so they go first.
  std::unique_ptr<alarms::AlarmService> alarms_;
  std::unique_ptr<alarms::ShardScanner> scanner_;
  std::unique_ptr<MessageDelivery> messages_;
  // Last: it reads the runtime, the provider and the alarms, so it goes first.
  std::unique_ptr<ActorAdmin> admin_;
  std::map<std::pair<std::string, std::string>, Loaded> loaded_;
  std::map<std::pair<std::string, std::string>, UpgradeFailures> upgrade_failures_;
  UpgradeStats upgrade_stats_;
  std::set<std::pair<std::string, std::string>> refreshing_;
  HandOvers* hand_overs_ = nullptr;
  Owners* owners_ = nullptr;  // the node's (its hooks point here until destroyed)  // the node's; its host hooks point here until destroyed
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
