#include "routing/front.h"

#include <limits>

#include "actor/idempotency.h"
#include "base/ascii.h"
#include "base/log.h"
#include "routing/message_delivery.h"

namespace wk {
namespace {

bool Unavailable(Code c) { return c == Code::kRetryable || c == Code::kUnknownOutcome || c == Code::kCancelled; }

// The node's own header prefix: an actor's response may not carry such a header, since a
// node reads them from its peers (kForwardingRefused) and trusts them.
constexpr std::string_view kInternalHeaderPrefix = "x-wasmkeep-";

bool IsInternalHeader(std::string_view name) {
  return name.size() >= kInternalHeaderPrefix.size() &&
         EqualsIgnoreAsciiCase(name.substr(0, kInternalHeaderPrefix.size()), kInternalHeaderPrefix);
}

// A WebSocket's subprotocols (Sec-WebSocket-Protocol, comma-separated, every header of the
// name): browsers cannot set Authorization on a WebSocket, so a client may offer its token as
// the subprotocol "bearer.<token>" (docs/websockets.md, "Authentication from a browser"). Splits it off:
// the token (or empty), whether "wasmkeep" was offered, and the rest for the actor.
constexpr std::string_view kBearerProtocolPrefix = "bearer.";
struct OfferedProtocols {
  std::string token;
  bool wasmkeep = false;
  std::vector<std::string> others;
};
OfferedProtocols SplitProtocols(const ServerHeaders& headers) {
  OfferedProtocols out;
  for (const auto& [name, value] : headers) {
    if (!EqualsIgnoreAsciiCase(name, "Sec-WebSocket-Protocol")) continue;
    ForEachHeaderListItem(value, [&out](std::string_view item) {
      if (item.starts_with(kBearerProtocolPrefix)) {
        if (out.token.empty()) out.token = std::string(item.substr(kBearerProtocolPrefix.size()));
      } else if (item == "wasmkeep") {
        out.wasmkeep = true;
      } else {
        out.others.emplace_back(item);
      }
    });
  }
  return out;
}

// The headers without Sec-WebSocket-Protocol's bearer token: what the actor and the owner
// (when relayed) see. "wasmkeep" stays, so the owner knows to answer with it.
ServerHeaders WithoutBearerProtocol(const ServerHeaders& headers) {
  ServerHeaders out;
  bool had = false;
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreAsciiCase(n, "Sec-WebSocket-Protocol")) {
      had = true;
      continue;
    }
    out.emplace_back(n, v);
  }
  if (had) {
    OfferedProtocols offered = SplitProtocols(headers);
    std::string list;
    if (offered.wasmkeep) list = "wasmkeep";
    for (const std::string& p : offered.others) list += (list.empty() ? "" : ", ") + p;
    if (!list.empty()) out.emplace_back("Sec-WebSocket-Protocol", std::move(list));
  }
  return out;
}

// The Content-Length a request announces, if it has a well-formed one.
std::optional<std::uint64_t> AnnouncedLength(const ServerRequest& request) {
  auto text = request.Header("Content-Length");
  if (!text || text->empty()) return std::nullopt;
  std::uint64_t length = 0;
  for (const char c : *text) {
    if (c < '0' || c > '9' || length > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) return std::nullopt;
    length = length * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return length;
}

// kMessageHeader's value: "<seq> <retry count> <sender>".
std::string MessageHeaderValue(const actor::IncomingMessage& m) {
  return std::to_string(m.seq) + " " + std::to_string(m.retry_count) + " " + m.from.ToString();
}

Result<actor::IncomingMessage> ParseMessageHeader(std::string_view value) {
  actor::IncomingMessage m;
  auto number = [&value](std::uint64_t max, std::uint64_t* out) {
    const auto space = value.find(' ');
    if (space == std::string_view::npos || space == 0) return false;
    std::uint64_t v = 0;
    for (const char c : value.substr(0, space)) {
      if (c < '0' || c > '9' || v > (max - 9) / 10) return false;
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    *out = v;
    value.remove_prefix(space + 1);
    return true;
  };
  std::uint64_t seq = 0;
  std::uint64_t retry = 0;
  if (!number(std::numeric_limits<std::uint64_t>::max(), &seq) || seq == 0 ||
      !number(static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()), &retry)) {
    return InvalidArgument("expected \"<seq> <retry count> <tenant/class/name>\"");
  }
  auto from = ParseActorId(value);
  if (!from.ok()) return InvalidArgument("the sender: " + from.status().message());
  m.seq = seq;
  m.retry_count = static_cast<std::int32_t>(retry);
  m.from = std::move(*from);
  return m;
}

}  // namespace

Front::Front(FrontDeps deps, FrontOptions options) : deps_(std::move(deps)), options_(std::move(options)) {}

