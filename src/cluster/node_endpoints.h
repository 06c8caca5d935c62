// Where operators reach a node's process: control/endpoints/<node>, format
// `wasmkeep-endpoints 1`. FROZEN once released: a change is a new header version.
//
//   wasmkeep-endpoints 1
//   node <id>
//   instance <instance>
//   metrics <http://host:port/metrics or https://...>
//
// Why an object of its own. The node record (nodes/<id>, node_record.h) names the peer
// listener, which only other nodes can reach (TLS with pinned client certificates), and its
// format is frozen; /metrics is served on the client or admin listener, whose address only
// the node knows. `wasmkeep serve` writes this object once per process, after its listeners
// are bound, unconditionally (nothing decides on it: it costs one PUT per process start).
// Readers (`wasmkeep cluster cost`) trust it only when it names the instance that the node's
// live record names; one left by an earlier process is ignored, never deleted.
//
// Threading: pure functions and values, except PublishNodeEndpoints (the Env's loop thread).
#pragma once

#include <string>
#include <string_view>

#include "base/ids.h"
#include "base/status.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk {

struct NodeEndpoints {
  NodeId node_id;
  InstanceToken instance;
  std::string metrics_url;  // http:// or https://, printable, no spaces, at most 256 bytes

  friend bool operator==(const NodeEndpoints&, const NodeEndpoints&) = default;
};

inline constexpr std::string_view kEndpointsPrefix = "control/endpoints/";
inline std::string EndpointsKey(const NodeId& id) { return std::string(kEndpointsPrefix) + id.str(); }

// OK or kInvalidArgument naming the field.
Status ValidateNodeEndpoints(const NodeEndpoints& e);
// REQUIRES (checked): e passes ValidateNodeEndpoints.
std::string EncodeNodeEndpoints(const NodeEndpoints& e);
// The record, or kFatal("corrupt ...") naming the line.
Result<NodeEndpoints> DecodeNodeEndpoints(std::string_view body);

// Writes e (unconditionally, purpose kControl), retrying a failure every `retry` up to
// `attempts` times (a node starting while the bucket is unreachable). The last error if
// none landed, kCancelled if the task was cancelled.
Task<Status> PublishNodeEndpoints(Env& env, ObjectStore& store, NodeEndpoints e, int attempts = 30,
                                  Duration retry = std::chrono::seconds(2));

}  // namespace wk
