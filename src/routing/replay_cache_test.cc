// The replay cache: a nonce is accepted once; entries expire once their timestamp left the
// window; the bound forgets the oldest first, and what was forgotten is refused, never
// accepted again.
#include "routing/replay_cache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace wk {
namespace {

using Verdict = ReplayCache::Verdict;

constexpr std::int64_t kWindowMs = 60'000;
constexpr std::int64_t kNowMs = 1'764'000'000'000;

std::string Nonce(unsigned n) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016x%016x", 0xabcdu, n);
  return buf;
}

TEST(ReplayCacheTest, ASecondUseOfANonceIsRefused) {
  ReplayCache cache(kWindowMs, 100);
  EXPECT_EQ(cache.Use(Nonce(1), kNowMs, kNowMs), Verdict::kFirstUse);
  EXPECT_EQ(cache.Use(Nonce(2), kNowMs, kNowMs), Verdict::kFirstUse);
  EXPECT_EQ(cache.Use(Nonce(1), kNowMs, kNowMs + 10), Verdict::kReplayed);
  EXPECT_EQ(cache.Use(Nonce(1), kNowMs, kNowMs + kWindowMs), Verdict::kReplayed) << "remembered to the window's end";
  EXPECT_EQ(cache.size(), 2u);
}

TEST(ReplayCacheTest, EntriesExpireOnceTheirTimestampLeftTheWindowAndTheFloorStillRefusesThem) {
  ReplayCache cache(kWindowMs, 100);
  ASSERT_EQ(cache.Use(Nonce(1), kNowMs, kNowMs), Verdict::kFirstUse);
  ASSERT_EQ(cache.Use(Nonce(2), kNowMs + 30'000, kNowMs + 30'000), Verdict::kFirstUse);
  // Past nonce 1's window: it is forgotten, nonce 2 is not.
  EXPECT_EQ(cache.Use(Nonce(3), kNowMs + kWindowMs + 1, kNowMs + kWindowMs + 1), Verdict::kFirstUse);
  EXPECT_EQ(cache.size(), 2u) << "nonce 1 expired";
  EXPECT_EQ(cache.floor_ms(), kNowMs);
  // Had the wall clock stepped back so that the window admitted nonce 1 again, the floor
  // still refuses it.
  EXPECT_EQ(cache.Use(Nonce(1), kNowMs, kNowMs + 1000), Verdict::kBeyondMemory);
  EXPECT_EQ(cache.Use(Nonce(2), kNowMs + 30'000, kNowMs + kWindowMs + 2), Verdict::kReplayed);
}

TEST(ReplayCacheTest, TheBoundForgetsTheOldestFirstAndRefusesWhatItForgot) {
  constexpr std::size_t kBound = 3;
  ReplayCache cache(kWindowMs, kBound);
  for (unsigned i = 0; i < 10; ++i) {
    ASSERT_EQ(cache.Use(Nonce(i), kNowMs + i, kNowMs + i), Verdict::kFirstUse) << i;
    EXPECT_LE(cache.size(), kBound) << "memory stays bounded";
  }
  EXPECT_EQ(cache.size(), kBound);
  EXPECT_EQ(cache.evicted(), 7u);
  EXPECT_EQ(cache.floor_ms(), kNowMs + 6);
  // Forgotten early (inside the window): refused, not accepted twice.
  for (unsigned i = 0; i < 7; ++i) EXPECT_EQ(cache.Use(Nonce(i), kNowMs + i, kNowMs + 10), Verdict::kBeyondMemory) << i;
  // Still remembered: refused as replays.
  for (unsigned i = 7; i < 10; ++i) EXPECT_EQ(cache.Use(Nonce(i), kNowMs + i, kNowMs + 10), Verdict::kReplayed) << i;
  // A request as old as the floor but never seen is refused too (the cost of the bound).
  EXPECT_EQ(cache.Use(Nonce(99), kNowMs + 6, kNowMs + 10), Verdict::kBeyondMemory);
  EXPECT_EQ(cache.Use(Nonce(100), kNowMs + 11, kNowMs + 11), Verdict::kFirstUse);
}

TEST(ReplayCacheTest, ANonceThatIsNot32LowercaseHexDigitsIsRefused) {
  ReplayCache cache(kWindowMs, 10);
  for (std::string bad : {std::string(), std::string(31, 'a'), std::string(33, 'a'), std::string(32, 'A'),
                          std::string(32, 'g'), std::string(31, 'a') + "\n"}) {
    EXPECT_EQ(cache.Use(bad, kNowMs, kNowMs), Verdict::kMalformed) << bad;
  }
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace wk
