#include "sim_peer_network.h"

namespace wk::sim {

namespace {

// What a sender waits on: the answer, set once (first wins), through the sender's Env.
struct Call {
  std::shared_ptr<bool> sender_alive;
  Latch<Result<ServerResponse>> answer;
};

// Runs on the receiving process's Env: the handler, then the reply back over the network.
Task<void> Serve(SimPeerNetwork::Handler handler, ServerRequest request, std::function<void(ServerResponse)> reply) {
  ServerResponse response = co_await handler(std::move(request));
  reply(std::move(response));
}

}  // namespace

class SimPeerNetwork::Transport final : public PeerTransport {
 public:
  Transport(SimPeerNetwork& net, NodeId from, SimEnv& env, std::string cert_pin)
      : net_(net), from_(std::move(from)), env_(env), cert_pin_(std::move(cert_pin)) {}
  ~Transport() override { *alive_ = false; }

  Task<Result<ServerResponse>> Send(PeerTarget to_node, ServerRequest request, Duration timeout) override {
    const std::string address = std::move(to_node.address);
    request.peer_cert_pin = cert_pin_;
    auto call = std::make_shared<Call>(Call{alive_, Latch<Result<ServerResponse>>(env_, [] {
                                              return Result<ServerResponse>(Cancelled("the sender was cancelled"));
                                            })});
    SimWorld& world = net_.world_;
    auto it = net_.listeners_.find(address);
    const NodeId to = it == net_.listeners_.end() ? NodeId() : it->second.node_id;
    const MessageFault fault = net_.fault_(from_, to);
    ++net_.sent_;
    auto answer = [call](Result<ServerResponse> r) {
      if (*call->sender_alive) call->answer.Set(std::move(r));
    };
    // The sender gives up at its timeout: whatever happened to the request is unknown by then.
    const Env::TimerId timer = env_.StartTimer(env_.MonoNow() + timeout, [answer, address] {
      answer(UnknownOutcome("no answer from " + address + " within the timeout"));
    });
    if (fault.drop_request) {
      ++net_.dropped_;
      world.Schedule(world.Now() + fault.request_delay, [answer, address] {
        answer(Retryable("cannot reach " + address + " (partitioned)"));
      });
    } else {
      SimPeerNetwork* net = &net_;
      std::shared_ptr<bool> net_alive = net_.alive_;
      world.Schedule(world.Now() + fault.request_delay, [net, net_alive, answer, address, fault,
                                                         request = std::move(request)]() mutable {
        if (!*net_alive) return;
        auto l = net->listeners_.find(address);
        if (l == net->listeners_.end()) {
          answer(Retryable("connection to " + address + " refused"));
          return;
        }
        std::shared_ptr<bool> listener_alive = l->second.alive;
        auto reply = [net, net_alive, listener_alive, answer, fault](ServerResponse response) {
          if (!*net_alive || !*listener_alive) return;  // the process died with the answer
          if (fault.lose_reply) {
            ++net->lost_replies_;
            return;
          }
          net->world_.Schedule(net->world_.Now() + fault.reply_delay,
                               [answer, response = std::move(response)]() mutable { answer(std::move(response)); });
        };
        l->second.env->Spawn(Serve(l->second.handler, std::move(request), std::move(reply)), "peer request");
      });
    }
    Result<ServerResponse> got = co_await call->answer.Wait();
    env_.CancelTimer(timer);
    co_return got;
  }

 private:
  SimPeerNetwork& net_;
  NodeId from_;
  SimEnv& env_;
  const std::string cert_pin_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

SimPeerNetwork::SimPeerNetwork(SimWorld& world, FaultFn fault) : world_(world), fault_(std::move(fault)) {}

SimPeerNetwork::~SimPeerNetwork() {
  *alive_ = false;
  for (auto& [address, l] : listeners_) *l.alive = false;
}

void SimPeerNetwork::Listen(const std::string& address, NodeId node_id, SimEnv* env, Handler handler) {
  auto it = listeners_.find(address);
  if (it != listeners_.end()) *it->second.alive = false;
  listeners_[address] = Listener{std::move(node_id), env, std::move(handler), std::make_shared<bool>(true)};
}

void SimPeerNetwork::Close(const std::string& address, const SimEnv* env) {
  auto it = listeners_.find(address);
  if (it == listeners_.end() || it->second.env != env) return;
  *it->second.alive = false;
  listeners_.erase(it);
}

std::unique_ptr<PeerTransport> SimPeerNetwork::TransportFor(NodeId from, SimEnv& env, std::string cert_pin) {
  return std::make_unique<Transport>(*this, std::move(from), env, std::move(cert_pin));
}

}  // namespace wk::sim
