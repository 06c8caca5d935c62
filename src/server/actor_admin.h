// ActorAdmin: the node's JSON routes for people and tools — /v1/whoami, /v1/classes (and a
// class's actors: list, inspect, delete; an actor's messages: list, and retry or drop a dead
// one), /v1/due-alarms, /v1/admin/{node,cluster,metrics}. The routes, their answers and who
// may ask: docs/http-api.md, "Listing, inspecting and deleting actors", "An actor's
// messages" and "Admin routes and the console"; the bucket work: replica/inspect.h.
//
// Guarantees: a listing or inspection (keys or messages) acquires and writes nothing (it
// reads the owner's memory here, forwards once to the live owner, or restores read-only from
// the bucket). A retry or drop of a dead message is made only by the node holding the actor,
// at its input gate, as a batch of its own (EventHost::ResolveDead), answered once durable:
// routed as a request is (Front::RouteOperatorJob: run here, the actor acquired and started
// if nobody holds it; or forwarded to its holder); nothing is ever written to the bucket by
// these routes for it.
// A deletion is itself an owner: on the holder's node the actor is kept from starting
// (DeletionGuard), unloaded, acquired through the ownership protocol (generation + 1), its
// log deleted under that hold while it is valid, its older alarm entries removed, and the
// hold released — so it never races a concurrent owner (docs/console.md, "How deleting is
// safe"); restores and forks likewise, made by routing/owner_changes.h (which this shell
// answers for: it forwards to the holder the component names). Bodies are refused (413) before they are read. Bucket requests count under the
// purpose `admin`, the acquisition and release under `owner`.
//
// Threading: the Env loop thread, like the front.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "actor/runtime.h"
#include "alarms/alarm_service.h"
#include "alarms/shard_scanner.h"
#include "base/metrics.h"
#include "cluster/cluster_node.h"
#include "control/operators.h"
#include "control/quota_cache.h"
#include "control/tokens.h"
#include "control/usage.h"
#include "net/http_types.h"
#include "replica/provider.h"
#include "routing/class_traffic.h"
#include "routing/forwarder.h"
#include "routing/front.h"
#include "routing/owner_changes.h"
#include "store/counting_store.h"

namespace wk {

struct ActorAdminDeps {
  Env& env;
  ObjectStore& store;
  ClusterNode& node;
  actor::ActorRuntime& runtime;
  replica::ReplicaProvider& provider;
  DeletionGuard& deletions;
  Forwarder& forwarder;
  // Routes an operator's change to an actor's state to its holder (Front::RouteOperatorJob).
  Front& front;
  control::TenantAuth& tenants;
  control::OperatorAuth& operators;
  MetricsRegistry& metrics;
  const replica::ReplicaTotals& replica_totals;
  NodeId node_id;
  InstanceToken instance;
  // What /v1/admin/node reports besides; each may be null (not shown then).
  const BucketRequestStats* bucket_requests = nullptr;  // this node's requests to the bucket
  const alarms::AlarmStats* alarm_stats = nullptr;
  const alarms::ShardScannerStats* scanner_stats = nullptr;
  // storage.retention_ms (and per tenant): the history window of the history routes.
  replica::Retention retention;
  BrokenModels broken;  // restore-without-acquire (base/broken_models.h)
  // The console's tenants page (/v1/admin/tenants): the quotas as this node reads them, and
  // this node's usage of the current hour. Either may be null (not shown then).
  const control::QuotaCache* quotas = nullptr;
  const control::UsageBook* usage = nullptr;
};

class ActorAdmin {
 public:
  explicit ActorAdmin(ActorAdminDeps deps);
  // A handler still running when the node stops (the HTTP server lets it run on) sees
  // alive_ false at its next resumption and touches nothing of this object after it.
  ~ActorAdmin() { *alive_ = false; }
  ActorAdmin(const ActorAdmin&) = delete;
  ActorAdmin& operator=(const ActorAdmin&) = delete;

  // Whether the target's path is one of these routes.
  static bool Matches(std::string_view target);
  Task<ServerResponse> Handle(ServerRequest request, Via via);
  // Before the body is read (client listener): a refusal for a body, or nullopt.
  std::optional<ServerResponse> CheckBeforeBody(const ServerRequest& request) const;
  // Counts one actor API request of the client listener (target /v1/actors/...) under its
  // class if deployed says the class is deployed, else under kUnknownClassRow
  // (routing/class_traffic.h).
  void RecordTraffic(std::string_view target, int status, Duration took, const ClassTrafficTable::Deployed& deployed) {
    traffic_.Record(target, status, took, deployed);
  }
  const std::map<std::string, ClassTraffic>& traffic() const { return traffic_.rows(); }

