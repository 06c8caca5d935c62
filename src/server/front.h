// Front: the actor API, /v1/actors/<tenant>/<class>/<name>/<path...> with any method
// (docs/architecture.md, "How a request flows"; ADR 0020 §3's routing read).
//
// For each request, in order:
//   1. Parse and validate the actor's name (400 naming the bad part) and the body size
//      (413).
//   2. Authenticate. Which listener the request came through decides what it must carry
//      (docs/security.md, "Between nodes"):
//      - the client API (Via::kClient): `Authorization: Bearer <token>`: none, a
//        malformed, unknown or revoked one is 401, a token of another tenant 403. A
//        request with forwarding headers is refused here (401): nodes forward only to
//        each other's peer listeners.
//      - the peer listener (Via::kPeer): another node's signature (forwarder.h), which
//        must verify (fresh, addressed to this instance, nonce unused); with
//        check_peer_pins, the TLS client certificate's pin must also be the pin of the
//        signing node's record, live in this node's membership view. Anything else is
//        401 with X-Wasmkeep-Forwarding-Refused naming why. The actor sees only the
//        signed client headers.
//   3. Quarantine (docs/security.md, "Poisoned actors"): an actor quarantined cluster-wide
//      is 503 with Retry-After (until the quarantine ends) and a body naming the reason and
//      the end, on whichever node the request lands, before it is forwarded or started. For
//      an actor not resident here its record is read at most once per the cache's ttl
//      (control/quarantine_cache.h), and once more, afresh, right before this node would
//      acquire it (step 4), so no node starts a quarantined actor on a stale answer. A
//      resident one is only looked up in memory (its start was checked) and unloaded if
//      found quarantined. A record that cannot be read in time lets the request through
//      (quarantine is a brake, not a lock); a corrupt one is 500.
//   4. Route. An actor that is leaving this node (a drain or a move: cluster/hand_over.h)
//      is not run here: the request waits for the hand-over's end (at most
//      kHandOverWait), then is routed again, so it reaches the next owner instead of a 503.
//      Served here if this node has the actor resident and still holds it (resident
//      with its hold ended: 503, and the actor is unloaded). Otherwise one GET of its
//      ownership record within 250 ms (Owners::OtherOwner): another node that the
//      membership view shows live → forward the request there (its peer listener, the
//      record's `address`; without the client's Authorization header) and pass its answer
//      back unchanged. Nobody, or a holder not live → load the class (404 if there
//      is none), acquire the actor here and run the event. An acquisition that finds the
//      actor taken meanwhile forwards to the taker. A draining node acquires nothing: a
//      request for an actor nobody holds is forwarded to the peer that takes its actors
//      (HandOvers::DrainTarget), which acquires it; 503 only when there is no such peer.
//      A request is forwarded at most
//      `max_hops` times in all (a forwarded request that finds its target no longer the
//      owner is routed once more, never bounced forever); past that it is 503.
//   Alarm hand-overs (docs/alarms.md): on the peer listener, POST /v1/alarms/<actor> with
//      another node's signature (the same checks as step 2's), handed to the node's alarm
//      service; 401 as in step 2 when it does not verify.
//   5. Answer: the actor's response once durable, without any X-Wasmkeep-* header (the
//      node's own: a node trusts them from its peers' fronts only, so an actor may not set
//      them); its trap or timeout is 500 naming the cause; its queue full, the node
//      draining, the node lease not valid, or the bucket unreachable is 503 with
//      Retry-After. Nothing acknowledged is ever lost: a 503 means the request was not
//      acknowledged and may be retried.
//
// The peer listener also takes a move's hand-over (HandOvers, "Move"): a signed
//   POST /v1/hand-over/<tenant>/<class>/<name>?generation=<g>   body: the record's version
// from the node that released the actor: this node acquires it from that record
// (Owners::AcquireHandedOver) and starts restoring it at once (EventHost::Warm). 200 once
// it holds the actor; 409 when someone else took it meanwhile; 503 when it takes no actors
// (draining, lease not valid) or the bucket did not answer. SendTake sends one.
//
// Threading: the Env loop thread. Simulator-clean: it reaches other nodes only through the
// forwarder's PeerTransport and runs events through an actor::EventHost.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "actor/event_host.h"
#include "base/metrics.h"
#include "cluster/hand_over.h"
#include "cluster/membership.h"
#include "cluster/owners.h"
#include "control/quarantine_cache.h"
#include "net/http_types.h"
#include "server/forwarder.h"

