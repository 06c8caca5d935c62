#include "base/digest.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

TEST(DigestTest, HexRoundTripsAndFromHexIsStrict) {
  EXPECT_EQ(ToHex(std::string_view("\x00\x0f\xa0\xff", 4)), "000fa0ff");
  EXPECT_EQ(ToHex(""), "");
  EXPECT_EQ(FromHex("000fa0ff"), std::string("\x00\x0f\xa0\xff", 4));
  EXPECT_EQ(FromHex("00FFaB"), std::string("\x00\xff\xab", 3));
  EXPECT_EQ(FromHex(""), std::string());
  for (std::string_view bad : {"0", "abc", "0g", " 00", "00 ", "+1", "0x00"}) {
    EXPECT_FALSE(FromHex(bad).has_value()) << bad;
  }
}

TEST(DigestTest, Sha256KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256("abc").size(), kSha256Bytes);
}

TEST(DigestTest, HmacSha256Rfc4231Case2) {
  EXPECT_EQ(ToHex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(DigestTest, ConstantTimeEqual) {
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_TRUE(ConstantTimeEqual("", ""));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "ab"));
}

}  // namespace
}  // namespace wk
