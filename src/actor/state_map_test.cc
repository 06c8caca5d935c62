#include "actor/state_map.h"

#include <gtest/gtest.h>

#include <string>

namespace wk::actor {
namespace {

// The model of what an entry costs in memory (state_map.h): short keys and values live
// inside the node; longer ones add a buffer of jemalloc's size class for size + 1. Measured
// against jemalloc itself in state_map_allocator_test.cc.
TEST(StateMapMemoryTest, EntryCostsFollowTheMeasuredModel) {
  EXPECT_EQ(EntryMemoryBytes(8, 8), 96u);
  EXPECT_EQ(EntryMemoryBytes(15, 15), 96u);  // still inline
  EXPECT_EQ(EntryMemoryBytes(16, 8), 96u + 32u);
  EXPECT_EQ(EntryMemoryBytes(8, 100), 96u + 112u);
  EXPECT_EQ(EntryMemoryBytes(40, 100), 96u + 48u + 112u);
  EXPECT_EQ(EntryMemoryBytes(8, 65535), 96u + 65536u) << "65,536 bytes: a size class";
  EXPECT_EQ(EntryMemoryBytes(8, 65536), 96u + 81920u) << "one more byte: the next class, 80 KiB";
}

TEST(StateMapMemoryTest, MemoryFollowsEveryMutation) {
  StateMap m;
  m.Put("a", "1");
  m.Put(std::string(16, 'k'), "v");
  EXPECT_EQ(m.bytes(), 2u + 17u);
  EXPECT_EQ(m.memory_bytes(), EntryMemoryBytes(1, 1) + EntryMemoryBytes(16, 1));
  // Overwrite with a long value, delete one, then delete everything.
  m.Put("a", std::string(100, 'x'));
  EXPECT_EQ(m.memory_bytes(), EntryMemoryBytes(1, 100) + EntryMemoryBytes(16, 1));
  Batch b;
  b.mutations.push_back(Mutation{Mutation::Kind::kDelete, std::string(16, 'k'), {}});
  m.Apply(b);
  EXPECT_EQ(m.memory_bytes(), EntryMemoryBytes(1, 100));
  Batch all;
  all.mutations.push_back(Mutation{Mutation::Kind::kDeleteAll, {}, {}});
  m.Apply(all);
  EXPECT_EQ(m.memory_bytes(), 0u);
  EXPECT_EQ(m.bytes(), 0u);
}

// Many small entries: memory is several times the stored bytes, which is why the budget
// counts memory_bytes and not bytes.
TEST(StateMapMemoryTest, SmallEntriesCostSeveralTimesWhatTheyStore) {
  StateMap m;
  for (int i = 0; i < 1000; ++i) m.Put("k" + std::to_string(i), "v");
  EXPECT_GT(m.memory_bytes(), 15 * m.bytes());
}

}  // namespace
}  // namespace wk::actor
