// ServerRequest, ServerResponse, ServerHandler: one HTTP exchange as HttpServer (http_server.h)
// hands it to the code that answers it (the actor API's routing, the admin routes).
//
// These are plain values: the server has already framed the message (read the whole
// body, decoded a chunked one) and will frame the response (it sets Content-Length and
// Connection itself). See http_server.h for what the server does with a response.
//
// Threading: plain values; ServerHandler is called on the server's loop thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "env/task.h"

namespace wk {

using ServerHeaders = std::vector<std::pair<std::string, std::string>>;

struct ServerRequest {
  std::string method;   // as sent, e.g. "GET", "POST" (an unknown token is passed as is)
  std::string target;   // path and query as sent, e.g. "/v1/actors/t/c/n/x?y=1"
  ServerHeaders headers;  // in order, names as sent (trailers of a chunked body included)
  std::string body;     // the whole body, de-chunked; empty when none was sent
  std::string remote;   // "ip:port" of the peer ("[v6]:port" for IPv6)
  // TLS: the pin (hex SHA-256 of the SubjectPublicKeyInfo, net/tls_identity.h) of the
  // client's certificate; empty without TLS or without a client certificate. The
  // simulator's peer network sets what a peer listener would.
  std::string peer_cert_pin;

  // First header with this name, case-insensitive; nullopt if absent.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct WebSocketUpgrade;  // websocket.h

struct ServerResponse {
  int status = 200;      // 200..599 (the server answers 500 for anything else), or 101 with upgrade
  ServerHeaders headers;   // Content-Length and Transfer-Encoding are set by the server
  std::string body;
  // Set (with status 101) to accept a WebSocket opening handshake: the server answers the 101
  // and hands the connection over (websocket.h). Only for a request CheckWebSocketHandshake
  // accepts; a 101 without it, or it on another status, is a 500.
  std::shared_ptr<WebSocketUpgrade> upgrade;
};

// Answers one request. Called on the loop thread; the returned Task runs as its own task
// on the Env (see HttpServer). Must not throw (errors are responses).
using ServerHandler = std::function<Task<ServerResponse>(ServerRequest)>;

// Calls fn(item) for each item of a header value that is a comma-separated list (RFC 9110
// section 5.6.1), in order, spaces and tabs around it trimmed, empty items skipped.
void ForEachHeaderListItem(std::string_view list, const std::function<void(std::string_view)>& fn);

// Whether such a list names token, compared case-insensitively: "keep-alive, Upgrade" names
// "upgrade".
bool HeaderListHasToken(std::string_view list, std::string_view token);

// A response with a text/plain (UTF-8) body.
ServerResponse TextResponse(int status, std::string body);

// A Task that yields response at once: for handlers that answer synchronously. (A
// coroutine lambda must not capture, so a handler lambda computes the response and
// returns ReadyResponse(...) instead of being a coroutine itself.)
Task<ServerResponse> ReadyResponse(ServerResponse response);

}  // namespace wk
