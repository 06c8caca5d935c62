// The objects under leases/<tenant>/<class>/<name> (docs/node-lease.md, "Upgrading from
// per-actor leases"): per-actor leases of the versions before node leases (`wasmkeep-lease
// 1`, read leniently, never written here) and the markers this version writes over them
// (`wasmkeep-lease 2`, FROZEN), which old binaries read as corrupt and never take over: so an
// old binary never takes an actor again. Markers and old leases are never collected.
// Threading: pure functions and values. The formats: docs/internals.md, "Lease markers".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "base/ids.h"
#include "base/status.h"
#include "base/time.h"
#include "cluster/timing.h"

namespace wk {

inline constexpr std::string_view kLeasesPrefix = "leases/";
inline std::string LeaseMarkerKey(const ActorId& id) { return std::string(kLeasesPrefix) + id.ToString(); }

// A per-actor lease of an older version, as far as it can be read.
struct OldLease {
  std::optional<NodeId> node_id;
  std::optional<Generation> generation;
  std::optional<WallTime> expires_at;
};

struct LeaseMarker {
  Generation seed;
  NodeId marked_by;
  WallTime marked_at{};
  friend bool operator==(const LeaseMarker&, const LeaseMarker&) = default;
};

using LeasesObject = std::variant<OldLease, LeaseMarker>;

// REQUIRES: marked_by is a valid node id (checked).
std::string EncodeLeaseMarker(const LeaseMarker& marker);
// An old lease, a marker, or kFatal("corrupt ...") for anything else (never taken).
Result<LeasesObject> DecodeLeasesObject(std::string_view body);

// Whether an old lease still holds its actor by the old rules: expires_at + grace has not
// passed on this clock (now). An expiry that cannot be read holds for ever.
bool OldLeaseLive(const OldLease& lease, WallTime now, const LeaseTiming& timing);

// For logs and refusals: "node-a, generation 7, expires 2026-...".
std::string DescribeOldLease(const OldLease& lease);

}  // namespace wk
