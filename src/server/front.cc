#include "server/front.h"

#include "base/ascii.h"

#include "base/log.h"

namespace wk {
namespace {

bool Unavailable(Code c) { return c == Code::kRetryable || c == Code::kUnknownOutcome || c == Code::kCancelled; }

}  // namespace

Front::Front(FrontDeps deps, FrontOptions options) : deps_(std::move(deps)), options_(std::move(options)) {
  if (deps_.metrics) {
    auto& r = *deps_.metrics;
    const std::string help = "Actor API requests by how they were routed or refused.";
    metrics_.local = &r.AddCounter("wasmkeep_api_requests_total", help, {{"route", "local"}});
    metrics_.forwarded = &r.AddCounter("wasmkeep_api_requests_total", help, {{"route", "forwarded"}});
    metrics_.refused = &r.AddCounter("wasmkeep_api_requests_total", help, {{"route", "refused"}});
    metrics_.unavailable = &r.AddCounter("wasmkeep_api_requests_total", help, {{"route", "unavailable"}});
    metrics_.failed = &r.AddCounter("wasmkeep_api_requests_total", help, {{"route", "actor_failed"}});
  }
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
    if (metrics_.unavailable) metrics_.unavailable->Inc();
  } else if (status >= 400 && status < 500) {
    ++stats_.refused;
    if (metrics_.refused) metrics_.refused->Inc();
  }
  return r;
}

ServerResponse Front::RefuseForwarded(const std::string& why) {
  ServerResponse refused = Error(401, "forwarded request refused: " + why);
  refused.headers.emplace_back(std::string(kForwardingRefused), why);
  return refused;
}

Task<ServerResponse> Front::Handle(ServerRequest request, Via via) {
  ++stats_.requests;
  // 1. The actor's name and the rest of the path.
  std::string_view target = request.target;
  if (!target.starts_with(kActorsPrefix)) co_return Error(404, "not found: actor paths are /v1/actors/<tenant>/<class>/<name>/...");
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
      if (rest.empty()) co_return Error(400, "bad actor path: expected /v1/actors/<tenant>/<class>/<name>[/<path>]");
      rest.remove_prefix(1);
    }
  }
  ActorId id{std::string(parts[0]), std::string(parts[1]), std::string(parts[2])};
  if (Status v = ValidateActorId(id); !v.ok()) co_return Error(400, "bad actor name: " + v.message());
  if (request.body.size() > options_.max_request_bytes) {
    co_return Error(413, "request body of " + std::to_string(request.body.size()) + " bytes is over actors.max_request_bytes (" +
                             std::to_string(options_.max_request_bytes) + ")");
  }

  // 2. Who is asking.
  int hops = 0;
  std::string tenant;
  actor::Request actor_request;
  if (via == Via::kPeer) {
    auto forwarded = deps_.forwarder.Verify(request);
    if (!forwarded.ok()) co_return RefuseForwarded(forwarded.status().message());
    if (!forwarded->has_value()) co_return RefuseForwarded("the peer listener takes forwarded requests only");
    ForwardedFrom& from = **forwarded;
    if (options_.check_peer_pins) {
      // The TLS identity must be the signer's: a node may not sign for another, and a
      // node that is no longer live (fenced, released, restarted) is not heard.
      auto it = deps_.membership.view().find(from.node_id);
      const bool signer_live = it != deps_.membership.view().end() && it->second.live();
      if (!signer_live || it->second.record->cert_pin.empty() || request.peer_cert_pin.empty() ||
          it->second.record->cert_pin != request.peer_cert_pin) {
        co_return RefuseForwarded("the TLS certificate is not that of " + from.node_id + "'s live node record");
      }
    }
    hops = from.hops;
    tenant = std::move(from.tenant);
    // Only what was signed goes on: to the actor, and to the next node if it moved.
    request.headers = std::move(from.headers);
    actor_request.headers = request.headers;
  } else {
    if (Forwarder::HasForwardingHeaders(request)) {
      co_return RefuseForwarded("forwarded requests are accepted on the peer listener only");
    }
    auto auth = request.Header("Authorization");
    std::string value = auth ? std::string(*auth) : std::string();
    auto who = co_await deps_.authenticate(std::move(value));
    if (!who.ok()) {
      // docs/tenants.md: a missing, malformed, unknown or revoked token is 401 (one answer
      // for all, so a caller learns nothing about which); a corrupt tenant record is 500.
      if (who.code() == Code::kInvalidArgument || who.code() == Code::kNotFound) co_return Error(401, who.status().message());
      if (who.code() == Code::kFatal) co_return Error(500, "cannot check the token: " + who.status().message());
      if (Unavailable(who.code())) co_return Error(503, "cannot check the token: " + who.status().message(), true);
      co_return Error(403, who.status().message());
    }
    tenant = std::move(*who);
    for (const auto& [n, v] : request.headers) {
      if (EqualsIgnoreAsciiCase(n, "Authorization")) continue;  // the actor never sees the token
      actor_request.headers.emplace_back(n, v);
    }
  }
  if (tenant != id.tenant) co_return Error(403, "this token is for tenant " + tenant + ", not " + id.tenant);

  actor_request.method = request.method;
  actor_request.path = std::string(rest);
  actor_request.query = std::string(query);
  actor_request.body = request.body;

  // 3. Where it runs.
  if (deps_.runtime.IsResident(id)) {
    // Resident: its storage's output gate decides whether its answer may go out (a hold
    // that ended refuses it, even a read's: 503, and the runtime unloads the actor).
    co_return co_await Run(std::move(id), std::move(actor_request));
  }
  if (!deps_.owners.accepting()) co_return Error(503, "this node is draining", true);
  auto other = co_await deps_.owners.OtherOwner(id);
  if (!other.ok()) {
    if (other.code() == Code::kFatal) co_return Error(500, "the owner record of " + id.ToString() + ": " + other.status().message());
    co_return Error(503, "cannot read the owner of " + id.ToString() + ": " + other.status().message(), true);
  }
  if (other->has_value()) {
    if (hops >= options_.max_hops) co_return Error(503, id.ToString() + " is moving between nodes", true);
    const std::string owner = (*other)->node_id;
    co_return co_await ForwardTo(owner, std::move(request), std::move(tenant), hops + 1);
  }
  Status loaded = co_await deps_.load_class(id.tenant, id.class_name);
  if (!loaded.ok()) {
    if (loaded.code() == Code::kNotFound) co_return Error(404, loaded.message());
    if (loaded.code() == Code::kFatal) co_return Error(500, loaded.message());
    co_return Error(503, "cannot load class " + id.tenant + "/" + id.class_name + ": " + loaded.message(), true);
  }
  AcquireResult acquired = co_await deps_.owners.Acquire(id);
  switch (acquired.kind) {
    case AcquireResult::Kind::kAcquired:
      co_return co_await Run(std::move(id), std::move(actor_request));
    case AcquireResult::Kind::kHeldElsewhere:
      if (hops < options_.max_hops && !acquired.owner.node_id.empty() &&
          acquired.owner.node_id != options_.node_id) {
        const std::string owner = acquired.owner.node_id;
        co_return co_await ForwardTo(owner, std::move(request), std::move(tenant), hops + 1);
      }
      co_return Error(503, id.ToString() + " is held by another node: " + acquired.why, true);
    case AcquireResult::Kind::kNotValid:
      co_return Error(503, "this node's lease is not valid", true);
    case AcquireResult::Kind::kUnknown:
    case AcquireResult::Kind::kError:
      break;
  }
  co_return Error(503, "cannot acquire " + id.ToString() + ": " + acquired.why, true);
}

