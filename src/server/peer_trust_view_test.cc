// Which node records a node trusts for TLS: only live ones with a pin and an address, never
// itself; a fenced or released record (or an old or corrupt one) gives no entry.
#include "server/peer_trust_view.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

std::string Pin(char c) { return std::string(64, c); }

NodeView Live(const std::string& id, char pin, LeaseState state = LeaseState::kLive) {
  NodeView v;
  v.node_id = NodeId(id);
  NodeRecord r;
  r.state = state;
  r.instance = InstanceToken("i-" + id);
  r.node_id = NodeId(id);
  r.address = "10.0.0.1:7443";
  r.software_version = "test";
  r.cert_pin = Pin(pin);
  v.record = r;
  return v;
}

TEST(PeerTrustViewTest, OnlyLiveRecordsWithAPinAreTrustedUnderTheirInstance) {
  Membership::View view;
  view[NodeId("a")] = Live("a", 'a');
  view[NodeId("b")] = Live("b", 'b', LeaseState::kFenced);
  view[NodeId("c")] = Live("c", 'c', LeaseState::kReleased);
  view[NodeId("d")] = Live("d", 'd');
  view[NodeId("d")].record->cert_pin.clear();  // a node that publishes no pin
  view[NodeId("e")] = Live("e", 'e');
  view[NodeId("e")].record->address.clear();
  view[NodeId("f")].node_id = NodeId("f");
  view[NodeId("f")].error = "corrupt";
  view[NodeId("self")] = Live("self", 's');
  auto trusted = TrustedPeersFromView(view, NodeId("self"));
  ASSERT_EQ(trusted.size(), 1u);
  EXPECT_EQ(trusted[0], (TrustedPeer{NodeId("a"), InstanceToken("i-a"), "10.0.0.1:7443", Pin('a')}));

  // The next listing shows a fenced: its pin is dropped from the trust.
  PeerTrust trust;
  trust.Update(trusted);
  ASSERT_NE(trust.FindByPin(Pin('a')), nullptr);
  view[NodeId("a")] = Live("a", 'a', LeaseState::kFenced);
  EXPECT_TRUE(trust.Update(TrustedPeersFromView(view, NodeId("self"))));
  EXPECT_EQ(trust.FindByPin(Pin('a')), nullptr);
}

}  // namespace
}  // namespace wk
