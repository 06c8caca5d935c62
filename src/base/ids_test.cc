#include "base/ids.h"

#include <gtest/gtest.h>

#include <map>
#include <type_traits>

namespace wk {
namespace {

TEST(IdsTest, ActorIdParseAndValidate) {
  auto id = ParseActorId("acme/counter/user-42");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->class_name, "counter");
  EXPECT_EQ(id->ToString(), "acme/counter/user-42");
  EXPECT_FALSE(ParseActorId("acme/counter").ok());
  EXPECT_NE(ParseActorId("acme/counter/..").status().message().find("actor name"), std::string::npos);
}

TEST(IdsTest, NodeIdsAndInstancesAreDistinctOrderedKeys) {
  static_assert(!std::is_convertible_v<std::string, NodeId>, "construction is explicit");
  static_assert(!std::is_convertible_v<NodeId, InstanceToken>, "a node id is not an instance");
  std::map<NodeId, int> m;
  m[NodeId("b")] = 2;
  m[NodeId("a")] = 1;
  EXPECT_EQ(m.begin()->first.str(), "a");
  EXPECT_EQ(NodeId("a"), NodeId(std::string("a")));
  EXPECT_NE(InstanceToken("x"), InstanceToken("y"));
  EXPECT_TRUE(NodeId().empty());
  EXPECT_TRUE(ValidateNodeId(NodeId("node-a.1_x")).ok());
  for (std::string_view bad : std::initializer_list<std::string_view>{"", ".", "..", "a/b", "a b", std::string_view("x\0", 2)}) {
    EXPECT_FALSE(ValidateNodeId(bad).ok()) << bad;
  }
  EXPECT_FALSE(ValidateNodeId(std::string(65, 'a')).ok());
}

TEST(IdsTest, GenerationsOnlyGrow) {
  Generation g{7};
  EXPECT_EQ(g.Next(), Generation{8});
  EXPECT_LT(g, g.Next());
}

}  // namespace
}  // namespace wk

namespace wk {
namespace {

TEST(IdsTest, SystemActorsAreNoTenantsActors) {
  const ActorId shard{"_alarms", "shard", "07"};
  EXPECT_TRUE(ValidateSystemActorId(shard).ok());
  EXPECT_FALSE(ValidateActorId(shard).ok());
  EXPECT_FALSE(ValidateSystemActorId(ActorId{"alarms", "shard", "07"}).ok());
  EXPECT_FALSE(ValidateSystemActorId(ActorId{"_", "shard", "07"}).ok());
  EXPECT_FALSE(ValidateSystemActorId(ActorId{"__x", "shard", "07"}).ok());
  EXPECT_FALSE(ValidateSystemActorId(ActorId{"_alarms", "shard", ".."}).ok());
  EXPECT_FALSE(ParseActorId("_alarms/shard/07").ok());  // never from a client's path
}

}  // namespace
}  // namespace wk
