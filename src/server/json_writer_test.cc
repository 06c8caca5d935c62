// JsonWriter: commas, escapes, invalid UTF-8 replaced, hex both ways.
#include "server/json_writer.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

TEST(JsonWriterTest, WritesNestedValuesWithCommasAndEscapes) {
  JsonWriter w;
  w.BeginObject()
      .Member("a", "x\"y\\z\n\t\x01")
      .Member("n", std::int64_t{-3})
      .Member("u", std::uint64_t{18446744073709551615u})
      .Member("b", true)
      .Key("list")
      .BeginArray()
      .Int(1)
      .String("two")
      .Null()
      .BeginObject()
      .EndObject()
      .EndArray()
      .Key("raw")
      .Raw("{\"k\":1}")
      .Member("d", 0.5)
      .EndObject();
  EXPECT_EQ(w.str(),
            "{\"a\":\"x\\\"y\\\\z\\n\\t\\u0001\",\"n\":-3,\"u\":18446744073709551615,\"b\":true,"
            "\"list\":[1,\"two\",null,{}],\"raw\":{\"k\":1},\"d\":0.5}");
}

TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharacters) {
  JsonWriter w;
  w.String(std::string("ok \xc3\xa9 bad \xff \xc3", 13));
  EXPECT_EQ(w.str(), "\"ok \xc3\xa9 bad \\ufffd \\ufffd\"");
}

TEST(JsonWriterTest, TextAndHex) {
  EXPECT_TRUE(IsText("hello, w\xc3\xb6rld\n"));
  EXPECT_FALSE(IsText(std::string("a\0b", 3)));
  EXPECT_FALSE(IsText("\xff"));
  EXPECT_FALSE(IsText("\xed\xa0\x80")) << "a surrogate";
  EXPECT_FALSE(IsText("\xc0\x80")) << "overlong";
  EXPECT_EQ(Hex(std::string("\x00\xff\x10", 3)), "00ff10");
  std::string back;
  ASSERT_TRUE(FromHex("00FF10", &back));
  EXPECT_EQ(back, std::string("\x00\xff\x10", 3));
  EXPECT_FALSE(FromHex("abc", &back));
  EXPECT_FALSE(FromHex("zz", &back));
}

}  // namespace
}  // namespace wk
