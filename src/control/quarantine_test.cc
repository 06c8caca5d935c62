// Quarantine records on mem:// in virtual time: the strict format (byte-exact, every
// rejection, mutations), strikes and their window, racing writers that lose no strike,
// lost replies, lifting, listing, and the per-node cache.
#include "control/quarantine.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "control/testing/fixture.h"
#include "control/quarantine_cache.h"

namespace wk::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const ActorId kActor{"acme", "poison", "p1"};

QuarantineRecord Sample() {
  QuarantineRecord r;
  r.actor = kActor;
  r.until = FromUnixMs(1'764'000'600'000);
  r.reason = "the event reached the worker's V8 heap limit (actors.isolate_heap_limit_bytes)";
  r.strikes = {{FromUnixMs(1'764'000'000'000), "n1", "0123456789abcdef"},
               {FromUnixMs(1'764'000'000'500), "node-2.b", "fedcba9876543210"}};
  return r;
}

const std::string kSampleBody =
    "wasmkeep-quarantine 1\n"
    "actor acme/poison/p1\n"
    "until_ms 1764000600000\n"
    "reason the event reached the worker's V8 heap limit (actors.isolate_heap_limit_bytes)\n"
    "strikes 2\n"
    "1764000000000 n1 0123456789abcdef\n"
    "1764000000500 node-2.b fedcba9876543210\n";

TEST(QuarantineFormatTest, RoundTripIsByteExact) {
  EXPECT_EQ(EncodeQuarantineRecord(Sample()), kSampleBody);
  auto d = DecodeQuarantineRecord(kSampleBody, kActor);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, Sample());
  EXPECT_EQ(EncodeQuarantineRecord(*d), kSampleBody);
  QuarantineRecord never = Sample();
  never.until = WallTime{};
  never.strikes.resize(1);
  EXPECT_EQ(DecodeQuarantineRecord(EncodeQuarantineRecord(never), kActor).value(), never);
  EXPECT_EQ(QuarantineKey(kActor), "quarantine/acme/poison/p1");
  EXPECT_EQ(Sample().window_start(), FromUnixMs(1'764'000'000'000));
}

TEST(QuarantineFormatTest, EveryRejection) {
  const std::string head = "wasmkeep-quarantine 1\nactor acme/poison/p1\nuntil_ms 5\nreason r\n";
  const std::string ok = head + "strikes 1\n1 n1 0123456789abcdef\n";
  ASSERT_TRUE(DecodeQuarantineRecord(ok, kActor).ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"empty", ""},
      {"another version", "wasmkeep-quarantine 2\nactor acme/poison/p1\nuntil_ms 5\nreason r\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"another kind", "wasmkeep-owner 1\nactor acme/poison/p1\nuntil_ms 5\nreason r\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"another actor", "wasmkeep-quarantine 1\nactor acme/poison/p2\nuntil_ms 5\nreason r\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"no final newline", ok.substr(0, ok.size() - 1)},
      {"CR LF", head + "strikes 1\r\n1 n1 0123456789abcdef\n"},
      {"empty line", head + "\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"until with a leading zero", "wasmkeep-quarantine 1\nactor acme/poison/p1\nuntil_ms 05\nreason r\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"negative until", "wasmkeep-quarantine 1\nactor acme/poison/p1\nuntil_ms -5\nreason r\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"fields out of order", "wasmkeep-quarantine 1\nactor acme/poison/p1\nreason r\nuntil_ms 5\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"an unknown field", "wasmkeep-quarantine 1\nactor acme/poison/p1\nuntil_ms 5\nwhy r\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"no reason", "wasmkeep-quarantine 1\nactor acme/poison/p1\nuntil_ms 5\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"a reason too long", "wasmkeep-quarantine 1\nactor acme/poison/p1\nuntil_ms 5\nreason " + std::string(301, 'x') +
                                "\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"a reason with a trailing space", head.substr(0, head.size() - 1) + " \nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"a non-printable byte", "wasmkeep-quarantine 1\nactor acme/poison/p1\nuntil_ms 5\nreason r\x01\nstrikes 1\n1 n1 0123456789abcdef\n"},
      {"no strikes", head + "strikes 0\n"},
      {"too many strikes", head + "strikes 101\n"},
      {"fewer strike lines than counted", head + "strikes 2\n1 n1 0123456789abcdef\n"},
      {"more strike lines than counted", ok + "2 n1 1123456789abcdef\n"},
      {"a strike of two parts", head + "strikes 1\n1 0123456789abcdef\n"},
      {"a strike of four parts", head + "strikes 1\n1 n1 0123456789abcdef x\n"},
      {"two spaces in a strike", head + "strikes 1\n1  n1 0123456789abcdef\n"},
      {"a bad strike time", head + "strikes 1\n01 n1 0123456789abcdef\n"},
      {"a negative strike time", head + "strikes 1\n-1 n1 0123456789abcdef\n"},
      {"a bad node id", head + "strikes 1\n1 n/1 0123456789abcdef\n"},
      {"an upper-case strike id", head + "strikes 1\n1 n1 0123456789ABCDEF\n"},
      {"a short strike id", head + "strikes 1\n1 n1 0123456789abcde\n"},
      {"a repeated strike id", head + "strikes 2\n1 n1 0123456789abcdef\n2 n2 0123456789abcdef\n"},
      {"bytes after the record", ok + "x"},
  };
  for (const auto& [what, body] : bad) {
    auto d = DecodeQuarantineRecord(body, kActor);
    EXPECT_FALSE(d.ok()) << what;
    if (!d.ok()) {
      EXPECT_EQ(d.code(), Code::kFatal) << what;
      EXPECT_NE(d.status().message().find("corrupt wasmkeep-quarantine 1 record quarantine/acme/poison/p1"),
                std::string::npos)
          << what << ": " << d.status().message();
    }
  }
}

