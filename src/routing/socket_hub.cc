#include "routing/socket_hub.h"

#include <algorithm>
#include <utility>

#include "base/log.h"

namespace wk {

namespace {
constexpr std::string_view kMovedReason = "the actor's owner changed: reconnect";
}  // namespace

struct SocketHub::Conn {
  std::int64_t id = 0;
  std::vector<std::string> tags;
  std::shared_ptr<WebSocketPeer> peer;  // null until the 101 is written
  bool accepted = false;                // the open event accepted it (Accept was called)
  bool closing = false;                 // a close was asked (by the actor, a bound, a move)
  bool moved = false;                   // closed because the actor left this node: no close event here
  // Released before the 101 was written: sent once it is, in order.
  std::vector<std::pair<std::shared_ptr<const std::string>, bool>> before_attach;
  std::size_t before_attach_bytes = 0;
  std::optional<std::pair<int, std::string>> close_after_attach;
};

struct SocketHub::ActorSockets {
  std::map<std::int64_t, Conn> conns;  // by id: opening order
  std::shared_ptr<const actor::SocketSet> view;  // null: to build again
  std::size_t in_flight = 0;
  std::deque<Latch<bool>> waiting;
};

// One connection's events, from the server (net/websocket.h).
class SocketHub::Handler final : public WebSocketHandler {
 public:
  Handler(SocketHub* hub, std::weak_ptr<bool> alive, ActorId actor, std::int64_t id)
      : hub_(hub), alive_(std::move(alive)), actor_(std::move(actor)), id_(id) {}
  Task<void> OnMessage(bool binary, std::string data) override {
    auto alive = alive_.lock();
    if (!alive || !*alive) co_return;
    co_await hub_->RunMessage(actor_, id_, binary, std::move(data));
  }
  void OnClosed(int code, std::string reason) override {
    auto alive = alive_.lock();
    if (!alive || !*alive) return;
    hub_->Ended(actor_, id_, code, std::move(reason), true);
  }