void PublishFrontMetrics(MetricsRegistry& registry, const Front& front) {
  const FrontStats& stats = front.stats();
  const std::string help = "Actor API requests by how they were routed or refused.";
  for (const auto& [route, field] : {std::pair{"local", &stats.local}, std::pair{"forwarded", &stats.forwarded},
                                     std::pair{"refused", &stats.refused}, std::pair{"unavailable", &stats.unavailable},
                                     std::pair{"actor_failed", &stats.actor_failed},
                                     std::pair{"quarantined", &stats.quarantined},
                                     std::pair{"throttled", &stats.throttled}}) {
    registry.AddCallbackCounter("wasmkeep_api_requests_total", help, [field] { return static_cast<double>(*field); },
                                {{"route", route}});
  }
  registry.AddCallbackCounter("wasmkeep_message_events_total",
                              "Message events run on this node (docs/messages.md), duplicates answered included",
                              [&stats] { return static_cast<double>(stats.messages_run); });
  registry.AddCallbackCounter("wasmkeep_hand_overs_taken_total",
                              "Actors this node took as a move's target (docs/node-lease.md, Moving actors)",
                              [&stats] { return static_cast<double>(stats.taken); });
}

ServerResponse Front::Error(int status, std::string message, bool retry_after) {
  ServerResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  if (retry_after) r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_seconds));
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  r.body = std::move(message);
  if (r.body.empty() || r.body.back() != '\n') r.body.push_back('\n');
  if (status == 503) {
    ++stats_.unavailable;
  } else if (status >= 400 && status < 500) {
    ++stats_.refused;
  }
  return r;
}

ServerResponse Front::RefuseForwarded(const std::string& why) {
  ServerResponse refused = Error(401, "forwarded request refused: " + why);
  refused.headers.emplace_back(std::string(kForwardingRefused), why);
  return refused;
}

ServerResponse Front::Quarantined(const control::QuarantineRecord& record) {
  ServerResponse r;
  r.status = 503;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  r.headers.emplace_back("Retry-After",
                         std::to_string(control::RetryAfterSeconds(record, deps_.quarantine->Now())));
  r.body = control::DescribeQuarantine(record) + "\n";
  ++stats_.quarantined;
  return r;
}

std::optional<ServerResponse> Front::ParseTarget(std::string_view target, ParsedTarget* out) {
  if (!target.starts_with(kActorsPrefix)) return Error(404, "not found: actor paths are /v1/actors/<tenant>/<class>/<name>/...");
  std::string_view query;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    query = target.substr(q + 1);
    target = target.substr(0, q);
  }
  std::string_view rest = target.substr(kActorsPrefix.size());
  std::string_view parts[3];
  for (int i = 0; i < 3; ++i) {
    const auto slash = rest.find('/');
    parts[i] = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    if (i < 2) {
      if (rest.empty()) return Error(400, "bad actor path: expected /v1/actors/<tenant>/<class>/<name>[/<path>]");
      rest.remove_prefix(1);
    }
  }
  out->id = ActorId{std::string(parts[0]), std::string(parts[1]), std::string(parts[2])};
  if (Status v = ValidateActorId(out->id); !v.ok()) return Error(400, "bad actor name: " + v.message());
  out->rest = rest;
  out->query = query;
  return std::nullopt;
}

std::optional<ServerResponse> Front::TooLarge(std::uint64_t body_bytes) {
  if (body_bytes <= options_.max_request_bytes) return std::nullopt;
  return Error(413, "request body of " + std::to_string(body_bytes) + " bytes is over actors.max_request_bytes (" +
                        std::to_string(options_.max_request_bytes) + ")");
}

std::optional<ServerResponse> Front::AuthenticationRefused(const Result<std::string>& who) {
  if (who.ok()) return std::nullopt;
  // docs/tenants.md: a missing, malformed, unknown or revoked token is 401 (one answer
  // for all, so a caller learns nothing about which); a corrupt tenant record is 500.
  if (who.code() == Code::kInvalidArgument || who.code() == Code::kNotFound) return Error(401, who.status().message());
  if (who.code() == Code::kFatal) return Error(500, "cannot check the token: " + who.status().message());
  if (Unavailable(who.code())) return Error(503, "cannot check the token: " + who.status().message(), true);
  return Error(403, who.status().message());
}

Task<std::optional<ServerResponse>> Front::CheckBeforeBody(ServerRequest request) {
  ParsedTarget target;
  std::optional<ServerResponse> refused = ParseTarget(request.target, &target);
  if (!refused) {
    if (auto length = AnnouncedLength(request)) refused = TooLarge(*length);
  }
  if (!refused && Forwarder::HasNodeHeaders(request)) {
    // Forwarded requests come through the peer listener only (Handle refuses them here
    // too), so a client cannot skip this check by adding forwarding headers.
    refused = RefuseForwarded("headers named X-Wasmkeep-* are the nodes' own: forwarded requests are accepted on the peer listener only");
  }
  if (!refused) {
    auto auth = request.Header("Authorization");
    // Not inside the co_await expression: GCC 12 miscompiles a conditional there.
    std::string value = auth ? std::string(*auth) : std::string();
    auto who = co_await deps_.authenticate(std::move(value));
    refused = AuthenticationRefused(who);
    if (!refused && *who != target.id.tenant) {
      refused = Error(403, "this token is for tenant " + *who + ", not " + target.id.tenant);
    }
  }
  if (refused) ++stats_.requests;  // Handle will not see it
  co_return refused;
}