 private:
  struct Principal {
    bool operator_ = false;
    std::string tenant;  // a tenant token's
    bool peer = false;   // another node's signed request
    int hops = 0;
    bool Opens(std::string_view t) const { return operator_ || peer || tenant == t; }
  };
  Task<Result<Principal>> Authenticate(const ServerRequest& request, Via via);
  Task<ServerResponse> ListActors(std::string tenant, std::string class_name, std::string query);
  Task<ServerResponse> Inspect(ActorId id, ServerRequest request, Principal who);
  Task<ServerResponse> Delete(ActorId id, ServerRequest request, Principal who);
  // An owner's change that another live node holds the actor for: that node's answer to the
  // same request (forwarded once), or 503 when this request was forwarded already.
  Task<ServerResponse> AskHolder(ActorId id, NodeId holder, ServerRequest request, Principal who);
  // History (docs/storage.md, "History and point-in-time restore"; actor_history_routes.cc):
  // GET .../history lists the batches in the retention window, GET .../history/state the
  // state at a point, read-only from the bucket; POST .../restore makes a point's state the
  // current one, POST .../fork?to=<class>/<name> a new actor with it, each as the owner.
  Task<ServerResponse> History(ActorId id, std::string query);
  Task<ServerResponse> HistoryState(ActorId id, std::string query);
  Task<ServerResponse> Restore(ActorId id, ServerRequest request, Principal who);
  Task<ServerResponse> Fork(ActorId id, ServerRequest request, Principal who);
  // GET .../actors/<name>/messages: the outbox, the dead messages and the applied records.
  Task<ServerResponse> Messages(ActorId id, ServerRequest request, Principal who);
  // POST .../messages/dead/<seq>/retry, DELETE .../messages/dead/<seq>.
  Task<ServerResponse> ResolveDead(ActorId id, std::uint64_t seq, actor::DeadAction action, ServerRequest request,
                                   Principal who);
  // Where an actor's state is read by Inspect and Messages: resident here (its replica, under
  // its lock), else the live owner's answer to the same request (forwarded once, when asked
  // by a client), else restored read-only from the bucket (also when the owner did not
  // answer: owner_error says so). `answer` set: give it as is (the owner's, or an error).
  struct StateSource {
    const replica::Replica* resident = nullptr;
    std::optional<actor::StateMap> restored;
    std::optional<ServerResponse> answer;
    std::string source;  // "owner" (this node's memory) or "bucket"
    std::string owner_error;
    std::uint64_t generation = 0;
  };
  Task<StateSource> LocateState(ActorId id, const ServerRequest& request, Principal who);
  Task<ServerResponse> ListClasses(Principal who);
  Task<ServerResponse> DueAlarms(Principal who, std::string query);
  // The actor's alarm index entries of holds before `generation`, deleted while valid().
  // How many went; an error leaves the rest, stale and harmless (rule 3 of docs/alarms.md).
  Task<Result<std::uint64_t>> DeleteAlarmEntries(ActorId id, Generation generation, std::function<bool()> valid);
  Task<ServerResponse> Cluster();
  Task<ServerResponse> Metrics(ServerRequest request);
  // /v1/admin/tenants: every tenant, its quotas and this node's use now; and
  // /v1/admin/tenants/<tenant>/usage?hours=N: the cluster's usage records, hour by hour.
  Task<ServerResponse> Tenants();
  Task<ServerResponse> TenantUsage(std::string tenant, std::string query);
  std::string NodeJson() const;
  // Sends request to node (live in the view) signed, within timeout; the answer or why not.
  Task<Result<ServerResponse>> AskPeer(NodeId node, ServerRequest request, Duration timeout, int hops);
  Task<void> AskStatusInto(NodeId node, std::shared_ptr<std::map<NodeId, Result<ServerResponse>>> out);
  // A plain function spawns the asks (GCC 12 and coroutines that spawn, docs/DEVELOPING.md).
  std::vector<TaskHandle> SpawnStatusAsks(const Membership::View& view,
                                          const std::shared_ptr<std::map<NodeId, Result<ServerResponse>>>& out);

  ActorAdminDeps deps_;
  ObjectStore& store_;  // deps_.store's view for the purpose `admin`
  // Restores, forks and the first step of a deletion, as the actor's owner
  // (routing/owner_changes.h).
  OwnerChanges changes_;
  ClassTrafficTable traffic_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
