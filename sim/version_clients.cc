#include "version_clients.h"

#include <algorithm>
#include <set>

#include "control/tenants.h"
#include "env/sim_env.h"
#include "store/mem/mem_store.h"
#include "storage_history.h"

namespace wk::sim {
namespace {

constexpr std::string_view kLedgerClass = "ledger";
constexpr int kOperatorAttempts = 5;

std::string At(MonoTime t) { return std::to_string(World::Ms(t.time_since_epoch())) + "ms"; }

std::string ActorName(int a) { return "g" + std::to_string(a); }

// "<v>.<value>" (a write by version v) or "u<a>><b>" (a migration from a to b).
struct Entry {
  bool migration = false;
  std::uint32_t version = 0;  // a write's version; a migration's target
  std::uint32_t from = 0;     // a migration's source
  std::string value;
};

std::optional<Entry> ParseEntry(const std::string& text) {
  Entry e;
  if (text.starts_with("u")) {
    const auto gt = text.find('>');
    if (gt == std::string::npos) return std::nullopt;
    e.migration = true;
    e.from = static_cast<std::uint32_t>(std::stoul(text.substr(1, gt - 1)));
    e.version = static_cast<std::uint32_t>(std::stoul(text.substr(gt + 1)));
    return e;
  }
  const auto dot = text.find('.');
  if (dot == std::string::npos || dot == 0) return std::nullopt;
  e.version = static_cast<std::uint32_t>(std::stoul(text.substr(0, dot)));
  e.value = text.substr(dot + 1);
  return e;
}

}  // namespace

struct VersionClients::Machine {
  explicit Machine(World& w) : env(w.sim(), FromUnixMs(kOriginMs)), store(env, w.bucket()) {}
  SimEnv env;
  MemStore store;
};

VersionClients::VersionClients(World& world, ServingCluster& cluster, VersionClientsOptions options)
    : w_(world), cluster_(cluster), options_(options), machine_(std::make_unique<Machine>(world)) {}

VersionClients::~VersionClients() = default;

void VersionClients::Configure(ServingOptions& serving) {
  serving.versioned_classes.emplace_back(kLedgerClass);
}

std::vector<ActorId> VersionClients::Actors(const VersionClientsOptions& options) {
  std::vector<ActorId> actors;
  for (int a = 0; a < options.actors; ++a) actors.push_back(ActorId{std::string(kServingTenant), std::string(kLedgerClass), ActorName(a)});
  return actors;
}

void VersionClients::Start() {
  machine_->env.Spawn(
      [](VersionClients* self) -> Task<void> {
        auto made = co_await control::CreateTenant(self->machine_->store, self->machine_->env,
                                                   std::string(kServingTenant), CallOptions{seconds(5)});
        if (!made.ok() && made.code() != Code::kPreconditionFailed) {
          self->w_.Trace("operator creates tenant t: " + made.status().ToString());
        }
        co_await self->Deploy(std::nullopt);
        self->ScheduleOperator();
        self->ScheduleClear();
      }(this),
      "version operator");
  for (int c = 0; c < options_.clients; ++c) cluster_.client_env().Spawn(Client(), "version client");
}

// ---- the operator

void VersionClients::ScheduleOperator() {
  w_.bucket_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(6000, 15000)), [this] {
    if (w_.Now() >= MonoTime(options_.operators_for)) return;
    machine_->env.Spawn(Operate(), "version operator");
  });
}

