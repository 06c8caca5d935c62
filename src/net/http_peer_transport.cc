#include "net/http_peer_transport.h"

#include <boost/beast/http/verb.hpp>

#include "net/http_client.h"

namespace wk {

HttpPeerTransport::HttpPeerTransport(RealEnv& env, HttpPeerTransportOptions options) : env_(env), options_(options) {}

HttpPeerTransport::~HttpPeerTransport() = default;

Result<HttpClient*> HttpPeerTransport::ClientFor(const std::string& address) {
  auto it = clients_.find(address);
  if (it != clients_.end()) return it->second.get();
  auto endpoint = ParseHttpEndpoint("http://" + address);
  if (!endpoint.ok()) return InvalidArgument("bad peer address " + address + ": " + endpoint.status().message());
  HttpClientOptions o;
  o.max_connections = options_.max_connections_per_peer;
  o.max_response_body_bytes = options_.max_response_body_bytes;
  auto client = HttpClient::Create(env_, *endpoint, o);
  if (!client.ok()) return client.status();
  HttpClient* raw = client->get();
  clients_.emplace(address, std::move(*client));
  return raw;
}

Task<Result<ServerResponse>> HttpPeerTransport::Send(std::string address, ServerRequest request, Duration timeout) {
  auto client = ClientFor(address);
  // A peer address that cannot become a client: nothing was sent.
  if (!client.ok()) co_return Retryable(client.status().message());
  HttpRequest out;
  out.method = boost::beast::http::string_to_verb(request.method);
  if (out.method == boost::beast::http::verb::unknown) {
    co_return InvalidArgument("method " + request.method + " cannot be forwarded");
  }
  out.target = std::move(request.target);
  out.headers = std::move(request.headers);
  out.body = std::move(request.body);
  const MonoTime deadline = env_.MonoNow() + timeout;
  HttpOutcome got = co_await (*client)->Send(std::move(out), deadline);
  if (!got.ok()) {
    std::string why = "sending to " + address + ": " + std::string(HttpFailureName(got.failure)) + " " + got.detail;
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
