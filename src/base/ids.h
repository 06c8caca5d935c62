// The vocabulary of names every layer shares: actor ids, node ids, instance tokens and
// generations. Distinct types, so a node id is never passed where an instance or an actor
// name is expected, and a generation is never a bare integer (docs/architecture.md).
//
//   ActorId        tenant/class/name; each part a safe key and URL path segment.
//   NodeId         the stable name of a node (nodes/<id>); 1..64 of [A-Za-z0-9._-].
//   InstanceToken  one run of a node process (a fresh random token per start); it tells a
//                  restarted node's records from its previous run's.
//   Generation     one per hold of an actor, only ever increasing.
//
// NodeId and InstanceToken wrap a string: construction is explicit (at the boundaries: a
// CLI flag, a decoded record, a header), comparison and ordering are the string's, and
// str() gives the text back for keys, logs and headers. They do not validate on
// construction: ValidateNodeId says whether a node id may be stored, and each record
// format checks the instances it stores.
//
// Threading: value types.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/check.h"
#include "base/status.h"

namespace wk {

// tenant/class/name. Tenant and class: 1..63 of [a-z0-9_-], starting with a letter or
// digit. Name: 1..128 of [A-Za-z0-9._~-], not "." or "..". So every part is a safe key
// segment and a safe URL path segment.
struct ActorId {
  std::string tenant;
  std::string class_name;
  std::string name;

  std::string ToString() const { return tenant + "/" + class_name + "/" + name; }
  friend auto operator<=>(const ActorId&, const ActorId&) = default;
};

Status ValidateActorId(const ActorId& id);
// A system actor: an ownership record the nodes hold for their own work, not a tenant's
// actor (an alarm shard, docs/alarms.md). Its tenant is '_' and then 1..62 of [a-z0-9_-],
// so no tenant can have it (ValidateActorId refuses it); class and name as above.
Status ValidateSystemActorId(const ActorId& id);
// Whether id names a system actor (its tenant starts with '_'; no tenant's actor does).
inline bool IsSystemActor(const ActorId& id) { return !id.tenant.empty() && id.tenant[0] == '_'; }
// Parses "tenant/class/name"; kInvalidArgument names the bad part.
Result<ActorId> ParseActorId(std::string_view text);

// A generation: one per hold of an actor, only ever increasing.
// The largest generation a record may carry, 2^63 - 1: a new hold every microsecond would
// take 290,000 years to reach it. Decoders refuse more, and an acquisition refuses to go
// past it, so a stray log key or a corrupt record can never wrap the count back to 0.
inline constexpr std::uint64_t kMaxGeneration = (std::uint64_t{1} << 63) - 1;

struct Generation {
  std::uint64_t value = 0;
  // REQUIRES: value < kMaxGeneration (checked: Owners refuses before asking).
  Generation Next() const {
    WK_CHECK(value < kMaxGeneration, "Generation::Next() past kMaxGeneration");
    return Generation{value + 1};
  }
  friend auto operator<=>(const Generation&, const Generation&) = default;
};

// A string with a type of its own; Tag keeps NodeId and InstanceToken apart.
template <typename Tag>
class StringId {
 public:
  StringId() = default;
  explicit StringId(std::string value) : value_(std::move(value)) {}
  explicit StringId(std::string_view value) : value_(value) {}
  explicit StringId(const char* value) : value_(value) {}

  const std::string& str() const { return value_; }
  bool empty() const { return value_.empty(); }

  friend bool operator==(const StringId&, const StringId&) = default;
  friend auto operator<=>(const StringId&, const StringId&) = default;

 private:
  std::string value_;
};

struct NodeIdTag {};
struct InstanceTokenTag {};
using NodeId = StringId<NodeIdTag>;
using InstanceToken = StringId<InstanceTokenTag>;

// A node id: 1..64 characters of [A-Za-z0-9._-], not "." or "..", so it is a safe key
// segment and a safe log field.
Status ValidateNodeId(std::string_view id);
inline Status ValidateNodeId(const NodeId& id) { return ValidateNodeId(std::string_view(id.str())); }
}  // namespace wk
