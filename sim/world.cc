#include "world.h"

#include "replica/format.h"

namespace wk::sim {

bool IsLogKey(std::string_view key) {
  return key.starts_with(replica::kWalPrefix) || key.starts_with(replica::kSnapshotPrefix);
}

World::World(const RunOptions& options, WorldOptions world)
    : chaos_for(world.chaos_for), heal_for(world.heal_for), slot_skew(static_cast<std::size_t>(world.slots)),
      options_(options), slots_(world.slots), start_spread_(world.start_spread),
      skew_per_process_(world.skew_per_process), sim_(options.seed), rng_(options.seed ^ world.stream),
      bucket_env_(sim_, FromUnixMs(kOriginMs)), bucket_(std::make_shared<MemBucket>()) {
  timing_ = LeaseTiming{};
  for (int i = 0; i < world.actors; ++i) actor_ids_.push_back(ActorId{"t", world.actor_class, "a" + std::to_string(i)});
  actor_ids_.insert(actor_ids_.end(), world.named_actors.begin(), world.named_actors.end());
  bucket_->set_put_observer([this](const std::string& key, const std::string& body, const Version&) {
    if (hooks.on_landed) hooks.on_landed(key, body);
  });
  for (int s = 0; s < slots_ && !skew_per_process_; ++s) {
    // Skew at the bound half of the time, anywhere within it otherwise.
    const auto max = timing_.max_skew;
    switch (Uniform(0, 3)) {
      case 0: slot_skew[static_cast<std::size_t>(s)] = max; break;
      case 1: slot_skew[static_cast<std::size_t>(s)] = -max; break;
      default: slot_skew[static_cast<std::size_t>(s)] = milliseconds(Uniform(-Ms(max), Ms(max)));
    }
  }
}

RunResult World::Run(const Stages& stages) {
  if (start_spread_ == Duration(0)) {
    for (int s = 0; s < slots_; ++s) StartProcess(s, false);
  } else {
    for (int s = 0; s < slots_; ++s) {
      bucket_env_.StartTimer(sim_.Now() + start_spread_ * s / slots_, [this, s] {
        if (!finished && Running(s) == 0 && !pending_start.count(s)) StartProcess(s, false);
      });
    }
  }
  if (stages.begin) stages.begin();
  const MonoTime chaos_end = MonoTime(chaos_for);
  const MonoTime end = chaos_end + heal_for;
  while (sim_.Now() < end && result_.violations.empty()) {
    if (!sim_.RunOne()) break;
    if (!healed && sim_.Now() >= chaos_end && stages.heal) stages.heal();
    if (stages.every_step) stages.every_step();
  }
  if (result_.violations.empty() && stages.final_checks) stages.final_checks();
  for (auto& [n, p] : processes_) Teardown(*p);
  if (result_.violations.empty() && stages.after_teardown) stages.after_teardown();
  result_.ok = result_.violations.empty();
  result_.history_digest = digest_;
  result_.trace.assign(trace_.begin(), trace_.end());
  return std::move(result_);
}

void World::Trace(const std::string& line) {
  std::string full = NowString() + " " + line;
  for (char c : full) digest_ = (digest_ ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  trace_.push_back(std::move(full));
  while (trace_.size() > options_.trace_lines) trace_.pop_front();
}

void World::Violation(const std::string& what) {
  Trace("VIOLATION " + what);
  result_.violations.push_back(NowString() + " " + what);
}

void World::StartProcess(int slot, bool twin) {
  auto p = std::make_unique<Process>();
  p->number = next_process_++;
  p->slot = slot;
  p->twin = twin;
  p->node_id = SlotNodeId(slot);
  p->skew = skew_per_process_ ? milliseconds(Uniform(-Ms(timing_.max_skew), Ms(timing_.max_skew)))
                              : slot_skew[static_cast<std::size_t>(slot)];
  cluster_testing::HostOptions host;
  host.skew = p->skew;
  host.fault = [this, slot](const OpInfo& op) { return hooks.fault ? hooks.fault(slot, op) : OpFault{}; };
  host.transit = &bucket_env_;
  p->host = std::make_unique<cluster_testing::SimHost>(sim_, bucket_, std::move(host));
  p->instance = InstanceToken(p->env()->RandomHex(8));
  instance_skew[p->instance] = p->skew;
  instance_process[p->instance] = p->number;
  const int number = p->number;
  p->store = std::make_unique<RecordingStore>(
      p->host->store(),
      [this, number](const std::string& k, const std::string& b) {
        if (hooks.on_send) hooks.on_send(number, k, b);
      },
      [this, number](const std::string& k) {
        if (hooks.on_delete) hooks.on_delete(number, k);
      });
  if (hooks.on_replica_send) {
    p->replica_store = std::make_unique<RecordingStore>(
        p->host->store(), [this, number](const std::string& k, const std::string& b) { hooks.on_replica_send(number, k, b); },
        [this, number](const std::string& k) {
          if (hooks.on_replica_delete) hooks.on_replica_delete(number, k);
        });
  }
  NodeIdentity identity = hooks.identity ? hooks.identity(*p) : NodeIdentity{p->node_id, "sim", "sim", ""};
  ObjectStore& node_store = hooks.node_store ? hooks.node_store(*p, *p->store) : *p->store;
  p->node = std::make_unique<ClusterNode>(*p->env(), node_store, std::move(identity), timing_, p->instance);
  p->node->set_broken_models(options_.broken());
  p->node->lease().AddObserver({
      [this, number](std::uint64_t e) { Trace("p" + std::to_string(number) + " valid epoch " + std::to_string(e)); },
      [this, number](std::uint64_t) {
        ++result_.lapses;
        Trace("p" + std::to_string(number) + " lapsed");
      },
      [this, number](const std::string& why) { Trace("p" + std::to_string(number) + " lost: " + why); },
  });
  p->running = true;
  p->started = sim_.Now();
  Trace("start p" + std::to_string(number) + " as " + p->node_id.str() + (twin ? " (twin)" : "") + " instance " +
        p->instance.str() + " skew " + std::to_string(Ms(p->skew)) + "ms");
  Process* raw = p.get();
  processes_[number] = std::move(p);
  if (hooks.on_built) hooks.on_built(*raw);
  raw->env()->Spawn(RunProcess(raw), "process");
  if (hooks.on_started) hooks.on_started(*raw);
}

Task<void> World::RunProcess(Process* p) {
  LeaseEnd end = co_await p->node->Run();
  p->end = end;
  p->running = false;
  if (end.reason != LeaseEndReason::kStopped) ++result_.lost_leases;
  Trace("p" + std::to_string(p->number) + " exits: " + std::string(LeaseEndReasonName(end.reason)) + " " +
        end.message);
  // The supervisor restarts a node that exited (systemd Restart=on-failure); a twin is
  // a mistake nobody restarts. Teardown happens outside the process's own stack.
  // A clean stop is reaped by the faults' StopProcess once `released` is written.
  if (end.reason == LeaseEndReason::kStopped) co_return;
  const int number = p->number;
  const int slot = p->slot;
  bucket_env_.Post([this, number] { Reap(number); });
  ScheduleRestart(slot, milliseconds(Uniform(500, 5000)));
}

void World::Teardown(Process& p) {
  // Killing a process: its frames go with its Env (while the node they point into still
  // exists); requests it sent stay in transit.
  if (p.node) {
    const ListingStats& listing = p.node->membership().stats();
    result_.listings += listing.listings;
    result_.listing_reads += listing.bodies_read();
    result_.listing_renewals += listing.renewals_assumed;
    result_.listing_failures += listing.failures;
    result_.listing_seconds += listing.total_seconds;
    p.node->owners().StopBackground();
  }
  if (p.parts) p.parts->BeforeEnvGoes();
  p.host.reset();
  p.parts.reset();
  p.changes = nullptr;
  p.node.reset();
  while (!p.store_layers.empty()) p.store_layers.pop_back();  // outermost first
  p.store.reset();
  p.replica_store.reset();
  p.running = false;
}

void World::Reap(int number) {
  auto it = processes_.find(number);
  if (it == processes_.end()) return;
  if (it->second->stopping) pending_start.erase(it->second->slot);
  Teardown(*it->second);
  processes_.erase(it);
}

Process* World::Primary(int slot) {
  for (auto& [n, p] : processes_)
    if (p->slot == slot && p->running && !p->stopping) return p.get();
  return nullptr;
}

int World::Running(int slot) const {
  int n = 0;
  for (auto& [num, p] : processes_)
    if (p->slot == slot && p->running) ++n;
  return n;
}

void World::ScheduleRestart(int slot, Duration after) {
  bucket_env_.StartTimer(sim_.Now() + after, [this, slot] {
    if (!finished && Running(slot) == 0 && !pending_start.count(slot)) StartProcess(slot, false);
  });
}

Task<void> World::ReleaseHold(Process* p, ActorId actor) {
  Status s = co_await p->node->owners().Release(actor);
  if (!s.ok()) ++result_.pending_releases;
  Trace("p" + std::to_string(p->number) + " released " + actor.name + ": " + s.ToString());
}

}  // namespace wk::sim
