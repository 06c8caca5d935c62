#include "cluster/node_record.h"

#include <gtest/gtest.h>

#include <random>

#include "cluster/timing.h"

namespace wk {
namespace {

NodeRecord Sample() {
  NodeRecord r;
  r.state = LeaseState::kLive;
  r.instance = InstanceToken("3f9a0c1d2e4b5a6978695a4b3c2d1e0f");
  r.written_at = FromUnixMs(1'764'000'000'123);
  r.node_id = NodeId("node-a");
  r.address = "127.0.0.1:8080";
  r.software_version = "0.1.0";
  r.started_at = FromUnixMs(1'764'000'000'000);
  return r;
}

TEST(NodeRecordTest, RoundTripsEveryState) {
  for (LeaseState s : {LeaseState::kLive, LeaseState::kReleased, LeaseState::kFenced}) {
    NodeRecord r = Sample();
    r.state = s;
    auto decoded = DecodeNodeObject(EncodeNodeRecord(r));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ASSERT_TRUE(std::holds_alternative<NodeRecord>(*decoded));
    EXPECT_EQ(std::get<NodeRecord>(*decoded), r);
  }
}

TEST(NodeRecordTest, ExactEncoding) {
  EXPECT_EQ(EncodeNodeRecord(Sample()),
            "wasmkeep-node 3\n"
            "lease live 3f9a0c1d2e4b5a6978695a4b3c2d1e0f\n"
            "written_at 1764000000123\n"
            "node node-a\n"
            "address 127.0.0.1:8080\n"
            "version 0.1.0\n"
            "started_at 1764000000000\n"
            "cert_pin -\n");
}

TEST(NodeRecordTest, OperatorFenceWithoutInstance) {
  NodeRecord r = Sample();
  r.state = LeaseState::kFenced;
  r.instance = InstanceToken();
  r.address.clear();
  auto d = DecodeNodeObject(EncodeNodeRecord(r));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(std::get<NodeRecord>(*d), r);
  r.state = LeaseState::kLive;
  EXPECT_FALSE(ValidateNodeRecord(r).ok()) << "a live record must name its instance";
}

TEST(NodeRecordTest, OldFormatsAreRecognisedNotFree) {
  auto v1 = DecodeNodeObject("wasmkeep-node 1\nnode a\nwritten_at_ms 1700000000000\n");
  ASSERT_TRUE(v1.ok());
  auto& old = std::get<OldHeartbeat>(*v1);
  EXPECT_EQ(old.format_version, 1);
  ASSERT_TRUE(old.written_at.has_value());
  EXPECT_EQ(ToUnixMs(*old.written_at), 1700000000000);
  auto v2 = DecodeNodeObject("wasmkeep-node 2\n{}\n");
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(std::get<OldHeartbeat>(*v2).format_version, 2);
  EXPECT_FALSE(std::get<OldHeartbeat>(*v2).written_at.has_value());
}

TEST(NodeRecordTest, StrictDecoderRefusesEverythingElse) {
  std::string good = EncodeNodeRecord(Sample());
  std::vector<std::string> bad = {
      "",
      "wasmkeep-node 4\n",
      "wasmkeep-lease 1\n",
      good.substr(0, good.size() - 1),                       // unterminated
      good + "extra 1\n",                                    // unknown trailing field
      "wasmkeep-node 3\nlease alive x\n" + good.substr(good.find("written_at")),
      "wasmkeep-node 3\nlease live\n" + good.substr(good.find("written_at")),
  };
  std::string swapped = good;
  swapped.replace(swapped.find("written_at 1764000000123"), 24, "written_at -1764000000123");
  bad.push_back(swapped);
  std::string badid = good;
  badid.replace(badid.find("node node-a"), 11, "node ../etc");
  bad.push_back(badid);
  for (const auto& body : bad) {
    auto d = DecodeNodeObject(body);
    EXPECT_FALSE(d.ok()) << "accepted: " << body;
    if (!d.ok()) {
      EXPECT_EQ(d.code(), Code::kFatal);
    }
  }
}

TEST(NodeRecordTest, RandomMutationsNeverCrash) {
  // A small in-test fuzzer: flip, drop and insert bytes; the decoder must return a value
  // or an error, and anything it accepts must re-encode to the same bytes.
  std::mt19937_64 rng(7);
  std::string good = EncodeNodeRecord(Sample());
  for (int i = 0; i < 20000; ++i) {
    std::string b = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      std::size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] = static_cast<char>(rng()); break;
        case 1: b.erase(at, 1); break;
        case 2: b.insert(at, 1, static_cast<char>(rng())); break;
      }
    }
    auto d = DecodeNodeObject(b);
    if (d.ok() && std::holds_alternative<NodeRecord>(*d)) {
      EXPECT_EQ(EncodeNodeRecord(std::get<NodeRecord>(*d)), b);
    }
  }
}

TEST(NodeIdTest, Validation) {
  EXPECT_TRUE(ValidateNodeId("node-1.eu_west").ok());
  EXPECT_FALSE(ValidateNodeId("").ok());
  EXPECT_FALSE(ValidateNodeId("..").ok());
  EXPECT_FALSE(ValidateNodeId("a/b").ok());
  EXPECT_FALSE(ValidateNodeId("a b").ok());
  EXPECT_FALSE(ValidateNodeId(std::string(65, 'a')).ok());
}

TEST(LeaseTimingTest, DefaultsAreValidAndDerivedValuesMatchTheAdr) {
  LeaseTiming t;
  ASSERT_TRUE(t.Validate().ok());
  EXPECT_EQ(t.lease_period(), std::chrono::seconds(3));
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(t.attempt_timeout()).count(), 2666);
  EXPECT_EQ(t.validity(), std::chrono::seconds(8));
  EXPECT_EQ(t.takeover_after(), std::chrono::seconds(15));
}

TEST(LeaseTimingTest, RefusesUnsafeSettingsNamingThem) {
  LeaseTiming t;
  t.heartbeat_period = std::chrono::seconds(4);
  auto s = t.Validate();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("heartbeat_period"), std::string::npos) << s.message();

  t = LeaseTiming{};
  t.grace = std::chrono::milliseconds(500);
  t.safety = std::chrono::milliseconds(1000);
  s = t.Validate();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("max_skew"), std::string::npos) << s.message();

  t = LeaseTiming{};
  t.safety = t.ttl;
  EXPECT_FALSE(t.Validate().ok());
  t = LeaseTiming{};
  t.ttl = Duration(0);
  EXPECT_FALSE(t.Validate().ok());
}

}  // namespace
}  // namespace wk
