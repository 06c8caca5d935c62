// Which node records a node trusts for TLS: only live ones with a pin and an address, never
// itself; a fenced or released record (or an old or corrupt one) gives no entry.
#include "server/peer_trust_view.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

std::string Pin(char c) { return std::string(64, c); }

NodeView Live(const std::string& id, char pin, LeaseState state = LeaseState::kLive) {
  NodeView v;
  v.node_id = id;
  NodeRecord r;
  r.state = state;
  r.instance = "i-" + id;
  r.node_id = id;
  r.address = "10.0.0.1:7443";
  r.software_version = "test";
  r.cert_pin = Pin(pin);
  v.record = r;
  return v;
}

TEST(PeerTrustViewTest, OnlyLiveRecordsWithAPinAreTrustedUnderTheirInstance) {
  std::map<std::string, NodeView> view;
  view["a"] = Live("a", 'a');
  view["b"] = Live("b", 'b', LeaseState::kFenced);
  view["c"] = Live("c", 'c', LeaseState::kReleased);
  view["d"] = Live("d", 'd');
  view["d"].record->cert_pin.clear();  // a node that publishes no pin
  view["e"] = Live("e", 'e');
  view["e"].record->address.clear();
  view["f"].node_id = "f";
  view["f"].error = "corrupt";
  view["self"] = Live("self", 's');
  auto trusted = TrustedPeersFromView(view, "self");
  ASSERT_EQ(trusted.size(), 1u);
  EXPECT_EQ(trusted[0], (TrustedPeer{"a", "i-a", "10.0.0.1:7443", Pin('a')}));

  // The next listing shows a fenced: its pin is dropped from the trust.
  PeerTrust trust;
  trust.Update(trusted);
  ASSERT_NE(trust.FindByPin(Pin('a')), nullptr);
  view["a"] = Live("a", 'a', LeaseState::kFenced);
  EXPECT_TRUE(trust.Update(TrustedPeersFromView(view, "self")));
  EXPECT_EQ(trust.FindByPin(Pin('a')), nullptr);
}

}  // namespace
}  // namespace wk
