// chat: a chat room per actor; messages are numbered 1, 2, 3, ... in the order they arrive.
//
//   POST /messages           appends the body as the next message; answers its number ("3\n")
//   GET  /messages?since=N   the messages numbered above N (default 0), oldest first, one per
//                            line as "<number>\t<text>\n"; at most kMaxMessagesPerResponse of
//                            them, so a client polls again with since=<last number it got>
//   WebSocket /ws[?since=N]  a live room (examples/chat/README.md, "WebSocket room"): each
//                            WebSocket message is one line without its "\n": the history
//                            first, then every new message as it is stored, "<number>\t<text>"
//                            (binary when the text is not UTF-8, which only POST can store),
//                            whether it came over a WebSocket or a POST; a text message from
//                            the client is posted as POST /messages would post it; a refused
//                            one is answered to its sender only, as "error\t<reason>"
//
// Storage layout: "last" holds the number of the newest message (decimal text); message N
// lives under "msg/" + N zero-padded to 20 digits, so key order is message order and a range
// listing from "msg/<N+1>" reads the messages after N. The append reads "last", writes the
// message and "last" in one event: one atomic batch, so numbers never repeat or skip. The
// WebSocket members are the connections tagged "member"; the room keeps nothing about them in
// globals or storage (the node holds the connections and their tags, across hibernation).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wasmkeep.hpp"

namespace {

constexpr std::string_view kLastKey = "last";
constexpr std::string_view kMessagePrefix = "msg/";
// One message is one line of the answer, at most "<20 digits>\t<text>\n". Both bounds
// together keep a full page inside the node's default max_response_bytes (1 MiB).
constexpr size_t kMaxMessageBytes = 4000;
constexpr int32_t kMaxMessagesPerResponse = 200;
static_assert(kMaxMessagesPerResponse * (kMaxMessageBytes + 22) <= 1024 * 1024,
              "a full page of messages must fit in the default max_response_bytes");

// The WebSocket room. Every open connection carries the tag kMemberTag; a new message is
// broadcast to the tag. A connection opened without ?since= gets the newest kHistory
// messages first; one opened with ?since=N gets those after N, at most kMaxCatchUp of them,
// and when more follow, it is closed with kCloseMoreHistory after them, so the client
// reconnects with since=<the last it got> and gets the next ones.
constexpr std::string_view kMemberTag = "member";
constexpr int32_t kHistory = 50;
constexpr int32_t kMaxCatchUp = 100;
constexpr int32_t kCloseMoreHistory = 4000;
// What one open event queues stays well inside a connection's send queue
// (websockets.max_send_queue_bytes, 1 MiB by default: src/net/websocket.h), which closes a
// connection whose queue goes past it.
static_assert(kMaxCatchUp * (kMaxMessageBytes + 21) <= 512 * 1024 && kHistory <= kMaxCatchUp,
              "a history must stay well inside the default send queue of a connection");

// "msg/00000000000000000042" for 42 (20 digits hold every int64).
std::string MessageKey(int64_t number) {
  std::string digits = std::to_string(number);
  return std::string(kMessagePrefix) + std::string(20 - digits.size(), '0') + digits;
}

// 42 for "msg/00000000000000000042".
int64_t KeyNumber(std::string_view key) {
  return wasmkeep::parse_int64(key.substr(kMessagePrefix.size())).value_or(0);
}

// "42\thello": a message as one line, without the "\n".
std::string Line(int64_t number, std::string_view text) {
  std::string line = std::to_string(number);
  line += '\t';
  line += text;
  return line;
}

// A message goes to WebSockets as a text message when it is UTF-8, as every message a
// WebSocket posts is; one that POST stored with other bytes goes as a binary message holding
// the same line, since a client closes a connection whose text is not UTF-8.
bool SendsAsBinary(std::string_view text) { return !wasmkeep::is_utf8(text); }

// Why a message is refused (with the HTTP status POST answers), or nullopt if it is fine.
// Both ways in refuse the same messages with the same reason.
struct Refusal {
  int status;
  std::string_view reason;
};
std::optional<Refusal> Check(std::string_view text) {
  if (text.empty()) return Refusal{400, "empty message"};
  if (text.size() > kMaxMessageBytes) return Refusal{413, "message over 4000 bytes"};
  if (text.find_first_of("\r\n") != std::string_view::npos) {
    return Refusal{400, "a message is one line (no CR or LF)"};
  }
  return std::nullopt;
}

// Stores text as the next message and sends it to every member; returns its number. The
// sends leave once the event's writes are durable, so a member never sees a message that
// could still be lost.
int64_t Store(std::string_view text) {
  int64_t number = wasmkeep::storage::get_int64(kLastKey).value_or(0) + 1;
  wasmkeep::storage::put(MessageKey(number), text);
  wasmkeep::storage::put_int64(kLastKey, number);
  wasmkeep::sockets::broadcast(kMemberTag, Line(number, text), SendsAsBinary(text));
  return number;
}

// The `since` query parameter: false if it is there but not a whole number >= 0.
bool ParseSince(const wasmkeep::Request& req, std::optional<int64_t>& since) {
  std::optional<std::string> text = req.query_param("since");
  if (!text) return true;
  std::optional<int64_t> parsed = wasmkeep::parse_int64(*text);
  if (!parsed || *parsed < 0) return false;
  since = parsed;
  return true;
}

// Up to `limit` messages after `since`, oldest first (nothing after INT64_MAX).
std::vector<std::pair<std::string, std::string>> MessagesAfter(int64_t since, int32_t limit) {
  if (since == INT64_MAX) return {};
  wasmkeep::storage::ListOptions options;
  options.start = MessageKey(since + 1);
  options.end = wasmkeep::storage::prefix_end(kMessagePrefix);
  options.limit = limit;
  return wasmkeep::storage::list(options);
}

void Append(const wasmkeep::Request& req, wasmkeep::Response& res) {
  const std::string& text = req.body();
  if (std::optional<Refusal> refusal = Check(text)) {
    return (void)res.text(refusal->status, std::string(refusal->reason) + "\n");
  }
  res.text(200, std::to_string(Store(text)) + "\n");
}

void Read(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::optional<int64_t> since;
  if (!ParseSince(req, since)) return (void)res.text(400, "since must be a number >= 0\n");
  std::string answer;
  for (const auto& [key, text] : MessagesAfter(since.value_or(0), kMaxMessagesPerResponse)) {
    answer += Line(KeyNumber(key), text);
    answer += '\n';
  }
  res.text(200, answer);
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.path() != "/messages") return (void)res.text(404, "use /messages\n");
  if (req.method() == "POST") return Append(req, res);
  if (req.method() == "GET") return Read(req, res);
  res.header("Allow", "GET, POST");
  res.text(405, "method not allowed\n");
}

