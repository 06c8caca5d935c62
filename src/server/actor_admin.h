// ActorAdmin: the node's JSON routes for people and tools — listing, inspecting and
// deleting actors (tenants and operators), and the cluster's and this node's state for the
// console (operators only). docs/http-api.md ("Listing, inspecting and deleting actors",
// "Admin routes") and docs/console.md describe them; the bucket work is in
// replica/inspect.h.
//
//   GET    /v1/whoami                                   who the token is: operator or tenant T
//   GET    /v1/classes                                  deployed classes (a tenant: its own)
//   GET    /v1/classes/<t>/<c>/actors?prefix=&after=&limit=
//                                                       one page of the class's actors: name,
//                                                       holder (and whether it is live), generation,
//                                                       stored size, alarm (by the alarm index).
//                                                       From the bucket; wakes nothing
//   GET    /v1/classes/<t>/<c>/actors/<name>?prefix=&after=&after_hex=&limit=&max_value_bytes=
//                                                       its keys and values, a page at a time
//   DELETE /v1/classes/<t>/<c>/actors/<name>            delete its state and log (see below)
//   GET    /v1/due-alarms?within_ms=&limit=&tenant=     alarms due (and late) by the alarm index,
//                                                       every shard read (a tenant: its own)
//   GET    /v1/admin/node                               this node: lease, readiness, resident
//                                                       actors, holds, pending releases, traffic
//                                                       per class, durable writes
//   GET    /v1/admin/cluster                            every node of the membership view, with
//                                                       each live node's /v1/admin/node
//   GET    /v1/admin/metrics[?node=<id>]                a node's Prometheus text
//
// Who may ask. A tenant token (`Authorization: Bearer wk.<tenant>...`) opens /v1/whoami,
// /v1/classes (its own), its own tenant's actors and due alarms (another tenant's: 403); an operator
// token (`wko....`, control/operators.h) opens everything; anything else is 401. On the
// peer listener these routes take only other nodes' signed requests (forwarder.h, with
// the pin checked as the front does): that is how a node reaches an actor's owner, and how
// /v1/admin/cluster gathers every node's state.
//
// Inspecting. The state comes from the actor's owner when it is resident: here (read from
// its replica's memory under the replica's lock: every committed batch, some perhaps still
// being made durable), or on the live node the ownership record names (the request is
// forwarded there, once). Otherwise it is restored read-only from the bucket
// (replica::RestoreReadOnly): nothing acquired, nothing written. The answer says which
// (`source`: "owner" or "bucket").
//
// Deleting. Safe against a concurrent owner because the deletion *is* an owner: on the node
// that holds the actor (the request is forwarded there if another live node does), the
// actor is first kept from starting here (its HoldSource refuses it: DeletionGuard) and
// unloaded if resident (its writes made durable, its hold released); then this node
// acquires it through the ownership protocol (Owners::Acquire: generation + 1, If-Match),
// so no other node can act on it while the deletion runs; replica::DeleteStoredActor writes
// the empty fence and deletes the log under that hold, each delete only while the hold is
// valid; then the actor's alarm index entries of earlier holds go too (rule 2 of
// docs/alarms.md: our hold is valid and its durable fence left the actor without an alarm;
// an entry of our generation or later is never touched), so no stale entry wakes the
// deleted actor; then the hold is released (record: nobody, generation kept). What a later
// acquisition sees: generation + 1, an empty state (replica/inspect.h).
//
// Bucket requests of these routes count under the purpose `admin` (store/object_store.h),
// the acquisition and release under `owner`.
//
// Bodies: these routes take none; CheckBeforeBody refuses one (413) before it is read.
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
#include "control/tokens.h"
#include "net/http_types.h"
#include "replica/provider.h"
#include "server/class_traffic.h"
#include "server/forwarder.h"
#include "server/front.h"
#include "store/counting_store.h"

namespace wk {

// The actors being deleted on this node: a HoldSource decorator that refuses to start them
// (kRetryable: the request gets 503 and may retry), so no replica of theirs opens here while
// the deletion holds them.
class DeletionGuard final : public replica::HoldSource {
 public:
  explicit DeletionGuard(replica::HoldSource& inner) : inner_(inner) {}
  Task<Result<replica::Replica::Hold>> Acquire(ActorId actor) override;
  Task<void> Release(ActorId actor, Generation generation) override;
  // False if a deletion of actor is already under way here.
  bool Block(const ActorId& actor) { return blocked_.insert(actor).second; }
  void Unblock(const ActorId& actor) { blocked_.erase(actor); }
  bool blocked(const ActorId& actor) const { return blocked_.count(actor) > 0; }

 private:
  replica::HoldSource& inner_;
  std::set<ActorId> blocked_;
};

struct ActorAdminDeps {
  Env& env;
  ObjectStore& store;
  ClusterNode& node;
  actor::ActorRuntime& runtime;
  replica::ReplicaProvider& provider;
  DeletionGuard& deletions;
  Forwarder& forwarder;
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
};

class ActorAdmin {
 public:
  explicit ActorAdmin(ActorAdminDeps deps);

  // Whether the target's path is one of these routes.
  static bool Matches(std::string_view target);
  Task<ServerResponse> Handle(ServerRequest request, Via via);
  // Before the body is read (client listener): a refusal for a body, or nullopt.
  std::optional<ServerResponse> CheckBeforeBody(const ServerRequest& request) const;
  // Counts one actor API request of the client listener (target /v1/actors/...) under its
  // class if deployed says the class is deployed, else under kUnknownClassRow
  // (server/class_traffic.h).
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
  Task<ServerResponse> ListClasses(Principal who);
  Task<ServerResponse> DueAlarms(Principal who, std::string query);
  // The actor's alarm index entries of holds before `generation`, deleted while valid().
  // How many went; an error leaves the rest, stale and harmless (rule 3 of docs/alarms.md).
  // Whether the actor has an ownership record or any object of its log (one HEAD, up to
  // two one-entry LISTs).
  Task<Result<bool>> AnythingStored(ActorId id);
  Task<Result<std::uint64_t>> DeleteAlarmEntries(ActorId id, Generation generation, std::function<bool()> valid);
  Task<ServerResponse> Cluster();
  Task<ServerResponse> Metrics(ServerRequest request);
  std::string NodeJson() const;
  // Sends request to node (live in the view) signed, within timeout; the answer or why not.
  Task<Result<ServerResponse>> AskPeer(NodeId node, ServerRequest request, Duration timeout, int hops);
  Task<void> AskStatusInto(NodeId node, std::shared_ptr<std::map<NodeId, Result<ServerResponse>>> out);
  // A plain function spawns the asks (GCC 12 and coroutines that spawn, docs/DEVELOPING.md).
  std::vector<TaskHandle> SpawnStatusAsks(const Membership::View& view,
                                          const std::shared_ptr<std::map<NodeId, Result<ServerResponse>>>& out);

  ActorAdminDeps deps_;
  ObjectStore& store_;  // deps_.store's view for the purpose `admin`
  ClassTrafficTable traffic_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
