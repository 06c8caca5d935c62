#include "routing/forwarder.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "base/ascii.h"
#include "base/digest.h"

namespace wk {
namespace {

bool IEquals(std::string_view a, std::string_view b) { return EqualsIgnoreAsciiCase(a, b); }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

// Headers that describe one connection, not the message (RFC 9110 §7.6.1), and the ones
// the transport sets itself: never copied from the client's request or the peer's reply.
bool HopByHop(std::string_view name) {
  for (std::string_view h : {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                             "upgrade", "content-length", "host"}) {
    if (IEquals(name, h)) return true;
  }
  return false;
}

// Credentials: checked by the node the client reached, never sent on.
bool Credential(std::string_view name) {
  return IEquals(name, "authorization") || IEquals(name, "proxy-authorization");
}

// RFC 9110 §5.6.2: token = 1*tchar (header names).
bool HasLineBreak(std::string_view value) { return value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos; }

// A whole-string decimal (from_chars alone accepts a prefix).
template <typename T>
bool ParseWhole(std::string_view text, T* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// The client's headers as forwarded: the ones passed on, one per name (repeated ones
// joined), names as the client spelled them first.
ServerHeaders ForwardedHeaders(const ServerHeaders& client) {
  ServerHeaders out;
  for (const auto& [n, v] : client) {
    if (Forwarder::IsNeverForwarded(n) || !IsHttpToken(n) || HasLineBreak(v)) continue;
    auto same = std::find_if(out.begin(), out.end(), [&n](const auto& h) { return IEquals(h.first, n); });
    if (same == out.end()) {
      out.emplace_back(n, v);
    } else {
      same->second.append(", ").append(v);
    }
  }
  return out;
}

}  // namespace

bool Forwarder::IsForwardingHeader(std::string_view name) {
  for (std::string_view h : {kForwardedBy, kForwardedTo, kTenant, kHops, kTimestamp, kNonce, kSignedHeaders, kSignature}) {
    if (IEquals(name, h)) return true;
  }
  return false;
}

bool Forwarder::IsNeverForwarded(std::string_view name) {
  return IsForwardingHeader(name) || HopByHop(name) || Credential(name);
}

bool Forwarder::HasForwardingHeaders(const ServerRequest& request) {
  for (const auto& [n, v] : request.headers) {
    if (IsForwardingHeader(n)) return true;
  }
  return false;
}

bool Forwarder::HasNodeHeaders(const ServerRequest& request) {
  constexpr std::string_view kNodePrefix = "X-Wasmkeep-";
  for (const auto& [n, v] : request.headers) {
    if (n.size() >= kNodePrefix.size() && IEquals(std::string_view(n).substr(0, kNodePrefix.size()), kNodePrefix)) {
      return true;
    }
  }
  return false;
}

Forwarder::Forwarder(Env& env, PeerTransport& transport, ForwarderIdentity self, control::ClusterSecret secret,
                     ForwarderOptions options)
    : env_(env),
      transport_(transport),
      self_(std::move(self)),
      secret_(secret),
      options_(options),
      replays_(std::chrono::duration_cast<std::chrono::milliseconds>(options.max_clock_difference).count(),
               options.replay_cache_entries) {}

std::string Forwarder::SignedText(const Signed& s) {
  std::string text = "wasmkeep-forward 2\n";
  for (std::string_view line : {s.from, s.to_node, s.to_instance, s.method, s.target, s.tenant}) {
    text.append(line).append("\n");
  }
  text.append(std::to_string(s.hops)).append("\n");
  text.append(std::to_string(s.timestamp_ms)).append("\n");
  text.append(s.nonce).append("\n");
  text.append(Sha256Hex(s.body)).append("\n");
  std::string names;
  std::string lines;
  if (s.headers != nullptr) {
    for (const auto& [n, v] : *s.headers) {
      if (!names.empty()) names.push_back(',');
      names.append(n);
      lines.append(n).append(":").append(v).append("\n");
    }
  }
  text.append(names).append("\n").append(lines);
  return text;
}

Task<Result<ServerResponse>> Forwarder::Forward(PeerTarget to, ServerRequest request, std::string tenant, int hops) {
  ServerRequest out = Sign(to, std::move(request), tenant, hops);
  ++stats_.forwarded;
  auto got = co_await transport_.Send(std::move(to), std::move(out), options_.timeout);
  if (!got.ok()) co_return got.status();
  ServerResponse r;
  r.status = got->status;
  for (auto& [n, v] : got->headers) {
    if (!HopByHop(n)) r.headers.emplace_back(n, v);
  }
  r.body = std::move(got->body);
  co_return r;
}

ServerRequest Forwarder::Sign(const PeerTarget& to, ServerRequest request, const std::string& tenant, int hops) {
  ServerHeaders headers = ForwardedHeaders(request.headers);
  ServerHeaders signed_headers;
  std::string names;
  for (const auto& [n, v] : headers) {
    signed_headers.emplace_back(Lower(n), v);
    if (!names.empty()) names.push_back(',');
    names.append(Lower(n));
  }
  const std::int64_t now = ToUnixMs(env_.WallNow());
  const std::string nonce = env_.RandomHex(ReplayCache::kNonceHexChars / 2);
  const std::string signature = secret_.Sign(SignedText(Signed{self_.node_id.str(), to.node_id.str(), to.instance.str(), request.method,
                                                               request.target, tenant, hops, now, nonce, request.body,
                                                               &signed_headers}));
  ServerRequest out;
  out.method = request.method;
  out.target = request.target;
  out.headers = std::move(headers);
  out.headers.emplace_back(std::string(kForwardedBy), self_.node_id.str());
  out.headers.emplace_back(std::string(kForwardedTo), to.node_id.str() + " " + to.instance.str());
  out.headers.emplace_back(std::string(kTenant), tenant);
  out.headers.emplace_back(std::string(kHops), std::to_string(hops));
  out.headers.emplace_back(std::string(kTimestamp), std::to_string(now));
  out.headers.emplace_back(std::string(kNonce), nonce);
  out.headers.emplace_back(std::string(kSignedHeaders), names);
  out.headers.emplace_back(std::string(kSignature), signature);
  out.body = std::move(request.body);
  return out;
}

Result<std::optional<ForwardedFrom>> Forwarder::Refuse(std::string why) {
  ++stats_.refused;
  return InvalidArgument(std::move(why));
}

Result<std::optional<ForwardedFrom>> Forwarder::Verify(const ServerRequest& request) {
  if (!HasForwardingHeaders(request)) return std::optional<ForwardedFrom>();
  // Each forwarding header exactly once.
  std::optional<std::string_view> by, to, tenant, hops, ts, nonce, names, sig;
  for (const auto& [n, v] : request.headers) {
    std::optional<std::string_view>* slot = nullptr;
    if (IEquals(n, kForwardedBy)) slot = &by;
    else if (IEquals(n, kForwardedTo)) slot = &to;
    else if (IEquals(n, kTenant)) slot = &tenant;
    else if (IEquals(n, kHops)) slot = &hops;
    else if (IEquals(n, kTimestamp)) slot = &ts;
    else if (IEquals(n, kNonce)) slot = &nonce;
    else if (IEquals(n, kSignedHeaders)) slot = &names;
    else if (IEquals(n, kSignature)) slot = &sig;
    if (slot == nullptr) continue;
    if (slot->has_value()) return Refuse("repeated forwarding header " + n);
    if (HasLineBreak(v)) return Refuse("line break in forwarding header " + n);
    *slot = v;
  }
  if (!by || !to || !tenant || !hops || !ts || !nonce || !names || !sig) return Refuse("incomplete forwarding headers");
  int h = 0;
  std::int64_t t = 0;
  if (!ParseWhole(*hops, &h) || h < 1 || h > 8) return Refuse("bad X-Wasmkeep-Hops");
  if (!ParseWhole(*ts, &t)) return Refuse("bad X-Wasmkeep-Timestamp");
  if (*to != self_.node_id.str() + " " + self_.instance.str()) {
    return Refuse("forwarded request addressed to " + std::string(*to) + ", not to this node's instance");
  }
  const std::int64_t now = ToUnixMs(env_.WallNow());
  const std::int64_t window = std::chrono::duration_cast<std::chrono::milliseconds>(options_.max_clock_difference).count();
  if (t < now - window || t > now + window) return Refuse("forwarded request outside the time window");

  // The signed client headers: each listed name once, present exactly once.
  ServerHeaders lowered;    // what was signed
  ServerHeaders as_received;  // what the actor sees
  std::set<std::string> seen;
  std::string_view list = *names;
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (!IsHttpToken(name) || Lower(name) != name || IsNeverForwarded(name) || !seen.insert(std::string(name)).second) {
      return Refuse("bad X-Wasmkeep-Signed-Headers");
    }
    const std::pair<std::string, std::string>* found = nullptr;
    for (const auto& header : request.headers) {
      if (!IEquals(header.first, name)) continue;
      if (found != nullptr) return Refuse("signed header " + std::string(name) + " repeated");
      found = &header;
    }
    if (found == nullptr) return Refuse("signed header " + std::string(name) + " missing");
    if (HasLineBreak(found->second)) return Refuse("signed header " + std::string(name) + " has a line break");
    lowered.emplace_back(std::string(name), found->second);
    as_received.push_back(*found);
  }
  std::string rejoined;
  for (const auto& [n, v] : lowered) rejoined.append(rejoined.empty() ? "" : ",").append(n);
  if (rejoined != *names) return Refuse("bad X-Wasmkeep-Signed-Headers");

