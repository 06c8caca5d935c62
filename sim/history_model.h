// HistoryModel: what the history checkers (H1-H4, docs/simulation.md, "History: restores and
// forks") know of the logs of the actors they watch, learnt from the bucket alone, never from
// the code under test's reading of it: every data segment that landed, with the bucket's time
// (the time the listing reports: when it became durable) and, per batch, the value it put
// under the actor's state key ("log" in the storage scenario, "list" for list actors), whether
// it replaced the whole state (a restore's or fork's batch) and then what it put; and which
// batches were acknowledged (a write's batch found by its own id, the last of its value).
//
// Every batch of these workloads puts the whole value (a write reads it and appends one id),
// so the state right after a batch is a function of that batch alone (StateOf). A point of
// the history is picked only where this record decides the state: an acknowledged batch (on
// the chain for good once acknowledged), or a time at which the newest data segment landed
// is an acknowledged batch's and no other landed since (then the state is its last batch's).
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "replica/history.h"
#include "world.h"

namespace wk::sim {

// A module state as the checkers compare it: every key with its value.
using ModelState = std::map<std::string, std::string>;

class HistoryModel {
 public:
  // The state a value stands for ("" is the empty state).
  using StateOf = std::function<ModelState(const std::string& value)>;
  HistoryModel(World& world, std::string key, StateOf state_of);

  void Watch(const ActorId& actor);
  bool Watched(const ActorId& actor) const { return actors_.count(actor) > 0; }
  // World::Hooks::on_landed: a data segment of a watched actor is recorded.
  void OnLanded(const std::string& key, const std::string& body);
  // Told of each replacement batch (a restore's or fork's) of a watched actor as it lands.
  std::function<void(const ActorId& actor, const std::string& value)> on_replacement;
  // A write of actor whose batch's value ends with `last` (its own id) was acknowledged now.
  void OnAcknowledged(const ActorId& actor, const std::string& last);

  struct Point {
    replica::PointSpec spec;
    std::string value;          // the model's state at it
    std::int64_t time_ms = 0;   // what the retention window is judged on (the batch's or the time)
    std::string text;           // for traces and violations
  };
  // A point of actor's history inside the retention window by true time (with the skew bound
  // and a little more to spare), a batch or a time, drawn from the world's random source;
  // nullopt when nothing acknowledged is that recent.
  std::optional<Point> Pick(const ActorId& actor, Duration retention);
  // Whether a refusal of a point at point_ms as outside the window is wrong whenever it was
  // made up to now: the point is inside by true time, the skew bound and a tolerance.
  bool SurelyInside(std::int64_t point_ms, Duration retention) const;
  // H1: the batch a restore or fork wrote (`batch` of `actor`) replaces the state with exactly
  // state_of(expected).
  void CheckWritten(const std::string& who, const ActorId& actor, const replica::BatchId& batch,
                    const std::string& expected);
  // H3: a state read at a point is state_of(expected).
  void CheckState(const std::string& who, const ModelState& state, const std::string& expected);
  // The acknowledged batches of actor that landed at or after since_ms, with their times.
  std::vector<std::pair<replica::BatchId, std::int64_t>> AckedSince(const ActorId& actor, std::int64_t since_ms) const;

  ModelState State(const std::string& value) const { return state_of_(value); }
  // The bucket's time now (true time).
  std::int64_t NowMs() const;

 private:
  struct BatchRecord {
    std::string value;  // "" when it put none
    bool replace = false;
    ModelState puts;    // replacement batches only
  };
  struct SegmentRecord {
    std::int64_t landed_ms = 0;
    std::vector<BatchRecord> batches;
  };
  struct Acked {
    replica::BatchId id;
    std::int64_t landed_ms = 0;
  };
  struct ActorRecord {
    std::map<replica::Position, SegmentRecord> segments;
    std::map<std::string, replica::BatchId> by_last;  // a write's id -> its batch
    std::vector<Acked> acked;
  };
  static std::string Show(const std::string& value);
  std::string Describe(const ModelState& state) const;

  World& w_;
  const std::string key_;
  StateOf state_of_;
  std::map<ActorId, ActorRecord> actors_;
};

}  // namespace wk::sim
