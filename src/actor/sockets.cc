#include "actor/sockets.h"

#include <algorithm>

#include <string>

namespace wk::actor {

namespace {
std::string Str(std::size_t v) { return std::to_string(v); }
std::string Str(std::int64_t v) { return std::to_string(v); }
std::string Str(int v) { return std::to_string(v); }
}  // namespace

const SocketInfo* SocketSet::Find(std::int64_t id) const {
  auto it = std::lower_bound(sockets.begin(), sockets.end(), id,
                             [](const SocketInfo& s, std::int64_t v) { return s.id < v; });
  return it != sockets.end() && it->id == id ? &*it : nullptr;
}

std::string_view SocketEventKindName(SocketEventKind kind) {
  switch (kind) {
    case SocketEventKind::kOpen: return "open";
    case SocketEventKind::kMessage: return "message";
    case SocketEventKind::kClose: return "close";
  }
  return "?";
}

Status CheckSocketTag(std::string_view tag, std::string_view fn) {
  if (tag.empty() || tag.size() > kMaxSocketTagBytes) {
    return InvalidArgument((std::string(fn) + ": a tag is 1 to " + Str(kMaxSocketTagBytes) + " bytes, not " + Str(tag.size())));
  }
  if (tag.find('\n') != std::string_view::npos) return InvalidArgument((std::string(fn) + ": a tag may not hold a newline"));
  return Status::Ok();
}

SocketEventState::SocketEventState(std::shared_ptr<const SocketSet> view, const SocketLimits& limits,
                                   const SocketEvent* event)
    : view_(std::move(view)), limits_(limits), event_(event) {}

bool SocketEventState::IsOpen(std::int64_t id) const {
  if (std::find(closed_.begin(), closed_.end(), id) != closed_.end()) return false;
  if (view_ && view_->Find(id) != nullptr) return true;
  // The connection an open event opens is in the view the hub publishes for it; a close
  // event's is gone already (nothing may be sent to it).
  return false;
}

std::vector<std::string> SocketEventState::TagsOf(std::int64_t id) const {
  std::vector<std::string> out;
  if (view_) {
    if (const SocketInfo* info = view_->Find(id)) out = info->tags;
  }
  for (const SocketTagged& t : effects_.tags) {
    if (t.id == id && std::find(out.begin(), out.end(), t.tag) == out.end()) out.push_back(t.tag);
  }
  return out;
}

Status SocketEventState::CountSend(std::size_t bytes, std::string_view fn, std::size_t recipients) {
  if (bytes > limits_.max_message_bytes) {
    return InvalidArgument((std::string(fn) + ": the message is " + Str(bytes) + " bytes, over the limit of " + Str(limits_.max_message_bytes) + " (websockets.max_message_bytes)"));
  }
  if (sends_ + 1 > limits_.max_event_sends) {
    return InvalidArgument((std::string(fn) + ": more than " + Str(limits_.max_event_sends) + " sends and closes in one event (websockets.max_event_sends)"));
  }
  // A broadcast holds its message once and its recipients' ids (as its event saw them) until
  // the batch is durable: both count.
  const std::size_t held = bytes + recipients * sizeof(std::int64_t);
  if (send_bytes_ + held > limits_.max_event_send_bytes) {
    return InvalidArgument((std::string(fn) + ": more than " + Str(limits_.max_event_send_bytes) + " bytes queued by one event, messages and broadcast recipients (websockets.max_event_send_bytes)"));
  }
  ++sends_;
  send_bytes_ += held;
  return Status::Ok();
}

Result<int> SocketEventState::Send(std::int64_t id, std::string_view data, bool binary) {
  if (Status s = CountSend(data.size(), "socket_send"); !s.ok()) return s;
  if (!IsOpen(id)) return 0;
  SocketAction a;
  a.kind = SocketAction::Kind::kSend;
  a.id = id;
  a.data = std::make_shared<const std::string>(data);
  a.binary = binary;
  effects_.actions.push_back(std::move(a));
  return 1;
}

Result<int> SocketEventState::Broadcast(std::string_view tag, std::string_view data, bool binary) {
  if (!tag.empty()) {
    if (Status s = CheckSocketTag(tag, "socket_broadcast"); !s.ok()) return s;
  }
  auto ids = List(tag);
  if (!ids.ok()) return ids.status();
  if (Status s = CountSend(data.size(), "socket_broadcast", ids->size()); !s.ok()) return s;
  if (ids->empty()) return 0;
  SocketAction a;
  a.kind = SocketAction::Kind::kBroadcast;
  a.tag = std::string(tag);
  a.data = std::make_shared<const std::string>(data);
  a.binary = binary;
  const int count = static_cast<int>(ids->size());
  a.ids = std::move(*ids);
  effects_.actions.push_back(std::move(a));
  return count;
}

Result<int> SocketEventState::Close(std::int64_t id, int code, std::string_view reason) {
  if (code != 1000 && (code < 3000 || code > 4999)) {
    return InvalidArgument((std::string("socket_close: code ") + Str(code) + " is not 1000 or 3000..4999"));
  }
  if (reason.size() > kMaxSocketCloseReasonBytes) {
    return InvalidArgument(
        (std::string("socket_close: the reason is ") + Str(reason.size()) + " bytes, over the limit of " + Str(kMaxSocketCloseReasonBytes)));
  }
  if (Status s = CountSend(0, "socket_close"); !s.ok()) return s;
  if (!IsOpen(id)) return 0;
  SocketAction a;
  a.kind = SocketAction::Kind::kClose;
  a.id = id;
  a.code = code;
  a.reason = std::string(reason);
  effects_.actions.push_back(std::move(a));
  closed_.push_back(id);
  return 1;
}

Result<int> SocketEventState::Tag(std::int64_t id, std::string_view tag) {
  if (Status s = CheckSocketTag(tag, "socket_tag"); !s.ok()) return s;
  if (!IsOpen(id)) return 0;
  std::vector<std::string> tags = TagsOf(id);
  if (std::find(tags.begin(), tags.end(), tag) != tags.end()) return 1;
  if (tags.size() >= kMaxSocketTags) {
    return InvalidArgument((std::string("socket_tag: connection ") + Str(id) + " has " + Str(kMaxSocketTags) + " tags already, the most it may have"));
  }
  effects_.tags.push_back(SocketTagged{id, std::string(tag)});
  return 1;
}

Result<std::vector<std::int64_t>> SocketEventState::List(std::string_view tag) const {
  if (!tag.empty()) {
    if (Status s = CheckSocketTag(tag, "socket_list"); !s.ok()) return s;
  }
  std::vector<std::int64_t> out;
  if (!view_) return out;
  for (const SocketInfo& info : view_->sockets) {
    if (std::find(closed_.begin(), closed_.end(), info.id) != closed_.end()) continue;
    if (tag.empty()) {
      out.push_back(info.id);
      continue;
    }
    bool has = std::find(info.tags.begin(), info.tags.end(), tag) != info.tags.end();
    if (!has) {
      for (const SocketTagged& t : effects_.tags) has = has || (t.id == info.id && t.tag == tag);
    }
    if (has) out.push_back(info.id);
  }
  return out;
}

std::optional<std::vector<std::string>> SocketEventState::Tags(std::int64_t id) const {
  if (!IsOpen(id)) return std::nullopt;
  return TagsOf(id);
}

}  // namespace wk::actor