  const std::string text = SignedText(Signed{*by, self_.node_id.str(), self_.instance.str(), request.method, request.target,
                                             *tenant, h, t, *nonce, request.body, &lowered});
  if (!secret_.Verify(text, *sig)) return Refuse("bad forwarding signature");
  switch (replays_.Use(*nonce, t, now)) {
    case ReplayCache::Verdict::kFirstUse:
      break;
    case ReplayCache::Verdict::kReplayed:
      ++stats_.replays;
      return Refuse("replayed forwarded request (its nonce was used before)");
    case ReplayCache::Verdict::kBeyondMemory:
      ++stats_.beyond_memory;
      return Refuse("forwarded request older than the replay cache remembers");
    case ReplayCache::Verdict::kMalformed:
      return Refuse("bad X-Wasmkeep-Nonce");
  }
  ++stats_.verified;
  return std::optional<ForwardedFrom>(ForwardedFrom{NodeId(*by), std::string(*tenant), h, std::move(as_received)});
}

void PublishForwarderMetrics(MetricsRegistry& registry, const Forwarder& forwarder) {
  const ForwarderStats& stats = forwarder.stats();
  const std::string help = "Forwarded requests this node refused (docs/security.md, \"Between nodes\")";
  registry.AddCallbackCounter("wasmkeep_peer_requests_refused_total", help,
                              [&stats] { return static_cast<double>(stats.replays); }, {{"reason", "replayed"}});
  registry.AddCallbackCounter("wasmkeep_peer_requests_refused_total", help,
                              [&stats] { return static_cast<double>(stats.refused - stats.replays); },
                              {{"reason", "other"}});
}

}  // namespace wk
