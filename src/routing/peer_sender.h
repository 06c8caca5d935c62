// PeerSender: sends a request to another node of the cluster, signed as a forwarded request
// (routing/forwarder.h implements it). Code that must reach a peer but sits beside routing
// rather than above it (the alarms' hand-overs) depends on this interface only, and the
// node's assembly (server/node.h) hands it the node's Forwarder.
//
// Outcomes: as PeerTransport::Send (net/peer_transport.h): a response, kRetryable (nothing
// sent), kUnknownOutcome (may have arrived), kInvalidArgument (cannot be sent).
// Threading: the Env loop thread of the sending node.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "env/task.h"
#include "net/http_types.h"
#include "net/peer_transport.h"

namespace wk {

// Alarm hand-overs between nodes (docs/alarms.md, "Who fires"): POST
// /v1/alarms/<tenant>/<class>/<name> on the peer listener only, signed as a forwarded request.
inline constexpr std::string_view kAlarmsHandOverPrefix = "/v1/alarms/";

class PeerSender {
 public:
  virtual ~PeerSender() = default;
  // Sends request to the node `to`, signed for it on behalf of `tenant`, with hop count hops.
  virtual Task<Result<ServerResponse>> Forward(PeerTarget to, ServerRequest request, std::string tenant,
                                               int hops) = 0;
};

}  // namespace wk