TEST(QuarantineFormatTest, MutatedRecordsNeverCrashAndAcceptedOnesRoundTrip) {
  std::mt19937_64 rng(7);
  int accepted = 0;
  for (int i = 0; i < 20'000; ++i) {
    std::string t = kSampleBody;
    t[rng() % t.size()] = static_cast<char>(rng() % 256);
    if (rng() % 4 == 0) t.resize(rng() % t.size());
    if (auto d = DecodeQuarantineRecord(t, kActor); d.ok()) {
      ++accepted;
      EXPECT_EQ(EncodeQuarantineRecord(*d), t);
    }
  }
  EXPECT_GT(accepted, 0) << "some mutations (a digit for a digit) are still records";
}

TEST(QuarantineFormatTest, ReasonsAreCleanedForTheRecord) {
  EXPECT_EQ(CleanReason("  heap\nlimit\x01  "), "heap?limit?");
  EXPECT_EQ(CleanReason(""), "unknown");
  EXPECT_EQ(CleanReason("   "), "unknown");
  EXPECT_EQ(CleanReason(std::string(500, 'x')).size(), kMaxReasonBytes);
  EXPECT_EQ(CleanReason(std::string(kMaxReasonBytes - 1, 'x') + "  y"), std::string(kMaxReasonBytes - 1, 'x'))
      << "cut, then no space at the end";
}

TEST(QuarantineFormatTest, PolicyBoundsNameTheSetting) {
  EXPECT_TRUE(ValidateQuarantinePolicy({}).ok());
  EXPECT_TRUE(ValidateQuarantinePolicy({0, seconds(1), seconds(1)}).ok()) << "0 is off";
  EXPECT_NE(ValidateQuarantinePolicy({101, seconds(1), seconds(1)}).message().find("actors.quarantine_strikes"),
            std::string::npos);
  EXPECT_NE(ValidateQuarantinePolicy({3, Duration{0}, seconds(1)}).message().find("actors.quarantine_window_ms"),
            std::string::npos);
  EXPECT_NE(ValidateQuarantinePolicy({3, seconds(1), std::chrono::hours(24 * 8)}).message().find("actors.quarantine_ms"),
            std::string::npos);
}

