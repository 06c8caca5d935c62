// Reading the alarm index for the console and the admin routes: the entries of a shard in
// due order, a read that stops at a due time or at its page bound (and says so), foreign
// keys counted and skipped, and each actor's alarm taken from its latest set.
#include "alarms/index_reader.h"

#include <gtest/gtest.h>

#include "base/log.h"
#include "cluster/testing/harness.h"

namespace wk::alarms {
namespace {

class IndexReaderTest : public ::testing::Test {
 protected:
  IndexReaderTest() { log::SetLevel(log::Level::kOff); }

  EntryKey Entry(const std::string& name, std::int64_t due_ms, std::uint64_t gen, std::uint64_t batch) {
    ActorId id{"t", "c", name};
    return EntryKey{ShardOf(id), due_ms, id, Generation{gen}, batch};
  }
  void Put(const EntryKey& k) {
    ASSERT_TRUE(bucket_->ApplyPut(EncodeEntryKey(k), std::string(kEntryBody), Precondition::None()).ok());
  }
  Result<ShardListing> Read(int shard, IndexReadOptions o) {
    auto r = RunTask(world_, env_, ReadShard(env_, store_, shard, o));
    return r ? std::move(*r) : Result<ShardListing>(Fatal("did not finish"));
  }

  SimWorld world_{5};
  std::shared_ptr<MemBucket> bucket_ = std::make_shared<MemBucket>();
  cluster_testing::SimHost host_{world_, bucket_, {.origin_ms = 1'700'000'000'000}};
  SimEnv& env_ = host_.env();
  MemStore& store_ = host_.store();
};

TEST_F(IndexReaderTest, AShardListsInDueOrderAndAnActorsAlarmIsItsLatestSet) {
  const EntryKey old_set = Entry("a", 1000, 1, 4);
  const EntryKey new_set = Entry("a", 5000, 2, 1);  // a later hold replaced the alarm
  Put(new_set);
  Put(old_set);
  const int shard = old_set.shard;
  // A key under the shard that is not an entry is counted, never parsed as one.
  ASSERT_TRUE(bucket_->ApplyPut(ShardPrefix(shard) + "not-an-entry", "x", Precondition::None()).ok());
  const auto writes = bucket_->counts().put;

  auto all = Read(shard, {});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->complete);
  EXPECT_EQ(all->foreign_keys, 1u);
  ASSERT_EQ(all->entries.size(), 2u);
  EXPECT_EQ(all->entries[0], old_set) << "due order";
  EXPECT_EQ(all->entries[1], new_set);
  EXPECT_EQ(bucket_->counts().put, writes) << "reading writes nothing";

  const auto latest = LatestSetPerActor(all->entries);
  ASSERT_EQ(latest.count(old_set.actor), 1u);
  EXPECT_EQ(latest.at(old_set.actor).latest, new_set) << "the latest set wins over the earlier due time";
  EXPECT_EQ(latest.at(old_set.actor).entries, 2u);

  auto due = Read(shard, {.due_until_ms = 2000});
  ASSERT_TRUE(due.ok());
  EXPECT_TRUE(due->complete) << "stopping at the due bound is a complete answer";
  ASSERT_EQ(due->entries.size(), 1u);
  EXPECT_EQ(due->entries[0], old_set);
}

TEST_F(IndexReaderTest, AReadStopsAtItsPageBoundAndSaysItIsIncomplete) {
  // More entries than one page in one shard: pick names that share a shard.
  const int shard = Entry("n0", 1, 1, 1).shard;
  int written = 0;
  for (int i = 0; written < 1001; ++i) {
    const EntryKey k = Entry("n" + std::to_string(i), 1000 + i, 1, 1);
    if (k.shard != shard) continue;
    Put(k);
    ++written;
  }
  auto one = Read(shard, {.max_pages = 1});
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->complete);
  EXPECT_EQ(one->entries.size(), 1000u);
  EXPECT_EQ(one->lists, 1u);
  auto two = Read(shard, {.max_pages = 2});
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(two->complete);
  EXPECT_EQ(two->entries.size(), 1001u);
}

TEST_F(IndexReaderTest, SeveralShardsAreReadAtOnceOneResultEach) {
  const EntryKey a = Entry("a", 1000, 1, 1);
  Put(a);
  std::vector<int> shards{a.shard, (a.shard + 1) % kShards, a.shard};
  auto r = RunTask(world_, env_, ReadShards(env_, store_, shards, {}));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->size(), 2u) << "one per distinct shard";
  ASSERT_TRUE(r->at(a.shard).ok());
  EXPECT_EQ(r->at(a.shard)->entries.size(), 1u);
  ASSERT_TRUE(r->at((a.shard + 1) % kShards).ok());
  EXPECT_TRUE(r->at((a.shard + 1) % kShards)->entries.empty());
}

}  // namespace
}  // namespace wk::alarms
