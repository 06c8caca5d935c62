// chat: a chat room per actor; messages are numbered 1, 2, 3, ... in the order they arrive.
//
//   POST /messages           appends the body as the next message; answers its number ("3\n")
//   GET  /messages?since=N   the messages numbered above N (default 0), oldest first, one per
//                            line as "<number>\t<text>\n"; at most kMaxMessagesPerResponse of
//                            them, so a client polls again with since=<last number it got>
//
// Storage layout: "last" holds the number of the newest message (decimal text); message N
// lives under "msg/" + N zero-padded to 20 digits, so key order is message order and a range
// listing from "msg/<N+1>" reads the messages after N. The append reads "last", writes the
// message and "last" in one event: one atomic batch, so numbers never repeat or skip.
#include <string>
#include <string_view>

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

// "msg/00000000000000000042" for 42 (20 digits hold every int64).
std::string MessageKey(int64_t number) {
  std::string digits = std::to_string(number);
  return std::string(kMessagePrefix) + std::string(20 - digits.size(), '0') + digits;
}

void Append(const wasmkeep::Request& req, wasmkeep::Response& res) {
  const std::string& text = req.body();
  if (text.empty()) return (void)res.text(400, "empty message\n");
  if (text.size() > kMaxMessageBytes) return (void)res.text(413, "message over 4000 bytes\n");
  if (text.find_first_of("\r\n") != std::string::npos) {
    return (void)res.text(400, "a message is one line (no CR or LF)\n");
  }
  int64_t number = wasmkeep::storage::get_int64(kLastKey).value_or(0) + 1;
  wasmkeep::storage::put(MessageKey(number), text);
  wasmkeep::storage::put_int64(kLastKey, number);
  res.text(200, std::to_string(number) + "\n");
}

void Read(const wasmkeep::Request& req, wasmkeep::Response& res) {
  int64_t since = 0;
  if (std::optional<std::string> text = req.query_param("since")) {
    std::optional<int64_t> parsed = wasmkeep::parse_int64(*text);
    if (!parsed || *parsed < 0) return (void)res.text(400, "since must be a number >= 0\n");
    since = *parsed;
  }
  std::string answer;
  if (since < INT64_MAX) {
    wasmkeep::storage::ListOptions options;
    options.start = MessageKey(since + 1);
    options.end = wasmkeep::storage::prefix_end(kMessagePrefix);
    options.limit = kMaxMessagesPerResponse;
    for (const auto& [key, text] : wasmkeep::storage::list(options)) {
      std::string_view digits = std::string_view(key).substr(kMessagePrefix.size());
      answer += std::to_string(wasmkeep::parse_int64(digits).value_or(0));
      answer += '\t';
      answer += text;
      answer += '\n';
    }
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

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
