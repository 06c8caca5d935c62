// TenantStores: the bucket requests a node sends on behalf of a tenant's actors, attributed
// to that tenant (docs/tenants.md, "Usage"; server/usage_meter.h adds them to its records).
// For(tenant) is a store for that tenant; its ForPurpose(p) view sends each call through the
// node store's own view of p (so CountingStore counts it exactly as before) and, once the
// call completed, reports it to the sink: tenant, purpose, operation, outcome code and body
// bytes. One ObjectStore call is one report (a retry is another call, so another report; an
// S3 call's internal retries are one call, as CountingStore counts them).
//
// Why a store per tenant rather than a tenant field in CallOptions: a purpose is chosen
// once per component (ForPurpose), but a tenant per actor, and every component that acts
// for an actor already holds the actor at the point it picks its store. The replica keeps
// the store it was opened with (ReplicaProvider hands it the tenant's), the alarm index
// and Owners pick one per request (Of(actor)); code that acts for nobody in particular
// (lease, listing, fence, control, classes, admin, alarm shard scans) never sees one, so
// it cannot be attributed by mistake, and a site that forgets the tenant is the node's
// (as before), never another tenant's.
//
// System actors (tenant starting with '_', base/ids.h: the alarm shards) are the node's:
// Of() answers the node's store for them.
//
// Threading: the Env's loop thread (For, Of, set_sink; a report runs where the call
// completed: the loop thread). Simulator-clean. REQUIRES: the node's store outlives this
// and every call in flight; the views handed out live as long as this (a component may
// keep one). A call still in flight when this is destroyed completes unreported.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/ids.h"
#include "store/counting_store.h"
#include "store/object_store.h"

namespace wk {

// One completed request sent for a tenant.
struct TenantRequest {
  std::string_view tenant;
  BucketPurpose purpose = BucketPurpose::kOther;
  BucketOp op = BucketOp::kGet;
  Code code = Code::kOk;            // the call's outcome (OutcomeOf gives its class)
  std::uint64_t sent_bytes = 0;     // a put's body (unless refused as invalid)
  std::uint64_t received_bytes = 0; // a get's body, a listing's keys
};
using TenantRequestSink = std::function<void(const TenantRequest&)>;

class TenantStores {
 public:
  // store: the node's store (a CountingStore root, or any store).
  explicit TenantStores(ObjectStore& store);
  ~TenantStores();
  TenantStores(const TenantStores&) = delete;
  TenantStores& operator=(const TenantStores&) = delete;

  // Where reports go; null: nowhere (the default). Replaces the previous sink.
  void set_sink(TenantRequestSink sink);

  // The tenant's store: its own calls count as kOther; ForPurpose(p) is its view of p.
  // REQUIRES: tenant not empty.
  ObjectStore& For(const std::string& tenant);
  // For(actor.tenant), or the node's store for a system actor.
  ObjectStore& Of(const ActorId& actor);
  // Tenants that have a store (each made at its first For).
  std::size_t tenants() const { return tenants_.size(); }

  class View;
  struct Shared;

 private:
  ObjectStore& store_;
  std::shared_ptr<Shared> shared_;
  struct Tenant;
  std::map<std::string, std::unique_ptr<Tenant>, std::less<>> tenants_;
};

}  // namespace wk
