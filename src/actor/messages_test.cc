// Messages between actors, the state side (messages.h): the outbox entry's strict codec,
// the receiver names a module may give, the limits, and what each batch holds.
#include "actor/messages.h"

#include <gtest/gtest.h>

#include "actor/state_map.h"

namespace wk::actor {
namespace {

const ActorId kSender{"acme", "bank", "alice"};

// An actor's state as an ActorStorage: Commit applies at once (nothing here waits for
// durability).
class StateStorage final : public ActorStorage {
 public:
  std::optional<std::string> Get(std::string_view k) const override { return s_.Get(k); }
  void List(const ListQuery& q, const ListVisitor& v) const override { s_.List(q, v); }
  std::optional<std::int64_t> Alarm() const override { return s_.alarm(); }
  std::optional<std::string> GetSystem(std::string_view k) const override { return s_.GetSystem(k); }
  void ListSystem(const ListQuery& q, const ListVisitor& v) const override { s_.ListSystem(q, v); }
  std::uint64_t SystemBytes() const override { return s_.system_bytes(); }
  std::uint64_t StoredBytes() const override { return s_.bytes(); }
  std::uint64_t MemoryBytes() const override { return s_.memory_bytes(); }
  std::uint64_t Commit(Batch b) override {
    s_.Apply(b);
    return ++seq_;
  }
  void WhenReleasable(std::uint64_t, std::function<void(Status)> done) override { done(Status::Ok()); }
  Status failure() const override { return Status::Ok(); }
  void Break(Status) override {}