// A client opens /ws: refused unless the path is /ws and since (if any) is a number; else it
// becomes a member and gets the history.
void OnOpen(wasmkeep::Socket socket, const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.path() != "/ws") return (void)res.text(404, "use /ws\n");
  std::optional<int64_t> since;
  if (!ParseSince(req, since)) return (void)res.text(400, "since must be a number >= 0\n");
  std::vector<std::pair<std::string, std::string>> history;
  bool more = false;
  if (since) {
    history = MessagesAfter(*since, kMaxCatchUp + 1);
    more = history.size() > static_cast<size_t>(kMaxCatchUp);
    if (more) history.pop_back();
  } else {
    wasmkeep::storage::ListOptions newest;
    newest.prefix = std::string(kMessagePrefix);
    newest.limit = kHistory;
    newest.reverse = true;
    history = wasmkeep::storage::list(newest);
    std::reverse(history.begin(), history.end());
  }
  for (const auto& [key, text] : history) {
    std::string line = Line(KeyNumber(key), text);
    if (SendsAsBinary(text)) {
      socket.send_binary(line);
    } else {
      socket.send(line);
    }
  }
  if (more) {
    // Sent after the history; the client reconnects for the rest.
    int64_t last_sent = KeyNumber(history.back().first);
    socket.close(kCloseMoreHistory, "more history: reconnect with since=" + std::to_string(last_sent));
    return;
  }
  socket.tag(kMemberTag);
}

// A member's message: posted as POST /messages posts it (so it reaches every member, the
// sender too), or refused to the sender alone.
void OnMessage(wasmkeep::Socket socket, const wasmkeep::SocketMessage& msg) {
  if (!msg.is_text()) return (void)socket.send("error\tbinary messages are not accepted (send text)");
  if (std::optional<Refusal> refusal = Check(msg.data())) {
    return (void)socket.send("error\t" + std::string(refusal->reason));
  }
  Store(msg.data());
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
WASMKEEP_SOCKET_OPEN_HANDLER(OnOpen)
WASMKEEP_SOCKET_MESSAGE_HANDLER(OnMessage)