TEST(QuarantineFormatTest, UtcTimes) {
  EXPECT_EQ(FormatUtc(FromUnixMs(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatUtc(FromUnixMs(1'764'000'600'123)), "2025-11-24T16:10:00.123Z");
}

struct QuarantineTest : ControlTest {
  QuarantinePolicy policy{3, seconds(600), seconds(300)};
  Result<StrikeOutcome> Strike(const std::string& node = "n1", const std::string& reason = "heap limit") {
    return Run(RecordStrike(store, env, kActor, node, reason, policy));
  }
  // `writers` strikes from nodes n0.. at once, run to the end; each one's outcome.
  std::vector<std::optional<Result<StrikeOutcome>>> RaceStrikes(int writers) {
    std::vector<std::optional<Result<StrikeOutcome>>> out(writers);
    for (int i = 0; i < writers; ++i) {
      env.Spawn([](ObjectStore* s, Env* e, QuarantinePolicy p, std::string node,
                   std::optional<Result<StrikeOutcome>>* o) -> Task<void> {
        o->emplace(co_await RecordStrike(*s, *e, kActor, node, "race", p));
      }(&store, &env, policy, "n" + std::to_string(i), &out[i]), "strike");
    }
    world.RunUntilIdle();
    return out;
  }
  std::optional<QuarantineRecord> Read() {
    auto r = Run(ReadQuarantine(store, kActor));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::nullopt;
  }
  void Advance(Duration d) { world.RunFor(d); }
};

TEST_F(QuarantineTest, ThreeStrikesWithinTheWindowQuarantineForTheDuration) {
  auto s1 = Strike("n1", "first");
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();
  EXPECT_TRUE(s1->counted);
  EXPECT_FALSE(s1->quarantined_now);
  EXPECT_EQ(s1->record.until, WallTime{});
  Advance(seconds(10));
  auto s2 = Strike("n2", "second");
  ASSERT_TRUE(s2.ok());
  EXPECT_FALSE(s2->quarantined_now);
  Advance(seconds(10));
  const WallTime third_at = env.WallNow();
  auto s3 = Strike("n3", "third");
  ASSERT_TRUE(s3.ok());
  EXPECT_TRUE(s3->counted);
  EXPECT_TRUE(s3->quarantined_now);
  EXPECT_EQ(s3->record.until, third_at + seconds(300));
  EXPECT_EQ(s3->record.reason, "third");
  auto stored = Read();
  ASSERT_TRUE(stored);
  EXPECT_EQ(*stored, s3->record);
  ASSERT_EQ(stored->strikes.size(), 3u);
  EXPECT_EQ(stored->strikes[1].node, "n2");
  EXPECT_TRUE(stored->QuarantinedAt(env.WallNow()));

  // While quarantined a strike changes nothing (no write at all).
  const auto puts = bucket->counts().put;
  auto s4 = Strike("n1", "fourth");
  ASSERT_TRUE(s4.ok());
  EXPECT_FALSE(s4->counted);
  EXPECT_EQ(bucket->counts().put, puts);
  EXPECT_EQ(Read()->reason, "third");

  // Once it ends, the strikes it was imposed for are spent: one more strike is one, not four.
  Advance(seconds(301));
  EXPECT_FALSE(Read()->QuarantinedAt(env.WallNow()));
  auto s5 = Strike("n1", "after");
  ASSERT_TRUE(s5.ok());
  EXPECT_TRUE(s5->counted);
  EXPECT_FALSE(s5->quarantined_now);
  EXPECT_EQ(s5->record.strikes.size(), 1u);
  EXPECT_EQ(s5->record.until, s3->record.until) << "the old until stays: it marks which strikes were spent";
}

// Records that do nothing any more are deleted by the sweep; the others stay: one quarantined
// now, one whose strike still counts, one corrupt.
TEST_F(QuarantineTest, TheSweepDeletesOnlyRecordsThatDoNothingAnyMore) {
  auto put = [&](const ActorId& a, WallTime until, std::vector<WallTime> strikes) {
    QuarantineRecord r;
    r.actor = a;
    r.until = until;
    r.reason = "test";
    for (WallTime at : strikes) r.strikes.push_back(control::Strike{at, "n1", "0123456789abcdef"});
    ASSERT_TRUE(bucket->ApplyPut(QuarantineKey(a), EncodeQuarantineRecord(r), Precondition::None()).ok());
  };
  Advance(std::chrono::hours(2));
  const WallTime now = env.WallNow();
  const ActorId quarantined{"t", "c", "now"}, ended{"t", "c", "ended"}, old_strike{"t", "c", "old"},
      recent_strike{"t", "c", "recent"}, corrupt{"t", "c", "corrupt"};
  put(quarantined, now + seconds(60), std::vector<WallTime>{now - seconds(10)});
  put(ended, now - std::chrono::hours(1), std::vector<WallTime>{now - std::chrono::minutes(61)});
  put(old_strike, WallTime{}, std::vector<WallTime>{std::chrono::time_point_cast<WallTime::duration>(now - policy.window - kSpentMargin - seconds(1))});
  put(recent_strike, WallTime{}, std::vector<WallTime>{now - seconds(30)});
  ASSERT_TRUE(bucket->ApplyPut(QuarantineKey(corrupt), "not a record", Precondition::None()).ok());
  auto deleted = Run(DeleteSpentQuarantines(store, env, policy));
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 2u);
  EXPECT_EQ(bucket->objects().count(QuarantineKey(ended)), 0u);
  EXPECT_EQ(bucket->objects().count(QuarantineKey(old_strike)), 0u);
  EXPECT_EQ(bucket->objects().count(QuarantineKey(quarantined)), 1u);
  EXPECT_EQ(bucket->objects().count(QuarantineKey(recent_strike)), 1u);
  EXPECT_EQ(bucket->objects().count(QuarantineKey(corrupt)), 1u) << "a corrupt record is an operator's";
}

TEST_F(QuarantineTest, StrikesOlderThanTheWindowNoLongerCount) {
  ASSERT_TRUE(Strike().ok());
  ASSERT_TRUE(Strike().ok());
  Advance(seconds(601));
  auto s = Strike();
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->quarantined_now);
  EXPECT_EQ(s->record.strikes.size(), 1u) << "the two old strikes fell out of the window";
  ASSERT_TRUE(Strike().ok());
  auto q = Strike();
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->quarantined_now);
}

