// SimPeerNetwork: the simulated network between nodes — a PeerTransport
// (net/peer_transport.h) per node, delivering requests to the handler (the Front) of
// whichever simulated process listens on the address at delivery time, on the virtual
// timeline.
//
// Each message asks the scenario's FaultFn what happens to it: a delay each way, a request
// dropped before it reaches the peer (a partition: the sender learns kRetryable after the
// delay, nothing was delivered), or a reply lost (the request ran; the sender waits out
// its timeout and learns kUnknownOutcome). Nobody listening at the address is a refused
// connection: kRetryable. A request delivered to a frozen node waits for the thaw (the
// node's own Env runs the handler); one delivered to a process that is then killed never
// answers. Messages in flight belong to the network, not to either process.
//
// Lifetime: each transport must be destroyed before its sender's SimEnv (it stops every
// reply owed to it from reaching that Env). Threading: single-threaded (the SimWorld).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/ids.h"
#include "env/sim_env.h"
#include "net/peer_transport.h"

namespace wk::sim {

class SimPeerNetwork {
 public:
  struct MessageFault {
    Duration request_delay{0};
    Duration reply_delay{0};
    bool drop_request = false;  // never delivered: kRetryable to the sender
    bool lose_reply = false;    // delivered and run, the answer never arrives
  };
  // from and to are the node ids (the addresses' owners, as the scenario registered them;
  // to is empty when nobody listens at the address).
  using FaultFn = std::function<MessageFault(const NodeId& from, const NodeId& to)>;
  using Handler = std::function<Task<ServerResponse>(ServerRequest)>;

  SimPeerNetwork(SimWorld& world, FaultFn fault);
  ~SimPeerNetwork();
  SimPeerNetwork(const SimPeerNetwork&) = delete;
  SimPeerNetwork& operator=(const SimPeerNetwork&) = delete;

  // A process listens on address as node_id; handler runs on env. A later Listen on the
  // same address replaces it (a restarted process); Close(address, env) removes it only if
  // env is still the listener (a process killed after its successor started stays silent).
  void Listen(const std::string& address, NodeId node_id, SimEnv* env, Handler handler);
  void Close(const std::string& address, const SimEnv* env);

  // The transport of the process with node id `from`, sending from env. Its requests arrive
  // with peer_cert_pin set to cert_pin, as a peer listener reports the pin of a TLS client
  // certificate (empty: a client without one).
  std::unique_ptr<PeerTransport> TransportFor(NodeId from, SimEnv& env, std::string cert_pin = "");

  std::uint64_t sent() const { return sent_; }
  std::uint64_t dropped() const { return dropped_; }
  std::uint64_t lost_replies() const { return lost_replies_; }

 private:
  class Transport;
  struct Listener {
    NodeId node_id;
    SimEnv* env = nullptr;
    Handler handler;
    // Cleared when the listener goes (the handler may point into a dead process).
    std::shared_ptr<bool> alive;
  };

  SimWorld& world_;
  FaultFn fault_;
  std::map<std::string, Listener> listeners_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::uint64_t sent_ = 0;
  std::uint64_t dropped_ = 0;
  std::uint64_t lost_replies_ = 0;
};

}  // namespace wk::sim
