#include "base/line_format.h"

#include <gtest/gtest.h>

#include <random>

namespace wk::line_format {
namespace {

// A small format for the tests: `wasmkeep-test 2`, a name, a count, then `count` bare lines.
struct Sample {
  std::string name;
  std::vector<std::string> items;
  friend bool operator==(const Sample&, const Sample&) = default;
};

std::string Encode(const Sample& b) {
  LineWriter w("test", 2);
  w.Field("name", b.name).Field("count", b.items.size());
  for (const auto& item : b.items) w.BareLine(item);
  return std::move(w).Take();
}

Result<Sample> Decode(std::string_view body) {
  auto r = LineReader::Open(body, "test", 2, "wasmkeep-test 2 body");
  if (!r.ok()) return r.status();
  Sample b;
  auto name = r->Field("name");
  if (!name.ok()) return name.status();
  b.name = std::string(*name);
  auto count = r->UintField("count", 100);
  if (!count.ok()) return count.status();
  for (std::uint64_t i = 0; i < *count; ++i) {
    auto line = r->BareLine();
    if (!line.ok()) return line.status();
    b.items.emplace_back(*line);
  }
  if (Status s = r->Finish(); !s.ok()) return s;
  return b;
}

// The message of a refused body (the test fails when it was accepted or not kFatal).
std::string Refusal(std::string_view body) {
  auto d = Decode(body);
  EXPECT_FALSE(d.ok()) << "accepted: " << body;
  if (d.ok()) return "";
  EXPECT_EQ(d.code(), Code::kFatal) << body;
  return d.status().message();
}

TEST(LineFormatTest, NumbersAreStrict) {
  EXPECT_EQ(ParseUint("0"), 0u);
  EXPECT_EQ(ParseUint("42"), 42u);
  EXPECT_EQ(ParseUint("18446744073709551615"), kMaxUint);
  EXPECT_EQ(ParseUint("7", 7), 7u);
  for (std::string_view bad : {"", "00", "01", "-1", "+1", " 1", "1 ", "1x", "0x10", "18446744073709551616",
                               "99999999999999999999", "123456789012345678901", "1.0"}) {
    EXPECT_FALSE(ParseUint(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ParseUint("8", 7).has_value()) << "above the caller's bound";

  EXPECT_EQ(ParseInt("-1"), -1);
  EXPECT_EQ(ParseInt("0"), 0);
  EXPECT_EQ(ParseInt("9223372036854775807"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(ParseInt("-9223372036854775808"), std::numeric_limits<std::int64_t>::min());
  for (std::string_view bad : {"", "-", "-0", "-01", "+1", "--1", "9223372036854775808", "-9223372036854775809", "01"}) {
    EXPECT_FALSE(ParseInt(bad).has_value()) << bad;
  }
}

TEST(LineFormatTest, WriterProducesTheCanonicalFormAndReaderReadsIt) {
  Sample b{"alpha beta", {"1-2", "x"}};
  EXPECT_EQ(Encode(b), "wasmkeep-test 2\nname alpha beta\ncount 2\n1-2\nx\n");
  EXPECT_EQ(Decode(Encode(b)).value(), b);
  LineWriter w("test", 2);
  w.IntField("alarm", -5).Field("n", std::uint64_t{0}).Payload(std::string_view("\0\n\r", 3));
  EXPECT_EQ(w.str(), std::string("wasmkeep-test 2\nalarm -5\nn 0\n\0\n\r", 32));
}

TEST(LineFormatTest, HeaderIsExact) {
  EXPECT_NE(Refusal("wasmkeep-test 3\nname a\ncount 0\n").find("line 1"), std::string::npos);
  Refusal("wasmkeep-test 02\nname a\ncount 0\n");
  Refusal("wasmkeep-test 2 \nname a\ncount 0\n");
  Refusal("wasmkeep-test 2");
  Refusal("");
  auto h = PeekHeader("wasmkeep-node 3\nrest");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->kind, "node");
  EXPECT_EQ(h->version, 3u);
  EXPECT_FALSE(PeekHeader("wasmkeep-node 03\n").has_value());
  EXPECT_FALSE(PeekHeader("wasmkeep-Node 3\n").has_value());
  EXPECT_FALSE(PeekHeader("wasmkeep-node\n").has_value());
}

TEST(LineFormatTest, BadNumbersNameTheirLine) {
  for (std::string_view count : {"01", "-1", "+1", "1 ", " 1", "x", "101", "99999999999999999999999"}) {
    std::string msg = Refusal("wasmkeep-test 2\nname a\ncount " + std::string(count) + "\n");
    EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count"), std::string::npos) << msg;
  }
}

TEST(LineFormatTest, MissingRepeatedUnknownAndMisplacedLinesAreRefusedByLine) {
  std::string missing = Refusal("wasmkeep-test 2\nname a\n");
  EXPECT_NE(missing.find("line 3: missing 'count'"), std::string::npos) << missing;
  std::string repeated = Refusal("wasmkeep-test 2\nname a\nname b\ncount 0\n");
  EXPECT_NE(repeated.find("line 3: repeated 'name'"), std::string::npos) << repeated;
  std::string unknown = Refusal("wasmkeep-test 2\nname a\ncolour red\ncount 0\n");
  EXPECT_NE(unknown.find("line 3: expected the 'count' line, found 'colour'"), std::string::npos) << unknown;
  std::string misplaced = Refusal("wasmkeep-test 2\ncount 0\nname a\n");
  EXPECT_NE(misplaced.find("line 2: expected the 'name' line, found 'count'"), std::string::npos) << misplaced;
  std::string trailing = Refusal("wasmkeep-test 2\nname a\ncount 0\nextra 1\n");
  EXPECT_NE(trailing.find("line 4: unexpected 'extra 1'"), std::string::npos) << trailing;
  std::string novalue = Refusal("wasmkeep-test 2\nname\ncount 0\n");
  EXPECT_NE(novalue.find("line 2"), std::string::npos) << novalue;
}

TEST(LineFormatTest, LineEndingsAndBytesAreExact) {
  std::string crlf = Refusal("wasmkeep-test 2\nname a\r\ncount 0\n");
  EXPECT_NE(crlf.find("line 2: ends in CR LF"), std::string::npos) << crlf;
  Refusal("wasmkeep-test 2\r\nname a\ncount 0\n");
  std::string unterminated = Refusal("wasmkeep-test 2\nname a\ncount 0");
  EXPECT_NE(unterminated.find("line 3: not newline-terminated"), std::string::npos) << unterminated;
  Refusal("wasmkeep-test 2\nname a\ncount 0\n\n");       // trailing empty line
  Refusal("wasmkeep-test 2\nname a\ncount 0\n ");        // trailing byte
  Refusal("wasmkeep-test 2\n\nname a\ncount 0\n");       // empty line
  Refusal("wasmkeep-test 2\nname  a\ncount 0\n");        // two spaces
  Refusal("wasmkeep-test 2\nname a \ncount 0\n");        // trailing space
  Refusal("wasmkeep-test 2\nname a\tb\ncount 0\n");      // a control byte
  Refusal(std::string("wasmkeep-test 2\nname a\0b\ncount 0\n", 30));
  Refusal("wasmkeep-test 2\nname \xc3\xa9\ncount 0\n");  // not ASCII
  Refusal("wasmkeep-test 2\nname " + std::string(kMaxValueBytes + 1, 'a') + "\ncount 0\n");
  EXPECT_TRUE(Decode("wasmkeep-test 2\nname " + std::string(kMaxValueBytes, 'a') + "\ncount 0\n").ok());
}

TEST(LineFormatTest, WallTimesAreUnixMillisecondsFrom1970) {
  EXPECT_EQ(ParseUnixMs("0"), FromUnixMs(0));
  EXPECT_EQ(ParseUnixMs("1764000000000"), FromUnixMs(1'764'000'000'000));
  EXPECT_EQ(ParseUnixMs("9223372036854775807"), FromUnixMs(std::numeric_limits<std::int64_t>::max()));
  for (std::string_view bad : {"", "-1", "01", "9223372036854775808", "1.5", "1 "}) {
    EXPECT_FALSE(ParseUnixMs(bad).has_value()) << bad;
  }
  LineWriter w("test", 2);
  w.UnixMsField("at", FromUnixMs(77));
  EXPECT_EQ(w.str(), "wasmkeep-test 2\nat 77\n");
  auto r = LineReader::Open(w.str(), "test", 2, "test");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->UnixMsField("at").value(), FromUnixMs(77));
  EXPECT_TRUE(r->AtEnd());
  for (std::string_view at : {"-1", "077", "9223372036854775808"}) {
    const std::string body = "wasmkeep-test 2\nat " + std::string(at) + "\n";  // the reader views it
    auto bad = LineReader::Open(body, "test", 2, "test");
    ASSERT_TRUE(bad.ok());
    auto t = bad->UnixMsField("at");
    ASSERT_FALSE(t.ok()) << at;
    EXPECT_NE(t.status().message().find("line 2: 'at' is not Unix milliseconds"), std::string::npos)
        << t.status().message();
  }
  EXPECT_DEATH(LineWriter("test", 2).UnixMsField("at", FromUnixMs(-1)), "before 1970");
}

TEST(LineFormatTest, FieldPartsAreExactlyThePartsTheFormatFixes) {
  LineWriter w("test", 2);
  w.FieldParts("token", {"ab", "cd", "12"}).FieldParts("one", {"x"});
  EXPECT_EQ(w.str(), "wasmkeep-test 2\ntoken ab cd 12\none x\n");
  auto r = LineReader::Open(w.str(), "test", 2, "test");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->FieldParts("token", 3).value(), (std::vector<std::string_view>{"ab", "cd", "12"}));
  EXPECT_FALSE(r->AtEnd());
  EXPECT_EQ(r->FieldParts("one", 1).value(), (std::vector<std::string_view>{"x"}));
  EXPECT_TRUE(r->AtEnd());
  for (std::string_view value : {"ab cd", "ab cd 12 34", "ab  cd 12", "ab cd  12"}) {
    const std::string body = "wasmkeep-test 2\ntoken " + std::string(value) + "\n";  // the reader views it
    auto bad = LineReader::Open(body, "test", 2, "test");
    ASSERT_TRUE(bad.ok());
    auto parts = bad->FieldParts("token", 3);
    ASSERT_FALSE(parts.ok()) << value;
    EXPECT_EQ(parts.code(), Code::kFatal);
    EXPECT_NE(parts.status().message().find("line 2: 'token' needs exactly 3 parts"), std::string::npos)
        << parts.status().message();
  }
  EXPECT_DEATH(LineWriter("test", 2).FieldParts("token", {"a b", "c"}), "bad part");
  EXPECT_DEATH(LineWriter("test", 2).FieldParts("token", {"a", ""}), "bad part");
}

TEST(LineFormatTest, PayloadAfterTheLinesIsLeftToTheCaller) {
  const std::string body = std::string("wasmkeep-test 2\nsize 3\n\0\n\r", 26);
  auto r = LineReader::Open(body, "test", 2, "test");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->UintField("size").value(), 3u);
  EXPECT_EQ(r->rest(), std::string_view("\0\n\r", 3));
  EXPECT_FALSE(r->Finish().ok());
  r->Skip(3);
  EXPECT_TRUE(r->Finish().ok());
}

// Random edits of a valid body: the reader never crashes, and whatever it accepts is
// canonical (re-encodes to the same bytes), so no two bodies mean the same thing. Breaks
// if, for example, ParseUint accepted "01" (then "count 01" would re-encode as "count 1").
TEST(LineFormatTest, MutationsNeverCrashAndAcceptedBodiesAreCanonical) {
  std::mt19937_64 rng(12);
  const std::string good = Encode(Sample{"node-a 7", {"1-2", "3-4", "zz"}});
  const std::string alphabet = "0123456789 -\n\r\tabcnotuwx";
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string b = good;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 3) && !b.empty(); ++e) {
      std::size_t at = rng() % b.size();
      char c = rng() % 2 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
      switch (rng() % 3) {
        case 0: b[at] = c; break;
        case 1: b.erase(at, 1); break;
        default: b.insert(at, 1, c);
      }
    }
    auto d = Decode(b);
    if (d.ok()) {
      ++accepted;
      EXPECT_EQ(Encode(*d), b);
    } else {
      EXPECT_EQ(d.code(), Code::kFatal);
    }
  }
  EXPECT_GT(accepted, 0) << "the mutations should also produce valid bodies (renamed items)";
}

}  // namespace
}  // namespace wk::line_format