// The core concurrency property: strikes from several nodes at once are never lost. Every
// request takes 5 ms, so the writers read the same version and all but one write conflict
// each round; each re-reads and retries.
TEST_F(QuarantineTest, RacingStrikesFromSeveralNodesAreAllCounted) {
  policy.strikes = 10;
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(5)}; });
  constexpr int kWriters = 4;
  auto out = RaceStrikes(kWriters);
  for (int i = 0; i < kWriters; ++i) {
    ASSERT_TRUE(out[i].has_value() && out[i]->ok()) << i << ": " << (out[i] ? out[i]->status().ToString() : "not done");
    EXPECT_TRUE((*out[i])->counted);
  }
  EXPECT_GE(bucket->counts().precondition_failed, 1u) << "the race happened";
  store.set_fault_hook(nullptr);
  auto stored = Read();
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->strikes.size(), static_cast<std::size_t>(kWriters)) << "no strike lost";
  std::set<std::string> nodes;
  for (const auto& s : stored->strikes) nodes.insert(s.node);
  EXPECT_EQ(nodes.size(), static_cast<std::size_t>(kWriters));
}

// Racing strikes that reach the count: exactly one of them imposes the quarantine.
TEST_F(QuarantineTest, RacingStrikesQuarantineExactlyOnce) {
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(5)}; });
  constexpr int kWriters = 5;
  auto out = RaceStrikes(kWriters);
  int counted = 0, imposed = 0;
  for (auto& o : out) {
    ASSERT_TRUE(o.has_value() && o->ok());
    counted += (*o)->counted ? 1 : 0;
    imposed += (*o)->quarantined_now ? 1 : 0;
  }
  EXPECT_EQ(counted, 3) << "the strikes after the third found it quarantined";
  EXPECT_EQ(imposed, 1);
  store.set_fault_hook(nullptr);
  EXPECT_EQ(Read()->strikes.size(), 3u);
}

TEST_F(QuarantineTest, ALostReplyIsResolvedByItsStrikeIdAndCountedOnce) {
  // The first put lands but its reply is lost (kUnknownOutcome at the deadline).
  int puts = 0;
  store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut) f.lose_reply = puts++ == 0;
    return f;
  });
  auto s = Run(RecordStrike(store, env, kActor, "n1", "lost", policy, CallOptions{seconds(1)}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->counted);
  store.set_fault_hook(nullptr);
  EXPECT_EQ(puts, 1) << "found by reading back, not written again";
  EXPECT_EQ(Read()->strikes.size(), 1u);
}

TEST_F(QuarantineTest, ACorruptRecordIsNeverOverwritten) {
  Corrupt(QuarantineKey(kActor), "wasmkeep-quarantine 1\ngarbage\n");
  auto s = Strike();
  EXPECT_EQ(s.code(), Code::kFatal);
  EXPECT_EQ(bucket->objects().at(QuarantineKey(kActor)).body, "wasmkeep-quarantine 1\ngarbage\n");
  EXPECT_EQ(Run(ReadQuarantine(store, kActor)).code(), Code::kFatal);
  auto list = Run(ListQuarantine(store, std::nullopt));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_FALSE((*list)[0].record);
  EXPECT_NE((*list)[0].error.find("corrupt"), std::string::npos);
  // The operator's way out.
  EXPECT_TRUE(Run(LiftQuarantine(store, kActor)).ok());
  EXPECT_TRUE(Strike().ok());
}

