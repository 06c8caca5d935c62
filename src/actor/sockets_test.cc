#include "actor/sockets.h"

#include <gtest/gtest.h>

namespace wk::actor {
namespace {

std::shared_ptr<const SocketSet> Set(std::vector<SocketInfo> sockets) {
  auto s = std::make_shared<SocketSet>();
  s->sockets = std::move(sockets);
  return s;
}

TEST(SocketSetTest, FindsByIdInOpeningOrder) {
  auto set = Set({{5, {}}, {9, {"a"}}, {12, {}}});
  ASSERT_NE(set->Find(9), nullptr);
  EXPECT_EQ(set->Find(9)->tags, std::vector<std::string>{"a"});
  EXPECT_EQ(set->Find(10), nullptr);
  EXPECT_EQ(set->Find(13), nullptr);
}

TEST(SocketEventStateTest, SendsOnlyToOpenConnectionsAndQueuesInOrder) {
  SocketLimits limits;
  SocketEventState s(Set({{1, {}}, {2, {}}}), limits, nullptr);
  EXPECT_EQ(s.Send(1, "a", false).value(), 1);
  EXPECT_EQ(s.Send(7, "b", false).value(), 0);  // not open: nothing queued
  EXPECT_EQ(s.Close(2, 1000, "bye").value(), 1);
  EXPECT_EQ(s.Send(2, "c", false).value(), 0);  // closed by this event
  SocketEffects e = s.TakeEffects();
  ASSERT_EQ(e.actions.size(), 2u);
  EXPECT_EQ(*e.actions[0].data, "a");
  EXPECT_EQ(e.actions[1].kind, SocketAction::Kind::kClose);
}

TEST(SocketEventStateTest, TagsAreSeenByTheRestOfTheEventAndBounded) {
  SocketLimits limits;
  SocketEventState s(Set({{1, {"room"}}, {2, {}}}), limits, nullptr);
  EXPECT_EQ(s.List("room").value(), std::vector<std::int64_t>{1});
  EXPECT_EQ(s.Tag(2, "room").value(), 1);
  EXPECT_EQ(s.List("room").value(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(s.List("").value(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(s.Broadcast("room", "hi", false).value(), 2);
  // The broadcast carries the connections the event saw with the tag (its own tag included).
  EXPECT_EQ(s.TakeEffects().actions.back().ids, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(s.Tag(2, "room").value(), 1);  // its tags were taken with the effects: again
  EXPECT_EQ(s.Tags(2).value(), std::vector<std::string>{"room"});
  EXPECT_FALSE(s.Tags(3).has_value());
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(s.Tag(2, "t" + std::to_string(i)).ok());
  auto ninth = s.Tag(2, "t7");
  ASSERT_FALSE(ninth.ok());
  EXPECT_NE(ninth.status().message().find("8 tags"), std::string::npos) << ninth.status().message();
  EXPECT_FALSE(s.Tag(1, "").ok());
  EXPECT_FALSE(s.Tag(1, "a\nb").ok());
  EXPECT_FALSE(s.Tag(1, std::string(65, 'x')).ok());
}

TEST(SocketEventStateTest, RefusesBadClosesAndLimitsByName) {
  SocketLimits limits;
  limits.max_message_bytes = 10;
  limits.max_event_send_bytes = 15;
  limits.max_event_sends = 3;
  SocketEventState s(Set({{1, {}}}), limits, nullptr);
  EXPECT_FALSE(s.Close(1, 1001, "").ok());  // only 1000 and 3000..4999
  EXPECT_FALSE(s.Close(1, 1000, std::string(124, 'r')).ok());
  auto big = s.Send(1, std::string(11, 'x'), false);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("websockets.max_message_bytes"), std::string::npos);
  EXPECT_TRUE(s.Send(1, std::string(10, 'x'), false).ok());
  auto over = s.Send(1, std::string(6, 'x'), false);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("websockets.max_event_send_bytes"), std::string::npos);
  EXPECT_TRUE(s.Send(1, "y", false).ok());
  EXPECT_TRUE(s.Send(1, "z", false).ok());
  auto many = s.Send(1, "w", false);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("websockets.max_event_sends"), std::string::npos);
}

TEST(SocketEventStateTest, ABroadcastCountsItsRecipientsAgainstTheEventsBytes) {
  // Each broadcast holds its recipients' ids until the batch is durable: 8 bytes each, so
  // many broadcasts to a large room cannot hold more than max_event_send_bytes.
  std::vector<SocketInfo> room;
  for (std::int64_t id = 1; id <= 100; ++id) room.push_back({id, {}});
  SocketLimits limits;
  limits.max_event_send_bytes = 2 * (100 * 8 + 2) + 10;
  SocketEventState s(Set(std::move(room)), limits, nullptr);
  EXPECT_EQ(s.Broadcast("", "hi", false).value(), 100);
  EXPECT_EQ(s.Broadcast("", "hi", false).value(), 100);
  auto third = s.Broadcast("", "hi", false);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("websockets.max_event_send_bytes"), std::string::npos)
      << third.status().message();
  EXPECT_TRUE(s.Send(1, "0123456789", false).ok());  // the 10 bytes left
}

TEST(SocketEventStateTest, WithoutAViewNothingIsOpen) {
  SocketLimits limits;
  SocketEventState s(nullptr, limits, nullptr);
  EXPECT_EQ(s.Send(1, "a", false).value(), 0);
  EXPECT_EQ(s.Broadcast("", "a", false).value(), 0);
  EXPECT_TRUE(s.List("").value().empty());
  EXPECT_TRUE(s.TakeEffects().empty());
}

}  // namespace
}  // namespace wk::actor
