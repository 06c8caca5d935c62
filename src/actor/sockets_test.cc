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

// A broadcast's recipients are fixed when the event calls it: the connections it sees with
// the tag then (the count it returns), carried in the action for SocketDirectory::Release.
// Broadcasts in a row to one tag share the list; a tag or a close in between makes a new one,
// whose 8 bytes per recipient count against max_event_send_bytes.
TEST(SocketEventStateTest, ABroadcastGoesToTheConnectionsTheEventSeesWhenItCallsIt) {
  SocketLimits limits;
  SocketEventState s(Set({{1, {"room"}}, {2, {}}, {3, {"room"}}}), limits, nullptr);
  EXPECT_EQ(s.Broadcast("room", "a", false).value(), 2);
  EXPECT_EQ(s.Broadcast("room", "b", false).value(), 2);
  EXPECT_EQ(s.Tag(2, "room").value(), 1);
  EXPECT_EQ(s.Broadcast("room", "c", false).value(), 3);
  EXPECT_EQ(s.Close(1, 1000, "").value(), 1);
  EXPECT_EQ(s.Broadcast("room", "d", false).value(), 2);
  EXPECT_EQ(s.Broadcast("", "e", false).value(), 2);
  EXPECT_EQ(s.Broadcast("nobody", "f", false).value(), 0);
  SocketEffects e = s.TakeEffects();
  std::vector<std::vector<std::int64_t>> to;
  for (const SocketAction& a : e.actions) {
    if (a.kind != SocketAction::Kind::kBroadcast) continue;
    ASSERT_NE(a.to, nullptr);
    to.push_back(*a.to);
  }
  EXPECT_EQ(to, (std::vector<std::vector<std::int64_t>>{{1, 3}, {1, 3}, {1, 2, 3}, {2, 3}, {2, 3}}));
  EXPECT_EQ(e.actions[0].to, e.actions[1].to) << "two broadcasts in a row to one tag share their list";

  limits.max_event_send_bytes = 40;
  SocketEventState bounded(Set({{1, {"room"}}, {2, {"room"}}}), limits, nullptr);
  EXPECT_TRUE(bounded.Broadcast("room", "x", false).ok());  // 1 + 2 x 8: 17 bytes
  EXPECT_TRUE(bounded.Broadcast("room", "x", false).ok());  // 1, the same list: 18
  EXPECT_EQ(bounded.Close(2, 1000, "").value(), 1);
  EXPECT_TRUE(bounded.Broadcast("room", "x", false).ok());  // 1 + 8: 27
  EXPECT_EQ(bounded.Tag(1, "other").value(), 1);
  EXPECT_TRUE(bounded.Broadcast("room", "x", false).ok());  // 1 + 8: 36
  EXPECT_EQ(bounded.Tag(1, "third").value(), 1);
  auto past = bounded.Broadcast("room", "x", false);  // 37 + 8 > 40
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("websockets.max_event_send_bytes"), std::string::npos) << past.status().message();
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