TEST_F(QuarantineTest, LiftDeletesTheRecordAndListingFindsEachTenant) {
  EXPECT_EQ(Run(LiftQuarantine(store, kActor)).code(), Code::kNotFound);
  ASSERT_TRUE(Strike().ok());
  const ActorId other{"beta", "c", "x"};
  ASSERT_TRUE(Run(RecordStrike(store, env, other, "n1", "oom", policy)).ok());
  auto all = Run(ListQuarantine(store, std::nullopt));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].actor, kActor);
  EXPECT_EQ((*all)[1].actor, other);
  auto beta = Run(ListQuarantine(store, std::string("beta")));
  ASSERT_TRUE(beta.ok());
  ASSERT_EQ(beta->size(), 1u);
  EXPECT_EQ((*beta)[0].record->reason, "oom");
  EXPECT_EQ(Run(ListQuarantine(store, std::string("Bad"))).code(), Code::kInvalidArgument);
  EXPECT_TRUE(Run(LiftQuarantine(store, kActor)).ok());
  EXPECT_FALSE(Read().has_value());
  EXPECT_EQ(Run(RecordStrike(store, env, kActor, "bad/node", "x", policy)).code(), Code::kInvalidArgument);
  QuarantinePolicy off{0, seconds(1), seconds(1)};
  EXPECT_EQ(Run(RecordStrike(store, env, kActor, "n1", "x", off)).code(), Code::kInvalidArgument);
}

// ---- the cache

struct QuarantineCacheTest : QuarantineTest {
  QuarantineCache cache{env, store, QuarantineCacheOptions{seconds(2), 4, CallOptions{seconds(1)}}};
  Result<std::optional<QuarantineRecord>> Check(const ActorId& id, QuarantineRead read = QuarantineRead::kOnMiss) {
    return Run(cache.Check(id, read));
  }
};

TEST_F(QuarantineCacheTest, ANegativeAnswerCostsOneReadPerTtlNotOnePerRequest) {
  for (int i = 0; i < 100; ++i) {
    auto c = Check(kActor);
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE(c->has_value());
  }
  EXPECT_EQ(bucket->counts().get, 1u);
  EXPECT_EQ(cache.stats().reads, 1u);
  EXPECT_EQ(cache.stats().cached, 99u);
  Advance(seconds(2));
  ASSERT_TRUE(Check(kActor).ok());
  EXPECT_EQ(bucket->counts().get, 2u) << "read again after ttl";
}

TEST_F(QuarantineCacheTest, AQuarantineIsSeenWithinTtlAndALiftToo) {
  ASSERT_TRUE(Check(kActor).ok());  // remembered: not quarantined
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Strike("n2").ok());  // another node quarantines it
  EXPECT_FALSE(Check(kActor)->has_value()) << "within ttl this node does not know yet";
  // ... unless a check asks whatever it knows (kAlways).
  auto before_acquire = Check(kActor, QuarantineRead::kAlways);
  ASSERT_TRUE(before_acquire.ok());
  EXPECT_TRUE(before_acquire->has_value());
  EXPECT_TRUE(Check(kActor)->has_value()) << "and what it read is remembered";
  Advance(seconds(2));
  auto q = Check(kActor);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->strikes.size(), 3u);
  EXPECT_TRUE(cache.Peek(kActor).has_value());
  ASSERT_TRUE(Run(LiftQuarantine(store, kActor)).ok());
  Advance(seconds(2));
  EXPECT_FALSE(cache.Peek(kActor).has_value()) << "a stale entry is no answer";
  EXPECT_FALSE(Check(kActor)->has_value());
}

TEST_F(QuarantineCacheTest, WithoutReadOnMissNothingIsRead) {
  EXPECT_FALSE(Check(kActor, QuarantineRead::kNever)->has_value());
  EXPECT_EQ(bucket->counts().get, 0u);
}

TEST_F(QuarantineCacheTest, RememberedRecordsAnswerWithoutAnyRead) {
  StrikeOutcome last;
  for (int i = 0; i < 3; ++i) last = Strike().value();
  ASSERT_TRUE(last.quarantined_now);
  const auto gets = bucket->counts().get;
  cache.Remember(last.record);
  EXPECT_TRUE(cache.Peek(kActor).has_value());
  EXPECT_TRUE(Check(kActor, QuarantineRead::kNever)->has_value());
  EXPECT_EQ(bucket->counts().get, gets);
  cache.Forget(kActor);
  EXPECT_FALSE(cache.Peek(kActor).has_value());
}

TEST_F(QuarantineCacheTest, EntriesAreBoundedAndErrorsAreNotRemembered) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Check(ActorId{"acme", "c", "a" + std::to_string(i)}).ok());
  EXPECT_LE(cache.size(), 4u);
  EXPECT_GE(cache.stats().clears, 1u);
  Corrupt(QuarantineKey(kActor), "junk\n");
  EXPECT_EQ(Check(kActor).code(), Code::kFatal);
  EXPECT_EQ(Check(kActor).code(), Code::kFatal) << "read again, not remembered";
  store.set_fault_hook([](const OpInfo&) { return OpFault{Duration{0}, Duration{0}, Retryable("down")}; });
  const ActorId fresh{"acme", "c", "fresh"};
  EXPECT_EQ(Check(fresh).code(), Code::kRetryable);
  store.set_fault_hook(nullptr);
  EXPECT_TRUE(Check(fresh).ok());
  EXPECT_EQ(cache.stats().read_failures, 3u);
}