Result<ForwardedFrom> Front::VerifyPeer(const ServerRequest& request) {
  auto forwarded = deps_.forwarder.Verify(request);
  if (!forwarded.ok()) return forwarded.status();
  if (!forwarded->has_value()) return InvalidArgument("the peer listener takes forwarded requests only");
  ForwardedFrom& from = **forwarded;
  if (options_.check_peer_pins) {
    // The TLS identity must be the signer's: a node may not sign for another, and a
    // node that is no longer live (fenced, released, restarted) is not heard.
    auto it = deps_.membership.view().find(from.node_id);
    const bool signer_live = it != deps_.membership.view().end() && it->second.live();
    if (!signer_live || it->second.record->cert_pin.empty() || request.peer_cert_pin.empty() ||
        it->second.record->cert_pin != request.peer_cert_pin) {
      return InvalidArgument("the TLS certificate is not that of " + from.node_id.str() + "'s live node record");
    }
  }
  return std::move(from);
}

Task<ServerResponse> Front::Handle(ServerRequest request, Via via, bool* reached_actor) {
  ++stats_.requests;
  if (via == Via::kPeer && deps_.alarm_handover && request.target.starts_with(kAlarmsHandOverPrefix)) {
    co_return co_await HandleAlarmHandOver(std::move(request));
  }
  if (via == Via::kPeer && request.target.starts_with(kMoveHandOverPrefix)) co_return co_await HandleTake(std::move(request));
  // 1. The actor's name and the rest of the path.
  ParsedTarget target;
  if (auto refused = ParseTarget(request.target, &target)) co_return std::move(*refused);
  ActorId id = std::move(target.id);
  if (auto refused = TooLarge(request.body.size())) co_return std::move(*refused);
  // A WebSocket's opening handshake (docs/websockets.md) is checked before anything else.
  const std::optional<std::string> handshake = CheckWebSocketHandshake(request);
  const bool websocket = handshake.has_value();
  if (websocket && !handshake->empty()) {
    ServerResponse bad = Error(handshake->starts_with("Sec-WebSocket-Version") ? 426 : 400, *handshake);
    if (bad.status == 426) bad.headers.emplace_back("Sec-WebSocket-Version", "13");
    co_return bad;
  }
  if (websocket && deps_.sockets == nullptr) co_return Error(501, "this node takes no WebSockets");

  // 2. Who is asking.
  Caller caller;
  if (auto refused = co_await Authenticate(&request, via, &caller)) co_return std::move(*refused);
  if (caller.tenant != id.tenant) co_return Error(403, "this token is for tenant " + caller.tenant + ", not " + id.tenant);
  if (via == Via::kPeer) {
    // A peer delivering a message (its header signed, so a node's own).
    for (auto it = caller.actor_headers.begin(); it != caller.actor_headers.end(); ++it) {
      if (!EqualsIgnoreAsciiCase(it->first, kMessageHeader)) continue;
      auto message = ParseMessageHeader(it->second);
      if (!message.ok()) co_return Error(400, "bad " + std::string(kMessageHeader) + ": " + message.status().message());
      if (message->from.tenant != id.tenant) co_return Error(403, "a message from another tenant");
      message->body = request.body;
      co_return co_await RouteMessage(std::move(id), std::move(*message), std::move(request), caller.hops);
    }
  }
  actor::Request actor_request;
  actor_request.method = request.method;
  actor_request.path = std::string(target.rest);
  actor_request.query = std::string(target.query);
  actor_request.headers = std::move(caller.actor_headers);
  actor_request.body = request.body;

  // 2b. The tenant's rate quotas, where a client's request arrives (a forwarded one was
  // admitted there).
  std::optional<QuotaRefusal> refuse_after;  // quota-after-run: the refusal, given after the run
  if (via == Via::kClient && deps_.limits != nullptr) {
    if (auto over = deps_.limits->AdmitRequest(id.tenant); over && options_.broken.on(BrokenModel::kQuotaAfterRun)) {
      refuse_after = std::move(over);
    } else if (over) {
      ServerResponse r;
      r.status = 429;
      r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
      r.headers.emplace_back("Retry-After", std::to_string(over->retry_after_seconds));
      r.body = over->message + "\n";
      ++stats_.throttled;
      co_return r;
    }
  }

  // 3. An actor this node knows to be quarantined is refused here, without a read. What it
  // does not know is asked only where the actor would start (Decide).
  if (auto refused = co_await CheckQuarantine(id)) co_return std::move(*refused);

  // 4. Where it runs, and 5. the answer.
  Route route = co_await Decide(id, caller.hops);
  if (route.reaches_actor && reached_actor != nullptr) *reached_actor = true;
  if (websocket) {
    switch (route.kind) {
      case Route::Kind::kRunHere:
        actor_request.body.clear();
        co_return co_await OpenSocket(std::move(id), std::move(actor_request), caller.offered_wasmkeep);
      case Route::Kind::kForward:
        co_return co_await RelaySocket(std::move(route.to), std::move(request), std::move(caller.tenant), caller.hops + 1);
      case Route::Kind::kRefuse:
        co_return std::move(route.refusal);
    }
  }
  switch (route.kind) {
    case Route::Kind::kRunHere:
      if (refuse_after) {
        co_await Run(std::move(id), std::move(actor_request));
        ServerResponse r = Error(429, refuse_after->message);
        r.headers.emplace_back("Retry-After", std::to_string(refuse_after->retry_after_seconds));
        co_return r;
      }
      co_return co_await Run(std::move(id), std::move(actor_request));
    case Route::Kind::kForward:
      co_return co_await ForwardTo(std::move(route.to), std::move(request), std::move(caller.tenant), caller.hops + 1);
    case Route::Kind::kRefuse:
      break;
  }
  co_return std::move(route.refusal);
}

