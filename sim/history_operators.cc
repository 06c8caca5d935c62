#include "history_operators.h"

#include <algorithm>
#include <map>

#include "env/sim_env.h"
#include "replica/history.h"
#include "storage_history.h"
#include "store/mem/mem_store.h"

namespace wk::sim {
namespace {

std::string At(MonoTime t) { return std::to_string(World::Ms(t.time_since_epoch())) + "ms"; }

// A change not answered within this (its node killed or frozen under it) frees its actor
// for the next change; its answer still counts if it comes.
constexpr Duration kChangeGivenUp = seconds(60);
// Attempts of one change (the first and the retries after a transient failure).
constexpr int kAttempts = 6;
// Sampled reads go on a little past the chaos.
constexpr Duration kReadsAfterChaos = seconds(20);

int SlotOf(const NodeId& node) {
  const std::string& s = node.str();
  return s.size() > 1 && s[0] == 'n' ? std::stoi(s.substr(1)) : -1;
}

}  // namespace

std::vector<ActorId> RestoreActors(const std::string& class_name) {
  return {ActorId{"t", class_name, "r0"}, ActorId{"t", class_name, "r1"}};
}

std::vector<ActorId> ForkTargets(const std::string& class_name) {
  std::vector<ActorId> out;
  for (int i = 0; i < 8; ++i) out.push_back(ActorId{"t", class_name, "f" + std::to_string(i)});
  return out;
}

std::vector<ActorId> HistoryActors(const std::string& class_name) {
  std::vector<ActorId> out = RestoreActors(class_name);
  for (ActorId& a : ForkTargets(class_name)) out.push_back(std::move(a));
  return out;
}

ModelState ListState(const std::string& list) {
  ModelState s;
  if (!list.empty()) s["list"] = list;
  return s;
}

void DrawRetention(World& w, replica::ReplicaOptions& options) {
  options.retention = milliseconds(w.Uniform(10'000, 120'000));
  const std::int64_t skew = World::Ms(w.timing().max_skew);
  options.retention_margin = milliseconds(w.Uniform(skew, 3 * skew));
}

// The operator's machine: its own Env (true time, never frozen) and an unfaulted view of
// the bucket, as `wasmkeep actor history` run from an operator's shell has.
struct HistoryOperators::Machine {
  explicit Machine(World& w) : env(w.sim(), FromUnixMs(kOriginMs)), store(env, w.bucket()) {}
  SimEnv env;
  MemStore store;
};

HistoryOperators::HistoryOperators(World& world, HistoryModel& model, HistoryOperatorsOptions options)
    : w_(world), model_(model), options_(std::move(options)), machine_(std::make_unique<Machine>(world)) {}

HistoryOperators::~HistoryOperators() = default;

void HistoryOperators::Start() {
  ScheduleChanges();
  ScheduleReads();
  if (options_.cluster) options_.cluster->client_env().Spawn(Client(), "restore client");
}

// ---- restores and forks, one of an actor at a time, every change_min..change_max of chaos

void HistoryOperators::ScheduleChanges() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(options_.change_min_ms, options_.change_max_ms)), [this] {
    if (w_.Now() >= MonoTime(w_.chaos_for)) return;
    ScheduleChanges();
    const ActorId actor =
        options_.actors[static_cast<std::size_t>(w_.Uniform(0, static_cast<std::int64_t>(options_.actors.size()) - 1))];
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    const bool fork = w_.Chance(options_.fork_share) && next_fork_ < options_.fork_targets.size();
    if (busy_.count(actor)) return;
    Process* p = w_.Primary(slot);
    if (p == nullptr || p->changes == nullptr) return;
    auto point = model_.Pick(actor, options_.retention);
    if (!point) return;
    Change c;
    c.actor = actor;
    if (fork) c.target = options_.fork_targets[next_fork_++];
    c.point = std::move(*point);
    c.issued = w_.Now();
    c.mark = on_issue ? on_issue() : 0;
    busy_.insert(actor);
    if (c.target) busy_.insert(*c.target);
    const std::size_t index = changes_.size();
    w_.Trace("operator asks p" + std::to_string(p->number) + " to " +
             (c.target ? "fork " + actor.name + " to " + c.target->name : "restore " + actor.name) + " at " +
             c.point.text);
    changes_.push_back(std::move(c));
    ++w_.result().history_changes;
    AskOf(p, index);
  });
}

