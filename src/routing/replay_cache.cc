#include "routing/replay_cache.h"

#include <limits>
#include <optional>

#include "base/check.h"

namespace wk {
namespace {

std::optional<std::uint64_t> ParseHex64(std::string_view hex) {
  std::uint64_t v = 0;
  for (char c : hex) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

}  // namespace

ReplayCache::ReplayCache(std::int64_t window_ms, std::size_t max_entries)
    : window_ms_(window_ms), max_entries_(max_entries), floor_ms_(std::numeric_limits<std::int64_t>::min()) {
  WK_CHECK(window_ms > 0 && max_entries > 0, "ReplayCache needs a positive window and bound");
}

void ReplayCache::Forget(std::set<std::pair<std::int64_t, Nonce>>::iterator it) {
  floor_ms_ = std::max(floor_ms_, it->first);
  nonces_.erase(it->second);
  by_time_.erase(it);
}

ReplayCache::Verdict ReplayCache::Use(std::string_view nonce_hex, std::int64_t timestamp_ms, std::int64_t now_ms) {
  if (nonce_hex.size() != kNonceHexChars) return Verdict::kMalformed;
  auto hi = ParseHex64(nonce_hex.substr(0, kNonceHexChars / 2));
  auto lo = ParseHex64(nonce_hex.substr(kNonceHexChars / 2));
  if (!hi || !lo) return Verdict::kMalformed;
  // Expiry: a timestamp that left the window can no longer pass the window check.
  while (!by_time_.empty() && by_time_.begin()->first < now_ms - window_ms_) Forget(by_time_.begin());
  if (timestamp_ms <= floor_ms_) return Verdict::kBeyondMemory;
  const Nonce nonce{*hi, *lo};
  if (!nonces_.insert(nonce).second) return Verdict::kReplayed;
  by_time_.emplace(timestamp_ms, nonce);
  while (nonces_.size() > max_entries_) {
    ++evicted_;
    Forget(by_time_.begin());
  }
  // The bound may have forgotten this very entry (its timestamp the oldest): it was
  // accepted all the same, and the floor now refuses it if it comes again.
  return Verdict::kFirstUse;
}

}  // namespace wk
