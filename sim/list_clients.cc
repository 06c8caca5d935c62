#include "list_clients.h"

#include <algorithm>
#include <map>

#include "storage_history.h"

namespace wk::sim {
namespace {

std::string At(MonoTime t) { return std::to_string(World::Ms(t.time_since_epoch())) + "ms"; }

}  // namespace

ListClients::ListClients(World& world, ServingCluster& cluster, ListClientsOptions options)
    : w_(world), cluster_(cluster), options_(std::move(options)) {}

void ListClients::Start() {
  for (int c = 0; c < options_.clients; ++c) cluster_.client_env().Spawn(Client(), "client");
}

void ListClients::FinalReadsAndCheck() {
  FinalReads();
  for (int a = 0; a < options_.actors; ++a) CheckActor(a);
}

// ---- clients
Task<void> ListClients::Client() {
  for (;;) {
    if (!co_await cluster_.client_env().SleepFor(milliseconds(w_.Uniform(50, 700)))) co_return;
    if (w_.Now() >= MonoTime(options_.clients_for)) co_return;
    Op op;
    op.actor = static_cast<int>(w_.Uniform(0, options_.actors - 1));
    op.slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    op.append = w_.Chance(0.6);
    if (op.append) op.value = "v" + std::to_string(++next_value_);
    if (op.append && options_.keyed_share > 0 && w_.Chance(options_.keyed_share)) {
      op.key = "k" + std::to_string(++next_key_);
    }
    const std::size_t index = ops_.size();
    const bool ok = co_await Send(op, index);
    if (!op.key.empty() && (!ok || w_.Chance(0.2))) co_await Retry(op);
  }
}

Task<void> ListClients::Retry(Op op) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (!co_await cluster_.client_env().SleepFor(milliseconds(w_.Uniform(100, 1500)))) co_return;
    op.slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    const std::size_t index = ops_.size();
    ++w_.result().keyed_retries;
    if (co_await Send(op, index)) co_return;
  }
}

ServerRequest ListClients::RequestFor(const Op& op) const {
  const std::string path = std::string(kServingTenant) + "/" + options_.class_name + "/a" + std::to_string(op.actor) +
                           (op.append ? "/append" : "");
  ServerRequest r = cluster_.Request(op.append ? "POST" : "GET", path);
  r.body = op.value;
  if (!op.key.empty()) r.headers.emplace_back("Idempotency-Key", op.key);
  return r;
}

// Sends op (recorded at index) and records its outcome. True if answered 200.
Task<bool> ListClients::Send(Op op, std::size_t index) {
  op.invoked = w_.Now();
  ServerRequest request = RequestFor(op);
  const std::string what = std::string(op.append ? "append " + op.value : "read") + " a" + std::to_string(op.actor) +
                           (op.key.empty() ? "" : " key " + op.key) + " via n" + std::to_string(op.slot);
  ops_.push_back(std::move(op));
  if (ops_[index].append) ++w_.result().appends; else ++w_.result().reads;
  auto got = co_await cluster_.Send(ops_[index].slot, std::move(request));
  Op& done = ops_[index];
  done.completed = w_.Now();
  done.done = true;
  if (!got.ok()) {
    w_.Trace("client " + what + " (sent " + At(done.invoked) + "): " + got.status().ToString());
    co_return false;
  }
  done.status = got->status;
  done.ok = got->status == 200;
  if (done.ok && !done.append) done.list = StorageHistory::SplitLog(got->body);
  if (done.ok) {
    if (done.append) ++w_.result().acked_appends; else ++w_.result().ok_reads;
  }
  std::string body = got->body;
  if (body.size() > 200) body = "..." + body.substr(body.size() - 200);
  while (!body.empty() && body.back() == '\n') body.pop_back();
  w_.Trace("client " + what + " (sent " + At(done.invoked) + "): " + std::to_string(got->status) + " " + body);
  co_return done.ok;
}

// After healing: each actor read through a healthy node until one answers (every
// acknowledged append must be in it: CheckActor judges it like any read).
void ListClients::FinalReads() {
  w_.finished = true;
  for (int a = 0; a < options_.actors; ++a) {
    bool answered = false;
    for (int attempt = 0; attempt < 10 && !answered; ++attempt) {
      Op op;
      op.actor = a;
      op.slot = (a + attempt) % kSlots;
      const std::size_t index = ops_.size();
      auto ran = RunTask(w_.sim(), cluster_.client_env(), Send(op, index), kClientTimeout + seconds(5));
      answered = ran.has_value() && *ran;
      if (!answered) w_.sim().RunFor(seconds(2));
    }
    if (!answered) w_.Violation("a" + std::to_string(a) + ": no healthy node answered a read after healing");
  }
}