Task<void> VersionClients::Operate() {
  const control::Rollout r = rollouts_.empty() ? control::Rollout{} : rollouts_.back().rollout;
  const std::int64_t pick = w_.Uniform(0, 99);
  if (pick < 30 || r.stable == 0) {
    // A new version: at a share one time in two, else at once.
    co_await Deploy(w_.Chance(0.5) ? std::optional<std::uint32_t>(w_.Uniform(20, 80)) : std::nullopt);
  } else if (pick < 45 && r.candidate != 0) {
    const std::uint32_t share = w_.Chance(0.5) ? 100 : std::min<std::uint32_t>(99, r.percent + w_.Uniform(10, 40));
    co_await Change("raises v" + std::to_string(r.candidate) + " to " + std::to_string(share) + "%",
                    control::SetShare(r.candidate, share));
  } else if (pick < 55 && r.stable > 1) {
    const auto back = static_cast<control::VersionNumber>(w_.Uniform(1, r.stable - 1));
    co_await Change("rolls back to v" + std::to_string(back), control::SetShare(back, 100));
  } else if (pick < 75) {
    // A version marked broken (never the stable one), most often one a state is at: a
    // pinned actor's (its pin goes with the mark, so its state must move on, with no version
    // to fall back to), or the one an actor answered from last.
    auto broken = static_cast<control::VersionNumber>(w_.Uniform(1, deployed_));
    const int actor = static_cast<int>(w_.Uniform(0, options_.actors - 1));
    if (!r.pins.empty() && w_.Chance(0.6)) {
      broken = std::next(r.pins.begin(), w_.Uniform(0, static_cast<std::int64_t>(r.pins.size()) - 1))->second;
    } else {
      for (auto op = ops_.rbegin(); op != ops_.rend(); ++op) {
        if (op->actor == actor && op->ok) {
          if (w_.Chance(0.7)) broken = op->version;
          break;
        }
      }
    }
    const control::VersionNumber run = w_.Chance(0.5) || broken == deployed_ ? 0 : deployed_;
    if (broken == r.stable) {
      ScheduleOperator();
      co_return;
    }
    co_await Change("marks v" + std::to_string(broken) + " broken (run " + std::to_string(run) + ")",
                    control::MarkBroken(broken, run));
  } else if (pick < 85 && !r.broken.empty()) {
    const control::VersionNumber cleared = r.broken.begin()->first;
    co_await Change("clears the broken mark of v" + std::to_string(cleared), control::ClearBroken(cleared));
  } else if (pick < 90) {
    co_await Change("pauses", control::Pause("the simulator's operator"));
  } else {
    const int actor = static_cast<int>(w_.Uniform(0, options_.actors - 1));
    const auto v = static_cast<control::VersionNumber>(w_.Uniform(1, deployed_));
    co_await Change("pins " + ActorName(actor) + " to v" + std::to_string(v), control::Pin(ActorName(actor), v));
  }
  ScheduleOperator();
}

Task<void> VersionClients::Deploy(std::optional<std::uint32_t> percent) {
  control::DeployRequest request;
  request.tenant = std::string(kServingTenant);
  request.class_name = std::string(kLedgerClass);
  // Native code: the bytes only name the version (its digest).
  request.wasm_bytes = "native ledger, deploy " + std::to_string(deployed_ + 1);
  request.deployed_by = "simulator";
  request.migrates = true;
  request.percent = percent;
  for (int attempt = 0; attempt < kOperatorAttempts; ++attempt) {
    const MonoTime sent = w_.Now();
    auto made = co_await control::DeployVersion(machine_->store, machine_->env, request, CallOptions{seconds(5)});
    w_.Trace("operator deploys the ledger" +
             (percent ? " at " + std::to_string(*percent) + "%" : std::string()) + ": " +
             (made.ok() ? "v" + std::to_string(made->version.number) : made.status().ToString()));
    if (made.ok()) {
      deployed_ = std::max(deployed_, made->version.number);
      rollouts_.push_back(Written{sent, w_.Now(), made->rollout});
      ++w_.result().version_deploys;
      co_return;
    }
  }
}

Task<void> VersionClients::Change(std::string what, control::RolloutChange change) {
  for (int attempt = 0; attempt < kOperatorAttempts; ++attempt) {
    const MonoTime sent = w_.Now();
    auto r = co_await control::UpdateRollout(machine_->store, machine_->env, std::string(kServingTenant),
                                             std::string(kLedgerClass), change, CallOptions{seconds(5)});
    w_.Trace("operator " + what + ": " + (r.ok() ? "revision " + std::to_string(r->revision) : r.status().ToString()));
    if (r.ok()) {
      rollouts_.push_back(Written{sent, w_.Now(), *r});
      co_return;
    }
    if (r.code() == Code::kInvalidArgument || r.code() == Code::kNotFound) co_return;  // refused
  }
}