Task<std::optional<ServerResponse>> Front::Authenticate(ServerRequest* request, Via via, Caller* caller) {
  if (via == Via::kPeer) {
    auto verified = VerifyPeer(*request);
    if (!verified.ok()) co_return RefuseForwarded(verified.status().message());
    ForwardedFrom& from = *verified;
    caller->hops = from.hops;
    caller->tenant = std::move(from.tenant);
    // Only what was signed goes on: to the actor, and to the next node if it moved.
    request->headers = std::move(from.headers);
    caller->actor_headers = request->headers;
    caller->offered_wasmkeep = SplitProtocols(request->headers).wasmkeep;
    co_return std::nullopt;
  }
  if (Forwarder::HasNodeHeaders(*request)) {
    co_return RefuseForwarded(
        "headers named X-Wasmkeep-* are the nodes' own: forwarded requests are accepted on the peer listener only");
  }
  auto auth = request->Header("Authorization");
  std::string value = auth ? std::string(*auth) : std::string();
  const bool websocket = CheckWebSocketHandshake(*request).has_value();
  if (websocket) {
    // A browser's WebSocket carries its token as a subprotocol (SplitProtocols); it is taken
    // off the handshake here, so neither the actor nor a relayed owner sees it.
    OfferedProtocols offered = SplitProtocols(request->headers);
    caller->offered_wasmkeep = offered.wasmkeep;
    if (!auth && !offered.token.empty()) value = "Bearer " + offered.token;
    request->headers = WithoutBearerProtocol(request->headers);
  }
  auto who = co_await deps_.authenticate(std::move(value));
  if (auto refused = AuthenticationRefused(who)) co_return std::move(*refused);
  caller->tenant = std::move(*who);
  for (const auto& [n, v] : request->headers) {
    if (EqualsIgnoreAsciiCase(n, "Authorization")) continue;  // the actor never sees the token
    caller->actor_headers.emplace_back(n, v);
  }
  if (websocket) {
    // Relayed without the client's credentials (the owner trusts the signature).
    std::erase_if(request->headers, [](const auto& h) { return EqualsIgnoreAsciiCase(h.first, "Authorization"); });
  }
  co_return std::nullopt;
}

Task<std::optional<ServerResponse>> Front::CheckQuarantine(ActorId id) {
  if (deps_.quarantine == nullptr) co_return std::nullopt;
  // Memory only (docs/security.md, "The check, and what it costs"): a request forwarded to
  // the node that holds the actor costs no quarantine read here (that node runs it, and
  // checks it if it starts it), and one for an actor that starts here is checked in Decide,
  // right before the start.
  auto quarantined = co_await deps_.quarantine->Check(id, control::QuarantineRead::kNever);
  if (quarantined.ok() && quarantined->has_value()) {
    if (deps_.runtime.IsResident(id)) deps_.runtime.Unload(id);
    co_return Quarantined(**quarantined);
  }
  co_return std::nullopt;
}

Task<std::optional<Front::Route>> Front::CheckBeforeStart(ActorId id) {
  if (deps_.quarantine == nullptr) co_return std::nullopt;
  // About to start the actor here: what this node knows of its record is at most the
  // cache's ttl old (a read, a strike, or the listing of quarantine/), else it asks, so a
  // quarantine imposed by another node is missed by no start later than that bound.
  auto quarantined = co_await deps_.quarantine->Check(id, control::QuarantineRead::kOnMiss);
  if (quarantined.ok() && quarantined->has_value()) co_return Refuse(Quarantined(**quarantined));
  if (!quarantined.ok() && quarantined.code() == Code::kFatal) {
    co_return Refuse(Error(500, "the quarantine record of " + id.ToString() + ": " + quarantined.status().message()));
  }
  // Could not be read in time: the request goes on (quarantine is a brake, not a lock).
  co_return std::nullopt;
}

