#include "cluster/timing.h"

#include <cstdio>

namespace wk {

std::string FormatDuration(Duration d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  char buf[48];
  if (ms % 1000 == 0) std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms / 1000));
  else std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  return buf;
}

Status LeaseTiming::Validate() const {
  auto positive = [](Duration d) { return d > Duration(0); };
  if (!positive(ttl)) return InvalidArgument("lease.ttl must be positive");
  if (!positive(heartbeat_period)) return InvalidArgument("lease.heartbeat_period must be positive");
  if (grace < Duration(0) || safety < Duration(0) || max_skew < Duration(0)) {
    return InvalidArgument("lease.grace, lease.safety and lease.max_skew must not be negative");
  }
  if (safety >= ttl) {
    return InvalidArgument("lease.safety (" + FormatDuration(safety) + ") must be below lease.ttl (" +
                           FormatDuration(ttl) + "): a node would never be valid");
  }
  if (grace + safety < 2 * max_skew) {
    return InvalidArgument("lease.grace + lease.safety (" + FormatDuration(grace + safety) +
                           ") must be at least 2 * lease.max_skew (" + FormatDuration(2 * max_skew) +
                           "), or two nodes could own one actor at once under clock skew");
  }
  if (heartbeat_period * 3 > ttl) {
    return InvalidArgument("lease.heartbeat_period (" + FormatDuration(heartbeat_period) +
                           ") must not exceed lease.ttl / 3 (" + FormatDuration(ttl / 3) +
                           "): the lease needs two retries before it runs out");
  }
  if (attempt_timeout() <= Duration(0)) {
    return InvalidArgument("(lease.ttl - lease.safety) / 3 must be positive");
  }
  return Status::Ok();
}

}  // namespace wk
