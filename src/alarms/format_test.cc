#include "alarms/format.h"

#include <gtest/gtest.h>

namespace wk::alarms {
namespace {

const ActorId kActor{"t", "c", "a1"};

TEST(AlarmFormatTest, AKeyRoundTripsAndSortsByDueTime) {
  EntryKey k{ShardOf(kActor), 1'764'000'000'123, kActor, Generation{7}, 42};
  const std::string text = EncodeEntryKey(k);
  EXPECT_EQ(text, ShardPrefix(k.shard) + "0000001764000000123/t/c/a1/00000000000000000007-00000000000000000042");
  auto back = ParseEntryKey(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, k);
  EntryKey later = k;
  later.due_ms += 1;
  EXPECT_LT(text, EncodeEntryKey(later));  // listing order is due order within a shard
  EXPECT_TRUE(text.starts_with(AlarmPrefix(kActor, k.due_ms)));
}

TEST(AlarmFormatTest, EveryNonNegativeTimeFits) {
  EntryKey k{ShardOf(kActor), INT64_MAX, kActor, Generation{UINT64_MAX}, UINT64_MAX};
  auto back = ParseEntryKey(EncodeEntryKey(k));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, k);
  k.due_ms = 0;
  auto zero = ParseEntryKey(EncodeEntryKey(k));
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, k);
}

TEST(AlarmFormatTest, ForeignKeysAreRefused) {
  const std::string good = EncodeEntryKey(EntryKey{ShardOf(kActor), 5, kActor, Generation{1}, 1});
  EXPECT_TRUE(ParseEntryKey(good).ok());
  const int other = (ShardOf(kActor) + 1) % kShards;
  std::string wrong_shard = good;
  wrong_shard.replace(kAlarmsPrefix.size(), 2, (other < 10 ? "0" : "") + std::to_string(other));
  for (const std::string& k : {std::string("alarms/"), std::string("alarms/00/"), good + "/x", good.substr(0, good.size() - 1),
                               std::string("wal/t/c/a1/x"), wrong_shard, std::string("alarms/16/") + good.substr(10)}) {
    EXPECT_EQ(ParseEntryKey(k).code(), Code::kInvalidArgument) << k;
  }
  std::string upper = good;
  upper[upper.find("/t/") + 1] = 'T';  // an invalid tenant
  EXPECT_FALSE(ParseEntryKey(upper).ok());
}

TEST(AlarmFormatTest, ShardActorsAreNoTenantsActors) {
  for (int s = 0; s < kShards; ++s) {
    const ActorId id = ShardActor(s);
    EXPECT_EQ(ShardOfShardActor(id), s);
    EXPECT_FALSE(ValidateActorId(id).ok()) << "no tenant can own " << id.ToString();
  }
  EXPECT_EQ(ShardOfShardActor(kActor), -1);
  EXPECT_EQ(ShardOfShardActor(ActorId{"_alarms", "shard", "16"}), -1);
  EXPECT_EQ(ShardActor(3).ToString(), "_alarms/shard/03");
}

TEST(AlarmFormatTest, ShardsSpreadActors) {
  int counts[kShards] = {};
  for (int i = 0; i < 1600; ++i) ++counts[ShardOf(ActorId{"t", "c", "a" + std::to_string(i)})];
  for (int c : counts) EXPECT_GT(c, 50);
}

}  // namespace
}  // namespace wk::alarms
