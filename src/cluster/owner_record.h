// The ownership record owners/<tenant>/<class>/<name> (actor ids: base/ids.h), format
// `wasmkeep-owner 1` (docs/node-lease.md, "Actors"). FROZEN: a change is a new header version.
//
//   wasmkeep-owner 1
//   owner <node id> <instance>        or        owner nobody
//   generation <n>
//
// The record is written only when the actor changes hands: an acquisition names a node
// and instance at generation + 1; a release names nobody and keeps the generation. Every
// hold has a generation of its own, and generations only grow.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/ids.h"  // ActorId, Generation, NodeId, InstanceToken
#include "base/status.h"

namespace wk {

inline constexpr std::string_view kOwnersPrefix = "owners/";
inline std::string OwnerKey(const ActorId& id) { return std::string(kOwnersPrefix) + id.ToString(); }

struct OwnerRecord {
  // Empty node_id: names nobody (released), the generation kept.
  NodeId node_id;
  InstanceToken instance;
  Generation generation;

  // The record a release writes: nobody, at the released hold's generation.
  static OwnerRecord Nobody(Generation generation) { return OwnerRecord{NodeId(), InstanceToken(), generation}; }

  bool names_nobody() const { return node_id.empty(); }
  bool Names(const NodeId& node, const InstanceToken& inst) const { return node_id == node && instance == inst; }
  friend bool operator==(const OwnerRecord&, const OwnerRecord&) = default;
};

// REQUIRES: a valid record (node id valid, instance set iff node set). Checked.
std::string EncodeOwnerRecord(const OwnerRecord& record);
// The record, or kFatal("corrupt ...") for anything else: never read as free.
Result<OwnerRecord> DecodeOwnerRecord(std::string_view body);

}  // namespace wk
