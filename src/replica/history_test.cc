// An actor's history on a simulated bucket (testing/replica_fixture.h): the chain followed back
// through the fences, late uploads left out, the state at every batch rebuilt exactly over
// random histories (writes, deletes, snapshots, GC with and without retention, new holds,
// restores), points in time and their refusals, and GC keeping the retention window.
#include "replica/history.h"

#include <gtest/gtest.h>

#include <random>

#include "replica/gc.h"
#include "replica/testing/replica_fixture.h"
#include "store/store_wrapper.h"

namespace wk::replica {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

// What a test compares: the module's entries and the alarm.
struct Visible {
  actor::StateMap::Entries entries;
  std::optional<std::int64_t> alarm;
  friend bool operator==(const Visible&, const Visible&) = default;
};
Visible Of(const actor::StateMap& s) { return Visible{s.entries(), s.alarm()}; }
std::string Show(const Visible& v) {
  std::string out = "{";
  for (const auto& [k, val] : v.entries) out += k + "=" + val + " ";
  return out + "alarm " + (v.alarm ? std::to_string(*v.alarm) : "none") + "}";
}

class HistoryTest : public testing::ReplicaTest {
 protected:
  HistoryOptions Options(Duration retention = {}) {
    HistoryOptions o;
    o.now_ms = ToUnixMs(env_.WallNow());
    o.retention = retention;
    o.read.broken = BrokenModels::FromEnvironment().value();  // scripts/check-proofs.sh
    return o;
  }
  Result<History> ReadAll(Duration retention = {}) {
    auto r = RunTask(world_, env_, ReadHistory(env_, *store_, actor_, Options(retention)));
    if (!r) return Fatal("history did not finish");
    return std::move(*r);
  }
  Result<PointState> At(PointSpec point, Duration retention = {}) {
    auto r = RunTask(world_, env_, StateAt(env_, *store_, actor_, point, Options(retention)));
    if (!r) return Fatal("state did not finish");
    return std::move(*r);
  }
  // Commits and waits until durable; the model gets the state after it.
  void Durable(Replica& r, actor::Batch b) {
    model_.Apply(b);
    const std::uint64_t seq = r.Commit(std::move(b));
    auto answer = std::make_shared<std::optional<Status>>();
    r.WhenReleasable(seq, [answer](Status s) { *answer = std::move(s); });
    Settle();
    ASSERT_TRUE(answer->has_value() && (*answer)->ok());
    states_.push_back(Of(model_));
  }
  void Close(std::unique_ptr<Replica>& r) {
    ASSERT_TRUE(RunTask(world_, env_, r->Close(seconds(5)))->ok());
    r.reset();
  }

  // A snapshot every 2 segments, GC unthrottled, one hour of retention and no margin.
  static ReplicaOptions HourOfRetention() {
    ReplicaOptions o;
    o.snapshot_every_segments = 2;
    o.gc_delete_interval = Duration(0);
    o.retention = hours(1);
    o.retention_margin = Duration(0);
    return o;
  }
  // Puts k = 0..9, each durable, a minute apart.
  void WriteTenMinuteByMinute(Replica& r) {
    for (int i = 0; i < 10; ++i) {
      Durable(r, testing::Put("k", std::to_string(i)));
      world_.RunFor(minutes(1));
    }
  }

