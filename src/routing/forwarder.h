// Forwarder: sends a request for an actor to the node that owns it, and checks the
// signature of requests other nodes forwarded here (docs/architecture.md, "How a request
// flows"; docs/security.md, "Forwarded requests", which gives the headers and the exact
// signed text).
//
// Guarantees: the client's credentials (Authorization, Proxy-Authorization) and hop-by-hop
// headers never leave the node that checked them; the receiver (Verify) accepts a request
// only if it is addressed to this node and instance, its timestamp is within
// max_clock_difference, each signed header appears once, the HMAC-SHA256 under the cluster
// secret verifies and its nonce is new (replay_cache.h); only the signed headers reach the
// actor. Requests go out through a PeerTransport (net/peer_transport.h); the forwarder
// reads only its Env's wall clock and randomness, so it is simulator-clean.
//
// Threading: the Env loop thread (the transport's).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/metrics.h"
#include "base/status.h"
#include "control/cluster_secret.h"
#include "env/env.h"
#include "net/http_types.h"
#include "net/peer_transport.h"
#include "routing/peer_sender.h"
#include "routing/replay_cache.h"

namespace wk {

// What a verified forwarded request says about itself.
struct ForwardedFrom {
  NodeId node_id;
  std::string tenant;
  int hops = 0;
  // The client's headers as signed (names as received, in the signed order): all the
  // actor may see.
  ServerHeaders headers;
};

// The node a Forwarder runs on: its id and this process's instance (its node record's).
struct ForwarderIdentity {
  NodeId node_id;
  InstanceToken instance;
};

struct ForwarderOptions {
  Duration timeout = std::chrono::seconds(60);
  Duration max_clock_difference = std::chrono::seconds(60);
  // The replay cache's bound (replay_cache.h): about 130 bytes an entry, so 100,000 is
  // about 13 MB and remembers every nonce of a whole window up to about 1,600 forwarded
  // requests a second; beyond that rate the oldest are forgotten early and their late
  // twins refused (a retry, never a replay).
  std::size_t replay_cache_entries = 100'000;
};

struct ForwarderStats {
  std::uint64_t forwarded = 0;
  std::uint64_t verified = 0;
  std::uint64_t refused = 0;   // every refusal, the two below included
  std::uint64_t replays = 0;   // a nonce used before
  std::uint64_t beyond_memory = 0;  // a timestamp older than what the cache remembers
};

class Forwarder final : public PeerSender {
 public:
  // transport must outlive the forwarder.
  Forwarder(Env& env, PeerTransport& transport, ForwarderIdentity self, control::ClusterSecret secret,
            ForwarderOptions options = {});

  // Sends request to the node `to`, signed for it, with hop count hops.
  // Errors (the transport's): kRetryable if nothing was sent (connect refused, a peer not
  // trusted...), kUnknownOutcome if the request may have reached the peer,
  // kInvalidArgument if it cannot be sent (a method HTTP cannot carry).
  Task<Result<ServerResponse>> Forward(PeerTarget to, ServerRequest request, std::string tenant, int hops) override;
  // The request Forward sends: the client's headers that may go on, signed for `to`, with the
  // forwarding headers added. For a WebSocket's relay (server/socket_relay.h), which sends
  // it on a connection of its own.
  ServerRequest Sign(const PeerTarget& to, ServerRequest request, const std::string& tenant, int hops);

  // nullopt if the request carries no forwarding headers (a client's request); an error
  // (kInvalidArgument, its message saying why) if it carries any and they do not verify
  // (see above). A request that verifies has its nonce remembered: the same request is
  // refused the next time.
  Result<std::optional<ForwardedFrom>> Verify(const ServerRequest& request);

  // Whether the request carries any forwarding header.
  static bool HasForwardingHeaders(const ServerRequest& request);
  // Whether the request carries any header named X-Wasmkeep-* (case-insensitive): the
  // node's own prefix, which the client API refuses whole, the names not yet used included
  // (docs/security.md, "Forwarding headers on the client API").
  static bool HasNodeHeaders(const ServerRequest& request);
  // One of the headers above (case-insensitive): set by the forwarder, never passed on.
  static bool IsForwardingHeader(std::string_view name);
  // A header the forwarder never passes on from a client: the forwarding headers, the
  // hop-by-hop ones and the credentials.
  static bool IsNeverForwarded(std::string_view name);

  const ForwarderStats& stats() const { return stats_; }
  const ReplayCache& replay_cache() const { return replays_; }

  static constexpr std::string_view kForwardedBy = "X-Wasmkeep-Forwarded-By";
  static constexpr std::string_view kForwardedTo = "X-Wasmkeep-Forwarded-To";
  static constexpr std::string_view kTenant = "X-Wasmkeep-Tenant";
  static constexpr std::string_view kHops = "X-Wasmkeep-Hops";
  static constexpr std::string_view kTimestamp = "X-Wasmkeep-Timestamp";
  static constexpr std::string_view kNonce = "X-Wasmkeep-Nonce";
  static constexpr std::string_view kSignedHeaders = "X-Wasmkeep-Signed-Headers";
  static constexpr std::string_view kSignature = "X-Wasmkeep-Signature";

  // What the signature covers (the text above), for tests that forge or check one.
  struct Signed {
    std::string_view from;
    std::string_view to_node;
    std::string_view to_instance;
    std::string_view method;
    std::string_view target;
    std::string_view tenant;
    int hops = 0;
    std::int64_t timestamp_ms = 0;
    std::string_view nonce;
    std::string_view body;
    const ServerHeaders* headers = nullptr;  // lowercase names, in order
  };
  static std::string SignedText(const Signed& s);

 private:
  Result<std::optional<ForwardedFrom>> Refuse(std::string why);

  Env& env_;
  PeerTransport& transport_;
  ForwarderIdentity self_;
  control::ClusterSecret secret_;
  ForwarderOptions options_;
  ReplayCache replays_;
  ForwarderStats stats_;
};

// Publishes wasmkeep_peer_requests_refused_total{reason="replayed"|"other"} over
// forwarder's stats (base/metrics.h, "How WasmKeep publishes"). REQUIRES: forwarder
// outlives every RenderText(), which runs on the loop thread.
void PublishForwarderMetrics(MetricsRegistry& registry, const Forwarder& forwarder);

}  // namespace wk
