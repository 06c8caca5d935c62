// ReplayCache: the nonces of the forwarded requests this node accepted, so that a second
// use of one is refused (docs/security.md, "Between nodes"; forwarder.h).
//
// Every forwarded request carries a random nonce and its sender's timestamp, both signed.
// The forwarder accepts a timestamp only within `window` of its own clock; the cache
// remembers each accepted nonce until its timestamp has left that window (timestamp +
// window < now), after which the window check alone refuses the request. Memory is
// bounded: past max_entries the entry with the oldest timestamp is forgotten early.
//
// Never accepting a replay, whatever was forgotten: the cache keeps a floor, the newest
// timestamp it has forgotten (by expiry or by the bound), and refuses every nonce whose
// timestamp is at or below it (kBeyondMemory), even if the window would admit it (the
// wall clock stepped back, or the bound forgot entries early under load). A sender whose
// request is refused so answers its client 503 (retry), so the cost of the bound is a
// retry for requests delayed longer than the cache can remember, never a replay.
//
// Time comes only from the caller (the forwarder passes its Env's wall clock), so the cache
// is deterministic in the simulator.
//
// Threading: not thread-safe; the forwarder's Env loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <utility>

namespace wk {

class ReplayCache {
 public:
  // Nonces are 16 random bytes, sent as 32 lowercase hex digits.
  static constexpr std::size_t kNonceHexChars = 32;

  enum class Verdict : std::uint8_t {
    kFirstUse,      // remembered now; accept the request
    kReplayed,      // seen before: refuse
    kBeyondMemory,  // at or below the floor: cannot tell, refuse
    kMalformed,     // not 32 lowercase hex digits: refuse
  };

  // REQUIRES: window_ms > 0, max_entries > 0.
  ReplayCache(std::int64_t window_ms, std::size_t max_entries);

  // Whether this is the nonce's first use (then it is remembered). Expired entries
  // (timestamp + window < now_ms) are dropped first.
  Verdict Use(std::string_view nonce_hex, std::int64_t timestamp_ms, std::int64_t now_ms);

  std::size_t size() const { return nonces_.size(); }
  // The newest forgotten timestamp (ms; INT64_MIN while nothing was forgotten).
  std::int64_t floor_ms() const { return floor_ms_; }
  // Entries forgotten early because of max_entries.
  std::uint64_t evicted() const { return evicted_; }

 private:
  using Nonce = std::pair<std::uint64_t, std::uint64_t>;
  void Forget(std::set<std::pair<std::int64_t, Nonce>>::iterator it);

  const std::int64_t window_ms_;
  const std::size_t max_entries_;
  std::set<Nonce> nonces_;
  std::set<std::pair<std::int64_t, Nonce>> by_time_;  // (timestamp, nonce), oldest first
  std::int64_t floor_ms_;
  std::uint64_t evicted_ = 0;
};

}  // namespace wk
