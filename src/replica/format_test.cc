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

bool SameMutations(const std::vector<actor::Mutation>& a, const std::vector<actor::Mutation>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto& x = a[i];
    const auto& y = b[i];
    if (x.kind != y.kind || x.key != y.key || (x.kind == actor::Mutation::Kind::kPut && x.value != y.value)) return false;
  }
  return true;
}

bool SameBatch(const actor::Batch& a, const actor::Batch& b) {
  return a.alarm == b.alarm && SameMutations(a.mutations, b.mutations) && SameMutations(a.system, b.system);
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

// The runtime's system entries (Batch::system) need version 2; an object without any is
// still written as version 1, byte for byte as before, so a node that knows only version 1
// reads it, and refuses a version 2 object as a newer format rather than misreading it.
TEST(FormatTest, SystemEntriesTravelInVersion2AndOnlyThere) {
  Segment plain{kActor, {4, 2}, {}, {SampleBatch(1), SampleBatch(2)}};
  EXPECT_TRUE(EncodeSegment(plain).starts_with("wasmkeep-segment 1\n"));
  Segment s = plain;
  s.batches[1].system.push_back({actor::Mutation::Kind::kPut, "idem/k", std::string("rec\0", 4)});
  s.batches[1].system.push_back({actor::Mutation::Kind::kDelete, "idem/old", ""});
  const std::string body = EncodeSegment(s);
  EXPECT_TRUE(body.starts_with("wasmkeep-segment 2\n"));
  auto d = DecodeSegment(body);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->batches.size(), 2u);
  EXPECT_TRUE(SameBatch(d->batches[0], s.batches[0]));
  EXPECT_TRUE(SameBatch(d->batches[1], s.batches[1]));
  // The same bytes under a version 1 header: the flagged batch is refused.
  std::string as_v1 = body.substr(0, body.size() - 16);
  as_v1.replace(0, 18, "wasmkeep-segment 1");
  char trailer[17];
  std::snprintf(trailer, sizeof trailer, "crc32c %08x\n", Crc32c(as_v1));
  EXPECT_EQ(DecodeSegment(as_v1 + trailer).code(), Code::kFatal);
  // A version 2 header over batches without system entries is refused too: one encoding.
  std::string plain_v2 = EncodeSegment(plain);
  plain_v2 = plain_v2.substr(0, plain_v2.size() - 16);
  plain_v2.replace(0, 18, "wasmkeep-segment 2");
  std::snprintf(trailer, sizeof trailer, "crc32c %08x\n", Crc32c(plain_v2));
  EXPECT_EQ(DecodeSegment(plain_v2 + trailer).code(), Code::kFatal);

  actor::StateMap state;
  state.Put("a", "1");
  EXPECT_TRUE(EncodeSnapshot(kActor, {7, 9}, state).starts_with("wasmkeep-snapshot 1\n"));
  state.PutSystem("idem/k", "r");
  state.PutSystem("idem-at/1/k", "");
  const std::string snap = EncodeSnapshot(kActor, {7, 9}, state);
  EXPECT_TRUE(snap.starts_with("wasmkeep-snapshot 2\n"));
  auto back = DecodeSnapshot(snap);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->state == state);
  EXPECT_EQ(back->state.GetSystem("idem/k"), "r");
  EXPECT_FALSE(back->state.Get("idem/k").has_value()) << "apart from the module's entries";
}

TEST(FormatTest, DecodersAreStrict) {
  Segment s{kActor, {4, 2}, {}, {SampleBatch(1)}};
  const std::string good = EncodeSegment(s);
  auto corrupt = [](const std::string& body) { return DecodeSegment(body).code() == Code::kFatal; };
  EXPECT_TRUE(corrupt(""));
  EXPECT_TRUE(corrupt(good.substr(0, good.size() - 1)));
  EXPECT_TRUE(corrupt(good + "x"));
  std::string other_version = good;
  other_version.replace(0, 18, "wasmkeep-segment 3");
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
