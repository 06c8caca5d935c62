// The state map's memory model (EntryMemoryBytes, state_map.h) against the allocator the
// wasmkeep binary links: this test is linked with jemalloc and built without the sanitizers
// (src/actor/CMakeLists.txt), and measures what entries really take with jemalloc's own
// count of the bytes it has handed out (stats.allocated, refreshed through "epoch"), which
// the machine's other load does not disturb as RSS would.
#include <jemalloc/jemalloc.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "actor/state_map.h"

namespace wk::actor {
namespace {

// Bytes jemalloc has handed out and not had back, every thread's cache flushed first.
std::uint64_t Allocated() {
  EXPECT_EQ(mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0), 0);
  std::uint64_t epoch = 1;
  std::size_t len = sizeof(epoch);
  EXPECT_EQ(mallctl("epoch", &epoch, &len, &epoch, len), 0);
  std::size_t allocated = 0;
  len = sizeof(allocated);
  EXPECT_EQ(mallctl("stats.allocated", &allocated, &len, nullptr, 0), 0);
  return allocated;
}

struct Case {
  const char* name;
  std::size_t entries;
  std::size_t value_bytes;
};

// The count may drift at most 20 % from what the allocator measured (the bound),
// for tiny and for large values, over tens of thousands of entries (a thousand of the
// largest: 80 MiB).
TEST(StateMapAllocatorTest, TheCountIsWithin20PercentOfJemallocsGrowth) {
  const char* version = nullptr;
  std::size_t len = sizeof(version);
  ASSERT_EQ(mallctl("version", &version, &len, nullptr, 0), 0) << "this test must run on jemalloc";
  for (const Case& c : {Case{"16-byte values", 50'000, 16}, Case{"8-byte values", 50'000, 8},
                        Case{"100-byte values", 20'000, 100}, Case{"64 KiB values", 1'000, 64 << 10}}) {
    // Keys and values made before the measurement: the map's copies are what is counted.
    std::vector<std::pair<std::string, std::string>> kv;
    kv.reserve(c.entries);
    for (std::size_t i = 0; i < c.entries; ++i) {
      char key[32];
      std::snprintf(key, sizeof key, "key%08zu", i);
      kv.emplace_back(key, std::string(c.value_bytes, 'v'));
    }
    auto map = std::make_unique<StateMap>();
    const std::uint64_t before = Allocated();
    for (const auto& [k, v] : kv) map->Put(k, v);  // copies: a string's capacity is its size
    const std::uint64_t after = Allocated();
    const double measured = static_cast<double>(after - before);
    const double counted = static_cast<double>(map->memory_bytes());
    std::printf("%-16s %6zu entries: jemalloc +%.1f MiB = %.1f bytes per entry (%.2f per stored byte); counted "
                "%.1f per entry; drift %+.2f %%\n",
                c.name, c.entries, measured / 1048576.0, measured / static_cast<double>(c.entries),
                measured / static_cast<double>(map->bytes()), counted / static_cast<double>(c.entries),
                100.0 * (counted - measured) / measured);
    EXPECT_LE(std::abs(counted - measured), 0.2 * std::min(counted, measured)) << c.name;
    map.reset();
  }
}

}  // namespace
}  // namespace wk::actor
