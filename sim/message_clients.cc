#include "message_clients.h"

#include <algorithm>
#include <cstdlib>

#include "actor/messages.h"
#include "alarm_clients.h"
#include "durable_state.h"
#include "storage_history.h"

namespace wk::sim {
namespace {

constexpr std::string_view kMailClass = "mail";

// One "got" entry: "<from>#<seq>:<id>:<hops>".
struct Got {
  std::string from;
  std::uint64_t seq = 0;
  std::string id;
  int hops = 0;
};

std::optional<Got> ParseGot(std::string_view entry) {
  const auto hash = entry.find('#');
  const auto first = entry.find(':');
  const auto last = entry.rfind(':');
  if (hash == std::string_view::npos || first == std::string_view::npos || first == last || hash > first) {
    return std::nullopt;
  }
  Got g;
  g.from = std::string(entry.substr(0, hash));
  g.seq = std::strtoull(std::string(entry.substr(hash + 1, first - hash - 1)).c_str(), nullptr, 10);
  g.id = std::string(entry.substr(first + 1, last - first - 1));
  g.hops = std::atoi(std::string(entry.substr(last + 1)).c_str());
  return g;
}

std::size_t CountSystem(const actor::StateMap& state, std::string_view prefix) {
  std::size_t n = 0;
  actor::ListQuery q;
  q.start = std::string(prefix);
  q.prefix = true;
  state.ListSystem(q, [&n](std::string_view, std::string_view) {
    ++n;
    return true;
  });
  return n;
}

}  // namespace

MessageClients::MessageClients(World& world, ServingCluster& cluster, MessageClientsOptions options)
    : w_(world), cluster_(cluster), options_(std::move(options)) {}

void MessageClients::ConfigureServing(ServingOptions& o, int actors, const LeaseTiming& timing) {
  MessageDeliveryOptions d;
  d.first_retry = std::chrono::milliseconds(200);
  d.max_retry = std::chrono::seconds(3);
  d.max_attempts = 40;  // at 10 % failures, never reached: a parked message is M5's finding
  WK_CHECK(ValidateMessageDeliveryOptions(d).ok(), "bad simulator message options");
  o.messages = d;
  if (!o.alarms) o.alarms = SimAlarmOptions(timing);
  o.host.mail_ring = actors;
  if (std::find(o.class_names.begin(), o.class_names.end(), std::string(kMailClass)) == o.class_names.end()) {
    o.class_names.emplace_back(kMailClass);
  }
}

void MessageClients::Start() {
  for (int c = 0; c < options_.clients; ++c) cluster_.client_env().Spawn(Client(c), "mail client");
}

Task<void> MessageClients::Client(int number) {
  for (;;) {
    if (!co_await cluster_.client_env().SleepFor(milliseconds(w_.Uniform(300, 1500)))) co_return;
    if (w_.Now() >= MonoTime(options_.clients_for)) co_return;
    const int sender = static_cast<int>(w_.Uniform(0, options_.actors - 1));
    SendInfo info;
    info.sender = sender;
    if (w_.Chance(0.5)) {
      info.to.push_back((sender + 1) % options_.actors);
      info.hops = static_cast<int>(w_.Uniform(1, 4));
    } else {
      for (int k = 1; k <= 3; ++k) info.to.push_back((sender + k * 2 - 1) % options_.actors);
      std::sort(info.to.begin(), info.to.end());
      info.to.erase(std::unique(info.to.begin(), info.to.end()), info.to.end());
      std::erase(info.to, sender);
    }
    const std::string id = "c" + std::to_string(number) + "x" + std::to_string(next_id_++);
    std::string to;
    for (int r : info.to) to += (to.empty() ? "" : ",") + Name(r);
    sends_[id] = info;
    ++w_.result().message_sends;
    const int slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    const std::string path = std::string(kServingTenant) + "/" + std::string(kMailClass) + "/" + Name(sender) +
                             "/send?to=" + to + "&hops=" + std::to_string(info.hops);
    ServerRequest request = cluster_.Request("POST", path);
    request.body = id;
    auto got = co_await cluster_.Send(slot, std::move(request));
    const bool ok = got.ok() && got->status == 200;
    w_.Trace("client sends " + id + " from " + Name(sender) + " to " + to + " hops " + std::to_string(info.hops) +
             " via n" + std::to_string(slot) + ": " + (got.ok() ? std::to_string(got->status) + (got->status == 200 ? "" : " " + got->body.substr(0, 100))
                       : got.status().ToString()));
    if (ok) {
      sends_[id].acked = true;
      ++w_.result().message_acked_sends;
    }
  }
}

void MessageClients::FinalChecks() {
  std::map<std::string, std::vector<Got>> got;       // per receiver, in order
  std::map<std::string, std::set<std::string>> sent;  // per sender, its durable send ids
  for (int i = 0; i < options_.actors; ++i) {
    const ActorId id{std::string(kServingTenant), std::string(kMailClass), Name(i)};
    auto state = DurableState(w_, id);
    if (!state) {
      w_.Violation(Name(i) + ": its durable state cannot be restored");
      continue;
    }
    for (const std::string& s : StorageHistory::SplitLog(state->Get("sent").value_or(""))) sent[Name(i)].insert(s);
    for (const std::string& e : StorageHistory::SplitLog(state->Get("got").value_or(""))) {
      auto g = ParseGot(e);
      if (!g) {
        w_.Violation(Name(i) + ": an unreadable entry " + e);
        continue;
      }
      got[Name(i)].push_back(std::move(*g));
    }
    if (const std::size_t n = CountSystem(*state, actor::kOutboxPrefix); n > 0) {
      w_.Violation("M4: " + Name(i) + " still has " + std::to_string(n) + " message(s) in its outbox at the end");
    }
    if (const std::size_t n = CountSystem(*state, actor::kDeadPrefix); n > 0) {
      w_.Violation("M5: " + Name(i) + " parked " + std::to_string(n) + " message(s) as dead");
    }
  }
  // What each actor's handler runs passed on: (sender, id, hops) per durable got entry.
  std::set<std::tuple<std::string, std::string, int>> ran;
  for (const auto& [receiver, entries] : got) {
    std::set<std::pair<std::string, std::uint64_t>> seen;
    std::set<std::tuple<std::string, std::string, int>> contents;
    std::map<std::string, std::uint64_t> last_seq;
    for (const Got& g : entries) {
      w_.result().message_applied++;
      if (!seen.insert({g.from, g.seq}).second) {
        w_.Violation("M1: " + receiver + " applied message " + std::to_string(g.seq) + " of " + g.from + " twice");
      }
      if (!contents.insert({g.from, g.id, g.hops}).second) {
        w_.Violation("M1: " + receiver + " applied " + g.id + ":" + std::to_string(g.hops) + " from " + g.from + " twice");
      }
      if (auto it = last_seq.find(g.from); it != last_seq.end() && it->second >= g.seq) {
        w_.Violation("M2: " + receiver + " applied message " + std::to_string(g.seq) + " of " + g.from + " after " +
                     std::to_string(it->second));
      }
      last_seq[g.from] = g.seq;
      ran.insert({receiver, g.id, g.hops});
    }
  }
  // M3: every applied message comes from a durable event.
  for (const auto& [receiver, entries] : got) {
    for (const Got& g : entries) {
      auto info = sends_.find(g.id);
      if (info == sends_.end()) {
        w_.Violation("M3: " + receiver + " applied " + g.id + ", which no client sent");
        continue;
      }
      const bool first_hop = g.from == Name(info->second.sender) && g.hops == info->second.hops;
      if (first_hop && !sent[g.from].contains(g.id)) {
        w_.Violation("M3: " + receiver + " applied " + g.id + " from " + g.from + ", whose durable state never sent it");
      }
      if (!first_hop && !ran.contains({g.from, g.id, g.hops + 1})) {
        w_.Violation("M3: " + receiver + " applied " + g.id + ":" + std::to_string(g.hops) + " from " + g.from +
                     ", whose durable state never ran the message that passes it on");
      }
    }
  }
  // M4: nothing lost: every durable send's messages, and every handler run's pass-on.
  auto applied = [&ran](const std::string& receiver, const std::string& id, int hops) {
    return ran.contains({receiver, id, hops});
  };
  for (const auto& [id, info] : sends_) {
    const std::string sender = Name(info.sender);
    const bool durable = sent[sender].contains(id);
    if (info.acked && !durable) w_.Violation("M4: the acknowledged send " + id + " of " + sender + " is not durable");
    if (!durable) continue;
    for (int r : info.to) {
      if (!applied(Name(r), id, info.hops)) {
        w_.Violation("M4: " + Name(r) + " never applied " + id + ":" + std::to_string(info.hops) + " from " + sender);
      }
    }
  }
  for (const auto& [receiver, id, hops] : ran) {
    if (hops <= 0) continue;
    const int self = std::atoi(receiver.c_str() + 1);
    const std::string next = Name((self + 1) % options_.actors);
    if (!applied(next, id, hops - 1)) {
      w_.Violation("M4: " + next + " never applied " + id + ":" + std::to_string(hops - 1) + " passed on by " + receiver);
    }
  }
}

}  // namespace wk::sim
