// The node lease object nodes/<id>, format `wasmkeep-node 3`, FROZEN (docs/node-lease.md,
// "What the lease is"). Guarantees: the decoder is strict; older formats decode as
// OldHeartbeat (recognised, never free, never live); a released or fenced record is not
// live whatever its age. Threading: pure functions and values. The format:
// docs/internals.md, "Node records".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "base/ids.h"  // NodeId, InstanceToken, ValidateNodeId
#include "base/status.h"
#include "base/time.h"

namespace wk {

enum class LeaseState : std::uint8_t { kLive, kReleased, kFenced };
std::string_view LeaseStateName(LeaseState s);

struct NodeRecord {
  LeaseState state = LeaseState::kLive;
  InstanceToken instance;  // empty only for an operator's fence of an absent object
  WallTime written_at;     // the send time of the last live write (kept by fences, releases)
  NodeId node_id;
  std::string address;   // its peer listener, where peers reach it; empty if none yet
  std::string software_version;
  WallTime started_at;
  std::string cert_pin;  // hex SHA-256 of the TLS key's SubjectPublicKeyInfo (docs/security.md); may be empty

  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};

struct OldHeartbeat {
  int format_version = 0;              // 1 or 2
  std::optional<WallTime> written_at;  // when the old body carries one we can read
};

using NodeObject = std::variant<NodeRecord, OldHeartbeat>;

inline constexpr std::string_view kNodesPrefix = "nodes/";
inline std::string NodeKey(const NodeId& id) { return std::string(kNodesPrefix) + id.str(); }

// REQUIRES: record passes ValidateNodeRecord (checked: a bad record is a programmer error).
std::string EncodeNodeRecord(const NodeRecord& record);
// OK or kInvalidArgument naming the field.
Status ValidateNodeRecord(const NodeRecord& record);
// A v3 record, an old heartbeat, or kFatal("corrupt ...") naming what is wrong.
Result<NodeObject> DecodeNodeObject(std::string_view body);

}  // namespace wk
