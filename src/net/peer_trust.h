// PeerTrust: which peers this node trusts right now, and under which pin (docs/security.md,
// "Between nodes"). It is the membership view reduced to what TLS needs: one entry per
// node whose node record the last listing showed live with a pin, under the instance that
// record names. Nothing else is trusted: a fenced or released node, a record without a
// pin, a node the listing no longer shows. The owner of the listing replaces the whole set
// after each listing (Update), so a fenced node's pin stops being accepted at the next
// listing.
//
// Used by the peer transport (http_peer_transport.h: whom it connects to and which pin it
// expects) and by the peer listener's TLS context (which client certificates it accepts).
//
// Threading: the RealEnv's loop thread (the listing's, the transport's and the TLS
// handshakes' thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"

namespace wk {

struct TrustedPeer {
  NodeId node_id;
  InstanceToken instance;  // of its live record
  std::string address;   // host:port of its peer listener, from the same record
  std::string pin;       // hex SHA-256 of its certificate's SubjectPublicKeyInfo

  friend bool operator==(const TrustedPeer&, const TrustedPeer&) = default;
};

class PeerTrust {
 public:
  // Replaces the trusted set. Entries whose pin is not a pin (net/tls_identity.h IsPin),
  // or whose node id or address is empty, are left out; of two entries with one pin (two
  // records that cannot both be honest), neither is kept. Returns whether the set changed.
  bool Update(std::vector<TrustedPeer> peers);

  // The trusted entry of node_id, or nullptr.
  const TrustedPeer* Find(const NodeId& node_id) const;
  // The trusted entry whose pin this is, or nullptr.
  const TrustedPeer* FindByPin(std::string_view pin) const;

  std::size_t size() const { return by_node_.size(); }
  // Updates that changed the set (for tests and metrics).
  std::uint64_t changes() const { return changes_; }

 private:
  std::map<NodeId, TrustedPeer> by_node_;
  std::map<std::string, NodeId, std::less<>> node_by_pin_;
  std::uint64_t changes_ = 0;
};

}  // namespace wk
