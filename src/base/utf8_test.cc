#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace wk {
namespace {

TEST(Utf8Test, SequenceLengthsAndCodePoints) {
  char32_t cp = 0;
  EXPECT_EQ(Utf8SequenceLength("a", &cp), 1u);
  EXPECT_EQ(cp, U'a');
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9", &cp), 2u);  // é
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC", &cp), 3u);  // €
  EXPECT_EQ(cp, 0x20ACu);
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80", &cp), 4u);  // U+1F600
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(Utf8SequenceLength("\xF4\x8F\xBF\xBF", &cp), 4u);  // U+10FFFF, the last
  EXPECT_EQ(cp, 0x10FFFFu);
  EXPECT_EQ(Utf8SequenceLength(std::string_view("\0", 1), &cp), 1u);
  EXPECT_EQ(cp, 0u);
}

TEST(Utf8Test, InvalidSequencesHaveNoLength) {
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength("\x80"), 0u);              // a lone continuation byte
  EXPECT_EQ(Utf8SequenceLength("\xC3"), 0u);              // truncated
  EXPECT_EQ(Utf8SequenceLength("\xC3("), 0u);             // not a continuation
  EXPECT_EQ(Utf8SequenceLength("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(Utf8SequenceLength("\xE0\x80\xAF"), 0u);      // overlong, 3 bytes
  EXPECT_EQ(Utf8SequenceLength("\xF0\x80\x80\xAF"), 0u);  // overlong, 4 bytes
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80"), 0u);      // U+D800, a surrogate
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80"), 0u);  // U+110000
  EXPECT_EQ(Utf8SequenceLength("\xFF"), 0u);
}

TEST(Utf8Test, WholeStrings) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("caf\xC3"));
  EXPECT_FALSE(IsValidUtf8("a\xED\xBF\xBF" "b"));
  EXPECT_FALSE(IsValidUtf8("\xC1\xBF"));
}

}  // namespace
}  // namespace wk
