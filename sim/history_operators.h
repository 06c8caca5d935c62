// HistoryOperators: an operator restoring actors to points of their history and forking them
// (docs/simulation.md, "History: restores and forks"; docs/storage.md, "History and
// point-in-time restore"), during the chaos, through the nodes' own OwnerChanges
// (routing/owner_changes.h: what `wasmkeep actor restore` and `actor fork` reach). A change
// is asked of a random node (its process's `changes`), running on that node's Env: it takes
// the actor as its owner, or names the live holder, which is then asked once (as the HTTP
// shell forwards). Points come from the HistoryModel (an acknowledged batch, or a time the
// record decides), never from the code under test. From an operator's machine (its own Env,
// an unfaulted view of the bucket) it also reads actors' histories and their states at
// sampled points. One change of an actor at a time.
//
// Checkers: H1 (the batch a restore or fork wrote is the point's state, and a batch point is
// the point it restored), H3 (a point inside the retention window is never refused; a state
// read at a point is the model's; the history lists every acknowledged batch of the window),
// and, with a ServingCluster, H2 for its restore actors: their own client appends and reads
// through random nodes, and every read made after an acknowledged restore starts with the
// point's list, holds none of the values acknowledged before the restore was asked beyond it,
// and every value appended since (docs/simulation.md says when a read is judged).
//
// Every draw goes through the world's random source.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "history_model.h"
#include "replica/replica.h"
#include "routing/owner_changes.h"
#include "serving.h"
#include "world.h"

namespace wk::sim {

// The actors the serving scenarios restore (t/<class>/r0, r1: written by the operator's own
// client only) and fork to (f0..f7), and both.
std::vector<ActorId> RestoreActors(const std::string& class_name);
std::vector<ActorId> ForkTargets(const std::string& class_name);
std::vector<ActorId> HistoryActors(const std::string& class_name);
// A list actor's state: "list", its values comma-separated (nothing when empty).
ModelState ListState(const std::string& list);
// Retention on (docs/storage.md, "History and point-in-time restore"): a window of 10 s to
// 2 min, and a margin of one to three times the skew bound (at least the bound: what the
// nodes' clocks and the bucket's may differ by).
void DrawRetention(World& w, replica::ReplicaOptions& options);

struct HistoryOperatorsOptions {
  std::vector<ActorId> actors;        // restored and forked from
  std::vector<ActorId> fork_targets;  // fresh names, one fork each
  Duration retention{};               // the nodes' ReplicaOptions::retention (the same for every tenant)
  double fork_share = 0.25;
  // Between two changes asked (ms), and between two sampled history reads.
  std::int64_t change_min_ms = 2000;
  std::int64_t change_max_ms = 6000;
  std::int64_t read_min_ms = 500;
  std::int64_t read_max_ms = 2000;
  // Set: the restore actors (`actors`, list actors) get their own client (appends and reads
  // through random nodes until clients_for) and H2 judges its reads (FinalChecks).
  ServingCluster* cluster = nullptr;
  Duration clients_for{};
};

class HistoryOperators {
 public:
  // REQUIRES: world and model outlive this; model watches every actor and fork target.
  HistoryOperators(World& world, HistoryModel& model, HistoryOperatorsOptions options);
  ~HistoryOperators();

  // Asked as a change is issued: a mark handed back with it (the storage scenario's count of
  // acknowledgements, for H2).
  std::function<std::uint64_t()> on_issue;
  // A restore or fork was made: `actor` (the restored one, or the fork's target) now holds
  // the point's state `value` (checked by H1 first).
  std::function<void(const ActorId& actor, const std::string& value, std::uint64_t mark)> on_changed;

  // Schedules the changes and the sampled reads over the chaos, and the restore actors' client.
  void Start();
  // With a cluster, after healing: each restore actor and each fork made read through a
  // healthy node, then H2 over every read (world.finished set first).
  void FinalChecks();

 private:
  struct Machine;
  struct Change {
    ActorId actor;                  // restored, or forked from
    std::optional<ActorId> target;  // a fork's
    HistoryModel::Point point;
    MonoTime issued{};
    std::optional<MonoTime> answered;
    bool made = false;
    bool given_up = false;  // not answered within kChangeGivenUp: its actor freed
    int attempts = 0;
    std::uint64_t mark = 0;
  };
  struct Op {  // a restore actor's client operation
    ActorId actor;
    bool append = false;
    std::string value;
    MonoTime invoked{};
    MonoTime completed{};
    bool done = false;
    bool ok = false;
    std::vector<std::string> list;
  };

  void ScheduleChanges();
  // Asks p for change `index` (another attempt), and gives up waiting after a while.
  void AskOf(Process* p, std::size_t index);
  // Asks process `number`'s OwnerChanges for change `index`; hops 1: asked by the node first
  // asked, which named this one as the holder.
  Task<void> Ask(int number, std::size_t index, int hops);
  void Finish(std::size_t index, const OwnerChange& r, const std::string& via);
  void ScheduleReads();
  Task<void> ReadState(ActorId actor, HistoryModel::Point point);
  Task<void> ReadHistory(ActorId actor);
  // The restore actors' client.
  Task<void> Client();
  Task<bool> Send(Op op, int slot);
  void ScheduleForkReads(const ActorId& target);
  Task<void> ForkRead(Op op, int slot);
  void Judge(const ActorId& actor);

  World& w_;
  HistoryModel& model_;
  HistoryOperatorsOptions options_;
  std::unique_ptr<Machine> machine_;
  std::deque<Change> changes_;
  std::set<ActorId> busy_;  // actors (and fork targets) with a change in flight
  std::size_t next_fork_ = 0;
  std::vector<ActorId> forked_;  // fork targets made
  std::deque<Op> ops_;
  std::uint64_t next_value_ = 0;
};

}  // namespace wk::sim
