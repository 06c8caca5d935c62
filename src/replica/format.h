// The durable formats of an actor's storage: segment and snapshot objects and their keys
// (docs/architecture.md, "Durable storage"). FROZEN once released: a change is a new version.
//
// Keys. Positions are (generation, seq): generation is the hold's, seq counts that hold's
// segments from 0. Both are zero-padded to 20 digits (every uint64 fits), so listing
// order is log order:
//   wal/<tenant>/<class>/<name>/<gen>-<seq>        a segment
//   snapshot/<tenant>/<class>/<name>/<gen>-<seq>   the state as of segment <gen>-<seq>
//
// Segment (`wasmkeep-segment 1`). Text header lines, then a binary payload, then a fixed
// 16-byte trailer `crc32c XXXXXXXX\n` over every byte before it:
//   wasmkeep-segment 1
//   actor <tenant>/<class>/<name>
//   position <gen>-<seq>
//   seq 0, the owner fence:                 seq > 0, data:
//     base <gen>-<seq> | none                 batches <n>
//     tip <gen>-<seq> | none                  <n batches, binary>
//     run <n>
//     <n lines: <gen>-<seq>>
// The fence is a hold's first segment. It names the chain it restored: `base`, the snapshot
// it started from; `run`, every segment after that snapshot up to and including `tip`, in
// log order. Restore follows the newest fence, so a segment of an older hold that is not
// in its run (an upload that landed after the next owner restored) is off the chain.
//
// A batch (little-endian): u32 mutation count; u8 alarm (0 unchanged, 1 deleted, 2 set,
// followed by i64 ms); then per mutation u8 kind (0 put, 1 delete, 2 delete all), u32 key
// length, key, and for a put u32 value length, value.
//
// Snapshot (`wasmkeep-snapshot 1`):
//   wasmkeep-snapshot 1
//   actor <tenant>/<class>/<name>
//   position <gen>-<seq>
//   alarm <ms> | none
//   entries <n>
//   <n entries: u32 key length, key, u32 value length, value; ascending, keys unique>
//   crc32c XXXXXXXX
//
// Decoders are strict: a wrong header, a field out of place, a count that does not match,
// bytes left over or a checksum mismatch is kFatal("corrupt ..."), never an empty value.
//
// Threading: pure functions.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actor/state_map.h"
#include "actor/storage.h"
#include "base/status.h"
#include "cluster/owner_record.h"

namespace wk::replica {

// A place in an actor's log: segment `seq` of the hold of generation `generation`.
struct Position {
  Generation generation;
  std::uint64_t seq = 0;
  friend auto operator<=>(const Position&, const Position&) = default;
  std::string ToString() const;  // "<gen>-<seq>", unpadded
};

inline constexpr std::string_view kWalPrefix = "wal/";
inline constexpr std::string_view kSnapshotPrefix = "snapshot/";

// "wal/<actor>/" and "snapshot/<actor>/": everything of one actor's log.
std::string WalPrefix(const ActorId& actor);
std::string SnapshotPrefix(const ActorId& actor);
std::string SegmentKey(const ActorId& actor, Position p);
std::string SnapshotKey(const ActorId& actor, Position p);
// The position of a key under prefix (as listed); kFatal naming the key for anything that
// is not exactly "<prefix><20 digits>-<20 digits>".
Result<Position> ParseKeyPosition(std::string_view prefix, std::string_view key);

struct FenceInfo {
  std::optional<Position> base;
  std::vector<Position> run;  // ascending
  std::optional<Position> tip() const;  // the last of run, else base
};

struct Segment {
  ActorId actor;
  Position position;
  FenceInfo fence;                  // seq 0 only
  std::vector<actor::Batch> batches;  // seq > 0 only; may be empty only for a fence
};

struct Snapshot {
  ActorId actor;
  Position position;
  actor::StateMap state;
};

std::string EncodeSegment(const Segment& segment);
// Appends one batch's binary encoding (as it appears in a segment) to out; returns its size.
std::size_t AppendBatch(const actor::Batch& batch, std::string& out);
// A segment from batches already encoded with AppendBatch (the writer's group commit keeps
// them encoded): `count` batches whose encodings are concatenated in payload.
std::string EncodeDataSegment(const ActorId& actor, Position p, std::size_t count, std::string_view payload);
Result<Segment> DecodeSegment(std::string_view body);

std::string EncodeSnapshot(const ActorId& actor, Position p, const actor::StateMap& state);
Result<Snapshot> DecodeSnapshot(std::string_view body);

}  // namespace wk::replica
