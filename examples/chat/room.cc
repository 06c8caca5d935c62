// chat room with fan-out: a room per actor (acme/room/lobby) whose members each have an
// inbox actor (acme/inbox/<member>, examples/chat/inbox.cc). A post is stored in the room
// and sent as a message to every member's inbox (docs/sdk.md, "Messages between actors").
//
//   POST /join?member=M      adds M to the room (again: no change); 409 past kMaxMembers
//   POST /leave?member=M     removes M; 404 if M is not a member
//   GET  /members            the members, one per line, in byte order
//   POST /post?from=M        stores the body as the next post and sends it to every member's
//                            inbox; answers "<number> <members reached>\n"
//   GET  /posts?since=N      the posts numbered above N, "<number>\t<from>\t<text>\n" each
//
// The post and its messages are one event's batch: a post is stored if and only if every
// inbox will get it, each exactly once, and an inbox receives a room's posts in post order
// (messages from one sender to one receiver take effect in send order). The message body is
// "<number>\t<from>\t<text>"; the inbox knows which room from the message's sender.
//
// Keys: "member/<name>" (empty value), "last" (the newest post's number), "post/<number, 20
// digits>" ("<from>\t<text>").
#include <string>
#include <string_view>

#include "wasmkeep.hpp"

namespace {

constexpr std::string_view kMember = "member/";
constexpr std::string_view kPost = "post/";
constexpr std::string_view kLast = "last";
// One post sends one message per member, and one event may send at most
// actors.max_messages_per_event messages (64 by default): the room stays within it.
constexpr size_t kMaxMembers = 64;
constexpr size_t kMaxPostBytes = 4000;
constexpr int32_t kMaxPostsPerResponse = 200;

std::string PostKey(int64_t number) {
  std::string digits = std::to_string(number);
  return std::string(kPost) + std::string(20 - digits.size(), '0') + digits;
}

// A member name: 1 to 64 letters, digits, '-', '_', '.' (it becomes part of an actor name).
bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string> Members() {
  std::vector<std::string> out;
  for (const auto& [key, value] : wasmkeep::storage::list({.prefix = std::string(kMember)})) {
    out.push_back(key.substr(kMember.size()));
  }
  return out;
}

std::optional<std::string> MemberParam(const wasmkeep::Request& req, wasmkeep::Response& res, const char* name) {
  std::optional<std::string> member = req.query_param(name);
  if (!member || !ValidName(*member)) {
    res.text(400, std::string(name) + " must be a name of letters, digits, - _ . (1 to 64)\n");
    return std::nullopt;
  }
  return member;
}

void Join(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::optional<std::string> member = MemberParam(req, res, "member");
  if (!member) return;
  const std::string key = std::string(kMember) + *member;
  if (wasmkeep::storage::get(key)) return (void)res.text(200, "already a member\n");
  if (Members().size() >= kMaxMembers) return (void)res.text(409, "the room is full (64 members)\n");
  wasmkeep::storage::put(key, "");
  res.text(200, "joined\n");
}

void Leave(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::optional<std::string> member = MemberParam(req, res, "member");
  if (!member) return;
  if (!wasmkeep::storage::del(std::string(kMember) + *member)) return (void)res.text(404, "not a member\n");
  res.text(200, "left\n");
}

void Post(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::optional<std::string> from = MemberParam(req, res, "from");
  if (!from) return;
  const std::string& text = req.body();
  if (text.empty() || text.find_first_of("\r\n") != std::string::npos) {
    return (void)res.text(400, "a post is one line of text (not empty, no CR or LF)\n");
  }
  if (text.size() > kMaxPostBytes) return (void)res.text(413, "post over 4000 bytes\n");
  const int64_t number = wasmkeep::storage::get_int64(kLast).value_or(0) + 1;
  wasmkeep::storage::put_int64(kLast, number);
  wasmkeep::storage::put(PostKey(number), *from + "\t" + text);
  const std::string body = std::to_string(number) + "\t" + *from + "\t" + text;
  const std::vector<std::string> members = Members();
  for (const std::string& member : members) wasmkeep::send("inbox/" + member, body);
  res.text(200, std::to_string(number) + " " + std::to_string(members.size()) + "\n");
}

void Posts(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::optional<int64_t> since = wasmkeep::parse_int64(req.query_param("since").value_or("0"));
  if (!since || *since < 0) return (void)res.text(400, "since must be a number >= 0\n");
  std::string out;
  if (*since < INT64_MAX) {
    wasmkeep::storage::ListOptions options;
    options.start = PostKey(*since + 1);
    options.end = wasmkeep::storage::prefix_end(kPost);
    options.limit = kMaxPostsPerResponse;
    for (const auto& [key, value] : wasmkeep::storage::list(options)) {
      out += std::to_string(wasmkeep::parse_int64(std::string_view(key).substr(kPost.size())).value_or(0));
      out += '\t';
      out += value;
      out += '\n';
    }
  }
  res.text(200, out);
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  const std::string& path = req.path();
  const bool get = path == "/members" || path == "/posts";
  const bool post = path == "/join" || path == "/leave" || path == "/post";
  if (!get && !post) return (void)res.text(404, "use POST /join, /leave, /post; GET /members, /posts\n");
  if (req.method() != (get ? "GET" : "POST")) {
    res.header("Allow", get ? "GET" : "POST");
    return (void)res.text(405, "method not allowed\n");
  }
  if (path == "/join") return Join(req, res);
  if (path == "/leave") return Leave(req, res);
  if (path == "/post") return Post(req, res);
  if (path == "/posts") return Posts(req, res);
  std::string out;
  for (const std::string& member : Members()) out += member + "\n";
  res.text(200, out);
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
