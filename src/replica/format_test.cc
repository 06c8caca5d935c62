#include "replica/format.h"

#include <gtest/gtest.h>

#include <random>

#include "base/crc32c.h"

namespace wk::replica {
namespace {

const ActorId kActor{"t", "c", "a.b"};

actor::Batch SampleBatch(int i) {
  actor::Batch b;
  b.mutations.push_back({actor::Mutation::Kind::kPut, "key" + std::to_string(i), std::string("v\0\n\xff", 4)});
  b.mutations.push_back({actor::Mutation::Kind::kDelete, "gone", ""});
  if (i % 3 == 0) b.mutations.push_back({actor::Mutation::Kind::kDeleteAll, "", ""});
  if (i % 2 == 0) b.alarm.emplace(std::int64_t{1'700'000'000'000} + i);
  if (i % 5 == 1) b.alarm.emplace(std::nullopt);
  return b;
}

bool SameBatch(const actor::Batch& a, const actor::Batch& b) {
  if (a.alarm != b.alarm || a.mutations.size() != b.mutations.size()) return false;
  for (std::size_t i = 0; i < a.mutations.size(); ++i) {
    const auto& x = a.mutations[i];
    const auto& y = b.mutations[i];
    if (x.kind != y.kind || x.key != y.key || (x.kind == actor::Mutation::Kind::kPut && x.value != y.value)) return false;
  }
  return true;
}

TEST(Crc32cTest, KnownVector) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

TEST(FormatTest, KeysArePaddedSoListingOrderIsLogOrder) {
  EXPECT_EQ(SegmentKey(kActor, {3, 17}), "wal/t/c/a.b/00000000000000000003-00000000000000000017");
  EXPECT_EQ(SnapshotKey(kActor, {3, 17}), "snapshot/t/c/a.b/00000000000000000003-00000000000000000017");
  EXPECT_LT(SegmentKey(kActor, {9, 99}), SegmentKey(kActor, {10, 0}));
  EXPECT_LT(SegmentKey(kActor, {10, 9}), SegmentKey(kActor, {10, 10}));
  auto p = ParseKeyPosition(WalPrefix(kActor), SegmentKey(kActor, {18446744073709551615ull, 5}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Position{18446744073709551615ull, 5}));
  for (std::string bad : {"wal/t/c/a.b/3-17", "wal/t/c/a.b/00000000000000000003_00000000000000000017",
                          "wal/t/c/a.b/0000000000000000000x-00000000000000000017", "wal/t/c/other/x",
                          "wal/t/c/a.b/00000000000000000003-00000000000000000017/extra"}) {
    EXPECT_EQ(ParseKeyPosition(WalPrefix(kActor), bad).code(), Code::kFatal) << bad;
  }
  EXPECT_FALSE(ParseKeyPosition(WalPrefix(kActor), "wal/t/c/a.b/99999999999999999999-00000000000000000000").ok())
      << "beyond uint64";
}

TEST(FormatTest, DataSegmentsRoundTrip) {
  Segment s{kActor, {4, 2}, {}, {}};
  for (int i = 0; i < 7; ++i) s.batches.push_back(SampleBatch(i));
  auto d = DecodeSegment(EncodeSegment(s));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->actor, kActor);
  EXPECT_EQ(d->position, (Position{4, 2}));
  ASSERT_EQ(d->batches.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(SameBatch(d->batches[i], s.batches[i])) << i;
}

TEST(FormatTest, FencesRoundTripAndNameTheirTip) {
  Segment f{kActor, {5, 0}, {}, {}};
  f.fence.base = Position{2, 3};
  f.fence.run = {{2, 4}, {3, 0}, {3, 1}, {4, 0}};
  const std::string body = EncodeSegment(f);
  EXPECT_NE(body.find("\ntip 4-0\n"), std::string::npos) << body;
  auto d = DecodeSegment(body);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->fence.base, f.fence.base);
  EXPECT_EQ(d->fence.run, f.fence.run);
  EXPECT_TRUE(d->batches.empty());

  Segment empty{kActor, {1, 0}, {}, {}};
  auto e = DecodeSegment(EncodeSegment(empty));
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->fence.tip().has_value());
}

TEST(FormatTest, SnapshotsRoundTrip) {
  actor::StateMap state;
  for (int i = 0; i < 100; ++i) state.Put("k" + std::to_string(i), std::string(i, '\0'));
  state.set_alarm(-5);
  auto d = DecodeSnapshot(EncodeSnapshot(kActor, {7, 9}, state));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->position, (Position{7, 9}));
  EXPECT_TRUE(d->state == state);
}

TEST(FormatTest, DecodersAreStrict) {
  Segment s{kActor, {4, 2}, {}, {SampleBatch(1)}};
  const std::string good = EncodeSegment(s);
  auto corrupt = [](const std::string& body) { return DecodeSegment(body).code() == Code::kFatal; };
  EXPECT_TRUE(corrupt(""));
  EXPECT_TRUE(corrupt(good.substr(0, good.size() - 1)));
  EXPECT_TRUE(corrupt(good + "x"));
  std::string other_version = good;
  other_version.replace(0, 18, "wasmkeep-segment 2");
  EXPECT_TRUE(corrupt(other_version)) << "an unknown version is not read";
  // A valid checksum over a malformed body is still refused.
  std::string body = good.substr(0, good.size() - 16) + "junk";
  char trailer[17];
  std::snprintf(trailer, sizeof trailer, "crc32c %08x\n", Crc32c(body));
  EXPECT_TRUE(corrupt(body + trailer)) << "bytes after the last batch";
  // A fence whose run is out of order or beyond itself.
  Segment f{kActor, {5, 0}, {}, {}};
  f.fence.run = {{3, 1}, {2, 0}};
  EXPECT_TRUE(corrupt(EncodeSegment(f)));
  f.fence.run = {{6, 0}};
  EXPECT_TRUE(corrupt(EncodeSegment(f)));
  EXPECT_EQ(DecodeSnapshot(good).code(), Code::kFatal) << "a segment is not a snapshot";
}

// Every single-byte change of a valid segment or snapshot is refused (the checksum), and
// random garbage never crashes a decoder or makes it allocate wildly.
TEST(FormatTest, TwentyThousandMutationsAreAllRefused) {
  Segment s{kActor, {4, 2}, {}, {}};
  for (int i = 0; i < 5; ++i) s.batches.push_back(SampleBatch(i));
  actor::StateMap state;
  for (int i = 0; i < 20; ++i) state.Put("k" + std::to_string(i), "v");
  const std::string seg = EncodeSegment(s);
  const std::string snap = EncodeSnapshot(kActor, {1, 1}, state);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20'000; ++i) {
    const std::string& base = i % 2 ? seg : snap;
    std::string m = base;
    const std::size_t at = rng() % m.size();
    const char flip = static_cast<char>(1 + rng() % 255);
    m[at] = static_cast<char>(m[at] ^ flip);
    if (i % 2) {
      EXPECT_FALSE(DecodeSegment(m).ok()) << "byte " << at;
    } else {
      EXPECT_FALSE(DecodeSnapshot(m).ok()) << "byte " << at;
    }
    std::string garbage(rng() % 200, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    (void)DecodeSegment(garbage);
    (void)DecodeSnapshot(garbage);
  }
}

}  // namespace
}  // namespace wk::replica