 private:
  SocketHub* hub_;
  std::weak_ptr<bool> alive_;
  ActorId actor_;
  std::int64_t id_;
};

SocketHub::SocketHub(Env& env, SocketHubOptions options)
    : env_(env), options_(std::move(options)), id_prefix_(env.RandomU64() & ((1ull << 21) - 1)) {}

SocketHub::~SocketHub() {
  *alive_ = false;
  for (auto& [key, sockets] : actors_) {
    for (Latch<bool>& w : sockets->waiting) w.Set(false);
  }
}

SocketHub::ActorSockets* SocketHub::Find(const ActorId& actor) {
  auto it = actors_.find(actor.ToString());
  return it == actors_.end() ? nullptr : it->second.get();
}

SocketHub::Conn* SocketHub::FindConn(const ActorId& actor, std::int64_t id) {
  ActorSockets* sockets = Find(actor);
  if (sockets == nullptr) return nullptr;
  auto it = sockets->conns.find(id);
  return it == sockets->conns.end() ? nullptr : &it->second;
}

Result<std::int64_t> SocketHub::Reserve(const ActorId& actor) {
  if (total_ >= options_.max_connections) {
    ++stats_.over_limit;
    return Retryable("the node holds " + std::to_string(total_) +
                             " WebSockets, its limit (websockets.max_connections)");
  }
  auto& slot = actors_[actor.ToString()];
  if (!slot) slot = std::make_unique<ActorSockets>();
  if (slot->conns.size() >= options_.max_connections_per_actor) {
    ++stats_.over_limit;
    return Retryable("actor " + actor.ToString() + " has " + std::to_string(slot->conns.size()) +
                             " WebSockets open, its limit (websockets.max_connections_per_actor)");
  }
  const auto id = static_cast<std::int64_t>((id_prefix_ << kIdCounterBits) | (next_id_++ & 0xffffffffull));
  Conn& conn = slot->conns[id];
  conn.id = id;
  slot->view.reset();
  ++total_;
  return id;
}

ServerResponse SocketHub::Accept(const ActorId& actor, std::int64_t id, ServerHeaders headers) {
  ServerResponse r;
  Conn* conn = FindConn(actor, id);
  if (conn == nullptr) {
    // Closed meanwhile (its actor left this node while the open event ran).
    r.status = 503;
    r.headers.emplace_back("Retry-After", "1");
    r.body = std::string(kMovedReason);
    return r;
  }
  conn->accepted = true;
  auto upgrade = std::make_shared<WebSocketUpgrade>();
  upgrade->limits = options_.connection;
  upgrade->headers = std::move(headers);
  std::weak_ptr<bool> alive = alive_;
  // An upgrade dropped without attach or abandoned (a 101 lost on its way, the server gone)
  // must not leave its connection reserved for ever: the guard ends it when the last copy
  // of the upgrade goes.
  struct AttachGuard {
    std::function<void()> on_drop;
    bool done = false;
    ~AttachGuard() {
      if (!done && on_drop) on_drop();
    }
  };
  auto guard = std::make_shared<AttachGuard>();
  guard->on_drop = [this, alive, actor, id] {
    auto a = alive.lock();
    if (a && *a) Ended(actor, id, 1006, "", true);
  };
  upgrade->attach = [this, alive, actor, id, guard](std::shared_ptr<WebSocketPeer> peer) -> std::shared_ptr<WebSocketHandler> {
    guard->done = true;
    auto a = alive.lock();
    if (!a || !*a) return nullptr;
    if (FindConn(actor, id) == nullptr) {
      peer->Close(kCloseRestart, std::string(kMovedReason));
      return nullptr;
    }
    Attach(actor, id, peer);
    return std::make_shared<Handler>(this, alive, actor, id);
  };
  upgrade->abandoned = [guard] {
    guard->done = true;
    std::function<void()> drop = std::move(guard->on_drop);
    if (drop) drop();
  };
  r.status = 101;
  r.upgrade = std::move(upgrade);
  return r;
}

ServerResponse SocketHub::RefuseWithClose(int code, std::string reason) const {
  auto upgrade = std::make_shared<WebSocketUpgrade>();
  upgrade->limits = options_.connection;
  upgrade->attach = [code, reason = std::move(reason)](std::shared_ptr<WebSocketPeer> peer) {
    peer->Close(code, reason);
    return std::shared_ptr<WebSocketHandler>();
  };
  ServerResponse r;
  r.status = 101;
  r.upgrade = std::move(upgrade);
  return r;
}

void SocketHub::Attach(const ActorId& actor, std::int64_t id, std::shared_ptr<WebSocketPeer> peer) {
  Conn* conn = FindConn(actor, id);
  if (conn == nullptr) return;
  conn->peer = std::move(peer);
  ++stats_.opened;
  auto pending = std::move(conn->before_attach);
  conn->before_attach.clear();
  conn->before_attach_bytes = 0;
  // What was released before a close asked for meanwhile goes first, then the close.
  auto close = std::move(conn->close_after_attach);
  conn->close_after_attach.reset();
  conn->closing = false;
  for (auto& [data, binary] : pending) SendTo(*conn, data, binary);
  if (close) CloseConn(*conn, close->first, close->second);
}

void SocketHub::Abort(const ActorId& actor, std::int64_t id) {
  ActorSockets* sockets = Find(actor);
  if (sockets == nullptr || !sockets->conns.contains(id)) return;
  ++stats_.refused;
  Forget(*sockets, actor, id);
}

void SocketHub::Forget(ActorSockets& sockets, const ActorId& actor, std::int64_t id) {
  if (sockets.conns.erase(id) == 0) return;
  sockets.view.reset();
  --total_;
  if (sockets.conns.empty() && sockets.in_flight == 0 && sockets.waiting.empty()) actors_.erase(actor.ToString());
}

void SocketHub::Ended(const ActorId& actor, std::int64_t id, int code, std::string reason, bool run_close_event) {
  ActorSockets* sockets = Find(actor);
  if (sockets == nullptr) return;
  auto it = sockets->conns.find(id);
  if (it == sockets->conns.end()) return;
  const bool run = run_close_event && it->second.accepted && !it->second.moved;
  ++stats_.closed;
  Forget(*sockets, actor, id);
  if (run && run_) env_.Spawn(RunClose(actor, id, code, std::move(reason)), "socket close event");
}

void SocketHub::SendTo(Conn& conn, const std::shared_ptr<const std::string>& data, bool binary) {
  if (conn.closing) {  // what was released after its close (even one waiting for the 101) is dropped
    ++stats_.send_dropped;
    return;
  }
  if (!conn.peer) {
    // Released before the 101 went out: held (within the send queue's bound) until it has.
    if (conn.before_attach_bytes + data->size() > options_.connection.max_send_queue_bytes) {
      ++stats_.send_dropped;
      return;
    }
    conn.before_attach_bytes += data->size();
    conn.before_attach.emplace_back(data, binary);
    ++stats_.messages_out;
    return;
  }
  // The server copies into its queue; one copy per connection is what a frame costs anyway.
  if (conn.peer->Send(binary, *data)) {
    ++stats_.messages_out;
  } else {
    ++stats_.send_dropped;
  }
}

void SocketHub::CloseConn(Conn& conn, int code, const std::string& reason) {
  if (conn.closing) return;
  conn.closing = true;
  if (!conn.peer) {
    conn.close_after_attach = std::make_pair(code, reason);
    return;
  }
  conn.peer->Close(code, reason);
}

void SocketHub::CloseActor(const ActorId& actor, int code, const std::string& reason) {
  ActorSockets* sockets = Find(actor);
  if (sockets == nullptr) return;
  std::vector<std::int64_t> never_attached;
  for (auto& [id, conn] : sockets->conns) {
    conn.moved = conn.moved || code == kCloseRestart;
    if (code == kCloseRestart && !conn.closing) ++stats_.closed_moved;
    if (!conn.peer && !conn.accepted) never_attached.push_back(id);  // its open event still runs
    CloseConn(conn, code, reason);
  }
  // A connection whose open event is still running is forgotten now: Accept then answers
  // 503 instead of a 101 that no node would serve.
  for (std::int64_t id : never_attached) Forget(*sockets, actor, id);
}

void SocketHub::CloseAll(int code, const std::string& reason) {
  std::vector<ActorId> all;
  for (auto& [key, sockets] : actors_) {
    auto id = ParseActorId(key);
    if (id.ok()) all.push_back(std::move(*id));
  }
  for (const ActorId& a : all) CloseActor(a, code, reason);
}

std::shared_ptr<const actor::SocketSet> SocketHub::View(const ActorId& id) {
  ActorSockets* sockets = Find(id);
  if (sockets == nullptr || sockets->conns.empty()) return nullptr;
  if (!sockets->view) {
    auto set = std::make_shared<actor::SocketSet>();
    set->sockets.reserve(sockets->conns.size());
    for (const auto& [cid, conn] : sockets->conns) {
      if (conn.closing) continue;  // nothing more may be sent to it
      set->sockets.push_back(actor::SocketInfo{cid, conn.tags});
    }
    sockets->view = std::move(set);
  }
  return sockets->view;
}

void SocketHub::Tagged(const ActorId& id, std::vector<actor::SocketTagged> tags) {
  ActorSockets* sockets = Find(id);
  if (sockets == nullptr) return;
  for (actor::SocketTagged& t : tags) {
    auto it = sockets->conns.find(t.id);
    if (it == sockets->conns.end()) continue;
    auto& have = it->second.tags;
    if (std::find(have.begin(), have.end(), t.tag) == have.end() && have.size() < actor::kMaxSocketTags) {
      have.push_back(std::move(t.tag));
    }
  }
  sockets->view.reset();
}

void SocketHub::Release(const ActorId& id, std::vector<actor::SocketAction> actions) {
  ActorSockets* sockets = Find(id);
  if (sockets == nullptr) {
    stats_.send_dropped += actions.size();
    return;
  }
  for (actor::SocketAction& a : actions) {
    switch (a.kind) {
      case actor::SocketAction::Kind::kSend: {
        auto it = sockets->conns.find(a.id);
        if (it == sockets->conns.end()) {
          ++stats_.send_dropped;
          break;
        }
        SendTo(it->second, a.data, a.binary);
        break;
      }
      case actor::SocketAction::Kind::kBroadcast:
        // To the connections the event saw with the tag, still open (ids in opening order,
        // as the map's: one pass over both).
        if (options_.broken.on(BrokenModel::kSocketBroadcastAtRelease)) {
          // Broken: the tag resolved now, so a connection opened since the event ran (whose
          // open event already sent it what it needed) is sent the message again.
          a.ids.clear();
          for (const auto& [cid, conn] : sockets->conns) {
            if (conn.closing) continue;
            if (a.tag.empty() || std::find(conn.tags.begin(), conn.tags.end(), a.tag) != conn.tags.end()) {
              a.ids.push_back(cid);
            }
          }
        }
        for (std::int64_t cid : a.ids) {
          auto it = sockets->conns.find(cid);
          if (it == sockets->conns.end()) {
            ++stats_.send_dropped;
            continue;
          }
          SendTo(it->second, a.data, a.binary);
        }
        break;
      case actor::SocketAction::Kind::kClose: {
        auto it = sockets->conns.find(a.id);
        if (it == sockets->conns.end()) break;
        CloseConn(it->second, a.code, a.reason);
        sockets->view.reset();
        break;
      }
    }
  }
}

std::uint64_t SocketHub::MemoryBytes() {
  const MonoTime now = env_.MonoNow();
  if (memory_known_ && now - memory_at_ < std::chrono::seconds(1)) return memory_cached_;
  std::uint64_t bytes = 0;
  for (const auto& [key, sockets] : actors_) {
    for (const auto& [id, conn] : sockets->conns) {
      bytes += kBookkeepingBytesPerConnection + conn.before_attach_bytes;
      for (const std::string& t : conn.tags) bytes += t.capacity();
      if (conn.peer) bytes += conn.peer->memory_bytes();
    }
  }
  memory_cached_ = bytes;
  memory_at_ = now;
  memory_known_ = true;
  return bytes;
}

Task<bool> SocketHub::TakeTurn(const ActorId& actor) {
  ActorSockets* sockets = Find(actor);
  if (sockets == nullptr) co_return false;
  if (sockets->in_flight < kMaxEventsInFlight) {
    ++sockets->in_flight;
    co_return true;
  }
  Latch<bool> turn(env_, [] { return false; });
  sockets->waiting.push_back(turn);
  const bool got = co_await turn.Wait();
  co_return got;
}

void SocketHub::EndTurn(const ActorId& actor) {
  ActorSockets* sockets = Find(actor);
  if (sockets == nullptr) return;
  while (!sockets->waiting.empty()) {
    // The turn passes on (in_flight stays), to a waiter still waiting: one whose wait was
    // cancelled has its value already, and Set says so.
    Latch<bool> next = sockets->waiting.front();
    sockets->waiting.pop_front();
    if (next.Set(true)) return;
  }
  --sockets->in_flight;
  if (sockets->conns.empty() && sockets->in_flight == 0) actors_.erase(actor.ToString());
}

Task<void> SocketHub::RunMessage(ActorId actor, std::int64_t id, bool binary, std::string data) {
  auto alive = alive_;
  if (!co_await TakeTurn(actor)) co_return;
  if (!*alive) co_return;
  // The turn is given back however the event ends (a cancelled wait included).
  co_await RunMessageEvent(actor, id, binary, std::move(data));
  if (*alive) EndTurn(actor);
}

Task<void> SocketHub::RunMessageEvent(ActorId actor, std::int64_t id, bool binary, std::string data) {
  auto alive = alive_;
  ++stats_.messages_in;
  // An overloaded actor (its queue full of requests) is asked again after a pause, a few
  // times: the client waits on TCP meanwhile (the server reads nothing more from it).
  Duration pause = std::chrono::milliseconds(20);
  for (int attempt = 0;; ++attempt) {
    if (FindConn(actor, id) == nullptr) break;  // closed meanwhile
    actor::SocketEvent event;
    event.kind = actor::SocketEventKind::kMessage;
    event.id = id;
    event.binary = binary;
    event.data = data;
    std::optional<actor::EventResult> result = co_await run_(actor, std::move(event));
    if (!*alive) co_return;
    Conn* conn = FindConn(actor, id);
    if (!result) {
      if (conn != nullptr) {
        conn->moved = true;
        if (!conn->closing) ++stats_.closed_moved;
        CloseConn(*conn, kCloseRestart, std::string(kMovedReason));
      }
      break;
    }
    if (result->ok()) break;
    if (result->outcome == actor::EventOutcome::kOverloaded && attempt < 8) {
      ++stats_.events_retried;
      if (!co_await env_.SleepFor(pause) || !*alive) co_return;
      pause = std::min<Duration>(pause * 2, std::chrono::seconds(1));
      continue;
    }
    ++stats_.events_failed;
    if (conn != nullptr) {
      int code = kCloseInternal;
      std::string reason = "the actor failed to handle the message";
      if (result->outcome == actor::EventOutcome::kOverloaded || result->outcome == actor::EventOutcome::kUnavailable) {
        code = kCloseTryAgain;
        reason = result->outcome == actor::EventOutcome::kOverloaded ? "the actor is overloaded"
                                                                     : "the actor is unavailable";
      }
      WK_LOG_INFO("websocket closed after a failed message event",
                  {{"actor", actor.ToString()}, {"code", std::to_string(code)}, {"error", result->error}});
      CloseConn(*conn, code, reason);
    }
    break;
  }
}

Task<void> SocketHub::RunClose(ActorId actor, std::int64_t id, int code, std::string reason) {
  auto alive = alive_;
  // Holds a turn like a message (the hub's entry for the actor stays while it runs).
  auto& slot = actors_[actor.ToString()];
  if (!slot) slot = std::make_unique<ActorSockets>();
  if (!co_await TakeTurn(actor)) co_return;
  if (!*alive) co_return;
  actor::SocketEvent event;
  event.kind = actor::SocketEventKind::kClose;
  event.id = id;
  event.code = code;
  event.data = std::move(reason);
  std::optional<actor::EventResult> result = co_await run_(actor, std::move(event));
  if (!*alive) co_return;
  if (result && !result->ok()) {
    WK_LOG_INFO("websocket close event failed", {{"actor", actor.ToString()}, {"error", result->error}});
  }
  EndTurn(actor);
}

void PublishSocketHubMetrics(MetricsRegistry& registry, const SocketHub& hub) {
  const SocketHub* h = &hub;
  registry.AddCallbackGauge("wasmkeep_websockets_held", "WebSockets the node holds for its actors (docs/websockets.md)",
                 [h] { return static_cast<double>(h->open_connections()); });
  registry.AddCallbackGauge("wasmkeep_websocket_actors", "Actors with at least one WebSocket on the node",
                 [h] { return static_cast<double>(h->actors_with_connections()); });
  auto counter = [&](const char* name, const char* help, std::uint64_t SocketHubStats::*field) {
    registry.AddCallbackCounter(name, help, [h, field] { return static_cast<double>(h->stats().*field); });
  };
  counter("wasmkeep_websocket_opened_total", "WebSocket handshakes accepted by their actor", &SocketHubStats::opened);
  counter("wasmkeep_websocket_refused_total", "WebSocket handshakes refused by their actor or a failed open event",
          &SocketHubStats::refused);
  counter("wasmkeep_websocket_over_limit_total",
          "WebSockets closed at once past websockets.max_connections or max_connections_per_actor",
          &SocketHubStats::over_limit);
  counter("wasmkeep_websocket_hub_closed_total", "WebSockets of actors that ended, for any reason", &SocketHubStats::closed);
  counter("wasmkeep_websocket_moved_total", "WebSockets closed with 1012 because their actor's owner changed",
          &SocketHubStats::closed_moved);
  counter("wasmkeep_websocket_messages_in_total", "WebSocket messages run as events", &SocketHubStats::messages_in);
  counter("wasmkeep_websocket_messages_out_total", "WebSocket messages queued to clients (after the output gate)",
          &SocketHubStats::messages_out);
  counter("wasmkeep_websocket_events_failed_total", "WebSocket message events that failed (the connection closed)",
          &SocketHubStats::events_failed);
  counter("wasmkeep_websocket_sends_dropped_total", "WebSocket sends to a connection that had closed",
          &SocketHubStats::send_dropped);
}

}  // namespace wk
