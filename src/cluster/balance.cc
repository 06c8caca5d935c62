#include "cluster/balance.h"

#include <algorithm>
#include <deque>
#include <memory>

#include "cluster/drain_control.h"
#include "cluster/operator.h"
#include "cluster/owner_record.h"

namespace wk {
namespace {

constexpr int kRecordReaders = 16;  // owner records read at once
constexpr Duration kAwaitPoll = std::chrono::milliseconds(250);

// Every key under prefix, all pages.
Task<Result<std::vector<std::string>>> ListAll(ObjectStore* store, std::string prefix, CallOptions call) {
  std::vector<std::string> keys;
  ListOptions options;
  options.prefix = std::move(prefix);
  for (;;) {
    auto page = co_await store->List(options, call);
    if (!page.ok()) co_return page.status();
    for (auto& e : page->entries) keys.push_back(std::move(e.key));
    if (!page->next_continuation) break;
    options.continuation = *page->next_continuation;
  }
  co_return keys;
}

struct RecordRead {
  std::string key;
  std::optional<OwnerRecord> record;
};

// One of the readers: takes keys until none is left.
Task<void> ReadRecords(ObjectStore* store, std::shared_ptr<std::deque<std::string>> keys,
                       std::shared_ptr<std::vector<RecordRead>> out, std::shared_ptr<Status> failed, CallOptions call) {
  while (!keys->empty() && failed->ok()) {
    std::string key = std::move(keys->front());
    keys->pop_front();
    auto got = co_await store->Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;  // deleted since the listing
      *failed = got.status();
      co_return;
    }
    auto rec = DecodeOwnerRecord(got->body);
    out->push_back(RecordRead{std::move(key), rec.ok() ? std::optional<OwnerRecord>(*rec) : std::nullopt});
  }
}

}  // namespace

Task<Result<ClusterLoad>> ReadClusterLoad(Env& env, ObjectStore& store, LeaseTiming timing) {
  const CallOptions call{timing.ttl};
  Membership membership(env, store, timing);
  if (Status s = co_await membership.ListOnce(); !s.ok()) co_return s;
  std::map<NodeId, InstanceToken> live;
  const WallTime now = env.WallNow();
  for (const auto& [id, view] : membership.view()) {
    if (DescribeNode(view, now, timing).state == "live") live[id] = view.record->instance;
  }
  // Named locals for the prefixes: GCC 12 destroys a temporary in a co_await operand twice.
  std::string drain_prefix(kDrainPrefix);
  auto draining = co_await ListAll(&store, std::move(drain_prefix), call);
  if (!draining.ok()) co_return draining.status();
  for (const std::string& key : *draining) live.erase(NodeId(key.substr(kDrainPrefix.size())));

  std::string owners_prefix(kOwnersPrefix);
  auto owners = co_await ListAll(&store, std::move(owners_prefix), call);
  if (!owners.ok()) co_return owners.status();
  auto keys = std::make_shared<std::deque<std::string>>(owners->begin(), owners->end());
  auto reads = std::make_shared<std::vector<RecordRead>>();
  auto failed = std::make_shared<Status>();
  std::vector<TaskHandle> readers;
  for (int i = 0; i < kRecordReaders; ++i) readers.push_back(env.Spawn(ReadRecords(&store, keys, reads, failed, call), "read records"));
  for (TaskHandle& r : readers) {
    if (!co_await r.Join()) co_return Cancelled("cancelled");
  }
  if (!failed->ok()) co_return *failed;

  ClusterLoad load;
  for (const auto& [id, instance] : live) {
    load.nodes.push_back(id);
    load.held[id];
  }
  for (const RecordRead& r : *reads) {
    if (!r.record || r.record->names_nobody()) continue;
    auto it = live.find(r.record->node_id);
    if (it == live.end() || it->second != r.record->instance) continue;
    // System actors (the alarm shards, owners/_alarms/...) do not parse as tenants' actors:
    // they are spread by the membership view, never counted or moved here.
    auto actor = ParseActorId(std::string_view(r.key).substr(kOwnersPrefix.size()));
    if (!actor.ok()) continue;
    load.held[it->first].push_back(*actor);
    load.holder[*actor] = it->first;
  }
  for (auto& [id, actors] : load.held) std::sort(actors.begin(), actors.end());
  co_return load;
}