// ---- the checker
//
// Per actor, over the operations the clients saw: the list is append-only, so in a
// linearizable history every answered read is a prefix of the longest one (M), and:
//   1. a read holds no value twice, and none that was not sent before the read ended;
//   2. a read holds every append acknowledged before the read was sent;
//   3. an append acknowledged before another was sent precedes it (if the later one is
//      anywhere in M, the earlier one is, before it);
//   4. a read that ended before another was sent is not longer than it (with 0, reads
//      are prefix-ordered in real time).
// The final reads are reads like any other, sent after everything was acknowledged.
// Keyed appends sent again (ListClientsOptions::keyed_share) must still hold their value
// once: a second run of one shows as a value held twice (1).
// Broken models that make it fail: --mutant answer-without-gate (2, at seed 1: an append
// answered before durable is lost with its node; a zombie's read is stale once the front's
// own validity checks are gone) and --mutant release-without-validity (2: a zombie's read
// released by the gate without the hold's validity; it takes effect with the hold gate,
// replica/hold_gate.h).
void ListClients::CheckActor(int a) {
  const std::string name = "a" + std::to_string(a);
  std::vector<const Op*> reads, acked, sent;
  for (const Op& op : ops_) {
    if (op.actor != a) continue;
    if (op.append) {
      sent.push_back(&op);
      if (op.ok) acked.push_back(&op);
    } else if (op.ok) {
      reads.push_back(&op);
    }
  }
  // A value sent again with its Idempotency-Key counts from its first send.
  std::map<std::string, const Op*> by_value;
  for (const Op* op : sent) by_value.emplace(op->value, op);
  const Op* longest = nullptr;
  for (const Op* r : reads)
    if (!longest || r->list.size() > longest->list.size()) longest = r;
  std::vector<std::string> m = longest ? longest->list : std::vector<std::string>{};
  std::map<std::string, std::size_t> pos;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (!pos.emplace(m[i], i).second) {
      w_.Violation(name + ": the read sent at " + At(longest->invoked) + " holds " + m[i] + " twice");
      return;
    }
    if (!by_value.count(m[i])) {
      w_.Violation(name + ": the read sent at " + At(longest->invoked) + " holds " + m[i] + ", never sent");
      return;
    }
  }
  // T1: an append refused 429 by a tenant's quota (docs/tenants.md, "Quotas") ran nothing
  // (one sent once, without a key: a keyed one may be applied by its retry).
  for (const Op* op : sent) {
    if (op->status != 429 || !op->key.empty() || !pos.contains(op->value)) continue;
    w_.Violation("T1: " + name + ": the append of " + op->value + " sent at " + At(op->invoked) + " via n" +
                 std::to_string(op->slot) + " was refused 429 by a quota, yet it was applied");
    return;
  }
  // The latest send time among M's first i values, so a read of length n ended after
  // every value it holds was sent.
  std::vector<MonoTime> sent_by(m.size() + 1, MonoTime{});
  for (std::size_t i = 0; i < m.size(); ++i) sent_by[i + 1] = std::max(sent_by[i], by_value[m[i]]->invoked);
  for (const Op* r : reads) {
    // 0. prefix of M.
    for (std::size_t i = 0; i < r->list.size(); ++i) {
      if (r->list[i] != m[i]) {
        w_.Violation(name + ": the reads sent at " + At(r->invoked) + " and " + At(longest->invoked) +
                  " disagree at position " + std::to_string(i) + " (" + r->list[i] + " vs " + m[i] + ")");
        return;
      }
    }
    // 1. nothing from the future.
    if (sent_by[r->list.size()] > r->completed) {
      w_.Violation(name + ": the read sent at " + At(r->invoked) + " holds a value sent after it ended");
      return;
    }
  }
  // 2. every append acknowledged before a read was sent is in it.
  std::vector<const Op*> by_ack = acked;
  std::sort(by_ack.begin(), by_ack.end(), [](const Op* x, const Op* y) { return x->completed < y->completed; });
  for (const Op* r : reads) {
    for (const Op* w : by_ack) {
      if (w->completed >= r->invoked) break;
      auto it = pos.find(w->value);
      if (it == pos.end() || it->second >= r->list.size()) {
        w_.Violation(name + ": the read sent at " + At(r->invoked) + " via n" + std::to_string(r->slot) + " (" +
                  std::to_string(r->list.size()) + " values) misses " + w->value + ", acknowledged at " +
                  At(w->completed) + " via n" + std::to_string(w->slot));
        return;
      }
    }
  }
  // 3. acknowledgement order (a value sent again with its key: from its first send, which
  // is the one that took effect if any did).
  for (const auto& [value, b] : by_value) {
    auto pb = pos.find(b->value);
    if (pb == pos.end()) continue;
    for (const Op* w : by_ack) {
      if (w->completed >= b->invoked) break;
      auto pw = pos.find(w->value);
      if (pw == pos.end() || pw->second > pb->second) {
        w_.Violation(name + ": " + w->value + " was acknowledged at " + At(w->completed) + ", before " + b->value +
                  " was sent, but " + (pw == pos.end() ? std::string("is missing") : std::string("comes after it")));
        return;
      }
    }
  }
  // 4. reads in real time never shrink.
  for (const Op* r1 : reads) {
    for (const Op* r2 : reads) {
      if (r1->completed < r2->invoked && r1->list.size() > r2->list.size()) {
        w_.Violation(name + ": the read sent at " + At(r2->invoked) + " (" + std::to_string(r2->list.size()) +
                  " values) is older than the one answered at " + At(r1->completed) + " (" +
                  std::to_string(r1->list.size()) + ")");
        return;
      }
    }
  }
}

// A moved actor is often a busy one: 6 more requests for it, to random nodes, within the
// next 300 ms, so requests race every step of the hand-over (the source's close, its
// release, the target's take) from every node.
void ListClients::Burst(int actor) {
  for (int k = 0; k < 6; ++k) {
    Op op;
    op.actor = actor;
    op.slot = static_cast<int>(w_.Uniform(0, kSlots - 1));
    op.append = w_.Chance(0.6);
    if (op.append) op.value = "v" + std::to_string(++next_value_);
    cluster_.client_env().StartTimer(w_.Now() + milliseconds(w_.Uniform(0, 300)),
                           [this, op] { cluster_.client_env().Spawn(BurstSend(op), "burst"); });
  }
}
Task<void> ListClients::BurstSend(Op op) {
  const std::size_t index = ops_.size();
  (void)co_await Send(std::move(op), index);
}

}  // namespace wk::sim