Task<std::optional<Front::Route>> Front::LoadClassOrRefuse(ActorId id) {
  Status loaded = co_await deps_.load_class(id.tenant, id.class_name);
  if (loaded.ok()) co_return std::nullopt;
  if (loaded.code() == Code::kNotFound) co_return Refuse(Error(404, loaded.message()));
  if (loaded.code() == Code::kFatal) co_return Refuse(Error(500, loaded.message()));
  co_return Refuse(Error(503, "cannot load class " + id.tenant + "/" + id.class_name + ": " + loaded.message(), true));
}

Front::Route Front::RunHere() { return Route{Route::Kind::kRunHere, NodeId(), {}, true}; }

Front::Route Front::Forward(NodeId to, bool reaches_actor) {
  return Route{Route::Kind::kForward, std::move(to), {}, reaches_actor};
}

Front::Route Front::Refuse(ServerResponse response) {
  return Route{Route::Kind::kRefuse, NodeId(), std::move(response), false};
}

Task<Front::Route> Front::Decide(ActorId id, int hops) {
  HandOvers* const hand_overs = deps_.hand_overs;
  const bool may_forward = hops < options_.max_hops;
  bool waited = false;
  // Each pass ends in a decision; a request for an actor that starts leaving this node while
  // it is routed goes round once more, to wait for the hand-over.
  for (int pass = 0;; ++pass) {
    if (hand_overs != nullptr && hand_overs->Leaving(id)) {
      if (!waited) {
        // Leaving this node (a drain or a move): held until its hand-over ends, then routed
        // again, to the node that has it next.
        waited = true;
        ++stats_.held;
        co_await hand_overs->WaitLeft(id, kHandOverWait);
        continue;
      }
      // Still leaving after the wait: its target, if it has one, has it next.
      std::optional<NodeId> to = hand_overs->ForwardTarget(id);
      if (to && may_forward) co_return Forward(std::move(*to), true);
      co_return Refuse(Error(503, id.ToString() + " is moving to another node", true));
    }
    // A draining node does not run an actor it no longer holds (its hand-over cut it): the
    // request goes where the actor goes.
    if (deps_.runtime.IsResident(id) && (deps_.owners.accepting() || deps_.owners.Find(id).IsValid())) {
      // Resident: its storage's output gate decides whether its answer may go out (a hold
      // that ended refuses it, even a read's: 503, and the runtime unloads the actor).
      if (deps_.refresh_class) deps_.refresh_class(id.tenant, id.class_name);
      co_return RunHere();
    }
    if (!deps_.owners.accepting() && hand_overs == nullptr) co_return Refuse(Error(503, "this node is draining", true));
    if (deps_.owners.accepting() && !deps_.owners.leaving(id) && deps_.owners.Find(id).IsValid()) {
      // Held here but not resident (a sleeping hold): the record names this node, and no
      // other node can take it while the hold is valid, so it runs here at once — no routing
      // read, no acquisition (Owners::Acquire would give this hold back). Its start is
      // checked like any other.
      if (auto refused = co_await LoadClassOrRefuse(id)) co_return std::move(*refused);
      if (auto refused = co_await CheckBeforeStart(id)) co_return std::move(*refused);
      co_return RunHere();
    }
    auto other = co_await deps_.owners.OtherOwner(id);
    if (!other.ok()) {
      if (other.code() == Code::kFatal) {
        co_return Refuse(Error(500, "the owner record of " + id.ToString() + ": " + other.status().message()));
      }
      co_return Refuse(Error(503, "cannot read the owner of " + id.ToString() + ": " + other.status().message(), true));
    }
    if (other->has_value()) {
      if (!may_forward) co_return Refuse(Error(503, id.ToString() + " is moving between nodes", true));
      co_return Forward((*other)->node_id, true);
    }
    if (hand_overs != nullptr && hand_overs->Leaving(id) && pass == 0) continue;
    if (!deps_.owners.accepting()) {
      // Draining: nobody holds it, and this node takes no actors: the peer that takes this
      // node's actors acquires it (its class was not checked here: no actor reached yet).
      std::optional<NodeId> to = hand_overs != nullptr ? hand_overs->ForwardTarget(id) : std::nullopt;
      if (to && may_forward) co_return Forward(std::move(*to), false);
      co_return Refuse(Error(503, "this node is draining", true));
    }
    if (auto refused = co_await LoadClassOrRefuse(id)) co_return std::move(*refused);
    if (auto refused = co_await CheckBeforeStart(id)) co_return std::move(*refused);
    AcquireResult acquired = co_await deps_.owners.Acquire(id);
    switch (acquired.kind) {
      case AcquireResult::Kind::kAcquired:
        co_return RunHere();
      case AcquireResult::Kind::kHeldElsewhere:
        if (may_forward && !acquired.owner.node_id.empty() && acquired.owner.node_id != options_.node_id) {
          co_return Forward(acquired.owner.node_id, true);
        }
        co_return Refuse(Error(503, id.ToString() + " is held by another node: " + acquired.why, true));
      case AcquireResult::Kind::kNotValid:
        // Started leaving (or the drain began) while this request was routed: once more.
        if (pass < 2 && hand_overs != nullptr && (hand_overs->Leaving(id) || !deps_.owners.accepting())) continue;
        co_return Refuse(Error(503, "this node's lease is not valid", true));
      case AcquireResult::Kind::kUnknown:
      case AcquireResult::Kind::kError:
        break;
    }
    co_return Refuse(Error(503, "cannot acquire " + id.ToString() + ": " + acquired.why, true));
  }
}