 private:
  StateMap s_;
  std::uint64_t seq_ = 0;
};

TEST(MessageTargetTest, ClassAndNameOrTheWholeNameOfTheSameTenant) {
  auto short_name = MessageTarget(kSender, "bank/bob");
  ASSERT_TRUE(short_name.ok());
  EXPECT_EQ(*short_name, (ActorId{"acme", "bank", "bob"}));
  auto whole = MessageTarget(kSender, "acme/inbox/bob");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->class_name, "inbox");
  for (const std::string bad : {"", "bob", "bank/", "/bob", "a/b/c/d", "acme/bank/bo b"}) {
    auto r = MessageTarget(kSender, bad);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
  }
  auto other = MessageTarget(kSender, "evil/bank/bob");
  EXPECT_EQ(other.code(), Code::kInvalidArgument);
  EXPECT_NE(other.status().message().find("another tenant"), std::string::npos) << other.status().message();
}

TEST(OutboxCodecTest, RoundTripsAndRefusesDamage) {
  OutboxMessage m{ActorId{"acme", "bank", "bob"}, std::string("credit:5\0x", 10), 1764000000000, 3, 1764000004000,
                  "the handler returned 1"};
  const std::string bytes = EncodeOutboxMessage(m);
  auto back = DecodeOutboxMessage(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(DecodeOutboxMessage(bytes.substr(0, cut)).ok()) << "cut at " << cut;
  }
  EXPECT_FALSE(DecodeOutboxMessage(bytes + "x").ok());
  std::string other_version = bytes;
  other_version[0] = 2;
  EXPECT_FALSE(DecodeOutboxMessage(other_version).ok());
}

TEST(MessageSendBufferTest, NumbersNeverRepeatAndTheLimitsAreNamed) {
  StateStorage storage;
  MessageSendBuffer first(storage, MessageLimits{});
  EXPECT_EQ(first.Send(kSender, "bank/bob", "credit:5", 10).value(), 1u);
  EXPECT_EQ(first.Send(kSender, "bank/carol", "credit:7", 10).value(), 2u);
  Batch b;
  first.AddTo(b);
  storage.Commit(std::move(b));
  MessageSendBuffer second(storage, MessageLimits{});
  EXPECT_EQ(second.Send(kSender, "bank/bob", "credit:1", 20).value(), 3u) << "the counter came from the committed state";
  auto outbox = ListOutbox(storage, 10);
  ASSERT_TRUE(outbox.ok());
  ASSERT_EQ(outbox->size(), 2u);
  EXPECT_EQ((*outbox)[0].first, 1u);
  EXPECT_EQ((*outbox)[1].second.to.name, "carol");

  MessageSendBuffer limited(storage, MessageLimits{.max_message_bytes = 4, .max_messages_per_event = 1});
  auto big = limited.Send(kSender, "bank/bob", "12345", 0);
  EXPECT_NE(big.status().message().find("actors.max_message_bytes"), std::string::npos);
  ASSERT_TRUE(limited.Send(kSender, "bank/bob", "1", 0).ok());
  auto many = limited.Send(kSender, "bank/bob", "2", 0);
  EXPECT_NE(many.status().message().find("actors.max_messages_per_event"), std::string::npos);
  Batch none;
  MessageSendBuffer(storage, MessageLimits{}).AddTo(none);
  EXPECT_TRUE(none.empty()) << "an event that sends nothing writes nothing";
}

TEST(OutboxTest, DeliveredFailedParkedAndRetried) {
  StateStorage storage;
  MessageSendBuffer send(storage, MessageLimits{});
  ASSERT_TRUE(send.Send(kSender, "bank/bob", "a", 0).ok());
  ASSERT_TRUE(send.Send(kSender, "bank/bob", "b", 0).ok());
  Batch b;
  send.AddTo(b);
  storage.Commit(std::move(b));
  storage.Commit(OutboxDelivered(1));
  auto left = ListOutbox(storage, 10);
  ASSERT_EQ(left->size(), 1u);
  OutboxMessage failed = (*left)[0].second;
  failed.attempts = 1;
  failed.last_error = "503";
  storage.Commit(OutboxFailed(2, failed));
  EXPECT_EQ(ListOutbox(storage, 10).value()[0].second.attempts, 1u);
  storage.Commit(OutboxParked(2, failed));
  EXPECT_TRUE(ListOutbox(storage, 10).value().empty());
  ASSERT_EQ(ListDead(storage, 10).value().size(), 1u);
  auto retry = RetryDead(storage, 2, 50);
  ASSERT_TRUE(retry.ok());
  storage.Commit(std::move(*retry));
  auto again = ListOutbox(storage, 10);
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].first, 3u) << "a retried message gets a new number, behind the others";
  EXPECT_EQ((*again)[0].second.attempts, 0u);
  EXPECT_TRUE(ListDead(storage, 10).value().empty());
  EXPECT_EQ(RetryDead(storage, 2, 60).code(), Code::kNotFound);
}

