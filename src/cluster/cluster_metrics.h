// The cluster's metrics: the node lease, the listing, fencing, holds and releases, drain
// (docs/node-lease.md lists them with what to alert on). The cluster code counts in its
// own stats structs (it runs in the simulator, which has no registry); this publishes
// views of them (base/metrics.h, "How WasmKeep publishes").
//
// Threading: the callbacks read loop-thread state, so RenderText() must run on the
// node's Env loop thread (the admin routes do).
#pragma once

#include "base/metrics.h"
#include "cluster/cluster_node.h"

namespace wk {

// REQUIRES: node outlives every RenderText() of registry; called once per registry.
void PublishClusterMetrics(MetricsRegistry& registry, ClusterNode& node);

}  // namespace wk