// Older news never replaces newer (broken model quarantine-cache-keeps-late-answer). Two
// strikes of this node ran at once: the one that quarantined the actor answered first, the
// other's reply (its record one strike short) came late. And a read sent before a strike
// was remembered, answered after it, does not hide it either.
TEST_F(QuarantineCacheTest, ALateAnswerNeverHidesANewerQuarantine) {
  auto broken = BrokenModels::FromEnvironment();
  ASSERT_TRUE(broken.ok());
  QuarantineCache late{env, store, QuarantineCacheOptions{seconds(2), 4, CallOptions{seconds(1)}, *broken}};
  const MonoTime first_sent = env.MonoNow();
  StrikeOutcome two;
  for (int i = 0; i < 2; ++i) two = Strike().value();
  Advance(milliseconds(100));
  const MonoTime second_sent = env.MonoNow();
  const StrikeOutcome three = Strike().value();
  ASSERT_TRUE(three.quarantined_now);
  late.Remember(three.record, second_sent);
  late.Remember(two.record, first_sent);  // the slower strike's reply
  EXPECT_TRUE(late.Peek(kActor).has_value()) << "the quarantine was forgotten for an older record";
  // The same when the late one was sent after: its record holds fewer strikes.
  late.Forget(kActor);
  late.Remember(three.record, first_sent);
  late.Remember(two.record, second_sent);
  EXPECT_TRUE(late.Peek(kActor).has_value()) << "a record the remembered one contains replaced it";
  // A read sent before the strike was remembered and answered after: still quarantined.
  late.Forget(kActor);
  ASSERT_TRUE(Run(LiftQuarantine(store, kActor)).ok());
  const MonoTime read_sent = env.MonoNow();
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(500), Duration{0}, std::nullopt, false}; });
  std::optional<Result<std::optional<QuarantineRecord>>> answer;
  env.Spawn([](QuarantineCache* c, std::optional<Result<std::optional<QuarantineRecord>>>* out) -> Task<void> {
    out->emplace(co_await c->Check(kActor, QuarantineRead::kAlways));
  }(&late, &answer), "slow read");
  Advance(milliseconds(100));
  late.Remember(three.record, read_sent + milliseconds(50));  // a strike sent after the read
  Advance(seconds(1));
  store.set_fault_hook(nullptr);
  ASSERT_TRUE(answer && answer->ok());
  EXPECT_TRUE((*answer)->has_value()) << "the read's older answer was taken over the strike";
  EXPECT_TRUE(late.Peek(kActor).has_value());
}

// ---- the listing (docs/security.md, "The check, and what it costs")

struct QuarantineListingTest : QuarantineTest {
  // list_after 1: every check memory cannot answer lists, unless a fresh listing exists.
  QuarantineCacheOptions Options(std::uint32_t list_after = 1) {
    QuarantineCacheOptions o{seconds(2), 100, CallOptions{seconds(1)}};
    o.list_after = list_after;
    auto broken = BrokenModels::FromEnvironment();
    EXPECT_TRUE(broken.ok());
    if (broken.ok()) o.broken = *broken;
    return o;
  }
  Result<std::optional<QuarantineRecord>> Check(QuarantineCache& c, const ActorId& id,
                                                QuarantineRead read = QuarantineRead::kOnMiss) {
    return Run(c.Check(id, read));
  }
  static ActorId Nth(int i) { return ActorId{"acme", "c", "a" + std::to_string(i)}; }
  // Quarantines kActor as another node would: three strikes, none remembered here.
  void QuarantineElsewhere() {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(Strike("n" + std::to_string(i + 2)).ok());
    ASSERT_TRUE(Read()->QuarantinedAt(env.WallNow()));
  }
};