  actor::StateMap model_;
  std::vector<Visible> states_;  // after each acknowledged batch, in order
};

TEST_F(HistoryTest, FollowsTheFencesBackAndLeavesLateUploadsOut) {
  ReplicaOptions o;
  o.snapshot_every_segments = 1000;
  auto r = Open(Generation{1}, o);
  for (const char* v : {"1", "2", "3"}) Durable(*r, testing::Put("a", v));
  Close(r);
  r = Open(Generation{2}, o);
  // Hold 1's upload landing after hold 2 restored: off the chain.
  actor::Batch late = testing::Put("a", "late");
  std::string payload;
  AppendBatch(late, payload);
  ASSERT_TRUE(bucket_
                  ->ApplyPut(SegmentKey(actor_, {1, 4}), EncodeDataSegment(actor_, {1, 4}, 1, payload, false),
                             Precondition::IfNoneMatchAny())
                  .ok());
  Durable(*r, testing::Put("b", "1"));
  Close(r);
  r = Open(Generation{3}, o);
  Durable(*r, testing::Put("c", "1"));

  auto h = ReadAll();
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  std::vector<std::string> ids;
  for (const auto& b : h->batches) ids.push_back(b.id.ToString());
  EXPECT_EQ(ids, (std::vector<std::string>{"1-1.1", "1-2.1", "1-3.1", "2-1.1", "3-1.1"}));
  ASSERT_EQ(h->batches.size(), states_.size());
  for (std::size_t i = 0; i < states_.size(); ++i) {
    auto s = At(PointSpec{std::nullopt, h->batches[i].id});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(Of(s->state), states_[i]) << "at " << h->batches[i].id.ToString() << ": " << Show(Of(s->state));
  }
  EXPECT_EQ(h->batches[3].keys, (std::vector<std::string>{"b"}));
  EXPECT_EQ(h->batches[3].puts, 1u);
}

TEST_F(HistoryTest, TimesPickThePrefixDurableByThenAndBadPointsAreRefused) {
  auto r = Open(Generation{1});
  Durable(*r, testing::Put("a", "1"));
  const std::int64_t t1 = ToUnixMs(env_.WallNow());
  world_.RunFor(seconds(10));
  Durable(*r, testing::Put("a", "2"));
  world_.RunFor(seconds(10));
  Durable(*r, testing::Put("a", "3"));
  const std::int64_t now = ToUnixMs(env_.WallNow());

  auto s = At(PointSpec{t1 + 5'000, std::nullopt});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Of(s->state), states_[0]);
  s = At(PointSpec{now, std::nullopt});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Of(s->state), states_[2]);
  s = At(PointSpec{t1 - 60'000, std::nullopt});
  ASSERT_TRUE(s.ok()) << "before the first batch of a chain that reaches the beginning: the empty state";
  EXPECT_TRUE(s->state.entries().empty());
  EXPECT_FALSE(s->last.has_value());

  s = At(PointSpec{now + 3'600'000, std::nullopt});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.status().message().find("future"), std::string::npos) << s.status().message();
  s = At(PointSpec{now - 60'000, std::nullopt}, seconds(30));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.status().message().find("retention window"), std::string::npos) << s.status().message();
  s = At(PointSpec{std::nullopt, BatchId{{9, 1}, 1}});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  auto h = ReadAll();
  ASSERT_TRUE(h.ok());
  BatchId past_end = h->batches.back().id;
  past_end.index += 1;
  s = At(PointSpec{std::nullopt, past_end});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.status().ToString();
  actor_ = ActorId{"t", "c", "nobody"};
  s = At(PointSpec{now, std::nullopt});
  EXPECT_EQ(s.code(), Code::kNotFound);
}

TEST(BatchIdTest, ParsesWhatItPrints) {
  auto id = ParseBatchId("12-7.3");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->ToString(), "12-7.3");
  for (const char* bad : {"", "12-7", "12.3", "0-1.1", "1-0.1", "1-1.0", "a-1.1", "1-1.1x", "-1-1.1"}) {
    EXPECT_EQ(ParseBatchId(bad).code(), Code::kInvalidArgument) << bad;
  }
}

// Random histories: every batch the history lists rebuilds to the model's state after it,
// and with a retention longer than the run nothing is lost, whatever GC did.
class RandomHistoryTest : public HistoryTest, public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(RandomHistoryTest, RebuildsEveryBatchInTheWindow) {
  {
    const std::uint32_t seed = GetParam();
    std::mt19937 rng(seed);
    const bool keep = seed % 2 == 1;
    ReplicaOptions o;
    o.snapshot_every_segments = 2 + rng() % 3;
    o.gc_delete_interval = Duration(0);
    o.gc_off_chain_after = seconds(1);
    o.retention = keep ? hours(24) : Duration(0);
    o.retention_margin = Duration(0);
    Generation gen{1};
    auto r = Open(gen, o);
    for (int step = 0; step < 50; ++step) {
      const unsigned op = rng() % 12;
      if (op < 7) {
        actor::Batch b;
        const int n = 1 + static_cast<int>(rng() % 3);
        if (rng() % 15 == 0) b.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kDeleteAll, {}, {}});
        for (int i = 0; i < n; ++i) {
          std::string key = "k" + std::to_string(rng() % 6);
          if (rng() % 4 == 0) {
            b.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kDelete, key, {}});
          } else {
            b.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, key, std::to_string(rng() % 1000)});
          }
        }
        if (rng() % 5 == 0) b.alarm = rng() % 2 ? std::optional<std::int64_t>(1'800'000'000'000 + rng() % 1000) : std::nullopt;
        Durable(*r, std::move(b));
      } else if (op < 9) {
        Close(r);
        gen = Generation{gen.value + 1};
        r = Open(gen, o);
        ASSERT_TRUE(r);
      } else if (op == 9) {
        auto h = ReadAll();
        ASSERT_TRUE(h.ok()) << h.status().ToString();
        if (h->batches.empty()) continue;
        const BatchId to = h->batches[rng() % h->batches.size()].id;
        auto s = At(PointSpec{std::nullopt, to});
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        Durable(*r, ReplacementBatch(s->state));
      } else {
        world_.RunFor(seconds(1 + rng() % 120));
      }
    }
    world_.RunFor(seconds(5));
    auto h = ReadAll();
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_LE(h->batches.size(), states_.size());
    if (keep) {
      EXPECT_EQ(h->batches.size(), states_.size()) << "the retention keeps every batch";
    }
    const std::size_t offset = states_.size() - h->batches.size();
    for (std::size_t i = 0; i < h->batches.size(); ++i) {
      auto s = At(PointSpec{std::nullopt, h->batches[i].id});
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      ASSERT_EQ(Of(s->state), states_[offset + i]) << "at " << h->batches[i].id.ToString();
    }
    Close(r);
  }
}
INSTANTIATE_TEST_SUITE_P(Seeds, RandomHistoryTest, ::testing::Range<std::uint32_t>(1, 13));