void HistoryOperators::AskOf(Process* p, std::size_t index) {
  const int attempt = ++changes_[index].attempts;
  p->env()->Spawn(Ask(p->number, index, 0), "operator change");
  w_.bucket_env().StartTimer(w_.Now() + kChangeGivenUp, [this, index, attempt] {
    Change& g = changes_[index];
    if (g.answered || g.attempts != attempt) return;
    w_.Trace("operator gives up waiting for the change of " + g.actor.name + " asked at " + At(g.issued));
    g.given_up = true;
    busy_.erase(g.actor);
    if (g.target) busy_.erase(*g.target);
  });
}

Task<void> HistoryOperators::Ask(int number, std::size_t index, int hops) {
  auto it = w_.processes().find(number);
  if (it == w_.processes().end() || it->second->changes == nullptr) co_return;
  OwnerChanges* changes = it->second->changes;
  // Copies: the deque's element stays, but the frame must not lean on it across awaits.
  const ActorId actor = changes_[index].actor;
  const std::optional<ActorId> target = changes_[index].target;
  const replica::PointSpec spec = changes_[index].point.spec;
  // No co_await in a conditional expression (GCC 12 destroys its result early:
  // docs/DEVELOPING.md, "Coroutines").
  OwnerChange r;
  if (target) {
    r = co_await changes->Fork(actor, spec, *target);
  } else {
    r = co_await changes->Restore(actor, spec);
  }
  const std::string via = "p" + std::to_string(number);
  if (r.holder) {
    Process* holder = w_.Primary(SlotOf(*r.holder));
    if (hops == 0 && holder != nullptr && holder->changes != nullptr) {
      w_.Trace("operator change of " + actor.name + ": " + via + " names the holder " + r.holder->str() + ", asked");
      holder->env()->Spawn(Ask(holder->number, index, 1), "operator change");
      co_return;
    }
    r.status = Retryable(actor.ToString() + " is moving between nodes (" + r.holder->str() + " holds it)");
    r.holder.reset();
  }
  Finish(index, r, via);
}

void HistoryOperators::Finish(std::size_t index, const OwnerChange& r, const std::string& via) {
  Change& c = changes_[index];
  const bool late = c.given_up;
  const Code code = r.status.code();
  const bool transient = code == Code::kRetryable || code == Code::kUnknownOutcome || code == Code::kCancelled ||
                         (code == Code::kPreconditionFailed && !r.conflict);
  if (!r.made() && transient && !late && c.attempts < kAttempts) {
    // As a person at a shell does with a 503: again, a little later, through some node.
    w_.Trace("operator: the change of " + c.actor.name + " asked at " + At(c.issued) + " (answered by " + via +
             "): " + r.status.ToString() + "; asked again");
    const Duration after = milliseconds(w_.Uniform(500, 2000));
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    w_.bucket_env().StartTimer(w_.Now() + after, [this, index, slot] {
      Process* p = w_.Primary(slot);
      Change& g = changes_[index];
      if (g.given_up || g.answered) return;
      if (p == nullptr || p->changes == nullptr) {
        g.answered = w_.Now();
        w_.Trace("operator: no node to ask again for the change of " + g.actor.name);
        busy_.erase(g.actor);
        if (g.target) busy_.erase(*g.target);
        return;
      }
      AskOf(p, index);
    });
    return;
  }
  c.answered = w_.Now();
  if (!late) {
    busy_.erase(c.actor);
    if (c.target) busy_.erase(*c.target);
  }
  const ActorId& changed = c.target ? *c.target : c.actor;
  const std::string who = "the " + std::string(c.target ? "fork of " : "restore of ") + c.actor.name +
                          (c.target ? " to " + c.target->name : "") + " at " + c.point.text + " (asked at " +
                          At(c.issued) + ", answered by " + via + ")";
  if (!r.made()) {
    w_.Trace("operator: " + who + ": " + r.status.ToString() + (r.conflict ? " (conflict)" : ""));
    // H3: a point inside the window is never refused as outside it or not retained.
    if (r.status.code() == Code::kInvalidArgument && model_.SurelyInside(c.point.time_ms, options_.retention)) {
      w_.Violation("H3: " + who + " was refused, its point inside the retention window: " + r.status.ToString());
    }
    return;
  }
  c.made = true;
  ++(c.target ? w_.result().history_forks : w_.result().history_restores);
  w_.Trace("operator: " + who + " made: batch " + r.batch.ToString() + ", point " +
           (r.point ? r.point->ToString() : "empty") + (late ? " (answered after the operator gave up)" : ""));
  // H1: the batch written holds the point's state; a batch point is the one restored to.
  model_.CheckWritten(who, changed, r.batch, c.point.value);
  if (c.point.spec.batch && r.point != c.point.spec.batch) {
    w_.Violation("H1: " + who + " restored to " + (r.point ? r.point->ToString() : "the empty state"));
  }
  if (on_changed) on_changed(changed, c.point.value, c.mark);
  if (c.target) {
    forked_.push_back(*c.target);
    if (options_.cluster) ScheduleForkReads(*c.target);
  }
}

