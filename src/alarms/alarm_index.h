// AlarmIndex: one node's part of the alarm index (docs/alarms.md, "The index"), as the
// replicas' AlarmIndexHook (replica/alarm_hook.h). It writes the index entry of every alarm
// its replicas set, before the segment holding the set is sent, and removes the entries
// the durable state no longer needs, keeping the invariant "whenever the durable state of
// an actor holds alarm T, an index entry for (actor, T) exists" by the three rules of
// docs/alarms.md, "The invariant, and the three rules that keep it". How removal judges
// entries of this, earlier and later holds: docs/internals.md, "alarms: an actor's own time".
// It also tells its listener (the AlarmService) where each actor's alarm stands.
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
#include "store/tenant_store.h"

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
  // Usage per tenant (store/tenant_store.h): when set, an actor's entries (their writes,
  // removals and the listings of earlier holds' entries) go through stores->Of(actor)'s view
  // of kAlarm, attributed to its tenant; null (the default): through the node's store.
  // REQUIRES: stores outlives this index.
  void set_tenant_stores(TenantStores* stores) { tenant_stores_ = stores; }

  // replica::AlarmIndexHook.
  void Opened(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm,
              std::function<bool()> is_valid, std::uint64_t resumed_after) override;
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
    // A woken sleeping hold's last batch before it slept: its own entries up to it are
    // judged as earlier holds' are.
    std::uint64_t resumed_after = 0;
    // The restored alarm: until the fence landed nothing of this hold is durable, so it is
    // the durable alarm then.
    std::optional<std::int64_t> restored;
  };

  void Cleanup(const ActorId& actor, Open& open, std::uint64_t durable_seq, std::optional<std::int64_t> durable_alarm);
  // The store for actor's entries: its tenant's view of kAlarm, or store_. The coroutines
  // below send through the one they are given only while the index is alive.
  ObjectStore& StoreOf(const ActorId& actor);
  static Task<void> WriteEntry(std::shared_ptr<bool> alive, AlarmIndex* self, ObjectStore* store, std::string key,
                               std::function<void(Status)> done);
  static Task<void> DeleteEntry(std::shared_ptr<bool> alive, AlarmIndex* self, ObjectStore* store, std::string key,
                                std::function<bool()> is_valid);
  static Task<void> DeleteEarlier(std::shared_ptr<bool> alive, AlarmIndex* self, ActorId actor, Generation generation,
                                  std::uint64_t resumed_after, std::int64_t due_ms, std::function<bool()> is_valid);

  Env& env_;
  ObjectStore& store_;
  TenantStores* tenant_stores_ = nullptr;
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
