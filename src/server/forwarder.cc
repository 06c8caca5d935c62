#include "server/forwarder.h"

#include <charconv>

#include "base/ascii.h"
#include "control/classes.h"

namespace wk {
namespace {

bool IEquals(std::string_view a, std::string_view b) { return EqualsIgnoreAsciiCase(a, b); }

// Headers that describe one connection, not the message (RFC 9110 §7.6.1), and the ones
// the forwarder sets itself: never copied from the client's request or the peer's reply.
bool HopByHop(std::string_view name) {
  for (std::string_view h : {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                             "upgrade", "content-length", "host"}) {
    if (IEquals(name, h)) return true;
  }
  return false;
}


}  // namespace

bool Forwarder::IsForwardingHeader(std::string_view name) {
  for (std::string_view h : {kForwardedBy, kTenant, kHops, kTimestamp, kSignature}) {
    if (IEquals(name, h)) return true;
  }
  return false;
}

Forwarder::Forwarder(Env& env, PeerTransport& transport, NodeId node_id, control::ClusterSecret secret,
                     ForwarderOptions options)
    : env_(env), transport_(transport), node_id_(std::move(node_id)), secret_(secret), options_(options) {}

std::string Forwarder::SignedText(std::string_view method, std::string_view target, std::string_view tenant,
                                  int hops, std::int64_t timestamp_ms, std::string_view body) {
  std::string text = "wasmkeep-forward 1\n";
  text.append(method).append("\n").append(target).append("\n").append(tenant).append("\n");
  text.append(std::to_string(hops)).append("\n").append(std::to_string(timestamp_ms)).append("\n");
  text.append(control::ModuleDigest::Of(body).hex);  // the body's SHA-256, hex
  return text;
}

std::string Forwarder::Sign(std::string_view method, std::string_view target, std::string_view tenant, int hops,
                            std::int64_t timestamp_ms, std::string_view body) const {
  return secret_.Sign(SignedText(method, target, tenant, hops, timestamp_ms, body));
}

Task<Result<ServerResponse>> Forwarder::Forward(std::string address, ServerRequest request, std::string tenant,
                                                 int hops) {
  ServerRequest out;
  out.method = request.method;
  out.target = request.target;
  for (auto& [n, v] : request.headers) {
    if (!HopByHop(n) && !IsForwardingHeader(n)) out.headers.emplace_back(n, v);
  }
  const std::int64_t now = ToUnixMs(env_.WallNow());
  out.headers.emplace_back(std::string(kForwardedBy), node_id_.str());
  out.headers.emplace_back(std::string(kTenant), tenant);
  out.headers.emplace_back(std::string(kHops), std::to_string(hops));
  out.headers.emplace_back(std::string(kTimestamp), std::to_string(now));
  out.headers.emplace_back(std::string(kSignature), Sign(request.method, request.target, tenant, hops, now, request.body));
  out.body = std::move(request.body);
  auto got = co_await transport_.Send(std::move(address), std::move(out), options_.timeout);
  if (!got.ok()) co_return got.status();
  ServerResponse r;
  r.status = got->status;
  for (auto& [n, v] : got->headers) {
    if (!HopByHop(n)) r.headers.emplace_back(n, v);
  }
  r.body = std::move(got->body);
  co_return r;
}

Result<std::optional<ForwardedFrom>> Forwarder::Verify(const ServerRequest& request) const {
  auto by = request.Header(kForwardedBy);
  auto tenant = request.Header(kTenant);
  auto hops = request.Header(kHops);
  auto ts = request.Header(kTimestamp);
  auto sig = request.Header(kSignature);
  if (!by && !tenant && !hops && !ts && !sig) return std::optional<ForwardedFrom>();
  if (!by || !tenant || !hops || !ts || !sig) return InvalidArgument("incomplete forwarding headers");
  int h = 0;
  std::int64_t t = 0;
  if (std::from_chars(hops->data(), hops->data() + hops->size(), h).ec != std::errc() || h < 1 || h > 8) {
    return InvalidArgument("bad X-Wasmkeep-Hops");
  }
  if (std::from_chars(ts->data(), ts->data() + ts->size(), t).ec != std::errc()) {
    return InvalidArgument("bad X-Wasmkeep-Timestamp");
  }
  const std::int64_t now = ToUnixMs(env_.WallNow());
  const std::int64_t window = std::chrono::duration_cast<std::chrono::milliseconds>(options_.max_clock_difference).count();
  if (t < now - window || t > now + window) return InvalidArgument("forwarded request outside the time window");
  if (!secret_.Verify(SignedText(request.method, request.target, *tenant, h, t, request.body), *sig)) {
    return InvalidArgument("bad forwarding signature");
  }
  return std::optional<ForwardedFrom>(ForwardedFrom{NodeId(*by), std::string(*tenant), h});
}

}  // namespace wk
