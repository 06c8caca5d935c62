#include "cluster/owner_record.h"

#include <gtest/gtest.h>

#include <random>

namespace wk {
namespace {

TEST(OwnerRecordTest, RoundTripAndExactEncoding) {
  OwnerRecord held{NodeId("node-a"), InstanceToken("3f9a0c1d"), Generation{7}};
  EXPECT_EQ(EncodeOwnerRecord(held), "wasmkeep-owner 1\nowner node-a 3f9a0c1d\ngeneration 7\n");
  EXPECT_EQ(DecodeOwnerRecord(EncodeOwnerRecord(held)).value(), held);
  OwnerRecord nobody = OwnerRecord::Nobody(Generation{7});
  EXPECT_EQ(EncodeOwnerRecord(nobody), "wasmkeep-owner 1\nowner nobody\ngeneration 7\n");
  EXPECT_EQ(DecodeOwnerRecord(EncodeOwnerRecord(nobody)).value(), nobody);
  EXPECT_TRUE(nobody.names_nobody());
}

TEST(OwnerRecordTest, StrictDecoder) {
  for (std::string_view bad : {"", "wasmkeep-owner 2\nowner nobody\ngeneration 1\n",
                               "wasmkeep-owner 1\nowner nobody\ngeneration 1",
                               "wasmkeep-owner 1\nowner nobody\ngeneration 01\n",
                               "wasmkeep-owner 1\nowner nobody\ngeneration -1\n",
                               "wasmkeep-owner 1\nowner a\ngeneration 1\n",
                               "wasmkeep-owner 1\nowner ../x i\ngeneration 1\n",
                               "wasmkeep-owner 1\nowner nobody\ngeneration 1\nextra\n",
                               "wasmkeep-owner 1\nowner nobody\ngeneration 99999999999999999999\n",
                               "wasmkeep-lease 1\nfoo\n"}) {
    auto d = DecodeOwnerRecord(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_EQ(d.code(), Code::kFatal);
    }
  }
}

TEST(OwnerRecordTest, MutationsNeverCrashAndAcceptedBodiesRoundTrip) {
  std::mt19937_64 rng(3);
  const std::string good = EncodeOwnerRecord(OwnerRecord{NodeId("n1"), InstanceToken("abc"), Generation{42}});
  for (int i = 0; i < 20000; ++i) {
    std::string b = good;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 3) && !b.empty(); ++e) {
      std::size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] = static_cast<char>(rng()); break;
        case 1: b.erase(at, 1); break;
        default: b.insert(at, 1, static_cast<char>(rng()));
      }
    }
    auto d = DecodeOwnerRecord(b);
    if (d.ok()) {
      EXPECT_EQ(EncodeOwnerRecord(*d), b);
    }
  }
}

TEST(ActorIdTest, ParseAndValidate) {
  auto id = ParseActorId("acme/counter/user-42");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->tenant, "acme");
  EXPECT_EQ(OwnerKey(*id), "owners/acme/counter/user-42");
  for (std::string_view bad : {"acme/counter", "acme/counter/a/b", "Acme/counter/x", "acme/counter/..", "acme//x",
                               "acme/counter/a b", "-x/counter/a", "acme/counter/%2e"}) {
    EXPECT_FALSE(ParseActorId(bad).ok()) << bad;
  }
  EXPECT_NE(ParseActorId("acme/Counter/x").status().message().find("class"), std::string::npos);
}

}  // namespace
}  // namespace wk
