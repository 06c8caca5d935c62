// The durable formats of an actor's storage: segment and snapshot objects and their keys
// (docs/storage.md, "Formats"), FROZEN once released (a change is a new version).
// Guarantees: keys list in log order (generation and seq zero-padded); decoders are strict:
// anything but a well-formed object with a matching CRC-32C is kFatal("corrupt ..."), never
// an empty value. Threading: pure functions. The grammar: docs/internals.md, "Replica
// formats".
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
// Segments and snapshots are written as version 1 unless they carry the runtime's system
// entries (actor::Batch::system), which only version 2 can: a node that knows only version 1
// refuses such an object as a newer format instead of misreading it. In a segment, a batch
// with system entries has kSystemFlag set in its alarm byte.
inline constexpr std::uint64_t kSystemVersion = 2;
inline constexpr std::uint8_t kSystemFlag = 0x10;
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
// `system`: a batch carries system entries (the segment is then version 2).
std::string EncodeDataSegment(const ActorId& actor, Position p, std::size_t count, std::string_view payload,
                              bool system);
Result<Segment> DecodeSegment(std::string_view body);

std::string EncodeSnapshot(const ActorId& actor, Position p, const actor::StateMap& state);
Result<Snapshot> DecodeSnapshot(std::string_view body);

}  // namespace wk::replica
