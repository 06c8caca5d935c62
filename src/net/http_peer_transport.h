// HttpPeerTransport: the real PeerTransport (peer_transport.h): HTTP/1.1 over TLS to each
// peer's peer listener, one keep-alive connection pool (HttpClient, http_client.h) per peer.
//
// Trust (docs/security.md, "Between nodes"). A request goes to a node only while the
// PeerTrust (peer_trust.h) names it, under the instance and address the caller names, and
// its connections accept the server only under the pin of that trusted entry
// (net/tls_identity.h MakePinnedClientContext); this node presents its own TlsIdentity as
// the client certificate (the peer listener requires one). A pool belongs to one
// (node, instance, address, pin): when the trust changes (DropUntrusted, called after each
// PeerTrust::Update, and again at each Send) the pools of peers no longer trusted under
// the same entry are shut down, idle and in-flight connections included, so a fenced or
// restarted node's connections are never used again.
//
// Threading: the RealEnv's loop thread (the HTTP client's).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "env/real_env.h"
#include "net/peer_transport.h"
#include "net/peer_trust.h"
#include "net/tls_identity.h"

namespace wk {

class HttpClient;

struct HttpPeerTransportOptions {
  int max_connections_per_peer = 64;
  std::size_t max_response_body_bytes = std::size_t{64} << 20;
};

struct HttpPeerTransportStats {
  std::uint64_t pools_opened = 0;
  std::uint64_t pools_dropped = 0;    // shut down because their peer is no longer trusted
  std::uint64_t untrusted_sends = 0;  // refused: the peer is not trusted as named
};

class HttpPeerTransport final : public PeerTransport {
 public:
  // identity and trust must outlive the transport.
  HttpPeerTransport(RealEnv& env, const TlsIdentity& identity, const PeerTrust& trust,
                    HttpPeerTransportOptions options = {});
  ~HttpPeerTransport() override;
  HttpPeerTransport(const HttpPeerTransport&) = delete;
  HttpPeerTransport& operator=(const HttpPeerTransport&) = delete;

  Task<Result<ServerResponse>> Send(PeerTarget to, ServerRequest request, Duration timeout) override;

  // Shuts down the pools of peers the trust no longer names as they were opened.
  void DropUntrusted();

  std::size_t pools() const { return pools_.size(); }
  const HttpPeerTransportStats& stats() const { return stats_; }

 private:
  struct Pool {
    TrustedPeer peer;  // what it was opened for
    std::unique_ptr<HttpClient> client;
  };
  Result<HttpClient*> ClientFor(const TrustedPeer& peer);

  RealEnv& env_;
  const TlsIdentity& identity_;
  const PeerTrust& trust_;
  HttpPeerTransportOptions options_;
  std::map<NodeId, Pool> pools_;  // by node id
  HttpPeerTransportStats stats_;
};

}  // namespace wk