// ---- sampled reads of the history, from the operator's machine

void HistoryOperators::ScheduleReads() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(options_.read_min_ms, options_.read_max_ms)), [this] {
    if (w_.Now() >= MonoTime(w_.chaos_for) + kReadsAfterChaos) return;
    ScheduleReads();
    const ActorId actor =
        options_.actors[static_cast<std::size_t>(w_.Uniform(0, static_cast<std::int64_t>(options_.actors.size()) - 1))];
    if (w_.Chance(0.3)) {
      machine_->env.Spawn(ReadHistory(actor), "history read");
      return;
    }
    auto point = model_.Pick(actor, options_.retention);
    if (point) machine_->env.Spawn(ReadState(actor, std::move(*point)), "state read");
  });
}

Task<void> HistoryOperators::ReadState(ActorId actor, HistoryModel::Point point) {
  replica::HistoryOptions o;
  o.now_ms = ToUnixMs(machine_->env.WallNow());
  o.retention = options_.retention;
  o.read.broken = w_.options().broken();
  auto s = co_await replica::StateAt(machine_->env, machine_->store, actor, point.spec, o);
  const std::string who = "the state of " + actor.name + " at " + point.text + " (read at " + At(w_.Now()) + ")";
  if (!s.ok()) {
    // Transient failures are fine (a collection's delete landing during the read); a point
    // inside the window refused is not.
    if (s.code() == Code::kInvalidArgument && model_.SurelyInside(point.time_ms, options_.retention)) {
      w_.Violation("H3: " + who + " was refused, its point inside the retention window: " + s.status().ToString());
    }
    // The operator's view of the bucket is never faulted, and an object collected under
    // the read is listed again (kRetryable): a fatal answer is a chain that cannot be read.
    if (s.code() == Code::kFatal) w_.Violation("H3: " + who + " failed: " + s.status().ToString());
    co_return;
  }
  ++w_.result().history_reads;
  model_.CheckState(who, ModelState(s->state.entries().begin(), s->state.entries().end()), point.value);
}