// The outbox's wake entry (KeepOutboxWake): written once when the outbox fills, at the
// first send's time plus wake_after_ms, not moved by later sends or failures, deleted by the
// batch that empties the outbox; the indexed time is the earlier of it and the alarm.
TEST(OutboxWakeTest, FollowsTheOutboxFromFillingToEmpty) {
  StateStorage storage;
  const MessageLimits limits{.wake_after_ms = 5000};
  MessageSendBuffer send(storage, limits);
  ASSERT_TRUE(send.Send(kSender, "bank/bob", "a", 1000).ok());
  ASSERT_TRUE(send.Send(kSender, "bank/bob", "b", 1200).ok());
  Batch b;
  send.AddTo(b);
  storage.Commit(std::move(b));
  EXPECT_EQ(ParseWake(storage.GetSystem(kWakeKey)), 6000) << "the first send's time plus wake_after_ms";
  EXPECT_EQ(storage.IndexedTime(), 6000);
  EXPECT_FALSE(storage.Get("wake").has_value()) << "the module never sees it";

  // A later send while messages wait writes no wake entry (no index entry per message).
  MessageSendBuffer more(storage, limits);
  ASSERT_TRUE(more.Send(kSender, "bank/carol", "c", 9000).ok());
  Batch b2;
  more.AddTo(b2);
  EXPECT_FALSE(ChangesIndexedTime(b2));
  storage.Commit(std::move(b2));

  // An alarm earlier than the wake time is the indexed time; a later one is not.
  Batch alarm;
  alarm.alarm = std::optional<std::int64_t>(3000);
  storage.Commit(std::move(alarm));
  EXPECT_EQ(storage.IndexedTime(), 3000);
  Batch later;
  later.alarm = std::optional<std::int64_t>(90000);
  storage.Commit(std::move(later));
  EXPECT_EQ(storage.IndexedTime(), 6000);

  // Outcomes that leave messages waiting keep it; the batch that empties the outbox deletes it.
  Batch one = OutboxDelivered(1);
  KeepOutboxWake(storage, one, 10000, 5000, {});
  EXPECT_FALSE(ChangesIndexedTime(one)) << "two messages still wait";
  storage.Commit(std::move(one));
  Batch rest = OutboxDelivered(2);
  auto parked = ListOutbox(storage, 10).value()[1].second;
  for (const Mutation& m : OutboxParked(3, parked).system) rest.system.push_back(m);
  KeepOutboxWake(storage, rest, 11000, 5000, {});
  EXPECT_TRUE(ChangesIndexedTime(rest));
  storage.Commit(std::move(rest));
  EXPECT_FALSE(storage.GetSystem(kWakeKey).has_value()) << "a dead message needs no wake: nothing delivers it";
  EXPECT_EQ(storage.IndexedTime(), 90000) << "the alarm alone again";

  // An operator's retry fills the outbox again: the committer adds a new wake time.
  auto retry = RetryDead(storage, 3, 20000);
  ASSERT_TRUE(retry.ok());
  KeepOutboxWake(storage, *retry, 20000, 5000, {});
  storage.Commit(std::move(*retry));
  EXPECT_EQ(ParseWake(storage.GetSystem(kWakeKey)), 25000);

  // The broken model writes none.
  if constexpr (BrokenModels::kBuilt) {
    StateStorage broken_storage;
    MessageSendBuffer broken(broken_storage, limits, BrokenModels::Of({BrokenModel::kOutboxNeverWakes}));
    ASSERT_TRUE(broken.Send(kSender, "bank/bob", "a", 0).ok());
    Batch bb;
    broken.AddTo(bb);
    broken_storage.Commit(std::move(bb));
    EXPECT_FALSE(broken_storage.GetSystem(kWakeKey).has_value());
  }
}

