#include "socket_clients.h"

#include <algorithm>
#include <deque>

#include "durable_state.h"
#include "net/websocket.h"
#include "routing/socket_hub.h"

namespace wk::sim {

constexpr std::string_view kRoomClass = "room";

// One simulated connection: its node's end (the WebSocketPeer the hub sends through) and
// what its client saw.
struct SocketClients::Conn final : WebSocketPeer, std::enable_shared_from_this<Conn> {
  Conn(World& w, int number, SimEnv* node_env, int room) : w(w), number(number), node_env(node_env), room(room) {}

  // The node's end.
  bool Send(bool binary, std::string data) override {
    (void)binary;
    if (node_closed) return false;
    // In order, 1-20 ms later (the network's delay only grows along a connection).
    deliver_at = std::max(deliver_at, w.Now() + milliseconds(w.Uniform(1, 20)));
    std::weak_ptr<Conn> self = shared_from_this();
    w.sim().Schedule(deliver_at, [self, data = std::move(data)] {
      if (auto c = self.lock()) c->received.push_back(data);
    });
    return true;
  }
  void Close(int code, std::string reason) override {
    if (node_closed) return;
    node_closed = true;
    deliver_at = std::max(deliver_at, w.Now() + milliseconds(w.Uniform(1, 20)));
    std::weak_ptr<Conn> self = shared_from_this();
    w.sim().Schedule(deliver_at, [self, code] {
      if (auto c = self.lock()) c->client_closed = code;
    });
    // The client answers the close: the server reports it to the handler.
    OnNode([self, code, reason = std::move(reason)] {
      if (auto c = self.lock()) c->EndOnNode(code, reason);
    });
  }
  std::size_t memory_bytes() const override { return 0; }
  // Nothing is queued on the node: a send is in flight on the simulated network at once.
  std::size_t queued_bytes() const override { return 0; }
  void WhenQueueAtMost(std::size_t, std::function<void()> ready) override { node_env->Post(std::move(ready)); }
  const std::string& remote() const override { return remote_; }

  // Whether the node process that holds it still runs.
  bool NodeAlive() const {
    auto it = w.processes().find(number);
    return it != w.processes().end() && it->second->running && it->second->env() == node_env;
  }
  // Runs fn on the node's Env after a network delay, if the node still runs then.
  void OnNode(std::function<void()> fn) {
    std::weak_ptr<Conn> self = shared_from_this();
    w.sim().Schedule(w.Now() + milliseconds(w.Uniform(1, 20)), [self, fn = std::move(fn)]() mutable {
      auto c = self.lock();
      if (!c || !c->NodeAlive()) return;
      c->node_env->Post(std::move(fn));
    });
  }
  // The client's message, run on the node one at a time (as HttpServer does).
  void FromClient(std::string text) {
    std::weak_ptr<Conn> self = shared_from_this();
    OnNode([self, text = std::move(text)]() mutable {
      auto c = self.lock();
      if (!c) return;
      c->inbox.push_back(std::move(text));
      c->Pump();
    });
  }
  void Pump() {
    if (running || inbox.empty() || !handler || ended) return;
    running = true;
    std::string text = std::move(inbox.front());
    inbox.pop_front();
    node_env->Spawn(RunOne(shared_from_this(), handler, std::move(text)), "websocket message");
  }
  static Task<void> RunOne(std::shared_ptr<Conn> c, std::shared_ptr<WebSocketHandler> h, std::string text) {
    co_await h->OnMessage(false, std::move(text));
    c->running = false;
    if (c->end_code != 0) {
      c->EndOnNode(c->end_code, c->end_reason);
      co_return;
    }
    c->Pump();
  }
  // OnClosed, last: after the message running now, as HttpServer orders them.
  void EndOnNode(int code, const std::string& reason) {
    if (ended || !handler) return;
    if (running) {
      end_code = code;
      end_reason = reason;
      return;
    }
    ended = true;
    auto h = std::move(handler);
    h->OnClosed(code, reason);
  }

