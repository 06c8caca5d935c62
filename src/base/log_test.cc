// FormatLine: one record is one line, whatever bytes its fields hold (docs/security.md,
// "Connections and requests": an actor's log messages reach the node's log).
#include "base/log.h"

#include <gtest/gtest.h>

#include <string>

namespace wk::log {
namespace {

TEST(LogFormatTest, PlainValuesStayAsTheyAreAndOthersAreQuoted) {
  EXPECT_EQ(FormatLine("lease written", {{"node", "n1"}, {"version", "7"}}), "lease written node=n1 version=7");
  EXPECT_EQ(FormatLine("m", {{"k", "two words"}}), "m k=\"two words\"");
  EXPECT_EQ(FormatLine("m", {{"k", ""}}), "m k=\"\"");
  EXPECT_EQ(FormatLine("m", {{"k", "a=b"}}), "m k=\"a=b\"");
  EXPECT_EQ(FormatLine("m", {{"k", "say \"hi\" \\o/"}}), "m k=\"say \\\"hi\\\" \\\\o/\"");
  EXPECT_EQ(FormatLine("m", {{"k", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82"}}),
            "m k=\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82\"")
      << "valid UTF-8 is kept";
}

TEST(LogFormatTest, ControlCharactersNeverReachTheLineAsThemselves) {
  // What an actor could log before: a forged second record, a terminal escape that
  // recolours or clears the operator's screen, a NUL that cuts the line for C tools.
  const std::string forged = "ok\r\n2026-01-01T00:00:00.000Z error node lease lost\x1b[2J\x1b]0;title\x07";
  const std::string nul("a\0b", 3);
  const std::string line = FormatLine("actor log", {{"actor", "t/c/n"}, {"msg", forged}, {"nul", nul}});
  EXPECT_EQ(line,
            "actor log actor=t/c/n "
            "msg=\"ok\\r\\n2026-01-01T00:00:00.000Z error node lease lost\\x1b[2J\\x1b]0;title\\x07\" "
            "nul=\"a\\x00b\"");
  for (const char c : line) {
    const auto b = static_cast<unsigned char>(c);
    EXPECT_TRUE(b >= 0x20 && b != 0x7f) << "control byte " << static_cast<int>(b) << " in " << line;
  }
  // Every C0 byte and DEL, one at a time.
  for (int b = 0; b < 0x20; ++b) {
    const std::string one(1, static_cast<char>(b));
    const std::string formatted = FormatLine("m", {{"k", one}});
    EXPECT_EQ(formatted.find(one), std::string::npos) << b;
  }
  EXPECT_EQ(FormatLine("m", {{"k", "\x7f"}}), "m k=\"\\x7f\"");
  // The message and keys too (they are constants today, but the rule is the line's).
  EXPECT_EQ(FormatLine("two\nlines", {{"k\r", "v"}}), "two\\nlines k\\r=v");
}

TEST(LogFormatTest, InvalidUtf8AndInvisibleCodePointsAreEscaped) {
  EXPECT_EQ(FormatLine("m", {{"k", "\xff\xfe"}}), "m k=\"\\xff\\xfe\"");
  EXPECT_EQ(FormatLine("m", {{"k", "\xc3"}}), "m k=\"\\xc3\"") << "truncated sequence";
  EXPECT_EQ(FormatLine("m", {{"k", "\xc0\xaf"}}), "m k=\"\\xc0\\xaf\"") << "overlong '/'";
  EXPECT_EQ(FormatLine("m", {{"k", "\xed\xa0\x80"}}), "m k=\"\\xed\\xa0\\x80\"") << "a surrogate";
  EXPECT_EQ(FormatLine("m", {{"k", "\xf4\x90\x80\x80"}}), "m k=\"\\xf4\\x90\\x80\\x80\"") << "above U+10FFFF";
  EXPECT_EQ(FormatLine("m", {{"k", "\xc2\x9b" "31m"}}), "m k=\"\\u{009b}31m\"") << "C1 CSI";
  EXPECT_EQ(FormatLine("m", {{"k", "a\xe2\x80\xa8" "b"}}), "m k=\"a\\u{2028}b\"") << "line separator";
  EXPECT_EQ(FormatLine("m", {{"k", "\xe2\x80\xae" "gnp.exe"}}), "m k=\"\\u{202e}gnp.exe\"") << "bidi override";
}

}  // namespace
}  // namespace wk::log