// GC with retention keeps the window and collects what is older than it.
TEST_F(HistoryTest, GarbageCollectionKeepsTheWindowAndCollectsWhatIsOlder) {
  auto r = Open(Generation{1}, HourOfRetention());
  WriteTenMinuteByMinute(*r);
  EXPECT_TRUE(Has(SegmentKey(actor_, {1, 1}))) << "inside the window: kept";
  auto h = ReadAll(hours(1));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->batches.size(), 10u);

  world_.RunFor(hours(2));
  for (int i = 10; i < 16; ++i) Durable(*r, testing::Put("k", std::to_string(i)));
  EXPECT_FALSE(Has(SegmentKey(actor_, {1, 1}))) << "older than the window: collected";
  h = ReadAll(hours(1));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_LT(h->batches.size(), 16u);
  ASSERT_TRUE(h->earliest_ms.has_value());
  EXPECT_GE(*h->earliest_ms, ToUnixMs(env_.WallNow()) - 3'601'000) << "never before the window";
  Close(r);
}

// A point older than every batch still retained, at or after the oldest base: the state is
// that snapshot's, named as such (not the empty state).
TEST_F(HistoryTest, APointAtTheOldestBaseIsThatSnapshotsStateNamedSo) {
  auto r = Open(Generation{1}, HourOfRetention());
  WriteTenMinuteByMinute(*r);
  world_.RunFor(hours(2));
  for (int i = 10; i < 16; ++i) {
    Durable(*r, testing::Put("k", std::to_string(i)));
    world_.RunFor(minutes(1));
  }
  EXPECT_FALSE(Has(SegmentKey(actor_, {1, 1}))) << "older than the window: collected";
  // Half an hour ago: inside the window, after the base (the snapshot of the first ten
  // writes, two hours old) and before every batch still retained after it.
  const std::int64_t point = ToUnixMs(env_.WallNow()) - 30 * 60'000;
  auto s = At(PointSpec{point, std::nullopt}, hours(1));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->last.has_value());
  ASSERT_TRUE(s->snapshot.has_value()) << "a snapshot's state, named";
  EXPECT_EQ(Of(s->state), states_[9]) << Show(Of(s->state));
  EXPECT_LE(s->time_ms, point);
  Close(r);
}

// The history reads race the owner's garbage collection: an object listed and gone when read
// is listed again, and after a few such attempts the answer is kRetryable, never kFatal.
class VanishingStore final : public StoreWrapper {
 public:
  VanishingStore(ObjectStore& inner, std::string key, int times) : StoreWrapper(inner), key_(std::move(key)), times_(times) {}
  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    if (key == key_ && times_ > 0) {
      --times_;
      co_return NotFound(key + " collected");
    }
    co_return co_await StoreWrapper::Get(std::move(key), options);
  }

 private:
  std::string key_;
  int times_;
};

