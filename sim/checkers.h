// The checkers of a scenario run, numbered as in docs/simulation.md:
//
//   lease      1 validity bound, 2 fence bound, 3 no early freeing, 4 watch after a lapse,
//              5 lost means gone, 6 one holder per id, 7 liveness after healing
//   ownership  8 never two owners acting for one actor, 9 never one generation for two
//              holds, 10 a drain never reports drained with a release pending
//   storage    11 no acknowledged write lost, history in order, 12 nothing applied twice,
//              13 consistent state (11-13 in storage_history.h), 14 no restore fails for
//              good, 15 garbage collection stays in the log, 16 the final audit
//   history    H2 (storage: 11 after an acknowledged restore, storage_history.h) and H4 only
//              a holder writes an actor's log (H1 and H3: history_model.h, history_operators.h)
//
// They see what the world's hooks report (sends, landings, drains, acknowledgements,
// restores) and the nodes' own state after every event; each breach is a
// World::Violation. They draw nothing random.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "faults.h"
#include "replica/replica.h"
#include "storage_history.h"
#include "world.h"

namespace wk::sim {

struct CheckerOptions {
  bool leases = true;   // 1-7 (all but the serving scenarios, which judge their clients' view)
  bool owners = false;  // 8 (the ownership, storage and move scenarios)
  bool logs = false;    // the storage checkers' landing counts (storage scenario)
  // H4: every segment of an actor's log is sent by a process holding the actor, valid, at the
  // segment's generation (the scenarios with restores and forks).
  bool holders = false;
  // Scale mode (sim/scale.h): checker 8 walks each process's holds instead of every actor
  // for every process, and checker 7's failures are counted for the report (liveness()),
  // violations only with `liveness_violations`.
  bool owners_from_holds = false;
  bool liveness_report = false;
  bool liveness_violations = true;
};

class Checkers {
 public:
  Checkers(World& world, CheckerOptions options);

  // ---- lease (1-7) and ownership (8-10)
  // A node's put as it is sent (World::Hooks::on_send): 5, and what 3 and 4 need of fences.
  void OnSend(int number, const std::string& key, const std::string& body);
  // A put landed (World::Hooks::on_landed): 9 for owner records, 2-4 for fences.
  void OnLanded(const std::string& key, const std::string& body);
  // After every event: 8, 6, 1 and 2.
  void CheckEveryStep();
  // After healing: 7.
  void FinalChecks();
  // A drain of p returned OK: 10.
  void OnDrained(Process& p);
  // Scale mode: checker 7's failures after healing, and the first few of them.
  std::uint64_t liveness_failures() const { return liveness_failures_; }
  const std::vector<std::string>& liveness_samples() const { return liveness_samples_; }

  // ---- storage (11-16)
  // A write acknowledged (WhenDurable said Ok) with the log it committed: 11, 12.
  void OnAcknowledged(const std::string& who, const ActorId& actor, const std::string& id, const std::string& log);
  // A replica of `generation` restored: later segments of older holds are off the chain.
  void OnRestored(const ActorId& actor, Generation generation);
  // A restore failed: 14.
  void OnRestoreFailed(const std::string& who, const Status& status);
  // Judges a restored state (a replica's, or the final audit's StateMap: same reads): 11-13.
  template <typename State>
  void CheckRestore(const std::string& who, const ActorId& actor, const State& state);
  // A replica sent a delete: 15.
  void OnReplicaDelete(int number, const std::string& key);
  // ---- restores and forks (H2 in the storage scenario: StorageHistory)
  void OnReplacementLanded(const ActorId& actor, const std::string& log) {
    history_.OnReplacementLanded(actor.ToString(), log);
  }
  void OnReplacementAcknowledged(const ActorId& actor, const std::string& log, std::uint64_t issued_at) {
    history_.OnReplacementAcknowledged(actor.ToString(), log, issued_at);
  }
  std::uint64_t acks() const { return history_.acks(); }
  // After the run: 16.
  void FinalAudit();

 private:
  // What the checkers know of a fence sent by a node, keyed by its body.
  struct FenceSend {
    int sender = 0;
    MonoTime sent{};
    WallTime sender_wall{};
    bool sender_valid = false;
    std::optional<MonoTime> sender_valid_since;
  };

  MonoTime SendTrue(const InstanceToken& instance, WallTime written_at) const;
  // A failure of checker 7: a violation, and in scale mode a count for the report.
  void LivenessFailure(const std::string& what);
  void CheckProcessBound(const InstanceToken& instance);
  // A segment or snapshot landed. Returns false for other keys.
  bool OnLogLanded(const std::string& key);

  World& w_;
  CheckerOptions options_;
  std::map<InstanceToken, MonoTime> landed_bound_;
  std::map<InstanceToken, MonoTime> fence_bound_;
  // Instances with a live write that landed after a fence named them (checker 2 bounds
  // only the validity the fence cut; see OnLanded).
  std::set<InstanceToken> renewed_after_fence_;
  std::map<std::string, FenceSend> fence_sends_;
  std::map<std::string, Generation> last_generation_;
  StorageHistory history_;
  std::map<std::string, Generation> opened_generation_;  // the newest hold that restored each actor
  std::uint64_t liveness_failures_ = 0;
  std::vector<std::string> liveness_samples_;
};

// Plugs the faults and the checkers into the world's hooks (fault, on_send, on_landed, a
// drain's end), and returns the stages every scenario runs: heal at the end of the chaos,
// check after every event, the liveness checks after healing. A scenario adds its own.
World::Stages Connect(World& world, Faults& faults, Checkers& checkers);

template <typename State>
void Checkers::CheckRestore(const std::string& who, const ActorId& actor, const State& state) {
  const std::string log = state.Get("log").value_or("");
  std::set<std::string> entries;
  actor::ListQuery query;
  query.start = "e/";
  query.prefix = true;
  state.List(query, [&entries](std::string_view key, std::string_view) {
    entries.emplace(key.substr(2));
    return true;
  });
  for (const auto& v : history_.OnRestored(actor.ToString(), log, entries)) w_.Violation(who + " restored: " + v);
}

}  // namespace wk::sim