// The "none for the quarantine check of an actor no node has quarantined": once the
// listing is fresh, a start's check of an actor without a record costs no request at all,
// and one with a record this node read at that version costs none either.
TEST_F(QuarantineListingTest, ANotQuarantinedActorCostsNoGetOnceTheListingIsFresh) {
  QuarantineCache cache{env, store, Options()};
  QuarantineElsewhere();
  for (int i = 0; i < 50; ++i) {
    auto c = Check(cache, Nth(i));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_FALSE(c->has_value());
  }
  EXPECT_EQ(bucket->counts().list, 1u) << "one listing answered every start";
  const auto gets_before = bucket->counts().get;
  EXPECT_EQ(cache.stats().reads, 0u);
  EXPECT_EQ(cache.stats().listed, 50u);
  // The one actor with a record is read (the listing has its key, not its body)...
  auto q = Check(cache, kActor);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->has_value()) << "quarantined by another node, and seen";
  EXPECT_EQ(bucket->counts().get, gets_before + 1);
  // ... and next time taken from the listing: the record's version there is the one read.
  Advance(seconds(2));
  EXPECT_TRUE(Check(cache, kActor)->has_value());
  EXPECT_FALSE(Check(cache, Nth(7))->has_value());
  EXPECT_EQ(bucket->counts().list, 2u) << "the stale listing was made again, once";
  EXPECT_EQ(bucket->counts().get, gets_before + 1) << "no GET: the listing showed the record unchanged";
  // A check before routing (kNever) never asks the bucket, and knows what the listing knows.
  EXPECT_TRUE(Check(cache, kActor, QuarantineRead::kNever)->has_value());
  EXPECT_TRUE(cache.Peek(kActor).has_value());
  EXPECT_FALSE(cache.Peek(Nth(3)).has_value());
  EXPECT_EQ(bucket->counts().list, 2u);
}

// Money: a LIST costs what 12.5 GETs cost on S3 and R2. A quiet node reads the records of
// the actors it starts; from the list_after-th start within one ttl it lists instead.
TEST_F(QuarantineListingTest, AQuietNodeReadsRecordsAndABusyOneListsOnceATtl) {
  QuarantineCache cache{env, store, Options(kDefaultQuarantineListAfter)};
  for (int i = 0; i < 11; ++i) ASSERT_TRUE(Check(cache, Nth(i)).ok());
  EXPECT_EQ(bucket->counts().get, 11u);
  EXPECT_EQ(bucket->counts().list, 0u) << "11 GETs are cheaper than a LIST";
  for (int i = 11; i < 100; ++i) ASSERT_TRUE(Check(cache, Nth(i)).ok());
  EXPECT_EQ(bucket->counts().get, 11u) << "the 12th start listed, and the listing answered the rest";
  EXPECT_EQ(bucket->counts().list, 1u);
  // Ten starts a second for 6 s: one listing a ttl, and no GET.
  for (int i = 0; i < 30; ++i) {
    Advance(milliseconds(200));
    for (int j = 0; j < 2; ++j) ASSERT_TRUE(Check(cache, Nth(1000 + 2 * i + j)).ok());
  }
  EXPECT_EQ(bucket->counts().get, 11u) << "a busy node read records";
  EXPECT_EQ(bucket->counts().list, 4u) << "one listing a ttl while starts keep coming";
  // A start per ttl: reads, never lists.
  for (int i = 0; i < 5; ++i) {
    Advance(seconds(2));
    ASSERT_TRUE(Check(cache, Nth(200 + i)).ok());
  }
  EXPECT_EQ(bucket->counts().get, 16u);
  EXPECT_EQ(bucket->counts().list, 4u);
  // 0: never lists.
  QuarantineCache reader{env, store, Options(0)};
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Check(reader, Nth(300 + i)).ok());
  EXPECT_EQ(bucket->counts().list, 4u);
  EXPECT_EQ(bucket->counts().get, 46u);
}

// The bound (broken model quarantine-listing-outlives-ttl): a start trusts a listing for the
// cache's ttl from its sending, so another node's quarantine reaches it within that, and an
// operator's lift too.
TEST_F(QuarantineListingTest, AQuarantineImposedElsewhereIsSeenByAStartWithinTheTtl) {
  QuarantineCache cache{env, store, Options()};
  EXPECT_FALSE(Check(cache, kActor)->has_value());
  EXPECT_EQ(bucket->counts().list, 1u);
  Advance(milliseconds(500));
  QuarantineElsewhere();
  EXPECT_FALSE(Check(cache, kActor)->has_value()) << "within the ttl of the listing: not known yet (the bound)";
  Advance(milliseconds(1500));
  auto seen = Check(cache, kActor);
  ASSERT_TRUE(seen.ok());
  EXPECT_TRUE(seen->has_value()) << "a start 2 s after the listing trusted it still";
  ASSERT_TRUE(Run(LiftQuarantine(store, kActor)).ok());
  EXPECT_TRUE(Check(cache, kActor)->has_value()) << "the lift reaches this node within the ttl, not at once";
  Advance(seconds(2));
  EXPECT_FALSE(Check(cache, kActor)->has_value()) << "lifted, and the next listing says so";
}

