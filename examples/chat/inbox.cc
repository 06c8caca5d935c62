// chat inbox: one per member (acme/inbox/ann), filled by the rooms the member joined
// (examples/chat/room.cc) through messages between actors (docs/sdk.md, "Messages between actors").
//
//   GET /messages?since=N    the messages numbered above N (default 0), oldest first, one per
//                            line as "<number>\t<room>\t<post number>\t<from>\t<text>\n",
//                            <room> the sending room's full name (acme/room/lobby); at most
//                            200 per answer
//
// wk_on_message appends each message it gets as the inbox's next one. The append and the
// record that the message was applied commit in one batch, so a post reaches an inbox once
// however often delivery is retried, and a room's posts appear in the order it sent them.
// Only messages from room actors are kept; anything else is applied as a no-op (failing it
// would only retry it until it is parked as dead).
//
// Keys: "last" (the newest message's number), "msg/<number, 20 digits>".
#include <string>
#include <string_view>

#include "wasmkeep.hpp"

namespace {

constexpr std::string_view kLast = "last";
constexpr std::string_view kMsg = "msg/";
constexpr int32_t kMaxMessagesPerResponse = 200;

std::string MessageKey(int64_t number) {
  std::string digits = std::to_string(number);
  return std::string(kMsg) + std::string(20 - digits.size(), '0') + digits;
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.path() != "/messages") return (void)res.text(404, "use GET /messages?since=N\n");
  if (req.method() != "GET") {
    res.header("Allow", "GET");
    return (void)res.text(405, "method not allowed\n");
  }
  std::optional<int64_t> since = wasmkeep::parse_int64(req.query_param("since").value_or("0"));
  if (!since || *since < 0) return (void)res.text(400, "since must be a number >= 0\n");
  std::string out;
  if (*since < INT64_MAX) {
    wasmkeep::storage::ListOptions options;
    options.start = MessageKey(*since + 1);
    options.end = wasmkeep::storage::prefix_end(kMsg);
    options.limit = kMaxMessagesPerResponse;
    for (const auto& [key, value] : wasmkeep::storage::list(options)) {
      out += std::to_string(wasmkeep::parse_int64(std::string_view(key).substr(kMsg.size())).value_or(0));
      out += '\t';
      out += value;
      out += '\n';
    }
  }
  res.text(200, out);
}

// True if name is "<tenant>/room/<room>".
bool FromARoom(std::string_view name) {
  const size_t slash = name.find('/');
  return slash != std::string_view::npos && name.substr(slash + 1).starts_with("room/");
}

void OnMessage(const wasmkeep::Message& msg) {
  if (!FromARoom(msg.sender())) {
    wasmkeep::log::warn("inbox: a message from " + msg.sender() + ", not a room: dropped");
    return;
  }
  const int64_t number = wasmkeep::storage::get_int64(kLast).value_or(0) + 1;
  wasmkeep::storage::put_int64(kLast, number);
  wasmkeep::storage::put(MessageKey(number), msg.sender() + "\t" + msg.body());
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
WASMKEEP_MESSAGE_HANDLER(OnMessage)