// A broken version's state whose migration failed is refused until the operator chooses:
// once the operator's last change has had time to land, every mark is cleared, so the
// final reads find every actor running.
void VersionClients::ScheduleClear() {
  w_.bucket_env().StartTimer(MonoTime(options_.operators_for + seconds(30)), [this] {
    control::RolloutChange clear_all = [](control::Rollout& r, const std::set<control::VersionNumber>&) -> Result<bool> {
      if (r.broken.empty()) return false;
      r.broken.clear();
      return true;
    };
    machine_->env.Spawn(Change("clears every broken mark", std::move(clear_all)), "version operator clears");
  });
}

// ---- the clients

Task<void> VersionClients::Client() {
  for (;;) {
    if (!co_await cluster_.client_env().SleepFor(milliseconds(w_.Uniform(80, 600)))) co_return;
    if (w_.Now() >= MonoTime(options_.clients_for)) co_return;
    Op op;
    op.actor = static_cast<int>(w_.Uniform(0, options_.actors - 1));
    op.append = w_.Chance(0.6);
    if (op.append) op.value = "w" + std::to_string(++next_value_);
    const std::size_t index = ops_.size();
    (void)co_await Send(op, index);
  }
}

Task<bool> VersionClients::Send(Op op, std::size_t index) {
  const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
  op.invoked = w_.Now();
  const std::string path =
      std::string(kServingTenant) + "/" + std::string(kLedgerClass) + "/" + ActorName(op.actor) + (op.append ? "/append" : "");
  ServerRequest request = cluster_.Request(op.append ? "POST" : "GET", path);
  request.body = op.value;
  const std::string what =
      std::string(op.append ? "append " + op.value : "read") + " " + ActorName(op.actor) + " via n" + std::to_string(slot);
  ops_.push_back(std::move(op));
  auto got = co_await cluster_.Send(slot, std::move(request));
  Op& done = ops_[index];
  done.completed = w_.Now();
  if (!got.ok()) {
    w_.Trace("version client " + what + ": " + got.status().ToString());
    co_return false;
  }
  w_.Trace("version client " + what + ": " + std::to_string(got->status) + " " + got->body.substr(0, 120));
  if (got->status != 200) co_return false;
  const std::string& body = got->body;
  const auto bar = body.find('|');
  try {
    done.version = static_cast<std::uint32_t>(std::stoul(body.substr(0, bar)));
  } catch (const std::exception&) {
    w_.Violation(ActorName(done.actor) + ": an answer names no version: " + body.substr(0, 80));
    co_return false;
  }
  if (!done.append) done.log = bar == std::string::npos ? "" : body.substr(bar + 1);
  done.ok = true;
  ++w_.result().version_answers;
  co_return true;
}

// ---- the checkers

void VersionClients::FinalReadsAndCheck() {
  w_.finished = true;
  for (int a = 0; a < options_.actors; ++a) {
    std::optional<std::size_t> answered;
    for (int attempt = 0; attempt < 15 && !answered; ++attempt) {
      Op op;
      op.actor = a;
      const std::size_t index = ops_.size();
      auto ran = RunTask(w_.sim(), cluster_.client_env(), Send(op, index), kClientTimeout + seconds(5));
      if (ran.has_value() && *ran) answered = index;
      if (!answered) w_.sim().RunFor(seconds(2));
    }
    if (!answered) {
      w_.Violation(ActorName(a) + ": no healthy node answered a read after healing");
      continue;
    }
    CheckActor(a, ops_[*answered]);
  }
}

