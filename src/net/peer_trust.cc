#include "net/peer_trust.h"

#include <set>

#include "net/tls_identity.h"

namespace wk {

bool PeerTrust::Update(std::vector<TrustedPeer> peers) {
  std::map<NodeId, TrustedPeer> by_node;
  for (TrustedPeer& p : peers) {
    if (p.node_id.empty() || p.address.empty() || !IsPin(p.pin)) continue;
    by_node[p.node_id] = std::move(p);
  }
  std::map<std::string, NodeId, std::less<>> node_by_pin;
  std::set<std::string> shared_pins;
  for (const auto& [id, p] : by_node) {
    if (!node_by_pin.emplace(p.pin, id).second) shared_pins.insert(p.pin);
  }
  // One key in two live records: a copied key or a forged record; trust neither.
  for (const std::string& pin : shared_pins) {
    std::erase_if(by_node, [&pin](const auto& e) { return e.second.pin == pin; });
    node_by_pin.erase(pin);
  }
  if (by_node == by_node_) return false;
  by_node_ = std::move(by_node);
  node_by_pin_ = std::move(node_by_pin);
  ++changes_;
  return true;
}

const TrustedPeer* PeerTrust::Find(const NodeId& node_id) const {
  auto it = by_node_.find(node_id);
  return it == by_node_.end() ? nullptr : &it->second;
}

const TrustedPeer* PeerTrust::FindByPin(std::string_view pin) const {
  auto it = node_by_pin_.find(pin);
  return it == node_by_pin_.end() ? nullptr : Find(it->second);
}

}  // namespace wk
