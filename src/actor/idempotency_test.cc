// Idempotency-Key parsing, the stored record's strict codec, and the record's place in the
// event's batch with the pruning of expired keys (idempotency.h).
#include "actor/idempotency.h"

#include <gtest/gtest.h>

#include "actor/state_map.h"

namespace wk::actor {
namespace {

Request WithKey(std::string value) {
  Request r;
  r.method = "POST";
  r.path = "/increment";
  r.headers = {{"Content-Type", "text/plain"}, {"Idempotency-Key", std::move(value)}};
  return r;
}

TEST(IdempotencyKeyTest, QuotedAndBareKeysAreReadAndBadOnesNamed) {
  auto quoted = IdempotencyKeyOf(WithKey("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""));
  ASSERT_TRUE(quoted.ok());
  EXPECT_EQ(**quoted, "8e03978e-40d5-43e8-bc93-6894a57f9324");
  auto bare = IdempotencyKeyOf(WithKey("  abc-1 "));
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(**bare, "abc-1");
  auto escaped = IdempotencyKeyOf(WithKey(R"("a \"b\" \\c")"));
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(**escaped, R"(a "b" \c)");
  Request none;
  auto absent = IdempotencyKeyOf(none);
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
  auto lower = IdempotencyKeyOf(Request{"POST", "/", "", {{"idempotency-key", "k"}}, ""});
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(**lower, "k") << "header names are case-insensitive";

  for (const std::string& bad : std::vector<std::string>{"", "\"\"", "a b", "\"a\\x\"", std::string(256, 'k'),
                                                          "caf\xc3\xa9"}) {
    auto r = IdempotencyKeyOf(WithKey(bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("Idempotency-Key"), std::string::npos) << r.status().message();
  }
  Request twice = WithKey("a");
  twice.headers.emplace_back("IDEMPOTENCY-KEY", "b");
  auto r = IdempotencyKeyOf(twice);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than once"), std::string::npos);
  EXPECT_TRUE(IdempotencyKeyOf(WithKey(std::string(255, 'k'))).ok());
}

TEST(IdempotencyKeyTest, TheFingerprintCoversMethodPathQueryAndBodyButNotHeaders) {
  Request a = WithKey("k");
  a.body = "x";
  Request b = a;
  b.headers.emplace_back("X-Other", "1");
  EXPECT_EQ(RequestFingerprint(a), RequestFingerprint(b));
  for (auto change : {+[](Request& r) { r.method = "PUT"; }, +[](Request& r) { r.path = "/other"; },
                      +[](Request& r) { r.query = "a=1"; }, +[](Request& r) { r.body = "y"; },
                      // No ambiguity between fields: moving a byte from one to the next differs.
                      +[](Request& r) { r.path = "/incremen"; r.query = "t"; }}) {
    Request c = a;
    change(c);
    EXPECT_NE(RequestFingerprint(a), RequestFingerprint(c));
  }
}

TEST(IdempotencyRecordTest, RoundTripsAndRefusesAnythingElse) {
  IdempotencyRecord rec;
  rec.fingerprint = std::string(32, '\x07');
  rec.created_ms = 1'800'000'000'123;
  rec.response.status = 201;
  rec.response.headers = {{"content-type", "text/plain"}, {"x-a", ""}};
  rec.response.body = std::string("body\0with nul", 13);
  const std::string bytes = EncodeIdempotencyRecord(rec);
  auto back = DecodeIdempotencyRecord(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->fingerprint, rec.fingerprint);
  EXPECT_EQ(back->created_ms, rec.created_ms);
  EXPECT_EQ(back->response.status, 201);
  EXPECT_EQ(back->response.headers, rec.response.headers);
  EXPECT_EQ(back->response.body, rec.response.body);
  EXPECT_TRUE(back->body_kept);
  // Every truncation and every single-byte change of the version is refused, never misread.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeIdempotencyRecord(bytes.substr(0, n)).ok()) << n;
  }
  std::string v2 = bytes;
  v2[0] = 2;
  EXPECT_FALSE(DecodeIdempotencyRecord(v2).ok());
  EXPECT_FALSE(DecodeIdempotencyRecord(bytes + "x").ok());
}

// The record goes into the event's own batch; expired keys are pruned, a bounded number
// per event, oldest first; a key whose record expired counts as absent and is reused.
TEST(IdempotencyRecordTest, TheRecordJoinsTheBatchAndExpiredKeysArePrunedABoundedNumberAtATime) {
  StateMap state;
  constexpr std::int64_t kTtl = 1000;
  auto add = [&](std::string key, std::int64_t now) {
    IdempotentRequest req{std::move(key), std::string(32, 'f'), kTtl, 4, 1 << 20};
    Response resp;
    resp.body = "12345";  // over max_answer_bytes (4): kept without its body
    Batch batch;
    batch.mutations.push_back({Mutation::Kind::kPut, "count", "1"});
    // The StateMap as an ActorStorage view is not needed: AddIdempotencyRecord reads only
    // the system entries, through this small adapter.
    struct View final : ActorStorage {
      const StateMap& s;
      explicit View(const StateMap& m) : s(m) {}
      std::optional<std::string> Get(std::string_view k) const override { return s.Get(k); }
      void List(const ListQuery& q, const ListVisitor& v) const override { s.List(q, v); }
      std::optional<std::int64_t> Alarm() const override { return s.alarm(); }
      std::optional<std::string> GetSystem(std::string_view k) const override { return s.GetSystem(k); }
      void ListSystem(const ListQuery& q, const ListVisitor& v) const override { s.ListSystem(q, v); }
      std::uint64_t SystemBytes() const override { return s.system_bytes(); }
      std::uint64_t StoredBytes() const override { return s.bytes(); }
      std::uint64_t MemoryBytes() const override { return s.memory_bytes(); }
      std::uint64_t Commit(Batch) override { return 0; }
      void WhenReleasable(std::uint64_t, std::function<void(Status)>) override {}
      Status failure() const override { return Status::Ok(); }
      void Break(Status) override {}
    } view(state);
    AddIdempotencyRecord(req, resp, now, view, batch);
    EXPECT_EQ(batch.mutations.size(), 1u) << "the module's writes are untouched";
    state.Apply(batch);
    return batch;
  };
  for (int i = 0; i < 40; ++i) add("k" + std::to_string(i), 100 + i);
  EXPECT_EQ(state.system_entries().size(), 80u) << "a record and a time entry per key";
  EXPECT_EQ(state.bytes(), 6u) << "system entries are not the module's stored bytes";
  // Within the TTL, every key is found; its body was over the bound and not kept.
  {
    std::optional<std::string> rec = state.GetSystem("idem/k5");
    ASSERT_TRUE(rec.has_value());
    auto r = DecodeIdempotencyRecord(*rec);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->body_kept);
    EXPECT_EQ(ReplayedResult(*r).replayed, "body-omitted");
  }
  // Past the TTL of all 40: one event prunes 16, the oldest first.
  add("new", 100 + 40 + kTtl);
  EXPECT_EQ(state.system_entries().size(), 80u - 2 * kIdempotencyPrunePerEvent + 2);
  EXPECT_FALSE(state.GetSystem("idem/k0").has_value());
  EXPECT_FALSE(state.GetSystem("idem/k15").has_value());
  EXPECT_TRUE(state.GetSystem("idem/k16").has_value());
  // A key whose record expired and was not pruned yet is reused: one record, one time entry.
  add("k39", 100 + 40 + kTtl + 1);
  std::size_t time_entries = 0;
  ListQuery q;
  q.start = std::string(kIdempotencyTimePrefix);
  q.prefix = true;
  state.ListSystem(q, [&](std::string_view k, std::string_view) {
    time_entries += k.ends_with("/k39");
    return true;
  });
  EXPECT_EQ(time_entries, 1u);
  // k39's event pruned k16..k31; the next prunes the 7 left: what remains is young.
  add("x1", 100 + 40 + kTtl + 2);
  add("x2", 100 + 40 + kTtl + 2);
  EXPECT_EQ(state.system_entries().size(), 8u) << "new, k39, x1 and x2";
  EXPECT_TRUE(state.GetSystem("idem/k39").has_value()) << "the reused key is young again";
}

// A busy actor's records stay within max_bytes: the oldest are forgotten before their TTL
// (counted), a bounded number per event, so the state and its snapshots do not grow with the
// request rate times the TTL.
TEST(IdempotencyRecordTest, AnActorsRecordsStayWithinMaxBytesOldestFirst) {
  StateMap state;
  struct View final : ActorStorage {
    const StateMap& s;
    explicit View(const StateMap& m) : s(m) {}
    std::optional<std::string> Get(std::string_view k) const override { return s.Get(k); }
    void List(const ListQuery& q, const ListVisitor& v) const override { s.List(q, v); }
    std::optional<std::int64_t> Alarm() const override { return s.alarm(); }
    std::optional<std::string> GetSystem(std::string_view k) const override { return s.GetSystem(k); }
    void ListSystem(const ListQuery& q, const ListVisitor& v) const override { s.ListSystem(q, v); }
    std::uint64_t SystemBytes() const override { return s.system_bytes(); }
    std::uint64_t StoredBytes() const override { return s.bytes(); }
    std::uint64_t MemoryBytes() const override { return s.memory_bytes(); }
    std::uint64_t Commit(Batch) override { return 0; }
    void WhenReleasable(std::uint64_t, std::function<void(Status)>) override {}
    Status failure() const override { return Status::Ok(); }
    void Break(Status) override {}
  } view(state);
  constexpr std::uint64_t kMax = 8192;
  std::size_t forgotten = 0;
  for (int i = 0; i < 500; ++i) {
    IdempotentRequest req{"key-" + std::to_string(i), std::string(32, 'f'), 3'600'000, 1024, kMax};
    Response resp;
    resp.body = std::string(40, 'b');
    Batch batch;
    forgotten += AddIdempotencyRecord(req, resp, 1000 + i, view, batch);
    state.Apply(batch);
    ASSERT_LE(state.system_bytes(), kMax) << "after key " << i;
  }
  EXPECT_GT(forgotten, 400u) << "the oldest went to make room";
  EXPECT_TRUE(state.GetSystem("idem/key-499").has_value()) << "the newest is kept";
  EXPECT_FALSE(state.GetSystem("idem/key-0").has_value());
  // One record larger than the rest together displaces at most kIdempotencyPrunePerEvent
  // a time: the bound is met again within a few events, never by dropping the new record.
  IdempotentRequest big{"big", std::string(32, 'f'), 3'600'000, 1 << 20, kMax};
  Response large;
  large.body = std::string(6000, 'x');
  Batch batch;
  AddIdempotencyRecord(big, large, 2000, view, batch);
  state.Apply(batch);
  EXPECT_TRUE(state.GetSystem("idem/big").has_value());
}

}  // namespace
}  // namespace wk::actor
