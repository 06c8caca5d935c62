// HttpClient: an asynchronous HTTP/1.1 client for one endpoint, with a bounded pool of
// keep-alive connections. It is the S3 backend's only I/O (s3_store.h).
//
// Concept. Send() runs one request/response exchange as a chain of Asio operations
// (resolve, connect, TLS handshake, write, read) on the RealEnv's io_context: no thread
// per request (name resolution uses Asio's one internal resolver thread, because
// getaddrinfo blocks). A new connection is resolved afresh, so DNS changes are followed.
// Each step is awaited through a Latch, so three things can end a wait:
//   - the operation completes (success or error);
//   - the call's deadline passes (one Env timer per call, covering the wait for a pool
//     slot, connect, handshake, send and receive);
//   - the awaiting task is cancelled (the Latch's on_cancel).
// In the last two cases the connection is aborted (socket closed, resolver cancelled)
// and never returned to the pool: a half-used connection may still carry the rest of a
// reply. The aborted operation's handler runs later and finds its Latch already set.
//
// The pool. At most max_connections connections exist (idle plus in use, plus slots
// reserved for connections being opened); a request finding none free waits in FIFO
// order, and a released connection (or its slot, if the connection was not reusable) is
// handed directly to the first waiter. Idle connections are reused most-recent first.
// A connection is reused only if
//   - its last exchange ended cleanly with keep-alive and nothing left unread, and
//   - it has been idle less than max_idle (4 s by default): servers close idle keep-alive
//     connections after some seconds (AWS about 20 s, proxies often 5 s), and a request
//     written into a connection the server is closing is ambiguous: did it arrive?
//   - a non-blocking peek sees no EOF and no unexpected bytes on the socket.
// Idle connections past max_idle are also closed by a timer, so they do not linger.
//
// Lanes. Requests are urgent or not (HttpRequest::urgent). Of max_connections,
// reserved_urgent_connections are kept for urgent ones: a request that is not urgent takes
// a connection (idle, new, or handed over) only while fewer than max_connections -
// reserved_urgent_connections are checked out; an urgent one while fewer than
// max_connections are. A released connection goes to the oldest urgent waiter first, then
// to the oldest other waiter if that one may take it. So however much bulk traffic the
// caller sends (an S3 store's segment uploads, restores and deletes), an urgent request
// (its lease write, its routing read) never queues behind more than the urgent requests
// already in flight. Within a lane, order is FIFO.
// If an idempotent request fails on a reused connection before any byte of the response
// arrived (the server closed it just before our write), it is re-sent once on a new
// connection; a non-idempotent one never is (the caller must learn the outcome is
// unknown: ADR 0020 read-back).
//
// Outcome of a call: a response (any status), or a failure that says whether any byte of
// the request may have left (request_sent): the S3 layer turns "not sent" into a
// retryable error and "sent" into an unknown outcome for writes.
//
// Lifetime. Connections, buffers and parsers live in heap objects shared with the Asio
// handlers, so a late handler never touches freed memory. Destroying the HttpClient (or
// Shutdown) aborts every in-flight request (they complete with kShutdown) and closes idle
// connections; the calls still running keep the shared pool state alive until they
// finish. The RealEnv (its io_context) must outlive the HttpClient and the tasks using it.
//
// Threading: every method on the RealEnv's loop thread; Send's Task completes there.
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
