#include "cluster/cluster_metrics.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace wk {
namespace {

// "live", "released", "fenced", "old_format" or "corrupt": the series label of a view.
std::string_view StateLabel(const NodeView& v) {
  if (v.record) {
    switch (v.record->state) {
      case LeaseState::kLive: return "live";
      case LeaseState::kReleased: return "released";
      case LeaseState::kFenced: return "fenced";
    }
  }
  return v.old ? "old_format" : "corrupt";
}

}  // namespace

void PublishClusterMetrics(MetricsRegistry& r, ClusterNode& node) {
  // A counter over one stats field of one component.
  auto counter = [&r](std::string name, std::string help, const std::uint64_t& field, MetricLabels labels = {}) {
    r.AddCallbackCounter(std::move(name), std::move(help), [&field] { return static_cast<double>(field); },
                         std::move(labels));
  };
  const NodeLeaseStats& lease = node.lease().stats();
  counter("wasmkeep_node_lease_writes_total", "Node lease writes the bucket acknowledged (or adopted after a lost reply)",
          lease.writes_ok);
  counter("wasmkeep_node_lease_failures_total",
          "Node lease write attempts that did not succeed; alert on the first increment", lease.write_failures);
  counter("wasmkeep_node_lease_adoptions_total", "Conflicts explained by this node's own write whose reply was lost",
          lease.adoptions);
  counter("wasmkeep_node_lease_lapses_total", "Times the node lease ran out without a conflict", lease.lapses);
  const FenceStats& fences = node.fence_watch().stats();
  counter("wasmkeep_fences_total", "Fences this node wrote over peers whose lease ran out", fences.fences_written);
  counter("wasmkeep_fences_refused_total", "Fences refused by their condition (the peer wrote meanwhile)",
          fences.fences_refused);
  const OwnersStats& owners = node.owners().stats();
  counter("wasmkeep_acquisitions_total", "Holds acquired (ownership record written at generation + 1)",
          owners.acquisitions);
  counter("wasmkeep_releases_total", "Releases", owners.releases_ok, {{"outcome", "ok"}});
  counter("wasmkeep_releases_total", "Releases", owners.releases_parked, {{"outcome", "parked"}});
  counter("wasmkeep_releases_total", "Releases", owners.pending_landed, {{"outcome", "landed_later"}});
  counter("wasmkeep_sleeping_holds_total", "Sleeping holds: kept as the actor left memory, woken, released",
          owners.slept, {{"event", "slept"}});
  counter("wasmkeep_sleeping_holds_total", "Sleeping holds: kept as the actor left memory, woken, released",
          owners.woken, {{"event", "woken"}});
  counter("wasmkeep_sleeping_holds_total", "Sleeping holds: kept as the actor left memory, woken, released",
          owners.sleep_released_idle, {{"event", "released_idle"}});
  counter("wasmkeep_sleeping_holds_total", "Sleeping holds: kept as the actor left memory, woken, released",
          owners.sleep_released_limit, {{"event", "released_limit"}});
  counter("wasmkeep_unresolved_acquires_total", "Acquires whose outcome was unknown", owners.unresolved);
  counter("wasmkeep_resolver_total", "Unresolved acquires decided", owners.resolver_released,
          {{"outcome", "released"}});
  counter("wasmkeep_resolver_total", "Unresolved acquires decided", owners.resolver_dropped, {{"outcome", "dropped"}});
  const HandOverStats& hand_overs = node.hand_overs().stats();
  const std::string hand_over_help = "Actors handed over by drains and moves (docs/node-lease.md, Drain), by how they ended";
  counter("wasmkeep_hand_overs_total", hand_over_help, hand_overs.closed, {{"outcome", "closed"}});
  counter("wasmkeep_hand_overs_total", hand_over_help, hand_overs.cut, {{"outcome", "cut"}});
  counter("wasmkeep_hand_overs_total", hand_over_help, hand_overs.moved, {{"outcome", "moved"}});
  counter("wasmkeep_hand_overs_total", hand_over_help, hand_overs.pending, {{"outcome", "pending"}});
  counter("wasmkeep_hand_over_waits_total", "Requests held while their actor was leaving this node", hand_overs.waited);
  const MoveControlStats& moves = node.move_control().stats();
  const std::string moves_help = "Moves requested through control/move/ that this node carried out, by outcome";
  counter("wasmkeep_moves_total", moves_help, moves.moved, {{"outcome", "moved"}});
  counter("wasmkeep_moves_total", moves_help, moves.refused, {{"outcome", "refused"}});
  counter("wasmkeep_moves_total", moves_help, moves.other, {{"outcome", "released_or_pending"}});
  counter("wasmkeep_upgrade_markers_total", "leases/ markers written by first acquisitions of actors (ADR 0020 §6)",
          owners.markers_written);
  counter("wasmkeep_old_lease_refusals_total",
          "First acquisitions refused by a live per-actor lease of an older version; alert on any increment",
          owners.old_lease_refusals);
  r.AddHistogramView("wasmkeep_listing_seconds", "Duration of one listing of nodes/ with the reads it made",
                     node.membership().stats().seconds);
  const ListingStats& listing = node.membership().stats();
  for (std::size_t reason = 0; reason < kReadReasons; ++reason) {
    counter("wasmkeep_listing_reads_total", "Bodies of nodes/ the listing read, by why (docs/node-lease.md)",
            listing.reads[reason], {{"reason", std::string(ReadReasonName(static_cast<ReadReason>(reason)))}});
  }
  counter("wasmkeep_listing_renewals_assumed_total",
          "New versions of live node records the listing took for renewals without reading them",
          listing.renewals_assumed);

  r.AddCallbackGauge("wasmkeep_node_lease_valid", "1 while this node's lease is valid",
                     [&node] { return node.lease().IsValid() ? 1.0 : 0.0; });
  r.AddCallbackGauge("wasmkeep_node_lease_epoch", "Validity epochs so far (increments after each lapse)",
                     [&node] { return static_cast<double>(node.lease().epoch()); });
  for (std::string_view state : {"live", "released", "fenced", "old_format", "corrupt"}) {
    r.AddCallbackGauge(
        "wasmkeep_cluster_nodes", "Node objects in the last listing, by state",
        [&node, state] {
          double n = 0;
          for (const auto& entry : node.membership().view()) n += StateLabel(entry.second) == state ? 1 : 0;
          return n;
        },
        {{"state", std::string(state)}});
  }
  // Tenants' actors only: the alarm shards a node holds (docs/alarms.md) are counted apart,
  // so that this gauge is what drains, moves and balancing act on.
  r.AddCallbackGauge("wasmkeep_holds_resident", "Tenants' actors this node holds now",
                     [&node] { return static_cast<double>(node.owners().holds() - node.owners().system_holds()); });
  r.AddCallbackGauge("wasmkeep_holds_system", "System actors (alarm shards) this node holds now",
                     [&node] { return static_cast<double>(node.owners().system_holds()); });
  // Of the tenants' holds, those whose actor is not in memory (docs/node-lease.md, "Sleeping
  // holds").
  r.AddCallbackGauge("wasmkeep_holds_sleeping", "Tenants' actors this node holds while they are not in memory",
                     [&node] { return static_cast<double>(node.owners().sleeping()); });
  r.AddCallbackGauge("wasmkeep_releases_pending", "Pending releases and unresolved acquires",
                     [&node] { return static_cast<double>(node.owners().pending()); });
  r.AddCallbackGauge("wasmkeep_draining", "1 while a drain is requested or done for this node",
                     [&node] { return node.drain_control().drained_or_draining() ? 1.0 : 0.0; });
  r.AddCallbackGauge("wasmkeep_hand_overs_in_progress", "Actors leaving this node now (drains and moves)",
                     [&node] { return static_cast<double>(node.hand_overs().leaving()); });
}

}  // namespace wk