Task<void> HistoryOperators::ReadHistory(ActorId actor) {
  replica::HistoryOptions o;
  o.now_ms = ToUnixMs(machine_->env.WallNow());
  o.retention = options_.retention;
  o.read.broken = w_.options().broken();
  // Only what is surely inside the window.
  o.since_ms = o.now_ms - World::Ms(options_.retention) + 2 * World::Ms(w_.timing().max_skew) + 1000;
  const auto expected = model_.AckedSince(actor, o.since_ms);
  auto h = co_await replica::ReadHistory(machine_->env, machine_->store, actor, o);
  if (!h.ok() && h.code() == Code::kFatal) {
    w_.Violation("H3: the history of " + actor.name + " read at " + At(w_.Now()) + " failed: " + h.status().ToString());
  }
  if (!h.ok() || h->truncated) co_return;
  ++w_.result().history_reads;
  std::map<replica::BatchId, std::int64_t> listed;
  for (const auto& b : h->batches) listed.emplace(b.id, b.time_ms);
  for (const auto& [id, t] : expected) {
    auto it = listed.find(id);
    if (it == listed.end() || it->second != t) {
      w_.Violation("H3: the history of " + actor.name + " read at " + At(w_.Now()) + " " +
                   (it == listed.end() ? "does not list" : "gives another time for") + " the acknowledged batch " +
                   id.ToString() + " (landed at " + std::to_string(t - kOriginMs) + "ms)");
      co_return;
    }
  }
}

// ---- the restore actors' client (serving scenarios)

Task<void> HistoryOperators::Client() {
  ServingCluster& cluster = *options_.cluster;
  for (;;) {
    if (!co_await cluster.client_env().SleepFor(milliseconds(w_.Uniform(200, 900)))) co_return;
    if (w_.Now() >= MonoTime(options_.clients_for)) co_return;
    Op op;
    op.actor =
        options_.actors[static_cast<std::size_t>(w_.Uniform(0, static_cast<std::int64_t>(options_.actors.size()) - 1))];
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    op.append = w_.Chance(0.65);
    if (op.append) op.value = "q" + std::to_string(++next_value_);
    (void)co_await Send(std::move(op), slot);
  }
}

Task<bool> HistoryOperators::Send(Op op, int slot) {
  ServingCluster& cluster = *options_.cluster;
  const std::string path =
      op.actor.tenant + "/" + op.actor.class_name + "/" + op.actor.name + (op.append ? "/append" : "");
  ServerRequest request = cluster.Request(op.append ? "POST" : "GET", path);
  request.body = op.value;
  op.invoked = w_.Now();
  const std::string what = std::string(op.append ? "append " + op.value : "read") + " " + op.actor.name + " via n" +
                           std::to_string(slot);
  const std::size_t index = ops_.size();
  ops_.push_back(std::move(op));
  auto got = co_await cluster.Send(slot, std::move(request));
  Op& done = ops_[index];
  done.completed = w_.Now();
  done.done = true;
  if (!got.ok()) {
    w_.Trace("restore client " + what + " (sent " + At(done.invoked) + "): " + got.status().ToString());
    co_return false;
  }
  done.ok = got->status == 200;
  if (done.ok && !done.append) done.list = StorageHistory::SplitLog(got->body);
  if (done.ok && done.append) model_.OnAcknowledged(done.actor, done.value);
  std::string body = got->body;
  if (body.size() > 120) body = "..." + body.substr(body.size() - 120);
  while (!body.empty() && body.back() == '\n') body.pop_back();
  w_.Trace("restore client " + what + " (sent " + At(done.invoked) + "): " + std::to_string(got->status) + " " + body);
  co_return done.ok;
}

void HistoryOperators::ScheduleForkReads(const ActorId& target) {
  for (int k = 0; k < 2; ++k) {
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    const Duration after = milliseconds(w_.Uniform(100, 5000));
    options_.cluster->client_env().StartTimer(w_.Now() + after, [this, target, slot] {
      Op op;
      op.actor = target;
      options_.cluster->client_env().Spawn(ForkRead(std::move(op), slot), "fork read");
    });
  }
}

Task<void> HistoryOperators::ForkRead(Op op, int slot) { (void)co_await Send(std::move(op), slot); }

void HistoryOperators::FinalChecks() {
  if (!options_.cluster) return;
  w_.finished = true;
  std::vector<ActorId> read = options_.actors;
  read.insert(read.end(), forked_.begin(), forked_.end());
  for (std::size_t a = 0; a < read.size(); ++a) {
    bool answered = false;
    for (int attempt = 0; attempt < 10 && !answered; ++attempt) {
      Op op;
      op.actor = read[a];
      auto ran = RunTask(w_.sim(), options_.cluster->client_env(), Send(std::move(op), static_cast<int>((a + attempt) % kSlots)),
                         kClientTimeout + seconds(5));
      answered = ran.has_value() && *ran;
      if (!answered) w_.sim().RunFor(seconds(2));
    }
    if (!answered) w_.Violation(read[a].name + ": no healthy node answered a read after healing");
  }
  for (const ActorId& a : read) Judge(a);
}

