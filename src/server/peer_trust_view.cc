#include "server/peer_trust_view.h"

namespace wk {

std::vector<TrustedPeer> TrustedPeersFromView(const Membership::View& view, const NodeId& self_id) {
  std::vector<TrustedPeer> out;
  for (const auto& [id, v] : view) {
    if (id == self_id || !v.live()) continue;
    const NodeRecord& r = *v.record;
    if (r.cert_pin.empty() || r.address.empty() || r.node_id != id) continue;
    out.push_back(TrustedPeer{id, r.instance, r.address, r.cert_pin});
  }
  return out;
}

}  // namespace wk
