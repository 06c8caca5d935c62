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

bool HasToken(std::string_view list, std::string_view token) {
  // A comma-separated list of tokens, compared case-insensitively (RFC 9110 5.6.1).
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (EqualsIgnoreAsciiCase(item, token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

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

std::optional<std::string> CheckWebSocketHandshake(const ServerRequest& request) {
  auto upgrade = request.Header("Upgrade");
  if (!upgrade || !HasToken(*upgrade, "websocket")) return std::nullopt;
  if (request.method != "GET") return "a WebSocket opening handshake must be a GET, not " + request.method;
  auto connection = request.Header("Connection");
  if (!connection || !HasToken(*connection, "upgrade")) {
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