Task<std::optional<ServerResponse>> Front::RouteOperatorJob(ActorId id, ServerRequest request, int hops) {
  Route route = co_await Decide(id, hops);
  switch (route.kind) {
    case Route::Kind::kRunHere:
      co_return std::nullopt;
    case Route::Kind::kForward: {
      ServerRequest out;
      out.method = std::move(request.method);
      out.target = std::move(request.target);
      std::string tenant = id.tenant;
      co_return co_await ForwardTo(std::move(route.to), std::move(out), std::move(tenant), hops + 1);
    }
    case Route::Kind::kRefuse:
      break;
  }
  co_return std::move(route.refusal);
}

Task<Status> Front::SendTake(NodeId to, ActorId actor, Version released, Generation generation) {
  auto it = deps_.membership.view().find(to);
  if (it == deps_.membership.view().end() || !it->second.live() || it->second.record->address.empty()) {
    co_return Retryable(to.str() + " is not live with an address in the membership view");
  }
  PeerTarget target{to, it->second.record->instance, it->second.record->address};
  ServerRequest request;
  request.method = "POST";
  request.target = std::string(kMoveHandOverPrefix) + actor.ToString() + "?generation=" + std::to_string(generation.value);
  request.body = released.token();
  std::string tenant = actor.tenant;
  auto got = co_await deps_.forwarder.Forward(std::move(target), std::move(request), std::move(tenant), 1);
  if (!got.ok()) co_return got.status();
  if (got->status == 200) co_return Status::Ok();
  std::string why = got->body;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  if (got->status == 409) co_return PreconditionFailed(to.str() + ": " + why);
  co_return Retryable(to.str() + " answered " + std::to_string(got->status) + ": " + why);
}

