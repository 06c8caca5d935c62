#include "net/websocket.h"

#include "base/ascii.h"
#include "net/http_types.h"

namespace wk {

bool IsSendableCloseCode(int code) {
  // 1004 is reserved, 1005 and 1006 must never be sent, 1015 is TLS's (RFC 6455 7.4.1);
  // 1012..1014 were registered later with IANA.
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

namespace {

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

// 16 bytes in base64: 22 characters and "==", the last of the 22 carrying 2 bits (so its
// low 4 bits are zero: one of A, Q, g, w).
bool IsSixteenByteBase64(std::string_view key) {
  if (key.size() != 24 || key[22] != '=' || key[23] != '=') return false;
  for (std::size_t i = 0; i < 22; ++i) {
    if (!IsBase64Char(key[i])) return false;
  }
  char last = key[21];
  return last == 'A' || last == 'Q' || last == 'g' || last == 'w';
}

}  // namespace

std::string_view WebSocketEndName(WebSocketEnd end) {
  switch (end) {
    case WebSocketEnd::kClient:
      return "client";
    case WebSocketEnd::kNode:
      return "node";
    case WebSocketEnd::kProtocol:
      return "protocol";
    case WebSocketEnd::kTooBig:
      return "too_big";
    case WebSocketEnd::kRate:
      return "rate";
    case WebSocketEnd::kSlowReader:
      return "slow_reader";
    case WebSocketEnd::kTimeout:
      return "timeout";
    case WebSocketEnd::kStopped:
      return "stopped";
  }
  return "unknown";
}

std::optional<std::string> CheckWebSocketHandshake(const ServerRequest& request) {
  auto upgrade = request.Header("Upgrade");
  if (!upgrade || !HeaderListHasToken(*upgrade, "websocket")) return std::nullopt;
  if (request.method != "GET") return "a WebSocket opening handshake must be a GET, not " + request.method;
  auto connection = request.Header("Connection");
  if (!connection || !HeaderListHasToken(*connection, "upgrade")) {
    return std::string("the Connection header must name upgrade for a WebSocket");
  }
  auto version = request.Header("Sec-WebSocket-Version");
  if (!version) return std::string("Sec-WebSocket-Version is missing (13 is supported)");
  if (*version != "13") return "Sec-WebSocket-Version " + std::string(*version) + " is not supported (13 is)";
  auto key = request.Header("Sec-WebSocket-Key");
  if (!key) return std::string("Sec-WebSocket-Key is missing");
  if (!IsSixteenByteBase64(*key)) return std::string("Sec-WebSocket-Key is not 16 bytes in base64");
  if (!request.body.empty()) return std::string("a WebSocket opening handshake has no body");
  return std::string();
}

}  // namespace wk