namespace wk {

inline constexpr std::string_view kActorsPrefix = "/v1/actors/";
// Alarm hand-overs between nodes (docs/alarms.md, "Who fires"): POST
// /v1/alarms/<tenant>/<class>/<name> on the peer listener only, signed as a forwarded request.
inline constexpr std::string_view kAlarmsHandOverPrefix = "/v1/alarms/";
// A move's hand-over (the target's take), on the peer listener only (see above).
inline constexpr std::string_view kMoveHandOverPrefix = "/v1/hand-over/";
// On a 401 for a forwarded request whose signature did not verify: tells the sending node
// (which answers its client 503) from a client's bad token.
inline constexpr std::string_view kForwardingRefused = "X-Wasmkeep-Forwarding-Refused";

// Which listener a request came through.
enum class Via : std::uint8_t {
  kClient,  // the client API
  kPeer,    // the peer listener: only other nodes' forwarded requests
};

struct FrontOptions {
  NodeId node_id;
  // Peer requests must come with a TLS client certificate whose pin is the signer's live
  // record's (ServerRequest::peer_cert_pin). On in `wasmkeep serve` (the peer listener
  // requires client certificates) and in the simulator (its network reports the sender's
  // pin); off only in tests without TLS.
  bool check_peer_pins = false;
  std::uint64_t max_request_bytes = 1ull << 20;
  int max_hops = 2;
  int retry_after_seconds = 1;
};

struct FrontDeps {
  // What runs the events: the ActorRuntime on a node, a native host in the simulator.
  actor::EventHost& runtime;
  Owners& owners;
  const Membership& membership;
  Forwarder& forwarder;
  // The Authorization header's value → the tenant it authenticates (control::TenantAuth).
  // kInvalidArgument or kNotFound: no, a malformed, an unknown or a revoked token (401);
  // kRetryable/kUnknownOutcome: the bucket could not be read (503); kFatal: a corrupt
  // tenant record (500); anything else: refused (403).
  std::function<Task<Result<std::string>>(std::string authorization)> authenticate;
  // Makes the class's current module known to the runtime before one of its actors starts.
  // kNotFound: no such class (404); kFatal: it cannot run here (500); kRetryable etc.: 503.
  std::function<Task<Status>(std::string tenant, std::string class_name)> load_class;
  // The node's quarantine cache; null: no quarantine check (the simulator's nodes).
  control::QuarantineCache* quarantine = nullptr;
  // A peer's verified alarm hand-over (AlarmService::ReceiveHandOver): the actor and the
  // request's body. Unset: /v1/alarms/ is not served (404).
  std::function<ServerResponse(ActorId actor, std::string_view body)> alarm_handover;
  // The node's hand-overs (drains, moves); null: requests for a draining node's actors are
  // answered 503, and no hand-over is taken.
  HandOvers* hand_overs = nullptr;
};

struct FrontStats {
  std::uint64_t requests = 0;
  std::uint64_t local = 0;      // run here
  std::uint64_t forwarded = 0;  // sent to the owner
  std::uint64_t refused = 0;    // 4xx before routing
  std::uint64_t unavailable = 0;  // 503
  std::uint64_t actor_failed = 0;  // 500: the actor's event failed (counted in local too)
  std::uint64_t quarantined = 0;  // 503: the actor is quarantined
  std::uint64_t held = 0;         // requests held while their actor was leaving this node
  std::uint64_t taken = 0;        // hand-overs taken (this node is a move's target)
};

class Front {
 public:
  Front(FrontDeps deps, FrontOptions options);
  // reached_actor, if given, is set when the request reached an actor: run here, or sent
  // to the node that holds it (or to a move's target while it leaves this node); so an
  // actor of its class was started, and the class is (or was then) deployed. Not set for a
  // request refused before (bad name, token, quarantine, no such class) or sent on by a
  // draining node for an actor nobody holds (its class was not checked here). The caller
  // keeps it alive until the task ends (ActorHost::Handle: class_traffic.h).
  Task<ServerResponse> Handle(ServerRequest request, Via via, bool* reached_actor = nullptr);
  // Steps 1 and 2 for a client API request whose body is not read yet (HttpServer's
  // HeaderCheck): the refusal Handle(request, Via::kClient) would give for its path, its
  // announced Content-Length, forwarding headers (401: those come through the peer
  // listener only) or its token (one GET of the tenant's record at most, shared with
  // Handle's through the cache), or nullopt to read the body and call Handle. So an
  // unauthenticated client's body is never read.
  Task<std::optional<ServerResponse>> CheckBeforeBody(ServerRequest request);
  const FrontStats& stats() const { return stats_; }
  // Tells node `to` (live in the membership view) to take actor from the record this
  // node's release left (nobody at generation, at version released). OK once it holds it.
  Task<Status> SendTake(NodeId to, ActorId actor, Version released, Generation generation);

 private:
  struct ParsedTarget {
    ActorId id;
    std::string_view rest;   // the path after the actor's name, into the target
    std::string_view query;  // without '?', into the target
  };
  // Refusals (400, 404, 413, 401/403/500/503), or nullopt.
  std::optional<ServerResponse> ParseTarget(std::string_view target, ParsedTarget* out);
  std::optional<ServerResponse> TooLarge(std::uint64_t body_bytes);
  std::optional<ServerResponse> AuthenticationRefused(const Result<std::string>& who);
  Task<ServerResponse> Run(ActorId id, actor::Request request);
  // A peer's POST /v1/alarms/<actor>: verified exactly as a forwarded request (step 2 for
  // the peer listener), then handed to FrontDeps::alarm_handover.
  Task<ServerResponse> HandleAlarmHandOver(ServerRequest request);
  // Step 2 for the peer listener: the signature, and with check_peer_pins the TLS pin.
  Result<ForwardedFrom> VerifyPeer(const ServerRequest& request);
  // A move's take (POST kMoveHandOverPrefix...): verified as a forwarded request (VerifyPeer),
  // then Owners::AcquireHandedOver and EventHost::Warm.
  Task<ServerResponse> HandleTake(ServerRequest request);
  Task<ServerResponse> ForwardTo(NodeId node_id, ServerRequest request, std::string tenant, int hops);
  // A 401 telling the sending node (X-Wasmkeep-Forwarding-Refused) why.
  ServerResponse RefuseForwarded(const std::string& why);
  ServerResponse Error(int status, std::string message, bool retry_after = false);
  ServerResponse Quarantined(const control::QuarantineRecord& record);

  FrontDeps deps_;
  FrontOptions options_;
  FrontStats stats_;
};

// Publishes wasmkeep_api_requests_total{route} over front's stats (base/metrics.h, "How
// WasmKeep publishes"). REQUIRES: front outlives every RenderText(), which runs on the loop
// thread.
void PublishFrontMetrics(MetricsRegistry& registry, const Front& front);

}  // namespace wk
