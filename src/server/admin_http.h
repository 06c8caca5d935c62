// AdminHttpServer: the node's operator endpoint — Prometheus metrics and health probes
// over plain HTTP/1.1.
//
// Routes (any query string is ignored):
//   GET /metrics  200, Content-Type kPrometheusTextContentType, body metrics_text()
//   GET /healthz  200 "ok\n" while healthy(), else 503 "unhealthy\n"   (liveness: restart
//                 the process if this fails)
//   GET /readyz   200 "ready\n" while ready(), else 503 with ready_detail() (readiness:
//                 send no traffic, e.g. "not ready: node lease not valid\n")
//   HEAD on each  the same status and headers (Content-Length of the GET body), no body
//   other methods 405 with "Allow: GET, HEAD"
//   other paths   404
//
// Bounds (every one is a limit in Limits, with its reason there):
//   - Request headers over max_header_bytes: 431, then the connection closes.
//   - No route takes a body. A request announcing one (Content-Length > 0, or chunked)
//     gets 413 and the connection closes: the body is never read, so the stream cannot
//     be trusted to find the next request. "Content-Length: 0" is accepted.
//   - Malformed requests: 400, then the connection closes.
//   - At most max_connections open connections; one accepted beyond that is closed at
//     once, before anything is read from it.
//   - Each read of a request and each write of a response must finish within
//     idle_timeout, or the connection is closed: a slow or idle client cannot hold a
//     connection slot forever.
// Keep-alive follows HTTP/1.1 (and HTTP/1.0's "Connection: keep-alive"); pipelined
// requests are answered in order.
//
// Threading: everything runs on the RealEnv's event loop (its io_context); the server
// starts no thread. Start, Stop, the destructor and the accessors must be called on the
// loop thread (or before the loop runs). The handlers are called on the loop thread, one
// at a time, synchronously while a request is answered: they must be quick, must not
// block, and must not call Stop() or destroy the server. They are never called after
// Stop() returns.
//
// Lifetime: Stop() closes the listening socket and every connection; the destructor
// calls it. Asio handlers still queued at that point own the state they touch and find
// the server stopped, so destroying the server with connections open is safe. The
// handlers' captures need only outlive the server (or the Stop() call).
//
// This is a real-runtime component (sockets): it never runs in the simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/time.h"
#include "env/real_env.h"

namespace wk {

// The bounds of one AdminHttpServer (see the header comment).
struct AdminHttpLimits {
  // Probes and scrapers send a few hundred bytes of headers; 8 KiB is what common
  // servers allow and keeps the per-connection buffer small.
  std::size_t max_header_bytes = 8 * 1024;
  // A handful of scrapers and probes connect at once; the cap bounds file descriptors
  // and memory if something (or someone) opens connections in a loop.
  std::size_t max_connections = 256;
  // Longer than any scrape interval Prometheus is configured with in practice (15 s
  // to 30 s keeps keep-alive connections reused), short enough to free slots held
  // by stalled clients.
  Duration idle_timeout = std::chrono::seconds(30);
};

class AdminHttpServer {
 public:
  // What the routes answer from. REQUIRES: metrics_text, healthy and ready are set;
  // ready_detail may be empty (then a not-ready reply says "not ready\n").
  struct Handlers {
    std::function<std::string()> metrics_text;
    std::function<bool()> healthy;
    std::function<bool()> ready;
    // Why the node is not ready, for the 503 body. A missing final newline is added.
    std::function<std::string()> ready_detail;
  };

  // Declared outside the class only so that `Limits limits = {}` can be a default
  // argument (a nested class's member initializers are not usable there).
  using Limits = AdminHttpLimits;

  // Binds listen_address ("IP:PORT": "127.0.0.1:9100", "0.0.0.0:9100", "[::1]:9100";
  // "localhost" means 127.0.0.1; PORT 0 picks a free port, see bound_port()) and starts
  // accepting on env's loop.
  // Errors, each a one-line message naming the address:
  //   kInvalidArgument  the address does not parse (no port, port not in 0..65535,
  //                     host not an IP address)
  //   kFatal            the socket cannot be bound or listened on (address in use,
  //                     permission denied, address not on this host)
  static Result<std::unique_ptr<AdminHttpServer>> Start(RealEnv& env, std::string listen_address,
                                                        Handlers handlers, Limits limits = {});

  ~AdminHttpServer();
  AdminHttpServer(const AdminHttpServer&) = delete;
  AdminHttpServer& operator=(const AdminHttpServer&) = delete;

  // The port actually listened on (the chosen one when the address said port 0).
  std::uint16_t bound_port() const;
  // The address as given to Start.
  const std::string& listen_address() const;

  // Closes the listening socket and every open connection (responses being written are
  // cut off). Idempotent. After it returns, no handler is called again.
  void Stop();

  // Connections currently open (including ones closing after their last response).
  std::size_t open_connections() const;
  // Connections closed at accept because max_connections were open.
  std::uint64_t rejected_connections() const;

  struct State;  // shared with in-flight Asio handlers; defined in admin_http.cc

 private:
  explicit AdminHttpServer(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace wk
