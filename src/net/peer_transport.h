// PeerTransport: how one node sends an HTTP request to another node of the cluster (the
// forwarder's wire, forwarder.h). The real transport (http_peer_transport.h) keeps one
// keep-alive connection pool per peer; the simulator's (sim/sim_peer_network.h) delivers
// requests to the other simulated nodes' handlers on the virtual timeline, with delays,
// losses and partitions. Code that talks to peers only through this interface (the
// forwarder, the front) therefore runs unchanged in the deterministic simulator.
//
// Outcomes are values:
//   a response      the peer answered (any status, 5xx included)
//   kRetryable      nothing reached the peer (connect refused, unknown address, a
//                   partition before sending): retrying cannot duplicate anything
//   kUnknownOutcome the request may have reached the peer and taken effect (a timeout or a
//                   connection lost after sending); never treat it as success or failure
//   kInvalidArgument the request cannot be sent at all (a method HTTP cannot carry, a
//                   malformed address)
//   kCancelled      the awaiting task was cancelled (treat as kUnknownOutcome)
//
// Threading: the Env loop thread of the node that sends; Send's Task completes there.
#pragma once

#include <string>

#include "base/ids.h"
#include "base/status.h"
#include "base/time.h"
#include "env/task.h"
#include "net/http_types.h"

namespace wk {

// Which node a request is for, as the sender's membership view shows it live.
struct PeerTarget {
  NodeId node_id;
  InstanceToken instance;  // of its live node record
  std::string address;   // its peer listener, "host:port" (the record's `address`)
};

class PeerTransport {
 public:
  virtual ~PeerTransport() = default;
  // Sends request to the node `to` names and waits up to timeout for the whole answer.
  // The request's headers are sent as given (the caller drops hop-by-hop ones); the
  // response's come back as received. The real transport talks TLS and accepts the node
  // only under the pin of its current live record (docs/security.md, "Between nodes"): a
  // node it does not trust (not live, another instance, another address) is kRetryable
  // without anything sent.
  virtual Task<Result<ServerResponse>> Send(PeerTarget to, ServerRequest request, Duration timeout) = 0;
};

}  // namespace wk
