// SocketHub: the WebSockets a node holds for the actors it owns (docs/websockets.md). The
// connections belong to the node, not to an actor's instance: an actor leaves memory
// (hibernation, eviction) with its connections open, and a message on one starts it again
// from its durable state. The hub
//   - reserves a connection for an opening handshake within the bounds (per actor, per node)
//     and puts it in the actor's view at once, so the open event sees it;
//   - runs each message and close as a socket event of its actor (RunEvent: routed as a
//     request is, so a connection whose actor is now held elsewhere is closed with 1012),
//     one message per connection at a time and at most kMaxEventsInFlight per actor, the
//     others waiting here, in arrival order (the clients wait on TCP meanwhile);
//   - is the runtime's SocketDirectory: events see the actor's connections (View), their
//     tags are kept (Tagged), and what they send and close goes out only once released
//     through the output gate (Release);
//   - closes every connection of an actor with 1012 when its hold here ends (HoldEnded:
//     drain, move, failover, lease loss), so clients reconnect and reach the new owner.
//
// Threading: the Env loop thread only. Simulator-clean: connections are WebSocketPeer
// interfaces (net/websocket.h), events go through RunEvent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "actor/sockets.h"
#include "actor/types.h"
#include "base/broken_models.h"
#include "base/ids.h"
#include "base/metrics.h"
#include "base/status.h"
#include "env/env.h"
#include "net/http_types.h"
#include "net/websocket.h"

namespace wk {

struct SocketHubOptions {
  // The bounds of each connection (the server enforces them).
  WebSocketLimits connection;
  // Connections one actor may have open on the node; one more is closed at once with 1013.
  std::size_t max_connections_per_actor = 10'000;
  // Connections the node may hold for all its actors together (each is a file descriptor
  // and its buffers); one more is closed at once with 1013.
  std::size_t max_connections = 50'000;
  // ws-broadcast-at-release (base/broken_models.h) breaks how a broadcast finds its recipients.
  BrokenModels broken;
};

struct SocketHubStats {
  std::uint64_t opened = 0;         // handshakes accepted (101 sent)
  std::uint64_t refused = 0;        // handshakes refused by the actor or a failed open event
  std::uint64_t over_limit = 0;     // closed at once: max_connections_per_actor or max_connections
  std::uint64_t closed = 0;         // connections ended, for any reason
  std::uint64_t closed_moved = 0;   // of those, closed with 1012 (the actor's owner changed)
  std::uint64_t messages_in = 0;    // messages run as events
  std::uint64_t messages_out = 0;   // messages queued to clients (a broadcast counts each one)
  std::uint64_t events_failed = 0;  // message events that failed (connection closed with 1011)
  std::uint64_t events_retried = 0; // message events retried after an overloaded actor
  std::uint64_t send_dropped = 0;   // sends to a connection that had closed (or whose queue was full)
};

class SocketHub final : public actor::SocketDirectory {
 public:
  // Runs a socket event for the actor where it is held: the event's result, or nullopt if
  // another node holds the actor now (the connection is then closed with 1012).
  using RunEvent = std::function<Task<std::optional<actor::EventResult>>(ActorId, actor::SocketEvent)>;
  // The largest part of the connection ids that is random: ids are the node's random 21 bits
  // then a 32-bit count, so they stay exact in a double (2^53) for browser code.
  static constexpr int kIdCounterBits = 32;
  // Message events of one actor handed to the runtime at once (it queues 64 at most,
  // actors.max_queued_events, and requests need room too).
  static constexpr std::size_t kMaxEventsInFlight = 16;
  // Bytes the hub keeps per connection besides what the server's session holds (its entry,
  // tags, the view's copy), charged to the memory budget with the sessions' own figures.
  static constexpr std::size_t kBookkeepingBytesPerConnection = 256;

  SocketHub(Env& env, SocketHubOptions options);
  ~SocketHub() override;
  SocketHub(const SocketHub&) = delete;
  SocketHub& operator=(const SocketHub&) = delete;

  // Set once, before any connection (the front is made after the hub).
  void SetRunEvent(RunEvent run) { run_ = std::move(run); }

  // An opening handshake for `actor`: a new connection id, in the actor's view at once.
  // kRetryable (naming the setting) past a bound.
  Result<std::int64_t> Reserve(const ActorId& actor);
  // The open event accepted connection `id`: the 101 response that upgrades it. `headers`
  // go in the 101 (Sec-WebSocket-Protocol). What was released to the connection before the
  // 101 is written is sent first.
  ServerResponse Accept(const ActorId& actor, std::int64_t id, ServerHeaders headers);
  // The open was refused or failed: the connection is forgotten (no close event runs).
  void Abort(const ActorId& actor, std::int64_t id);
  // Closes every connection of the actor (1012 when its owner changed); no-op if none.
  void CloseActor(const ActorId& actor, int code, const std::string& reason);
  // Closes every connection (the node stops).
  void CloseAll(int code, const std::string& reason);

  // actor::SocketDirectory
  std::shared_ptr<const actor::SocketSet> View(const ActorId& id) override;
  void Tagged(const ActorId& id, std::vector<actor::SocketTagged> tags) override;
  void Release(const ActorId& id, std::vector<actor::SocketAction> actions) override;
  std::uint64_t MemoryBytes() override;

  bool HasConnections(const ActorId& actor) const { return actors_.contains(actor.ToString()); }
  // A 101 whose connection is closed at once with code and reason: a refusal a browser can
  // read (it sees no HTTP status of a failed handshake).
  ServerResponse RefuseWithClose(int code, std::string reason) const;
  std::size_t open_connections() const { return total_; }
  std::size_t actors_with_connections() const { return actors_.size(); }
  const SocketHubStats& stats() const { return stats_; }

 private:
  struct Conn;
  struct ActorSockets;
  class Handler;

  ActorSockets* Find(const ActorId& actor);
  Conn* FindConn(const ActorId& actor, std::int64_t id);
  void Attach(const ActorId& actor, std::int64_t id, std::shared_ptr<WebSocketPeer> peer);
  // The connection ended (the server's OnClosed, or it never came up): forget it, run the
  // actor's close event (if it was accepted).
  void Ended(const ActorId& actor, std::int64_t id, int code, std::string reason, bool run_close_event);
  void Forget(ActorSockets& sockets, const ActorId& actor, std::int64_t id);
  void SendTo(Conn& conn, const std::shared_ptr<const std::string>& data, bool binary);
  void CloseConn(Conn& conn, int code, const std::string& reason);
  Task<void> RunMessage(ActorId actor, std::int64_t id, bool binary, std::string data);
  Task<void> RunMessageEvent(ActorId actor, std::int64_t id, bool binary, std::string data);
  Task<void> RunClose(ActorId actor, std::int64_t id, int code, std::string reason);
  // Waits for a turn among the actor's kMaxEventsInFlight; false if the hub is going away.
  Task<bool> TakeTurn(const ActorId& actor);
  void EndTurn(const ActorId& actor);

  Env& env_;
  SocketHubOptions options_;
  RunEvent run_;
  std::uint64_t id_prefix_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::string, std::unique_ptr<ActorSockets>> actors_;  // by ActorId::ToString
  std::size_t total_ = 0;
  SocketHubStats stats_;
  std::uint64_t memory_cached_ = 0;
  MonoTime memory_at_{};
  bool memory_known_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The hub's figures (wasmkeep_websocket_*), docs/websockets.md "Metrics".
void PublishSocketHubMetrics(MetricsRegistry& registry, const SocketHub& hub);

}  // namespace wk
