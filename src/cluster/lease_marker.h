// The objects under leases/<tenant>/<class>/<name> (ADR 0020 §6): per-actor leases of the
// versions before node leases (`wasmkeep-lease 1`), and the markers this version writes over
// them (`wasmkeep-lease 2`) so that an old binary never takes an actor again.
//
// An old lease (written by per-actor-lease binaries, never by this code) is recognised by its
// header alone and read leniently, like an old heartbeat (node_record.h): a line
// `node <id>`, `generation <n>` and `expires_at_ms <unix ms>` (or `expires_at <unix ms>`),
// each optional. It is live by the old rules until expires_at + grace on the reader's clock;
// one whose expiry cannot be read is never taken for expired.
//
//   wasmkeep-lease 1                 (as the per-actor-lease versions wrote it)
//   node node-a
//   generation 7
//   expires_at_ms 1764000010000
//
// The marker. FROZEN: a change is a new header version. Old code accepts only
// `wasmkeep-lease 1` (its LeaseRecord::decode), reads a marker as corrupt and never takes
// it over: that is the point. `seed` is the generation the actor's first ownership record
// starts above (max of the old lease's generation and every generation in the actor's log);
// `marked_by` and `marked_at` tell an operator who marked it and when.
//
//   wasmkeep-lease 2
//   seed 7
//   marked_by node-b
//   marked_at 1764000020000
//
// Markers and old leases are never collected (docs/storage.md): an old binary started
// against the bucket later must keep being refused.
//
// Threading: pure functions and values.
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