TEST_F(HistoryTest, AnObjectCollectedUnderTheReadIsListedAgainThenRetryable) {
  auto r = Open(Generation{1});
  Durable(*r, testing::Put("a", "1"));
  Durable(*r, testing::Put("a", "2"));
  const std::string key = SegmentKey(actor_, {1, 2});
  ASSERT_TRUE(Has(key));
  {
    VanishingStore once(*store_, key, 1);
    auto s = RunTask(world_, env_, StateAt(env_, once, actor_, PointSpec{std::nullopt, BatchId{{1, 2}, 1}}, Options()));
    ASSERT_TRUE(s && s->ok()) << (s ? s->status().ToString() : "did not finish");
    EXPECT_EQ(Of((*s)->state), states_[1]);
    VanishingStore once_more(*store_, key, 1);
    auto h = RunTask(world_, env_, ReadHistory(env_, once_more, actor_, Options()));
    ASSERT_TRUE(h && h->ok()) << (h ? h->status().ToString() : "did not finish");
    EXPECT_EQ((*h)->batches.size(), 2u);
  }
  VanishingStore always(*store_, key, 1000);
  auto s = RunTask(world_, env_, StateAt(env_, always, actor_, PointSpec{std::nullopt, BatchId{{1, 2}, 1}}, Options()));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code(), Code::kRetryable) << s->status().ToString();
  auto h = RunTask(world_, env_, ReadHistory(env_, always, actor_, Options()));
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->code(), Code::kRetryable) << h->status().ToString();
  Close(r);
}

TEST(GcRetentionTest, KeepFromHoldsTheChainAfterItAndItsSnapshots) {
  GcInput in;
  in.generation = Generation{3};
  in.snapshot = Position{3, 3};
  in.keep_from = Position{1, 4};
  in.chain = {{1, 4}, {1, 5}, {2, 0}, {2, 1}, {2, 2}};
  in.segments = {{1, 0}, {1, 3}, {1, 4}, {1, 5}, {2, 0}, {2, 1}, {2, 2}, {2, 3}, {3, 0}, {3, 1}, {3, 2}, {3, 3}};
  in.snapshots = {{1, 2}, {1, 4}, {2, 2}, {3, 3}};
  in.off_chain_ripe = true;
  in.broken = BrokenModels::FromEnvironment().value();  // scripts/check-proofs.sh
  const GcPlan plan = PlanGc(in);
  EXPECT_EQ(plan.segments, (std::vector<Position>{{1, 0}, {1, 3}, {1, 4}, {2, 3}}))
      << "up to the base the window needs, and the late upload 2-3";
  EXPECT_EQ(plan.snapshots, (std::vector<Position>{{1, 2}})) << "1-4 is the base, 2-2 on the chain after it";
}

// Under retention a pass lists the whole retained log, so passes start at least a sixtieth of
// the retention margin apart (replica.cc, RetainedPassInterval); one asked for sooner runs
// once that has passed, not never. With no margin (the control) every snapshot's pass runs:
// the control is what the test sees with the rule switched off.
TEST_F(HistoryTest, PassesUnderRetentionAreASixtiethOfTheMarginApartAndNoneIsLost) {
  auto passes_for = [this](Duration margin, Generation gen) {
    ReplicaOptions o = HourOfRetention();  // a snapshot every 2 segments
    o.retention_margin = margin;
    auto r = Open(gen, o);
    const std::uint64_t lists_before = bucket_->counts().list;
    for (int i = 0; i < 20; ++i) Durable(*r, testing::Put("k", std::to_string(i)));  // a second each: 20 s
    const std::uint64_t during = bucket_->counts().list - lists_before;
    world_.RunFor(seconds(15));
    const std::uint64_t after = bucket_->counts().list - lists_before;
    Close(r);
    return std::pair{during, after};
  };
  // Ten minutes of margin: a pass every 10 s. Each pass lists the log's segments and snapshots.
  const auto [throttled, throttled_after] = passes_for(minutes(10), Generation{1});
  EXPECT_LE(throttled, 3u * 2) << "in 20 s: the first pass and at most one every 10 s";
  EXPECT_GT(throttled_after, throttled) << "the pass asked for meanwhile ran once its 10 s had passed";
  const auto [control, control_after] = passes_for(Duration(0), Generation{2});
  EXPECT_GE(control, 2u * 8) << "no margin: a pass per snapshot (10 snapshots)";
  (void)control_after;
}

}  // namespace
}  // namespace wk::replica
