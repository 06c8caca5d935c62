// The membership view as PeerTrust entries (net/peer_trust.h; docs/security.md, "Between
// nodes"): every node but this one whose node record the listing showed live, under the
// instance, address and pin that record names. A fenced or released record, an old
// format, a corrupt body or a record without a pin or an address gives no entry, so that
// node's pin is no longer accepted once the listing that saw it so is applied.
//
// Threading: a pure function.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/membership.h"
#include "net/peer_trust.h"

namespace wk {

std::vector<TrustedPeer> TrustedPeersFromView(const Membership::View& view, const NodeId& self_id);

}  // namespace wk