  World& w;
  const int number;
  SimEnv* const node_env;
  const int room;
  std::shared_ptr<WebSocketHandler> handler;
  std::deque<std::string> inbox;
  bool running = false;
  int end_code = 0;  // a close that waits for the running message
  std::string end_reason;
  bool ended = false;        // OnClosed was called
  bool node_closed = false;  // the node closed it
  int client_closed = 0;     // the close code the client got (0: none yet)
  MonoTime deliver_at{};
  std::vector<std::string> received;
  std::string remote_ = "client";
};

SocketClients::SocketClients(World& world, ServingCluster& cluster, SocketClientsOptions options)
    : w_(world), cluster_(cluster), options_(options) {}

SocketClients::~SocketClients() { *alive_ = false; }

void SocketClients::Configure(ServingOptions& serving) {
  serving.sockets = true;
  serving.class_names.emplace_back(kRoomClass);
}

std::vector<ActorId> SocketClients::Actors(const SocketClientsOptions& options) {
  std::vector<ActorId> out;
  for (int i = 0; i < options.rooms; ++i) out.push_back(ActorId{std::string(kServingTenant), std::string(kRoomClass), "r" + std::to_string(i)});
  return out;
}

void SocketClients::Start() {
  for (int c = 0; c < options_.clients; ++c) cluster_.client_env().Spawn(Client(c), "socket client");
}

Task<void> SocketClients::Client(int number) {
  auto alive = alive_;
  SimEnv& env = cluster_.client_env();
  for (;;) {
    if (!co_await env.SleepFor(milliseconds(w_.Uniform(100, 800))) || !*alive) co_return;
    if (w_.Now() >= MonoTime(options_.clients_for)) co_return;
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    const int room = static_cast<int>(w_.Uniform(0, options_.rooms - 1));
    ServerRequest request = cluster_.Request("GET", std::string(kServingTenant) + "/room/r" + std::to_string(room) + "/ws");
    request.headers.emplace_back("Upgrade", "websocket");
    request.headers.emplace_back("Connection", "Upgrade");
    request.headers.emplace_back("Sec-WebSocket-Version", "13");
    request.headers.emplace_back("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
    Result<ServerResponse> answer = co_await cluster_.Send(slot, std::move(request));
    if (!*alive) co_return;
    if (!answer.ok() || answer->status != 101 || !answer->upgrade) continue;
    Process* p = w_.Primary(slot);
    if (p == nullptr || !p->running) continue;
    auto conn = std::make_shared<Conn>(w_, p->number, p->env(), room);
    conns_.push_back(conn);
    // The 101 reached the client: the server attaches the connection (on its node).
    std::shared_ptr<WebSocketUpgrade> upgrade = answer->upgrade;
    conn->OnNode([conn, upgrade] {
      conn->handler = upgrade->attach(conn);
      if (!conn->handler && !conn->node_closed) conn->node_closed = true;
      conn->Pump();
    });
    w_.Trace("socket client " + std::to_string(number) + " opened r" + std::to_string(room) + " on p" +
             std::to_string(p->number));
    // Messages, one at a time, until the connection ends or the client leaves.
    const int messages = static_cast<int>(w_.Uniform(1, 12));
    for (int m = 0; m < messages; ++m) {
      if (!co_await env.SleepFor(milliseconds(w_.Uniform(100, 1500))) || !*alive) co_return;
      if (conn->client_closed != 0 || !conn->NodeAlive() || w_.Now() >= MonoTime(options_.clients_for)) break;
      conn->FromClient("s" + std::to_string(++next_text_));
    }
    if (conn->client_closed == 0 && conn->NodeAlive()) {
      // The client leaves: a close frame, answered.
      conn->OnNode([conn] { conn->EndOnNode(kCloseNormal, ""); });
    }
  }
}

void SocketClients::FinalChecks() {
  std::vector<std::vector<std::string>> rooms;
  for (int r = 0; r < options_.rooms; ++r) {
    const ActorId id{std::string(kServingTenant), std::string(kRoomClass), "r" + std::to_string(r)};
    auto state = DurableState(w_, id);
    std::vector<std::string> list;
    if (!state) {
      w_.Violation("S1: room r" + std::to_string(r) + ": its durable state cannot be restored");
    } else if (auto value = state->Get("list")) {
      std::string_view rest = *value;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        list.emplace_back(rest.substr(0, comma));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    }
    rooms.push_back(std::move(list));
  }
  std::uint64_t received = 0;
  for (const auto& c : conns_) {
    std::int64_t last = 0;
    for (const std::string& line : c->received) {
      ++received;
      const auto colon = line.find(':');
      const std::int64_t n = colon == std::string::npos ? -1 : std::atoll(line.substr(0, colon).c_str());
      const std::string text = colon == std::string::npos ? line : line.substr(colon + 1);
      const auto& list = rooms[static_cast<std::size_t>(c->room)];
      if (n < 1 || static_cast<std::size_t>(n) > list.size() || list[static_cast<std::size_t>(n - 1)] != text) {
        w_.Violation("S1: a client of r" + std::to_string(c->room) + " (on p" + std::to_string(c->number) +
                     ") received \"" + line + "\", which is not the room's durable message " + std::to_string(n) +
                     " (it holds " + std::to_string(list.size()) + ")");
        return;
      }
      if (n <= last) {
        w_.Violation("S2: a client of r" + std::to_string(c->room) + " received message " + std::to_string(n) +
                     " after " + std::to_string(last) + " on one connection");
        return;
      }
      last = n;
    }
  }
  w_.result().socket_connections += conns_.size();
  w_.result().socket_received += received;
  w_.Trace("socket clients: " + std::to_string(conns_.size()) + " connections, " + std::to_string(received) +
           " messages received");
}

}  // namespace wk::sim
