// WebSockets as an actor sees them (docs/websockets.md, docs/abi.md "WebSockets"): the
// socket events (open, message, close), the connections an event sees (SocketSet), what an
// event asks for (SocketAction: sends, broadcasts, closes, released only through the output
// gate; tags, kept once its handler succeeded) and SocketEventState, the bookkeeping of one
// event's socket calls with every check the ABI makes. SocketDirectory is what holds the
// connections for the runtime (routing/socket_hub.h on a node).
//
// Threading: SocketSet is immutable once published (events on worker threads read it);
// SocketEventState belongs to one event; SocketDirectory is called on the Env loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actor/types.h"
#include "base/ids.h"
#include "base/status.h"

namespace wk::actor {

using ::wk::ActorId;

// Per connection (docs/abi.md): tags are for finding connections, not for data.
inline constexpr std::size_t kMaxSocketTags = 8;
inline constexpr std::size_t kMaxSocketTagBytes = 64;
inline constexpr std::size_t kMaxSocketCloseReasonBytes = 123;

// The [websockets] settings one event's calls are checked against (docs/configuration.md).
struct SocketLimits {
  std::size_t max_message_bytes = 64 * 1024;
  // Bytes one event may queue: each message's bytes (a broadcast's once) and 8 bytes for each
  // recipient of a broadcast, all held in memory until the event's batch is durable.
  std::size_t max_event_send_bytes = 16 * 1024 * 1024;
  // Sends, broadcasts and closes of one event.
  std::size_t max_event_sends = 100'000;
};

struct SocketInfo {
  std::int64_t id = 0;
  std::vector<std::string> tags;
};

// One actor's open connections, in opening order (ids increase with it), as published by
// the SocketDirectory.
struct SocketSet {
  std::vector<SocketInfo> sockets;
  // The connection with this id, or null (binary search: ids are in increasing order).
  const SocketInfo* Find(std::int64_t id) const;
};

enum class SocketEventKind : std::uint8_t { kOpen, kMessage, kClose };
std::string_view SocketEventKindName(SocketEventKind kind);

struct SocketEvent {
  SocketEventKind kind = SocketEventKind::kMessage;
  std::int64_t id = 0;
  // kOpen: the opening handshake as the actor sees it (GET, path, query, headers; no body).
  Request handshake;
  // kMessage: the message; kClose: the close reason.
  bool binary = false;
  std::string data;
  // kClose: the code received (1005: none in the close frame; 1006: no close frame).
  int code = 0;
};

// One event's socket calls (the ABI's socket_* functions, docs/abi.md), checked as the ABI
// documents: a call that is the module's fault returns an error naming the value or setting
// (it fails the event). `view` may be null (the actor has no connection).
class SocketEventState {
 public:
  SocketEventState(std::shared_ptr<const SocketSet> view, const SocketLimits& limits, const SocketEvent* event);

  // 1 queued, 0 not one of the actor's open connections.
  Result<int> Send(std::int64_t id, std::string_view data, bool binary);
  // How many connections it goes to (as the event sees them).
  Result<int> Broadcast(std::string_view tag, std::string_view data, bool binary);
  Result<int> Close(std::int64_t id, int code, std::string_view reason);
  Result<int> Tag(std::int64_t id, std::string_view tag);
  // Ids with the tag ("" = all), in opening order.
  Result<std::vector<std::int64_t>> List(std::string_view tag) const;
  // The tags of `id`, or nullopt if it is not one of the actor's open connections.
  std::optional<std::vector<std::string>> Tags(std::int64_t id) const;

  const SocketEvent* event() const { return event_; }
  SocketEffects TakeEffects() { return std::move(effects_); }

 private:
  bool IsOpen(std::int64_t id) const;
  // The event's own tags added to `id` (beyond the view's).
  std::vector<std::string> TagsOf(std::int64_t id) const;
  Status CountSend(std::size_t bytes, std::string_view fn, std::size_t recipients = 0);

  std::shared_ptr<const SocketSet> view_;
  SocketLimits limits_;
  const SocketEvent* event_;
  SocketEffects effects_;
  std::size_t send_bytes_ = 0;
  std::size_t sends_ = 0;
  std::vector<std::int64_t> closed_;  // closed by this event: not open for its later calls
};

// Holds the connections the runtime's actors see (routing/socket_hub.h). Called on the loop.
class SocketDirectory {
 public:
  virtual ~SocketDirectory() = default;
  // The actor's open connections as of now, for an event being dispatched; null if none.
  virtual std::shared_ptr<const SocketSet> View(const ActorId& id) = 0;
  // An event's handler succeeded: keep its tags (before its next event is dispatched).
  virtual void Tagged(const ActorId& id, std::vector<SocketTagged> tags) = 0;
  // An event's answer was released (its batch durable under a valid hold): carry out its
  // sends, broadcasts and closes, in order.
  virtual void Release(const ActorId& id, std::vector<SocketAction> actions) = 0;
  // What the connections hold of the node's memory now (counted in the runtime's budget);
  // may be up to a second old.
  virtual std::uint64_t MemoryBytes() = 0;
};

// Whether a tag is 1..kMaxSocketTagBytes bytes without '\n'; the error names it.
Status CheckSocketTag(std::string_view tag, std::string_view fn);

}  // namespace wk::actor
