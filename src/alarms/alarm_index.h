// AlarmIndex: one node's part of the alarm index (docs/alarms.md, "The index"). It is the
// replicas' AlarmIndexHook (replica/alarm_hook.h): it writes the index entry of every alarm
// its replicas set, and removes entries the durable state no longer needs, keeping the
// invariant
//
//   whenever the durable state of an actor holds alarm T, an index entry for (actor, T) exists
//
// by the rules of docs/alarms.md:
//   1. Entry before state. Committed(set T at batch s) writes the entry
//      (T, actor, generation, s) with an unconditional PUT of its own key, retried until
//      acknowledged or `entry_timeout` passes; the replica sends no segment holding the set
//      until it is (or fails if it is not).
//   2. Removal after durability. An entry is deleted only while the actor's hold is valid
//      (asked right before each DELETE), and only once a durable batch D left the alarm at
//      X != T: then an entry of this hold is deleted if it was written at or before D (its
//      batch <= D), an entry of an earlier hold always (its set was on the restored chain or
//      never durable), an entry of a later hold never (we are a zombie then). Durable
//      batches are reported by the replica (Durable), or by an alarm event's released
//      answer (AfterAlarmEvent). Entries of earlier holds are not known here: they are
//      found by one LIST of the alarm's prefix (the restored alarm's, or the time a delivery
//      was for), and only once the hold's fence landed (Fenced): until then an earlier
//      hold's segment in flight may still join the chain a next restore follows.
//   3. Stale entries are judged against the state by the alarm event itself
//      (actor/alarm_event.h); its answer comes back here through AfterAlarmEvent.
// Every key is written once, so a DELETE that lands late removes only the entry it was
// decided for.
//
// The index also tells its listener (the AlarmService) where each actor's alarm stands, so
// that the owner arms a timer for it and the last owner keeps one after it leaves memory.
//
// Threading: Env loop thread only. Simulator-clean.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "alarms/format.h"
#include "base/broken_models.h"
#include "env/env.h"
#include "replica/alarm_hook.h"
#include "store/object_store.h"

namespace wk::alarms {

struct AlarmIndexOptions {
  // One PUT, DELETE or LIST of the index.
  Duration request_timeout = std::chrono::seconds(5);
  // How long an entry's PUT is retried before the replica is failed (its event is then not
  // acknowledged).
  Duration entry_timeout = std::chrono::seconds(10);
  // earlier-entries-before-fence (base/broken_models.h); tests and the simulator only.
  BrokenModels broken;
};

struct AlarmIndexStats {
  std::uint64_t entries_written = 0;   // entry PUTs acknowledged
  std::uint64_t entry_failures = 0;    // sets whose entry could not be written (replica failed)
  std::uint64_t entries_deleted = 0;   // DELETEs acknowledged
  std::uint64_t delete_failures = 0;   // DELETEs that failed (the entry stays, stale)
  std::uint64_t lists = 0;             // LISTs of an alarm's prefix (entries of earlier holds)
  std::uint64_t puts = 0, deletes = 0;  // requests sent, retries included
};

class AlarmIndex final : public replica::AlarmIndexHook {
 public:
  // Where an actor's alarm stands, for the AlarmService: resident says the replica is open
  // here (the owner's timer); after Closed it is false (the last owner's wake timer).
  using Listener = std::function<void(const ActorId& actor, std::optional<std::int64_t> alarm, bool resident)>;

  AlarmIndex(Env& env, ObjectStore& store, AlarmIndexOptions options = {});
  ~AlarmIndex() override;
  AlarmIndex(const AlarmIndex&) = delete;
  AlarmIndex& operator=(const AlarmIndex&) = delete;

  void set_listener(Listener listener) { listener_ = std::move(listener); }

  // replica::AlarmIndexHook.
  void Opened(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm,
              std::function<bool()> is_valid) override;
  void Committed(const ActorId& actor, Generation generation, std::uint64_t seq, std::optional<std::int64_t> alarm,
                 std::function<void(Status)> entry_written) override;
  void Durable(const ActorId& actor, Generation generation, std::uint64_t seq,
               std::optional<std::int64_t> alarm) override;
  void Fenced(const ActorId& actor, Generation generation) override;
  void Closed(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm) override;

  // An alarm event delivered for alarm time `due_ms` was answered Ok (through the output
  // gate) with the actor's alarm at `alarm_after`, durable: if that is not due_ms, the
  // entries of earlier holds for due_ms go (rule 2). A no-op unless the actor is open here.
  void AfterAlarmEvent(const ActorId& actor, std::int64_t due_ms, std::optional<std::int64_t> alarm_after);

  const AlarmIndexStats& stats() const { return stats_; }
  // Actors with an open replica here.
  std::size_t open_actors() const { return open_.size(); }
  // Requests of the index in flight (tests wait for them).
  std::size_t in_flight() const { return in_flight_; }

 private:
  struct Open {
    Generation generation;
    std::function<bool()> is_valid;
    std::optional<std::int64_t> alarm;  // as last committed
    // Entries this hold wrote, by batch: their alarm time.
    std::map<std::uint64_t, std::int64_t> own;
    // Alarm times whose entries of earlier holds may exist (the restored alarm, the times
    // deliveries were for): removed with one LIST once the durable alarm is another.
    std::set<std::int64_t> earlier;
    // The hold's fence landed (Fenced): earlier holds' entries may be judged.
    bool fenced = false;
    // The restored alarm: until the fence landed nothing of this hold is durable, so it is
    // the durable alarm then.
    std::optional<std::int64_t> restored;
  };

  void Cleanup(const ActorId& actor, Open& open, std::uint64_t durable_seq, std::optional<std::int64_t> durable_alarm);
  static Task<void> WriteEntry(std::shared_ptr<bool> alive, AlarmIndex* self, std::string key,
                               std::function<void(Status)> done);
  static Task<void> DeleteEntry(std::shared_ptr<bool> alive, AlarmIndex* self, std::string key,
                                std::function<bool()> is_valid);
  static Task<void> DeleteEarlier(std::shared_ptr<bool> alive, AlarmIndex* self, ActorId actor, Generation generation,
                                  std::int64_t due_ms, std::function<bool()> is_valid);

  Env& env_;
  ObjectStore& store_;
  AlarmIndexOptions options_;
  Listener listener_;
  // Open replicas by actor and hold (a closing replica may still report while the next one
  // of the same actor opens).
  std::map<std::pair<ActorId, Generation>, Open> open_;
  AlarmIndexStats stats_;
  std::size_t in_flight_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk::alarms