// News is only as late as its request (broken model quarantine-cache-keeps-late-answer): a
// listing sent before a strike of this node landed, and answered after the strike's reply
// was remembered, does not hide the quarantine that strike imposed.
TEST_F(QuarantineListingTest, AStrikeAnsweredWhileAListingWasOnItsWayIsNotHiddenByIt) {
  QuarantineCache cache{env, store, Options()};
  const QuarantinePolicy at_once{1, seconds(600), seconds(300)};  // one strike quarantines
  // A listing, answered at once by the bucket (kActor has no record yet), whose reply takes
  // 800 ms.
  store.set_fault_hook([](const OpInfo& op) {
    return op.op == StoreOp::kList ? OpFault{Duration{0}, milliseconds(800), std::nullopt, false} : OpFault{};
  });
  std::optional<Result<std::optional<QuarantineRecord>>> other;
  env.Spawn([](QuarantineCache* c, std::optional<Result<std::optional<QuarantineRecord>>>* out) -> Task<void> {
    out->emplace(co_await c->Check(Nth(1), QuarantineRead::kOnMiss));
  }(&cache, &other), "a start's check");
  Advance(milliseconds(100));
  const MonoTime sent = env.MonoNow();
  auto strike = Run(RecordStrike(store, env, kActor, "n1", "heap limit", at_once));
  ASSERT_TRUE(strike.ok() && strike->quarantined_now);
  cache.Remember(strike->record, sent);  // as QuarantineStrikes does with its reply
  Advance(seconds(1));
  store.set_fault_hook(nullptr);
  ASSERT_TRUE(other && other->ok());
  EXPECT_EQ(bucket->counts().list, 1u);
  auto q = Check(cache, kActor);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->has_value()) << "the listing sent before the strike landed hid the quarantine";
  EXPECT_TRUE(cache.Peek(kActor).has_value());
}

// A burst of starts shares one listing; a listing of more records than the cache holds is not
// used (reads instead), and what the cache forgot is never answered by an older listing.
TEST_F(QuarantineListingTest, ABurstSharesOneListingAndAnOlderListingNeverAnswersForWhatWasForgotten) {
  QuarantineCache cache{env, store, Options()};
  store.set_fault_hook([](const OpInfo& op) {
    return op.op == StoreOp::kList ? OpFault{milliseconds(50), milliseconds(50), std::nullopt, false} : OpFault{};
  });
  std::vector<std::optional<Result<std::optional<QuarantineRecord>>>> answers(20);
  for (int i = 0; i < 20; ++i) {
    env.Spawn([](QuarantineCache* c, ActorId id, std::optional<Result<std::optional<QuarantineRecord>>>* out)
                  -> Task<void> { out->emplace(co_await c->Check(std::move(id), QuarantineRead::kOnMiss)); }(
                  &cache, Nth(i), &answers[i]),
              "start");
  }
  Advance(milliseconds(500));
  store.set_fault_hook(nullptr);
  for (const auto& a : answers) ASSERT_TRUE(a && a->ok() && !(*a)->has_value());
  EXPECT_EQ(bucket->counts().list, 1u) << "20 starts at once, one listing";
  EXPECT_EQ(bucket->counts().get, 0u);

  // This node quarantines kActor (its strike remembered), then forgets it: the listing, sent
  // before, must not answer for it.
  const MonoTime sent = env.MonoNow();
  StrikeOutcome last;
  for (int i = 0; i < 3; ++i) last = Strike().value();
  ASSERT_TRUE(last.quarantined_now);
  cache.Remember(last.record, sent);
  cache.Forget(kActor);
  auto q = Check(cache, kActor);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->has_value()) << "an older listing answered for a forgotten quarantine";

  // Too many records for the cache to hold: the listing is not used, records are read.
  QuarantineCacheOptions small = Options();
  small.max_entries = 4;
  QuarantineCache tight{env, store, small};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Run(RecordStrike(store, env, Nth(100 + i), "n1", "heap", policy)).ok());
  }
  const auto gets = bucket->counts().get;
  const auto lists = bucket->counts().list;
  EXPECT_FALSE(Check(tight, Nth(1))->has_value());
  EXPECT_EQ(tight.stats().listing_failures, 1u);
  EXPECT_EQ(bucket->counts().get, gets + 1) << "read instead";
  Advance(seconds(2));
  EXPECT_FALSE(Check(tight, Nth(2))->has_value());
  EXPECT_EQ(bucket->counts().list, lists + 1) << "not listed again soon";
}

}  // namespace
}  // namespace wk::control
