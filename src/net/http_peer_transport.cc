#include "net/http_peer_transport.h"

#include <boost/beast/http/verb.hpp>

#include "net/http_client.h"

namespace wk {

HttpPeerTransport::HttpPeerTransport(RealEnv& env, const TlsIdentity& identity, const PeerTrust& trust,
                                     HttpPeerTransportOptions options)
    : env_(env), identity_(identity), trust_(trust), options_(options) {}

HttpPeerTransport::~HttpPeerTransport() = default;

void HttpPeerTransport::DropUntrusted() {
  for (auto it = pools_.begin(); it != pools_.end();) {
    const TrustedPeer* now = trust_.Find(it->first);
    if (now != nullptr && *now == it->second.peer) {
      ++it;
      continue;
    }
    // Aborts what is in flight too (those calls end kShutdown: an unknown outcome).
    it->second.client->Shutdown();
    ++stats_.pools_dropped;
    it = pools_.erase(it);
  }
}

Result<HttpClient*> HttpPeerTransport::ClientFor(const TrustedPeer& peer) {
  auto it = pools_.find(peer.node_id);
  if (it != pools_.end() && it->second.peer == peer) return it->second.client.get();
  auto endpoint = ParseHttpEndpoint("https://" + peer.address);
  if (!endpoint.ok()) return InvalidArgument("bad peer address " + peer.address + ": " + endpoint.status().message());
  auto tls = MakePinnedClientContext(identity_, peer.pin);
  if (!tls.ok()) return tls.status();
  HttpClientOptions o;
  o.max_connections = options_.max_connections_per_peer;
  o.max_response_body_bytes = options_.max_response_body_bytes;
  o.tls_context = std::move(*tls);
  auto client = HttpClient::Create(env_, *endpoint, o);
  if (!client.ok()) return client.status();
  HttpClient* raw = client->get();
  if (it != pools_.end()) {
    it->second.client->Shutdown();
    ++stats_.pools_dropped;
    pools_.erase(it);
  }
  pools_.emplace(peer.node_id, Pool{peer, std::move(*client)});
  ++stats_.pools_opened;
  return raw;
}

Task<Result<ServerResponse>> HttpPeerTransport::Send(PeerTarget to, ServerRequest request, Duration timeout) {
  HttpRequest out;
  out.method = boost::beast::http::string_to_verb(request.method);
  if (out.method == boost::beast::http::verb::unknown) {
    co_return InvalidArgument("method " + request.method + " cannot be forwarded");
  }
  DropUntrusted();
  const TrustedPeer* peer = trust_.Find(to.node_id);
  if (peer == nullptr || peer->instance != to.instance || peer->address != to.address) {
    ++stats_.untrusted_sends;
    co_return Retryable("node " + to.node_id.str() + " (instance " + to.instance.str() + " at " + to.address +
                        ") is not a live peer with a pin in this node's view");
  }
  // A copy: the trust may change while this call waits.
  const TrustedPeer target = *peer;
  auto client = ClientFor(target);
  // A peer address that cannot become a client: nothing was sent.
  if (!client.ok()) co_return Retryable(client.status().message());
  out.target = std::move(request.target);
  out.headers = std::move(request.headers);
  out.body = std::move(request.body);
  const MonoTime deadline = env_.MonoNow() + timeout;
  HttpOutcome got = co_await (*client)->Send(std::move(out), deadline);
  if (!got.ok()) {
    std::string why = "sending to " + target.node_id.str() + " at " + target.address + ": " +
                      std::string(HttpFailureName(got.failure)) + " " + got.detail;
    if (got.request_sent) co_return UnknownOutcome(std::move(why));
    co_return Retryable(std::move(why));
  }
  ServerResponse r;
  r.status = got.response.status;
  r.headers = std::move(got.response.headers);
  r.body = std::move(got.response.body);
  co_return r;
}

}  // namespace wk
