// Front: the actor API, /v1/actors/<tenant>/<class>/<name>/<path...> with any method, as
// docs/architecture.md ("How a request flows", step 3) tells it; the answers it gives of its
// own are listed in docs/http-api.md ("Answers that are not the actor's"). Handle, in order:
//   1. the actor's name (400 naming the bad part) and the body size (413);
//   2. who asks: on the client API a tenant's bearer token (401, 403 for another tenant's;
//      any X-Wasmkeep-* forwarding header is 401), on the peer listener a peer's signature
//      and pin (forwarder.h; 401 with X-Wasmkeep-Forwarding-Refused). The actor sees only
//      the client's headers (signed ones, when forwarded), never the token;
//   2b. the tenant's rate quotas (tenant_limits.h), on the client API only: 429 with
//      Retry-After naming the quota;
//   3. quarantine (docs/security.md, "Poisoned actors"): 503 with Retry-After on a node that
//      knows the actor is quarantined, from memory (no read);
//   4. where it runs (Decide): resident and held here → run; held here but not resident (a
//      sleeping hold) → the class loaded, the quarantine checked, run, with no routing read
//      and no acquisition; leaving this node → held until its hand-over ends (at most
//      kHandOverWait), then routed again; another live holder → forwarded (at most max_hops
//      in all), with no quarantine read (the holder checks what it starts); nobody → the
//      class loaded, the quarantine checked, the actor acquired and run; a draining node
//      sends it to the peer taking its actors. One decision, carried out in one place. A
//      request that reaches a node that does not hold the actor costs one bucket read, the
//      routing read; every start checks the quarantine with knowledge at most the cache's
//      ttl old (control/quarantine_cache.h: most often no read at all);
//   5. the actor's answer once its gate releases it, with no X-Wasmkeep-* header; 503 with
//      Retry-After whenever the request was not acknowledged (it may have taken effect).
// The peer listener also takes alarm hand-overs (POST /v1/alarms/<actor>) and a move's take
// (POST /v1/hand-over/<actor>?generation=<g>: Owners::AcquireHandedOver, then Warm).
//
// Threading: the Env loop thread. Simulator-clean: other nodes only through the Forwarder's
// PeerTransport, events only through an actor::EventHost.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "actor/event_host.h"
#include "base/broken_models.h"
#include "base/metrics.h"
#include "cluster/hand_over.h"
#include "cluster/membership.h"
#include "cluster/owners.h"
#include "control/quarantine_cache.h"
#include "net/http_types.h"
#include "routing/forwarder.h"
#include "routing/socket_hub.h"
#include "routing/tenant_limits.h"

namespace wk {

inline constexpr std::string_view kActorsPrefix = "/v1/actors/";
// A move's hand-over (the target's take), on the peer listener only (see above).
inline constexpr std::string_view kMoveHandOverPrefix = "/v1/hand-over/";
// A message between actors (docs/messages.md) travels as a POST to the receiver's actor path
// carrying this header, "<seq> <retry count> <sender's tenant/class/name>", signed like any
// forwarded header. Only a node sets it: the client API refuses every X-Wasmkeep-* header.
inline constexpr std::string_view kMessageHeader = "X-Wasmkeep-Message";
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
  // quota-after-run (base/broken_models.h): tests only.
  BrokenModels broken;
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
  // Before an event of a resident actor: lets a redeploy reach it (the class's pointer read
  // again if stale, without waiting). Unset: resident actors keep their code until they
  // next start.
  std::function<void(const std::string& tenant, const std::string& class_name)> refresh_class;
  // WebSockets (docs/websockets.md): the node's hub, where connections to actors run here
  // are held; null: an opening handshake is answered 501.
  SocketHub* sockets = nullptr;
  // An opening handshake for an actor another node holds: relayed to it over the peer
  // listener (server/socket_relay.h), its answer given as is (a 101 that pipes the two
  // connections together). `request` is the client's, its token removed; `tenant` the
  // caller's. Unset: answered 503 naming the owner.
  std::function<Task<ServerResponse>(PeerTarget to, ServerRequest request, std::string tenant, int hops)> relay_socket;
  // The tenants' rate quotas (docs/tenants.md, "Quotas"); null: none applied.
  TenantLimits* limits = nullptr;
};

