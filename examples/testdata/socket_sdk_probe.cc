// A test actor that drives the WebSocket part of the C++ SDK (sdk/c/wasmkeep.hpp) and some of
// the C helpers under it (sdk/c/wasmkeep.h), so a host test can check both against
// docs/abi.md "WebSockets". Not an example. Built by target wk_actors; it imports every
// socket_* host function and exports all three socket handlers.
//
// Opening (any path): /refuse is refused with 403, an X-Why header and "refused\n"; /fail
// fails the open event (the node refuses with 500); any other path is accepted, tagged with
// the query parameter `tag` if there is one, and sent "open <id> <Socket::current id>".
//
// A text message is a command, answered on the same connection:
//   echo <text>              sends <text> back           binary <text>   sends it as binary
//   tag <t>                  "tag 1" (or 0)              tags            the tags, space-separated
//   has <t>                  "has 1" (or 0)              list [<t>]      "list <id> <id>..."
//   broadcast <t> <text>     broadcast to tag <t> ("-" for every connection), then "sent <n>"
//   to <id> <text>           sends <text> to connection <id>, then "to 1" (or 0)
//   close <code> <reason>    closes this connection      fail            fails the event
//   c                        through the C helpers: "c <data> <ids> <tags>"
// A binary message is answered "binary <length>"; in both, nothing else is sent.
// wk_on_socket_close stores "closed/<id>" = "<code> <reason>".
//
// Requests: GET /closed lists those, "<id> <code> <reason>\n" each; GET /list?tag=T the ids
// tagged T (all without T), one per line; POST /broadcast?tag=T sends the body to tag T and
// answers the count; GET /event answers what the socket event calls give in a request,
// "<id> <kind> <data length>" (docs/abi.md: "-1 -1 -1").
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wasmkeep.hpp"

namespace {

std::string Ids(const std::vector<wasmkeep::Socket>& sockets) {
  std::string out;
  for (const wasmkeep::Socket& s : sockets) out += " " + std::to_string(s.id());
  return out;
}

// The first word of text and the rest after one space.
std::pair<std::string_view, std::string_view> Split(std::string_view text) {
  size_t space = text.find(' ');
  if (space == std::string_view::npos) return {text, {}};
  return {text.substr(0, space), text.substr(space + 1)};
}

int OnOpen(wasmkeep::Socket socket, const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.path() == "/refuse") {
    res.header("X-Why", "probe").text(403, "refused\n");
    return 0;
  }
  if (req.path() == "/fail") return 1;
  if (std::optional<std::string> tag = req.query_param("tag")) socket.tag(*tag);
  std::optional<wasmkeep::Socket> current = wasmkeep::Socket::current();
  socket.send("open " + std::to_string(socket.id()) + " " + std::to_string(current ? current->id() : -1));
  return 0;
}

int OnMessage(wasmkeep::Socket socket, const wasmkeep::SocketMessage& msg) {
  if (msg.is_binary()) {
    socket.send("binary " + std::to_string(msg.data().size()));
    return 0;
  }
  auto [command, rest] = Split(msg.data());
  if (command == "echo") {
    socket.send(rest);
  } else if (command == "binary") {
    socket.send_binary(rest);
  } else if (command == "tag") {
    socket.send(socket.tag(rest) ? "tag 1" : "tag 0");
  } else if (command == "tags") {
    std::string out = "tags";
    for (const std::string& t : socket.tags().value_or(std::vector<std::string>{})) out += " " + t;
    socket.send(out);
  } else if (command == "has") {
    socket.send(socket.has_tag(rest) ? "has 1" : "has 0");
  } else if (command == "list") {
    socket.send("list" + Ids(wasmkeep::sockets::list(rest)));
  } else if (command == "broadcast") {
    auto [tag, text] = Split(rest);
    int32_t n = wasmkeep::sockets::broadcast(tag == "-" ? std::string_view() : tag, text);
    socket.send("sent " + std::to_string(n));
  } else if (command == "to") {
    auto [id, text] = Split(rest);
    bool queued = wasmkeep::Socket(wasmkeep::parse_int64(id).value_or(-1)).send(text);
    socket.send(queued ? "to 1" : "to 0");
  } else if (command == "close") {
    auto [code, reason] = Split(rest);
    socket.close(static_cast<int32_t>(wasmkeep::parse_int64(code).value_or(1000)), reason);
  } else if (command == "fail") {
    return 1;
  } else if (command == "c") {
    size_t len = 0, count = 0, tags_len = 0;
    char* data = wk_socket_event_data_dup(&len);
    int64_t* ids = wk_socket_list_dup("", 0, &count);
    char* tags = wk_socket_tags_dup(wk_socket_event_id(), &tags_len);
    std::string out = "c " + std::string(data, len) + " " + std::to_string(count) + " " +
                      (tags ? std::string(tags, tags_len) : std::string("-"));
    wk_socket_send_str(wk_socket_event_id(), out.c_str());
    free(data);
    free(ids);
    free(tags);
  }
  return 0;
}

void OnClose(wasmkeep::Socket socket, const wasmkeep::SocketClose& close) {
  wasmkeep::storage::put("closed/" + std::to_string(socket.id()), std::to_string(close.code()) + " " + close.reason());
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.path() == "/closed") {
    std::string out;
    for (const auto& [key, value] : wasmkeep::storage::list({.prefix = "closed/"})) {
      out += key.substr(7) + " " + value + "\n";
    }
    return (void)res.text(200, out);
  }
  if (req.path() == "/list") {
    std::string out;
    for (const wasmkeep::Socket& s : wasmkeep::sockets::list(req.query_param("tag").value_or(""))) {
      out += std::to_string(s.id()) + "\n";
    }
    return (void)res.text(200, out);
  }
  if (req.path() == "/broadcast" && req.method() == "POST") {
    int32_t n = wasmkeep::sockets::broadcast(req.query_param("tag").value_or(""), req.body());
    return (void)res.text(200, std::to_string(n) + "\n");
  }
  if (req.path() == "/event") {
    return (void)res.text(200, std::to_string(wk_socket_event_id()) + " " + std::to_string(wk_socket_event_kind()) +
                                   " " + std::to_string(wk_socket_event_data()) + "\n");
  }
  res.text(404, "no such probe\n");
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
WASMKEEP_SOCKET_OPEN_HANDLER(OnOpen)
WASMKEEP_SOCKET_MESSAGE_HANDLER(OnMessage)
WASMKEEP_SOCKET_CLOSE_HANDLER(OnClose)