std::vector<PlannedMove> PlanBalance(const ClusterLoad& load) {
  std::vector<PlannedMove> moves;
  const std::size_t k = load.nodes.size();
  if (k < 2) return moves;
  auto count = [&load](const NodeId& id) {
    auto it = load.held.find(id);
    return it == load.held.end() ? std::size_t{0} : it->second.size();
  };
  std::size_t n = 0;
  for (const NodeId& id : load.nodes) n += count(id);
  // The most loaded keep the extra one of n % k: fewer moves.
  std::vector<NodeId> order = load.nodes;
  std::sort(order.begin(), order.end(), [&](const NodeId& a, const NodeId& b) {
    return count(a) != count(b) ? count(a) > count(b) : a < b;
  });
  std::map<NodeId, std::size_t> quota;
  for (std::size_t i = 0; i < k; ++i) quota[order[i]] = n / k + (i < n % k ? 1 : 0);
  // Givers in order (most loaded first), each giving its last actors by name.
  std::vector<std::pair<NodeId, ActorId>> given;
  for (const NodeId& id : order) {
    const std::size_t c = count(id);
    if (c <= quota[id]) continue;
    const auto& actors = load.held.at(id);
    for (std::size_t i = quota[id]; i < c; ++i) given.emplace_back(id, actors[i]);
  }
  // Takers least loaded first.
  std::size_t next = 0;
  for (auto it = order.rbegin(); it != order.rend() && next < given.size(); ++it) {
    for (std::size_t c = count(*it); c < quota[*it] && next < given.size(); ++c, ++next) {
      moves.push_back(PlannedMove{given[next].second, given[next].first, *it});
    }
  }
  return moves;
}

Task<Status> RequestMove(Env& env, ObjectStore& store, PlannedMove move, CallOptions call) {
  const std::string key = MoveKey(move.from, move.actor);
  MoveRecord request{move.to, MoveState::kRequested, env.WallNow(), ""};
  std::string body = EncodeMoveRecord(request);
  auto put = co_await store.Put(key, body, Precondition::IfNoneMatchAny(), call);
  if (put.ok()) co_return Status::Ok();
  if (put.code() != Code::kPreconditionFailed) co_return put.status();
  // One is there: replace it if it is finished (its command did not delete it).
  auto got = co_await store.Get(key, call);
  if (!got.ok()) co_return got.status();
  auto old = DecodeMoveRecord(got->body);
  if (old.ok() && old->state == MoveState::kRequested) {
    co_return PreconditionFailed("a move of " + move.actor.ToString() + " from " + move.from.str() + " to " +
                                 old->to.str() + " is already requested");
  }
  auto replaced = co_await store.Put(key, std::move(body), Precondition::IfMatch(got->version), call);
  if (!replaced.ok()) co_return replaced.status();
  co_return Status::Ok();
}

Task<Result<MoveRecord>> AwaitMove(Env& env, ObjectStore& store, NodeId from, ActorId actor, MonoTime deadline,
                                   CallOptions call) {
  const std::string key = MoveKey(from, actor);
  for (;;) {
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) co_return NotFound("the move request of " + actor.ToString() + " was removed");
      if (got.code() != Code::kRetryable && got.code() != Code::kUnknownOutcome) co_return got.status();
    } else {
      auto rec = DecodeMoveRecord(got->body);
      if (!rec.ok()) co_return rec.status();
      if (rec->state != MoveState::kRequested) {
        Status deleted = co_await store.Delete(key, Precondition::None(), call);
        deleted.IgnoreError();  // a left-over finished request is harmless (RequestMove replaces it)
        co_return *rec;
      }
      if (env.MonoNow() >= deadline) co_return *rec;
    }
    if (env.MonoNow() >= deadline) co_return UnknownOutcome("the bucket did not answer");
    if (!co_await env.SleepFor(std::min<Duration>(kAwaitPoll, deadline - env.MonoNow()))) co_return Cancelled("cancelled");
  }
}

}  // namespace wk