Task<ServerResponse> Front::HandleTake(ServerRequest request) {
  auto verified = VerifyPeer(request);
  if (!verified.ok()) co_return RefuseForwarded(verified.status().message());
  if (request.method != "POST") co_return Error(405, "a hand-over is a POST");
  std::string_view rest = std::string_view(request.target).substr(kMoveHandOverPrefix.size());
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  auto id = ParseActorId(rest);
  if (!id.ok()) co_return Error(400, "bad actor in a hand-over: " + id.status().message());
  if (verified->tenant != id->tenant) co_return Error(403, "a hand-over signed for tenant " + verified->tenant);
  constexpr std::string_view kGeneration = "generation=";
  std::optional<std::uint64_t> g;
  if (query.starts_with(kGeneration)) {
    std::uint64_t v = 0;
    bool digits = query.size() > kGeneration.size();
    for (const char c : query.substr(kGeneration.size())) {
      if (c < '0' || c > '9' || v > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) digits = false;
      if (digits) v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (digits) g = v;
  }
  if (!g || request.body.empty()) co_return Error(400, "a hand-over names a generation and a version");
  if (!deps_.owners.accepting()) co_return Error(503, "this node is draining", true);
  Status loaded = co_await deps_.load_class(id->tenant, id->class_name);
  if (!loaded.ok()) co_return Error(loaded.code() == Code::kNotFound ? 404 : 503, loaded.message(), true);
  if (deps_.quarantine != nullptr) {
    auto quarantined = co_await deps_.quarantine->Check(*id, control::QuarantineRead::kOnMiss);
    if (quarantined.ok() && quarantined->has_value()) co_return Quarantined(**quarantined);
  }
  // Named locals, not temporaries in the co_await operand (GCC 12: docs/DEVELOPING.md).
  Version released(request.body);
  const Generation generation{*g};
  ActorId taken = *id;
  AcquireResult acquired = co_await deps_.owners.AcquireHandedOver(std::move(taken), std::move(released), generation);
  switch (acquired.kind) {
    case AcquireResult::Kind::kAcquired: {
      ++stats_.taken;
      // The restore starts now: requests forwarded here meanwhile queue behind it.
      deps_.runtime.Warm(*id);
      ServerResponse r;
      r.status = 200;
      r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
      r.body = "taken " + id->ToString() + " at generation " + std::to_string(acquired.hold.generation().value) + "\n";
      co_return r;
    }
    case AcquireResult::Kind::kHeldElsewhere:
      co_return Error(409, id->ToString() + " was taken meanwhile: " + acquired.why);
    case AcquireResult::Kind::kNotValid:
    case AcquireResult::Kind::kUnknown:
    case AcquireResult::Kind::kError:
      break;
  }
  co_return Error(503, "cannot take " + id->ToString() + ": " + acquired.why, true);
}

Task<ServerResponse> Front::HandleAlarmHandOver(ServerRequest request) {
  // Verified exactly as a forwarded request: the signature, and the live signer's TLS pin.
  auto verified = VerifyPeer(request);
  if (!verified.ok()) co_return RefuseForwarded(verified.status().message());
  const ForwardedFrom& from = *verified;
  if (request.method != "POST") co_return Error(405, "alarm hand-overs are POST");
  auto id = ParseActorId(std::string_view(request.target).substr(kAlarmsHandOverPrefix.size()));
  if (!id.ok()) co_return Error(400, "bad actor name: " + id.status().message());
  if (from.tenant != id->tenant) co_return Error(403, "signed for tenant " + from.tenant + ", not " + id->tenant);
  co_return deps_.alarm_handover(*id, request.body);
}

Task<ServerResponse> Front::ForwardTo(NodeId node_id, ServerRequest request, std::string tenant, int hops) {
  auto it = deps_.membership.view().find(node_id);
  if (it == deps_.membership.view().end() || !it->second.live() || it->second.record->address.empty()) {
    co_return Error(503, "the owner " + node_id.str() + " is not live with an address in the membership view", true);
  }
  PeerTarget to{node_id, it->second.record->instance, it->second.record->address};
  auto got = co_await deps_.forwarder.Forward(std::move(to), std::move(request), std::move(tenant), hops);
  if (!got.ok()) {
    if (got.code() == Code::kInvalidArgument) co_return Error(501, got.status().message());
    WK_LOG_WARN("forwarding failed", {{"node", options_.node_id.str()}, {"owner", node_id.str()}, {"error", got.status().ToString()}});
    co_return Error(503, "the owner " + node_id.str() + " did not answer: " + got.status().message(), true);
  }
  if (got->status == 401) {
    for (const auto& [n, v] : got->headers) {
      if (EqualsIgnoreAsciiCase(n, kForwardingRefused)) {
        // The peer refused what we sent (clocks more than 60 s apart, another cluster
        // secret, a view of us that is not live yet): not the client's fault, and not a
        // token problem.
        WK_LOG_WARN("a peer refused a forwarded request", {{"node", options_.node_id.str()}, {"owner", node_id.str()}, {"why", v}});
        co_return Error(503, "the owner " + node_id.str() + " refused the forwarded request: " + v, true);
      }
    }
  }
  ++stats_.forwarded;
  co_return std::move(*got);
}

Task<ServerResponse> Front::DeliverMessage(ActorId receiver, actor::IncomingMessage message) {
  ServerRequest request;
  request.method = "POST";
  request.target = std::string(kActorsPrefix) + receiver.ToString();
  request.headers.emplace_back(std::string(kMessageHeader), MessageHeaderValue(message));
  request.body = message.body;
  ServerResponse r = co_await RouteMessage(std::move(receiver), std::move(message), std::move(request), 0);
  co_return r;
}

Task<ServerResponse> Front::RouteMessage(ActorId receiver, actor::IncomingMessage message, ServerRequest request,
                                         int hops) {
  ++stats_.messages;
  if (auto refused = TooLarge(message.body.size())) co_return std::move(*refused);
  // 3. A quarantined receiver runs nothing: the sender retries later (503). Known here, or
  // checked where it would start (Decide).
  if (auto refused = co_await CheckQuarantine(receiver)) co_return std::move(*refused);
  // 4. Where it runs: as a request's (the same routing read and signed forwarding).
  Route route = co_await Decide(receiver, hops);
  switch (route.kind) {
    case Route::Kind::kRunHere:
      co_return co_await RunMessage(std::move(receiver), std::move(message));
    case Route::Kind::kForward: {
      std::string tenant = receiver.tenant;
      co_return co_await ForwardTo(std::move(route.to), std::move(request), std::move(tenant), hops + 1);
    }
    case Route::Kind::kRefuse:
      break;
  }
  co_return std::move(route.refusal);
}

Task<ServerResponse> Front::RunMessage(ActorId id, actor::IncomingMessage message) {
  const std::string name = id.ToString();
  actor::EventResult result = co_await deps_.runtime.HandleMessage(std::move(id), std::move(message));
  ++stats_.messages_run;
  ServerResponse r = MessageAnswer(result, name);
  if (r.status == 503) {
    ++stats_.unavailable;
  } else if (r.status == 500) {
    ++stats_.actor_failed;
    WK_LOG_WARN("message handler failed", {{"node", options_.node_id.str()}, {"actor", name}, {"error", result.error}});
  }
  co_return r;
}

Task<ServerResponse> Front::Run(ActorId id, actor::Request request) {
  const std::string name = id.ToString();
  const std::string method = request.method;
  actor::EventResult result = co_await deps_.runtime.HandleRequest(std::move(id), std::move(request));
  ++stats_.local;
  // One line per event at debug level (log.level = "debug"): an access log.
  if (log::Enabled(log::Level::kDebug)) {
    WK_LOG_DEBUG("event", {{"node", options_.node_id.str()},
                           {"actor", name},
                           {"method", method},
                           {"outcome", std::string(actor::EventOutcomeName(result.outcome))},
                           {"status", std::to_string(result.ok() ? result.response.status : 0)}});
  }
  co_return EventAnswer(std::move(result), name);
}

ServerResponse Front::EventAnswer(actor::EventResult result, const std::string& name) {
  switch (result.outcome) {
    case actor::EventOutcome::kOk: {
      ServerResponse r;
      r.status = result.response.status;
      for (auto& [n, v] : result.response.headers) {
        // The node's own headers are the node's: a peer's X-Wasmkeep-Forwarding-Refused
        // must come from its front, never from an actor (docs/http-api.md).
        if (!IsInternalHeader(n)) r.headers.emplace_back(std::move(n), std::move(v));
      }
      r.body = std::move(result.response.body);
      if (!result.replayed.empty()) r.headers.emplace_back(std::string(actor::kReplayedHeader), result.replayed);
      return r;
    }
    case actor::EventOutcome::kBadRequest:
      return Error(413, result.error);
    case actor::EventOutcome::kInvalidHeader:
      return Error(400, result.error);
    case actor::EventOutcome::kKeyReused:
      return Error(422, result.error);
    case actor::EventOutcome::kNotFound:
      return Error(404, result.error);
    case actor::EventOutcome::kOverloaded:
      return Error(503, name + " is overloaded: " + result.error, true);
    case actor::EventOutcome::kOverQuota:
      ++stats_.throttled;
      return Error(429, name + " cannot start: " + result.error, true);
    case actor::EventOutcome::kActorFailed:
      ++stats_.actor_failed;
      WK_LOG_WARN("event failed", {{"node", options_.node_id.str()}, {"actor", name}, {"error", result.error}});
      return Error(500, "actor " + name + " failed: " + result.error);
    case actor::EventOutcome::kUnavailable:
      break;
  }
  return Error(503, name + " is unavailable: " + result.error, true);
}

Task<ServerResponse> Front::OpenSocket(ActorId id, actor::Request handshake, bool offered_wasmkeep) {
  ++stats_.socket_opens;
  const std::string name = id.ToString();
  auto reserved = deps_.sockets->Reserve(id);
  if (!reserved.ok()) {
    WK_LOG_INFO("websocket refused", {{"actor", name}, {"why", reserved.status().message()}});
    co_return deps_.sockets->RefuseWithClose(kCloseTryAgain, reserved.status().message().substr(0, kMaxCloseReasonBytes));
  }
  const std::int64_t conn = *reserved;
  actor::SocketEvent event;
  event.kind = actor::SocketEventKind::kOpen;
  event.id = conn;
  event.handshake = std::move(handshake);
  actor::EventResult result = co_await deps_.runtime.HandleSocket(id, std::move(event));
  ++stats_.local;
  if (!result.ok() || result.response.status >= 400) {
    deps_.sockets->Abort(id, conn);
    co_return EventAnswer(std::move(result), name);
  }
  ServerHeaders headers;
  for (auto& [n, v] : result.response.headers) {
    // The one header of the actor's that means something in a 101: the subprotocol it chose.
    if (EqualsIgnoreAsciiCase(n, "Sec-WebSocket-Protocol")) headers.emplace_back("Sec-WebSocket-Protocol", std::move(v));
  }
  if (headers.empty() && offered_wasmkeep) headers.emplace_back("Sec-WebSocket-Protocol", "wasmkeep");
  co_return deps_.sockets->Accept(id, conn, std::move(headers));
}

Task<ServerResponse> Front::RelaySocket(NodeId node_id, ServerRequest request, std::string tenant, int hops) {
  auto it = deps_.membership.view().find(node_id);
  if (it == deps_.membership.view().end() || !it->second.live() || it->second.record->address.empty()) {
    co_return Error(503, "the owner " + node_id.str() + " is not live with an address in the membership view", true);
  }
  if (!deps_.relay_socket) {
    co_return Error(503, "the actor is held by " + node_id.str() + ", and this node relays no WebSockets", true);
  }
  ++stats_.socket_relayed;
  PeerTarget to{node_id, it->second.record->instance, it->second.record->address};
  ServerResponse r = co_await deps_.relay_socket(std::move(to), std::move(request), std::move(tenant), hops);
  co_return r;
}

Task<std::optional<actor::EventResult>> Front::RunSocketEvent(ActorId id, actor::SocketEvent event) {
  auto unavailable = [](std::string why) {
    actor::EventResult r;
    r.outcome = actor::EventOutcome::kUnavailable;
    r.error = std::move(why);
    return r;
  };
  if (auto refused = co_await CheckQuarantine(id)) co_return unavailable("the actor is quarantined");
  Route route = co_await Decide(id, 0);
  switch (route.kind) {
    case Route::Kind::kRunHere: {
      actor::EventResult r = co_await deps_.runtime.HandleSocket(std::move(id), std::move(event));
      co_return r;
    }
    case Route::Kind::kForward:
      co_return std::nullopt;
    case Route::Kind::kRefuse:
      break;
  }
  co_return unavailable(route.refusal.body);
}

}  // namespace wk
