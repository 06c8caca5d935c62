// HttpClient: an asynchronous HTTP/1.1 client for one endpoint with a bounded pool of
// keep-alive connections (the S3 backend's only I/O). Guarantees: a call ends by its
// deadline or its cancellation, and a connection so aborted is never reused; a failure says
// whether any byte of the request may have left (request_sent), and only an idempotent
// request is re-sent (once, when a reused connection was closed before any reply); urgent
// requests have connections of their own (reserved_urgent_connections). Threading: every
// method on the RealEnv's loop thread. REQUIRES: the RealEnv outlives the client and the
// tasks using it. Details (the pool, lanes, reuse, lifetime): docs/internals.md, "HttpClient".
#pragma once

#include <boost/beast/http/verb.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "env/real_env.h"
#include "env/task.h"
#include "net/http_endpoint.h"

namespace boost::asio::ssl {
class context;
}

namespace wk {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;   // encoded path and query, e.g. "/bucket/key?x=1"
  HttpHeaders headers;  // Host, Content-Length and User-Agent are added by the client
  std::string body;
  // Safe to re-send once if a reused connection turned out to be dead (see above).
  bool idempotent = false;
  // May use the connections reserved for urgent requests (see "Lanes" above).
  bool urgent = false;
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;  // names as the server sent them
  std::string body;     // empty for HEAD
  // The first header of that name (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

enum class HttpFailure : std::uint8_t {
  kNone,
  kResolveNotFound,     // DNS says the name does not exist. Nothing sent.
  kResolveFailed,       // DNS temporarily failed. Nothing sent.
  kConnectFailed,       // refused, unreachable, reset during connect. Nothing sent.
  kTlsVerifyFailed,     // the server's certificate did not verify. Nothing sent.
  kTlsHandshakeFailed,  // another handshake failure. Nothing sent.
  kTimeout,             // the deadline passed (request_sent says whether before sending)
  kConnectionLost,      // reset, EOF or a malformed reply after the request started
  kResponseTooLarge,    // the reply's body exceeded max_response_body_bytes
  kCancelled,           // the awaiting task was cancelled
  kShutdown,            // the HttpClient was destroyed
};
std::string_view HttpFailureName(HttpFailure f);

struct HttpOutcome {
  HttpFailure failure = HttpFailure::kNone;
  // True once the first byte of the request may have been written: from then on the
  // server may have acted on it.
  bool request_sent = false;
  std::string detail;     // for messages: what failed and why
  HttpResponse response;  // valid when failure == kNone
  bool ok() const { return failure == HttpFailure::kNone; }
};

struct HttpClientOptions {
  int max_connections = 64;
  // Of those, kept for urgent requests (see "Lanes"): 0 .. max_connections - 1.
  int reserved_urgent_connections = 0;
  // See "The pool" above for why this is short.
  Duration max_idle = std::chrono::seconds(4);
  // PEM certificates trusted in addition to the system's default verify paths (a private
  // CA; tests use a self-signed certificate).
  std::string extra_ca_pem;
  // For https: the TLS context to connect with, instead of one that checks the server's
  // certificate against the CAs and the host name. Whoever makes it decides what is
  // verified and what the client presents (the peer transport's pinned context,
  // net/tls_identity.h); extra_ca_pem is then unused. Shared by every connection.
  std::shared_ptr<boost::asio::ssl::context> tls_context;
  // Bound on a reply body held in memory. WasmKeep's objects are actor snapshots and
  // records; a larger reply means a misconfigured bucket, not data to buffer.
  std::size_t max_response_body_bytes = std::size_t{1} << 30;  // 1 GiB
  // Peek at an idle connection before reusing it (see "The pool"). Tests turn it off to
  // reach the re-send path deterministically.
  bool peek_idle_connections = true;
};

struct HttpClientStats {
  std::uint64_t connections_opened = 0;  // TCP connects that succeeded
  std::uint64_t requests_sent = 0;       // exchanges that started writing
  std::uint64_t reused = 0;              // exchanges on a pooled connection
  std::uint64_t stale_dropped = 0;       // idle connections found dead or too old
  std::uint64_t stale_resends = 0;       // idempotent re-sends after a dead reused one
  // Requests that found no connection they could take and waited, by lane, and those whose
  // deadline passed (or that were cancelled) while they waited.
  std::uint64_t urgent_waits = 0;
  std::uint64_t other_waits = 0;
  std::uint64_t urgent_wait_timeouts = 0;
  std::uint64_t other_wait_timeouts = 0;
  int idle = 0;                          // connections in the pool now
  int in_use = 0;                        // connections (or slots) checked out now
};

class HttpClient {
 public:
  // kInvalidArgument if the options are out of range or the extra CA does not parse.
  static Result<std::unique_ptr<HttpClient>> Create(RealEnv& env, HttpEndpoint endpoint,
                                                    HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One exchange, finished by `deadline` (this node's monotonic clock).
  Task<HttpOutcome> Send(HttpRequest request, MonoTime deadline);

  // Aborts every request in flight (they end with kShutdown), closes idle connections
  // and fails later requests at once. The destructor calls it. Idempotent.
  void Shutdown();

  const HttpEndpoint& endpoint() const;
  HttpClientStats stats() const;

  struct Pool;  // the shared state (http_client.cc)

 private:
  explicit HttpClient(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}
  std::shared_ptr<Pool> pool_;
};

}  // namespace wk