void VersionClients::CheckActor(int a, const Op& final_read) {
  const std::string name = ActorName(a);
  // The final answer: "<mark>|<log>" after the running version.
  const auto bar = final_read.log.find('|');
  const std::uint32_t mark = static_cast<std::uint32_t>(std::stoul(final_read.log.substr(0, bar)));
  const std::string log = bar == std::string::npos ? "" : final_read.log.substr(bar + 1);
  const std::vector<std::string> entries = StorageHistory::SplitLog(log);
  // Versions the operator ever marked broken (V1), and when each mark stood (V6).
  std::set<std::uint32_t> ever_broken;
  for (const Written& w : rollouts_)
    for (const auto& [v, run] : w.rollout.broken) ever_broken.insert(v);
  // V1, V2.
  std::uint32_t at = 0;  // the version the state is at
  std::map<std::string, int> held;
  for (const std::string& text : entries) {
    const std::optional<Entry> e = ParseEntry(text);
    if (!e) {
      w_.Violation(name + ": unreadable entry " + text);
      return;
    }
    if (e->migration) {
      ++w_.result().migrations;
      if (e->from != at || e->version <= e->from) {
        w_.Violation(name + ": migrated " + text + " while its state was at v" + std::to_string(at) +
                     " (a state migrated twice, or from a version it was not at)");
        return;
      }
      at = e->version;
      continue;
    }
    ++held[e->value];
    if (at != 0 && e->version != at && !(e->version < at && ever_broken.contains(at))) {
      w_.Violation(name + ": " + text + " was written by v" + std::to_string(e->version) + " while its state was at v" +
                   std::to_string(at) + ", without a migration");
      return;
    }
    at = e->version;
  }
  if (at != 0 && mark != at) {
    w_.Violation(name + ": its state's version mark is v" + std::to_string(mark) + " but its last write was by v" +
                 std::to_string(at));
    return;
  }
  for (const Op& op : ops_) {
    if (op.actor != a) continue;
    // V3.
    if (op.append) {
      const int n = held.contains(op.value) ? held[op.value] : 0;
      if (n > 1) w_.Violation(name + ": " + op.value + " is in the state " + std::to_string(n) + " times");
      if (op.ok && std::find(entries.begin(), entries.end(), std::to_string(op.version) + "." + op.value) == entries.end()) {
        w_.Violation(name + ": " + op.value + ", acknowledged by v" + std::to_string(op.version) + " at " +
                     At(op.completed) + ", is not in the state as written by it");
      }
    }
    if (!op.ok) continue;
    // V4.
    if (!op.append) {
      const auto read_bar = op.log.find('|');
      const std::string read = read_bar == std::string::npos ? "" : op.log.substr(read_bar + 1);
      if (!log.starts_with(read) || (read.size() < log.size() && !read.empty() && log[read.size()] != ',')) {
        w_.Violation(name + ": the read answered at " + At(op.completed) + " is not a prefix of the final state");
      }
    }
    // V5: a version some rollout written before the answer let this actor run.
    std::set<std::uint32_t> allowed;
    for (const Written& w : rollouts_) {
      if (w.sent > op.completed) break;
      allowed.insert(control::ChooseVersion(w.rollout, name, 0, true).run);
      allowed.insert(w.rollout.stable);
      for (const auto& [v, run] : w.rollout.broken) allowed.insert(run != 0 ? run : w.rollout.stable);
    }
    if (!allowed.contains(op.version)) {
      w_.Violation(name + ": answered by v" + std::to_string(op.version) + " at " + At(op.completed) +
                   ", which no rollout written before let it run (a candidate outside its share?)");
    }
    // V6: an append by a version marked broken long enough ago, and not cleared since.
    if (op.append) {
      std::optional<MonoTime> marked;
      for (const Written& w : rollouts_) {
        if (w.sent > op.completed) break;
        if (w.rollout.broken.contains(op.version)) {
          if (!marked) marked = w.landed;
        } else {
          marked.reset();
        }
      }
      if (marked && op.completed > *marked + options_.mark_read_within) {
        w_.Violation(name + ": " + op.value + " acknowledged by v" + std::to_string(op.version) + " at " +
                     At(op.completed) + ", marked broken at " + At(*marked));
      }
    }
  }
}

}  // namespace wk::sim