struct FrontStats {
  std::uint64_t requests = 0;
  std::uint64_t local = 0;      // run here
  std::uint64_t forwarded = 0;  // sent to the owner
  std::uint64_t refused = 0;    // 4xx before routing
  std::uint64_t unavailable = 0;  // 503
  std::uint64_t actor_failed = 0;  // 500: the actor's event failed (counted in local too)
  std::uint64_t quarantined = 0;  // 503: the actor is quarantined
  std::uint64_t throttled = 0;    // 429: over a tenant's rate quota
  std::uint64_t held = 0;         // requests held while their actor was leaving this node
  std::uint64_t taken = 0;        // hand-overs taken (this node is a move's target)
  std::uint64_t messages = 0;     // message deliveries routed (DeliverMessage and peers')
  std::uint64_t messages_run = 0;  // message events run here (duplicates answered included)
  std::uint64_t socket_opens = 0;      // WebSocket handshakes run here (the open event)
  std::uint64_t socket_relayed = 0;    // WebSocket handshakes relayed to the owner
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
  // Delivers one message to its receiver as a request is routed (steps 3 to 5: quarantine,
  // run here or forward to the holder, or acquire): 200 once it took effect (body
  // "applied", or "duplicate" if it had before), 404 no such class or no wk_on_message, 500
  // the handler failed (nothing of it committed), 413 too large, 503 not known (retry).
  // The sender checks `message.from` is of the receiver's tenant (actor/messages.h).
  Task<ServerResponse> DeliverMessage(ActorId receiver, actor::IncomingMessage message);
  // Where an operator's change to one actor's own state must run (the admin routes' retry
  // and drop of a dead message, server/actor_admin.h), decided as a request's route is
  // (step 4: resident and held here; leaving, held until its hand-over ends; another live
  // holder; nobody: its class loaded and the actor acquired here). nullopt: run it here (the
  // caller then starts the actor if needed, EventHost::ResolveDead). Otherwise the answer to
  // give: `request` (the admin route itself: method and target only, the client's
  // credentials never leave this node) forwarded to the node that holds it over the signed
  // peer listener, hops + 1, whose admin routes take it; or a refusal (404 no such class,
  // 503 draining, moving, held elsewhere, not acquired, a quarantined actor: not acquired).
  // No step 3 before: the change runs none of the actor's code.
  Task<std::optional<ServerResponse>> RouteOperatorJob(ActorId id, ServerRequest request, int hops);
  // Tells node `to` (live in the membership view) to take actor from the record this
  // node's release left (nobody at generation, at version released). OK once it holds it.
  Task<Status> SendTake(NodeId to, ActorId actor, Version released, Generation generation);
  // A socket event of one of the hub's connections (SocketHub::RunEvent), decided as a
  // request's route is (step 4) and run here: the result; nullopt if another node holds the
  // actor now (the hub closes the connection with 1012, and the client's reconnect reaches
  // that node). A refusal (draining, quarantined, the bucket unreadable) is kUnavailable.
  Task<std::optional<actor::EventResult>> RunSocketEvent(ActorId id, actor::SocketEvent event);

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
  // Step 2: who is asking. On the peer listener, request's headers become the signed ones.
  struct Caller {
    std::string tenant;
    bool offered_wasmkeep = false;  // a WebSocket handshake offered subprotocol "wasmkeep"
    int hops = 0;                 // forwarded this many times already
    ServerHeaders actor_headers;  // what the actor may see
  };
  Task<std::optional<ServerResponse>> Authenticate(ServerRequest* request, Via via, Caller* caller);
  // Step 3: the refusal of an actor this node knows (without I/O) to be quarantined (a
  // resident one is unloaded), or nullopt.
  Task<std::optional<ServerResponse>> CheckQuarantine(ActorId id);
  // Step 4's decision: run here (acquired, or resident and held), forward to one node, or
  // refuse. Handle carries it out in one place.
  struct Route {
    enum class Kind : std::uint8_t { kRunHere, kForward, kRefuse };
    Kind kind = Kind::kRefuse;
    NodeId to;                 // kForward
    ServerResponse refusal;    // kRefuse
    bool reaches_actor = false;  // Handle's reached_actor
  };
  Task<Route> Decide(ActorId id, int hops);
  // Step 4's refusals before a start here: the class (404, 500, 503), and the quarantine
  // (503 with Retry-After; 500 for a corrupt record), checked with QuarantineRead::kOnMiss.
  // nullopt: go on (a record that could not be read lets the start go on).
  Task<std::optional<Route>> LoadClassOrRefuse(ActorId id);
  Task<std::optional<Route>> CheckBeforeStart(ActorId id);
  static Route RunHere();
  static Route Forward(NodeId to, bool reaches_actor);
  static Route Refuse(ServerResponse response);
  Task<ServerResponse> Run(ActorId id, actor::Request request);
  // Step 5's mapping of an event's outcome to an answer (kOk: the actor's response, its
  // X-Wasmkeep-* headers dropped).
  ServerResponse EventAnswer(actor::EventResult result, const std::string& name);
  // An opening handshake routed here: the connection reserved in the hub, the open event,
  // then the 101 (or the actor's refusal, or the event's failure as an HTTP answer).
  Task<ServerResponse> OpenSocket(ActorId id, actor::Request handshake, bool offered_wasmkeep);
  Task<ServerResponse> RelaySocket(NodeId node_id, ServerRequest request, std::string tenant, int hops);
  Task<ServerResponse> RunMessage(ActorId id, actor::IncomingMessage message);
  // Steps 3 to 5 for a message, from this node (hops 0) or a peer's delivery.
  Task<ServerResponse> RouteMessage(ActorId receiver, actor::IncomingMessage message, ServerRequest request,
                                    int hops);
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