TEST(WakeEntryTest, TheCodecRefusesWhatIsNotATime) {
  EXPECT_EQ(ParseWake(std::string_view("1764000000000")), 1764000000000);
  EXPECT_EQ(ParseWake(EncodeWake(42)), 42);
  for (const std::string_view bad : {"", "-5", "12a", " 1", "9999999999999999999"}) {
    EXPECT_FALSE(ParseWake(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ParseWake(std::nullopt).has_value());
  EXPECT_EQ(IndexedTime(std::nullopt, std::nullopt), std::nullopt);
  EXPECT_EQ(IndexedTime(5, std::nullopt), 5);
  EXPECT_EQ(IndexedTime(std::nullopt, 7), 7);
  EXPECT_EQ(IndexedTime(9, 7), 7);
}

// An operator's drop (docs/messages.md, "Dead messages"): only the dead entry goes; an
// unknown number is NotFound naming it; the counter is untouched.
TEST(OutboxTest, ADeadMessageIsDroppedAndAnUnknownOneIsNotFound) {
  StateStorage storage;
  MessageSendBuffer send(storage, MessageLimits{});
  ASSERT_TRUE(send.Send(kSender, "bank/bob", "a", 0).ok());
  ASSERT_TRUE(send.Send(kSender, "bank/carol", "b", 0).ok());
  Batch b;
  send.AddTo(b);
  storage.Commit(std::move(b));
  OutboxMessage parked = ListOutbox(storage, 10).value()[0].second;
  parked.last_error = "no class acme/bank";
  storage.Commit(OutboxParked(1, parked));
  EXPECT_EQ(LastSentSeq(storage), 2u);
  auto missing = DropDead(storage, 2);  // in the outbox, not dead
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("2"), std::string::npos) << missing.status().message();
  auto drop = DropDead(storage, 1);
  ASSERT_TRUE(drop.ok()) << drop.status().ToString();
  ASSERT_EQ(drop->system.size(), 1u);
  EXPECT_TRUE(drop->mutations.empty()) << "the module's entries are never touched";
  storage.Commit(std::move(*drop));
  EXPECT_TRUE(ListDead(storage, 10).value().empty());
  ASSERT_EQ(ListOutbox(storage, 10).value().size(), 1u) << "the outbox is left as it was";
  EXPECT_EQ(LastSentSeq(storage), 2u) << "a drop issues no number";
  EXPECT_EQ(DropDead(storage, 1).code(), Code::kNotFound) << "dropped once only";
  auto retry = RetryDead(storage, 1, 10);
  EXPECT_EQ(retry.code(), Code::kNotFound) << "a dropped message cannot be sent again";
}

TEST(OutboxTest, TheListingHasTheOutboxTheDeadAndTheAppliedRecordsBoundedPerList) {
  StateStorage storage;
  MessageSendBuffer send(storage, MessageLimits{});
  for (const char* body : {"1", "2", "3", "4"}) ASSERT_TRUE(send.Send(kSender, "bank/bob", body, 7).ok());
  Batch b;
  send.AddTo(b);
  RecordApplied(b, ActorId{"acme", "bank", "bob"}, 9);
  RecordApplied(b, ActorId{"acme", "bank", "carol"}, 3);
  storage.Commit(std::move(b));
  OutboxMessage parked = ListOutbox(storage, 10).value()[1].second;
  parked.attempts = 8;
  parked.last_error = "the handler returned 1";
  storage.Commit(OutboxParked(2, parked));
  auto all = ListMessages(storage, 10);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->outbox.size(), 3u);
  EXPECT_EQ(all->outbox[0].first, 1u);
  EXPECT_EQ(all->outbox[2].first, 4u);
  ASSERT_EQ(all->dead.size(), 1u);
  EXPECT_EQ(all->dead[0].first, 2u);
  EXPECT_EQ(all->dead[0].second.last_error, "the handler returned 1");
  EXPECT_EQ(all->dead[0].second.attempts, 8u);
  ASSERT_EQ(all->applied.size(), 2u);
  EXPECT_EQ(all->applied[0], (std::pair<std::string, std::uint64_t>{"acme/bank/bob", 9}));
  EXPECT_EQ(all->applied[1], (std::pair<std::string, std::uint64_t>{"acme/bank/carol", 3}));
  EXPECT_FALSE(all->truncated);
  auto two = ListMessages(storage, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->outbox.size(), 2u);
  EXPECT_EQ(two->dead.size(), 1u) << "each list has its own bound";
  EXPECT_EQ(two->applied.size(), 2u);
  EXPECT_TRUE(two->truncated);
  // A damaged entry is an error naming it, not a silent gap.
  Batch damage;
  damage.system.push_back({Mutation::Kind::kPut, "msg-dead/00000000000000000005", "garbage"});
  storage.Commit(std::move(damage));
  auto damaged = ListMessages(storage, 10);
  EXPECT_EQ(damaged.code(), Code::kFatal);
  EXPECT_NE(damaged.status().message().find("msg-dead/00000000000000000005"), std::string::npos);
}

TEST(AppliedRecordTest, OneNumberPerSender) {
  StateStorage storage;
  EXPECT_EQ(AppliedSeq(storage, kSender), 0u);
  Batch b;
  b.mutations.push_back({Mutation::Kind::kPut, "balance", "5"});
  RecordApplied(b, kSender, 7);
  storage.Commit(std::move(b));
  EXPECT_EQ(AppliedSeq(storage, kSender), 7u);
  EXPECT_EQ(AppliedSeq(storage, ActorId{"acme", "bank", "carol"}), 0u);
  EXPECT_FALSE(storage.Get("msg-in/acme/bank/alice").has_value()) << "the module never sees the record";
}

}  // namespace
}  // namespace wk::actor
