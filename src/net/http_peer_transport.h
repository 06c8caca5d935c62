// HttpPeerTransport: the real PeerTransport (peer_transport.h) over HTTP/1.1, one
// keep-alive connection pool (HttpClient, store/s3/http_client.h) per peer address,
// created on first use and kept for the transport's life.
//
// Threading: the RealEnv's loop thread (the HTTP client's).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "env/real_env.h"
#include "net/peer_transport.h"

namespace wk {

class HttpClient;

struct HttpPeerTransportOptions {
  int max_connections_per_peer = 64;
  std::size_t max_response_body_bytes = std::size_t{64} << 20;
};

class HttpPeerTransport final : public PeerTransport {
 public:
  explicit HttpPeerTransport(RealEnv& env, HttpPeerTransportOptions options = {});
  ~HttpPeerTransport() override;
  HttpPeerTransport(const HttpPeerTransport&) = delete;
  HttpPeerTransport& operator=(const HttpPeerTransport&) = delete;

  Task<Result<ServerResponse>> Send(std::string address, ServerRequest request, Duration timeout) override;

 private:
  Result<HttpClient*> ClientFor(const std::string& address);

  RealEnv& env_;
  HttpPeerTransportOptions options_;
  std::map<std::string, std::unique_ptr<HttpClient>> clients_;
};

}  // namespace wk
