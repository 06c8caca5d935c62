#include "poison_clients.h"

#include <algorithm>

#include "control/quarantine.h"
#include "control/quarantine_cache.h"

namespace wk::sim {

PoisonClients::PoisonClients(World& world, ServingCluster& cluster, PoisonClientsOptions options)
    : w_(world), cluster_(cluster), options_(std::move(options)), actors_(Actors(options_)) {}

std::vector<ActorId> PoisonClients::Actors(const PoisonClientsOptions& options) {
  std::vector<ActorId> actors;
  for (int i = 0; i < options.actors; ++i) {
    actors.push_back(ActorId{std::string(kServingTenant), options.class_name, "p" + std::to_string(i)});
  }
  return actors;
}

void PoisonClients::Configure(ServingOptions& serving) {
  serving.class_names.push_back(options_.class_name);
  serving.quarantine = control::QuarantinePolicy{};  // 3 strikes in 10 min, 10 min long
  serving.on_actor_start = [this](int number, const ActorId& actor) { OnStart(number, actor); };
  serving.on_quarantine_read = [this](int number, const std::string& key, bool done) { OnRead(number, key, done); };
}

void PoisonClients::Start() { cluster_.client_env().Spawn(Client(), "poison client"); }

void PoisonClients::OnRead(int number, const std::string& key, bool done) {
  if (!key.starts_with(control::kQuarantinePrefix)) return;
  (done ? last_answer_ : last_read_)[{number, key}] = w_.Now();
  const bool listing = key == control::kQuarantinePrefix;
  w_.Trace("p" + std::to_string(number) + (done ? " has the answer of its " : " sends a ") +
           (listing ? "listing of " : "read of ") + key);
}

void PoisonClients::OnStart(int number, const ActorId& actor) {
  const std::string key = control::QuarantineKey(actor);
  if (actor.class_name == options_.class_name) w_.Trace("p" + std::to_string(number) + " acquires " + actor.name);
  auto q = quarantined_at_.find(key);
  if (q == quarantined_at_.end()) return;
  const Duration ttl = control::QuarantineCacheOptions{}.ttl;
  // The latest read of the record, or listing of quarantine/ (which answers for every
  // record), this process sent; and whether one was answered just now.
  auto latest = [&](const std::map<std::pair<int, std::string>, MonoTime>& times) {
    std::optional<MonoTime> at;
    for (const std::string& k : {key, std::string(control::kQuarantinePrefix)}) {
      auto it = times.find({number, k});
      if (it != times.end() && (!at || it->second > *at)) at = it->second;
    }
    return at;
  };
  const std::optional<MonoTime> read_at = latest(last_read_);
  const std::optional<MonoTime> answered_at = latest(last_answer_);
  const bool just_answered = answered_at && *answered_at == w_.Now();
  if (!just_answered && (!read_at || w_.Now() - *read_at >= ttl)) {
    w_.Violation("Q1: p" + std::to_string(number) + " started " + actor.name + ", quarantined since " +
                 std::to_string(World::Ms(q->second.time_since_epoch())) + " ms, on " +
                 (!read_at ? std::string("no read of its record")
                           : "a read of its record sent at " +
                                 std::to_string(World::Ms(read_at->time_since_epoch())) + " ms"));
  }
}

void PoisonClients::OnLanded(const std::string& key, const std::string& body) {
  if (!key.starts_with("quarantine/") || quarantined_at_.contains(key)) return;
  const ActorId* actor = nullptr;
  for (const ActorId& a : actors_) {
    if (control::QuarantineKey(a) == key) actor = &a;
  }
  if (actor == nullptr) {
    w_.Violation("Q2: " + key + " was written, but only poison actors ever fail");
    return;
  }
  auto record = control::DecodeQuarantineRecord(body, *actor);
  if (!record.ok()) {
    w_.Violation("Q2: " + key + " landed corrupt: " + record.status().ToString());
    return;
  }
  // The bucket's clock is true time: a record quarantines from the moment it lands.
  const WallTime now = FromUnixMs(kOriginMs + World::Ms(w_.Now().time_since_epoch()));
  if (!record->QuarantinedAt(now)) return;
  quarantined_at_[key] = w_.Now();
  ++w_.result().quarantines;
  w_.Trace(actor->name + " quarantined: " + control::DescribeQuarantine(*record));
}

Task<void> PoisonClients::Client() {
  const MonoTime until = MonoTime(options_.clients_for);
  while (true) {
    if (!co_await cluster_.client_env().SleepFor(milliseconds(w_.Uniform(300, 2000)))) co_return;
    if (cluster_.client_env().MonoNow() >= until) co_return;
    const auto elapsed = cluster_.client_env().MonoNow().time_since_epoch();
    const int open = std::min<int>(options_.actors, 1 + static_cast<int>(elapsed / options_.stagger));
    const int i = static_cast<int>(w_.Uniform(0, open - 1));
    const ActorId& actor = actors_[static_cast<std::size_t>(i)];
    const bool arm = w_.Uniform(0, 99) < 60;
    const std::int64_t due = kOriginMs + World::Ms(w_.Now().time_since_epoch()) + w_.Uniform(500, 5000);
    ServerRequest request =
        cluster_.Request("POST", actor.ToString() + (arm ? "/arm?t=" + std::to_string(due) : std::string("/hit")));
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    auto got = co_await cluster_.Send(slot, std::move(request));
    w_.Trace("client " + std::string(arm ? "arms " : "hits ") + actor.name + " via n" + std::to_string(slot) + ": " +
             (got.ok() ? std::to_string(got->status) : got.status().ToString()));
    if (arm) ++w_.result().poison_arms;
    else ++w_.result().poison_hits;
  }
}

}  // namespace wk::sim
