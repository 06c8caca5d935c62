// LeaseTiming: the node lease's timings (docs/node-lease.md, "Timings") and the relations between
// them that keep one owner per actor under clock skew.
//
//   validity   an owner acts until  sent + ttl - safety   on its own clock
//   takeover   a peer frees it after written_at + ttl + grace  on the peer's clock
//   safe while grace + safety >= 2 * max_skew  (the two clocks may disagree by max_skew
//              each way)
//   period     a lease write every min(heartbeat_period, ttl / 3) from the previous send;
//              a configured heartbeat period above ttl / 3 is refused
//   attempt    each write is bounded by (ttl - safety) / 3, so two retries fit before the
//              lease runs out
//
// Defaults: ttl 10 s, grace 5 s, safety 2 s, max skew 1 s, heartbeat 3 s. Tests run with
// shorter ones; every relation is checked by Validate, which names the settings at fault.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"
#include "base/time.h"

namespace wk {

struct LeaseTiming {
  Duration ttl = std::chrono::seconds(10);
  Duration grace = std::chrono::seconds(5);
  Duration safety = std::chrono::seconds(2);
  Duration max_skew = std::chrono::seconds(1);
  Duration heartbeat_period = std::chrono::seconds(3);

  // OK, or kInvalidArgument naming the setting(s) and the rule broken.
  Status Validate() const;

  // The lease write cadence: min(heartbeat_period, ttl / 3).
  Duration lease_period() const { return std::min(heartbeat_period, ttl / 3); }
  // The bound on one lease write attempt: (ttl - safety) / 3.
  Duration attempt_timeout() const { return (ttl - safety) / 3; }
  // How long a node acts on one acknowledged write: ttl - safety after its send.
  Duration validity() const { return ttl - safety; }
  // How long after a written_at a peer may treat that node as gone: ttl + grace.
  Duration takeover_after() const { return ttl + grace; }
  // How long a peer watches an unchanged object before fencing: one lease period plus
  // one attempt timeout (docs/node-lease.md, "When to fence").
  Duration fence_watch() const { return lease_period() + attempt_timeout(); }
};

static_assert(std::chrono::seconds(5) + std::chrono::seconds(2) >= 2 * std::chrono::seconds(1),
              "the default timings must satisfy grace + safety >= 2 * max_skew");
static_assert(std::chrono::seconds(3) * 3 <= std::chrono::seconds(10),
              "the default heartbeat period must not exceed ttl / 3");

std::string FormatDuration(Duration d);

}  // namespace wk
