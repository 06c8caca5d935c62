// The alarm index's stored format (docs/alarms.md, "The index"). FROZEN once released: a
// change is a new version.
//
//   alarms/<shard>/<due>/<tenant>/<class>/<name>/<generation>-<batch>
//
// shard: two digits, Crc32c("tenant/class/name") % kShards (the number of shards is part of
// the format); due: Unix ms, 19 digits, so a shard lists in due order; generation and batch
// (20 digits each): the hold and the batch whose event set the alarm, so every set writes a
// key of its own, never written again. The body is the single line `wasmkeep-alarm 1`: the
// key is the whole entry, and a scan lists and never reads.
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/ids.h"
#include "base/status.h"

namespace wk::alarms {

inline constexpr std::string_view kAlarmsPrefix = "alarms/";
inline constexpr int kShards = 16;
inline constexpr std::string_view kEntryBody = "wasmkeep-alarm 1\n";

// The tenant of the ownership records that hold shards, owners/_alarms/shard/<nn>: a name
// no tenant can have (tenants start with a letter or digit, base/ids.h).
inline constexpr std::string_view kShardTenant = "_alarms";
inline constexpr std::string_view kShardClass = "shard";

struct EntryKey {
  int shard = 0;
  std::int64_t due_ms = 0;
  ActorId actor;
  Generation generation;
  std::uint64_t batch = 0;
  friend auto operator<=>(const EntryKey&, const EntryKey&) = default;
};

// The shard an actor's entries go to.
int ShardOf(const ActorId& actor);
// "alarms/<shard>/".
std::string ShardPrefix(int shard);
// "alarms/<shard>/<due>/<tenant>/<class>/<name>/": every entry of one alarm time of one actor.
std::string AlarmPrefix(const ActorId& actor, std::int64_t due_ms);
// REQUIRES: a valid actor, due_ms >= 0, shard == ShardOf(actor). Checked.
std::string EncodeEntryKey(const EntryKey& key);
// kInvalidArgument for anything that is not a canonical entry key (a foreign object
// under alarms/ is reported, never deleted).
Result<EntryKey> ParseEntryKey(std::string_view key);

// The ownership-record id of shard s (held like an actor, docs/alarms.md), and back.
ActorId ShardActor(int shard);
// The shard of a shard actor id, or -1 for any other id.
int ShardOfShardActor(const ActorId& id);
// Whether `id` is a shard's (Owners accepts it although ValidateActorId does not).
inline bool IsShardActor(const ActorId& id) { return ShardOfShardActor(id) >= 0; }

}  // namespace wk::alarms