Task<ServerResponse> Front::ForwardTo(const std::string& node_id, ServerRequest request, std::string tenant, int hops) {
  auto it = deps_.membership.view().find(node_id);
  if (it == deps_.membership.view().end() || !it->second.live() || it->second.record->address.empty()) {
    co_return Error(503, "the owner " + node_id + " is not live with an address in the membership view", true);
  }
  PeerTarget to{node_id, it->second.record->instance, it->second.record->address};
  auto got = co_await deps_.forwarder.Forward(std::move(to), std::move(request), std::move(tenant), hops);
  if (!got.ok()) {
    if (got.code() == Code::kInvalidArgument) co_return Error(501, got.status().message());
    WK_LOG_WARN("forwarding failed", {{"node", options_.node_id}, {"owner", node_id}, {"error", got.status().ToString()}});
    co_return Error(503, "the owner " + node_id + " did not answer: " + got.status().message(), true);
  }
  if (got->status == 401) {
    for (const auto& [n, v] : got->headers) {
      if (EqualsIgnoreAsciiCase(n, kForwardingRefused)) {
        // The peer refused what we sent (clocks more than 60 s apart, another cluster
        // secret, a view of us that is not live yet): not the client's fault, and not a
        // token problem.
        WK_LOG_WARN("a peer refused a forwarded request", {{"node", options_.node_id}, {"owner", node_id}, {"why", v}});
        co_return Error(503, "the owner " + node_id + " refused the forwarded request: " + v, true);
      }
    }
  }
  ++stats_.forwarded;
  if (metrics_.forwarded) metrics_.forwarded->Inc();
  co_return std::move(*got);
}

Task<ServerResponse> Front::Run(ActorId id, actor::Request request) {
  const std::string name = id.ToString();
  const std::string method = request.method;
  actor::EventResult result = co_await deps_.runtime.HandleRequest(std::move(id), std::move(request));
  ++stats_.local;
  if (metrics_.local) metrics_.local->Inc();
  // One line per event at debug level (log.level = "debug"): an access log.
  if (log::Enabled(log::Level::kDebug)) {
    WK_LOG_DEBUG("event", {{"node", options_.node_id},
                           {"actor", name},
                           {"method", method},
                           {"outcome", std::string(actor::EventOutcomeName(result.outcome))},
                           {"status", std::to_string(result.ok() ? result.response.status : 0)}});
  }
  switch (result.outcome) {
    case actor::EventOutcome::kOk: {
      ServerResponse r;
      r.status = result.response.status;
      r.headers = std::move(result.response.headers);
      r.body = std::move(result.response.body);
      co_return r;
    }
    case actor::EventOutcome::kBadRequest:
      co_return Error(413, result.error);
    case actor::EventOutcome::kNotFound:
      co_return Error(404, result.error);
    case actor::EventOutcome::kOverloaded:
      co_return Error(503, name + " is overloaded: " + result.error, true);
    case actor::EventOutcome::kActorFailed:
      if (metrics_.failed) metrics_.failed->Inc();
      WK_LOG_WARN("event failed", {{"node", options_.node_id}, {"actor", name}, {"error", result.error}});
      co_return Error(500, "actor " + name + " failed: " + result.error);
    case actor::EventOutcome::kUnavailable:
      break;
  }
  co_return Error(503, name + " is unavailable: " + result.error, true);
}

}  // namespace wk