// H2, for one actor, over its reads. A read is judged when the changes of the actor (its
// restores, or the fork that made it) leave no doubt about which state it starts from: Y,
// the last change acknowledged before the read was sent, and every other change asked before
// the read ended was answered before Y was asked (a change unanswered, or answered during
// the read, may or may not have taken effect by then). Then:
//   (a) the read starts with Y's point (nothing at all before any change: the empty list);
//   (b) beyond it, only values appended to this actor, sent before the read ended, none
//       twice, and none acknowledged before Y was asked (those came before Y's batch: the
//       restore removed them, unless its point holds them);
//   (c) beyond it, every value whose append was sent after Y was acknowledged and
//       acknowledged before the read was sent (sent after: an append in flight during the
//       restore may have been applied before its batch, and removed).
// Appends are sent by one client, one at a time, so (c) is in order too.
void HistoryOperators::Judge(const ActorId& actor) {
  std::vector<const Change*> changes;
  for (const Change& c : changes_) {
    if ((c.target ? *c.target : c.actor) == actor) changes.push_back(&c);
  }
  std::map<std::string, const Op*> appends;
  for (const Op& op : ops_) {
    if (op.actor == actor && op.append) appends.emplace(op.value, &op);
  }
  for (const Op& r : ops_) {
    if (r.actor != actor || r.append || !r.ok) continue;
    const Change* y = nullptr;
    for (const Change* c : changes) {
      if (c->made && *c->answered < r.invoked && (!y || *c->answered > *y->answered)) y = c;
    }
    bool clean = true;
    for (const Change* c : changes) {
      if (c == y || c->issued >= r.completed) continue;
      if (!c->answered || (y ? *c->answered >= y->issued : true)) clean = false;
    }
    if (!clean) continue;
    ++w_.result().history_judged_reads;
    const std::vector<std::string> point = y ? StorageHistory::SplitLog(y->point.value) : std::vector<std::string>{};
    const std::string name = actor.name + ": H2: the read sent at " + At(r.invoked) +
                             (y ? " after the " + std::string(y->target ? "fork" : "restore") + " to " + y->point.text +
                                      " (asked at " + At(y->issued) + ", acknowledged at " + At(*y->answered) + ")"
                                : "");
    if (r.list.size() < point.size() || !std::equal(point.begin(), point.end(), r.list.begin())) {
      w_.Violation(name + " does not start with the point's " + std::to_string(point.size()) + " values (it holds " +
                   std::to_string(r.list.size()) + ")");
      return;
    }
    std::set<std::string> beyond;
    for (std::size_t i = point.size(); i < r.list.size(); ++i) {
      const std::string& v = r.list[i];
      auto it = appends.find(v);
      if (it == appends.end() || it->second->invoked > r.completed) {
        w_.Violation(name + " holds " + v + ", never appended to " + actor.name + " before it ended");
        return;
      }
      if (!beyond.insert(v).second) {
        w_.Violation(name + " holds " + v + " twice");
        return;
      }
      if (y && it->second->ok && it->second->completed < y->issued) {
        w_.Violation(name + " holds " + v + ", acknowledged at " + At(it->second->completed) +
                     ", before the restore was asked, and not in its point: the restore did not take effect");
        return;
      }
    }
    for (const auto& [v, a] : appends) {
      if (!a->ok || a->completed >= r.invoked || (y && a->invoked <= *y->answered)) continue;
      if (!beyond.count(v)) {
        w_.Violation(name + " misses " + v + ", appended at " + At(a->invoked) + " and acknowledged at " +
                     At(a->completed));
        return;
      }
    }
  }
}

}  // namespace wk::sim
