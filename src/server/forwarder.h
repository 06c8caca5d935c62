// Forwarder: sends a request for an actor to the node that owns it, and checks the
// signature of requests other nodes forwarded here (docs/architecture.md, "Serving and
// routing").
//
// Authentication. A forwarded request carries, besides the client's own request:
//   X-Wasmkeep-Forwarded-By   the sending node's id
//   X-Wasmkeep-Tenant         the tenant the sender authenticated (the client's token is
//                             not re-checked: the sender did that)
//   X-Wasmkeep-Hops           how many nodes forwarded it (1 after the first hop)
//   X-Wasmkeep-Timestamp      the sender's wall clock, ms since the epoch
//   X-Wasmkeep-Signature      hex HMAC-SHA256, keyed by the cluster secret, over
//                             "wasmkeep-forward 1\n" method \n target \n tenant \n hops \n
//                             timestamp \n hex SHA-256 of the body
// A request whose signature does not verify, or whose timestamp is more than
// `max_clock_difference` away from ours, is refused (a replay window of that size remains;
// the network between nodes is assumed private, as the cluster secret is).
//
// Transport. Requests go out through a PeerTransport (net/peer_transport.h): the real one
// keeps a keep-alive pool per peer; the simulator's delivers to simulated nodes. The
// forwarder itself reads only its Env's wall clock (the timestamp), so it is
// simulator-clean.
//
// Threading: the Env loop thread (the transport's).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "control/cluster_secret.h"
#include "env/env.h"
#include "net/http_types.h"
#include "net/peer_transport.h"

namespace wk {

// What a verified forwarded request says about itself.
struct ForwardedFrom {
  NodeId node_id;
  std::string tenant;
  int hops = 0;
};

struct ForwarderOptions {
  Duration timeout = std::chrono::seconds(60);
  Duration max_clock_difference = std::chrono::seconds(60);
};

class Forwarder {
 public:
  // transport must outlive the forwarder.
  Forwarder(Env& env, PeerTransport& transport, NodeId node_id, control::ClusterSecret secret,
            ForwarderOptions options = {});

  // Sends request to the node at address ("host:port"), signed, with hop count hops.
  // Errors (the transport's): kRetryable if nothing was sent (connect refused...),
  // kUnknownOutcome if the request may have reached the peer, kInvalidArgument if it
  // cannot be sent (a method HTTP cannot carry).
  Task<Result<ServerResponse>> Forward(std::string address, ServerRequest request, std::string tenant, int hops);

  // nullopt if the request carries no forwarding headers (a client's request); an error
  // (kInvalidArgument) if it carries them and they do not verify.
  Result<std::optional<ForwardedFrom>> Verify(const ServerRequest& request) const;

  // The signature Forward would send (tests).
  std::string SignForTest(std::string_view method, std::string_view target, std::string_view tenant, int hops,
                          std::int64_t timestamp_ms, std::string_view body) const {
    return Sign(method, target, tenant, hops, timestamp_ms, body);
  }

  // One of the headers above (case-insensitive): set by the forwarder, never passed on.
  static bool IsForwardingHeader(std::string_view name);

  static constexpr std::string_view kForwardedBy = "X-Wasmkeep-Forwarded-By";
  static constexpr std::string_view kTenant = "X-Wasmkeep-Tenant";
  static constexpr std::string_view kHops = "X-Wasmkeep-Hops";
  static constexpr std::string_view kTimestamp = "X-Wasmkeep-Timestamp";
  static constexpr std::string_view kSignature = "X-Wasmkeep-Signature";

 private:
  // What the signature covers.
  static std::string SignedText(std::string_view method, std::string_view target, std::string_view tenant, int hops,
                                std::int64_t timestamp_ms, std::string_view body);
  std::string Sign(std::string_view method, std::string_view target, std::string_view tenant, int hops,
                   std::int64_t timestamp_ms, std::string_view body) const;

  Env& env_;
  PeerTransport& transport_;
  NodeId node_id_;
  control::ClusterSecret secret_;
  ForwarderOptions options_;
};

}  // namespace wk
