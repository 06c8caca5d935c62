#include "alarms/index_reader.h"

#include <algorithm>
#include <memory>
#include <tuple>

#include "base/check.h"

namespace wk::alarms {
namespace {

bool Transient(Code c) { return c == Code::kRetryable || c == Code::kUnknownOutcome; }
Duration Backoff(int attempt) { return std::chrono::milliseconds(50) * (1 << std::min(attempt, 5)); }

Task<void> ReadInto(Env* env, ObjectStore* store, int shard, IndexReadOptions options,
                    std::shared_ptr<std::map<int, Result<ShardListing>>> out) {
  auto r = co_await ReadShard(*env, *store, shard, options);
  out->insert_or_assign(shard, std::move(r));
}

// A plain function spawns the readers: GCC 12 miscompiled coroutines that spawn several
// tasks (docs/DEVELOPING.md).
std::vector<TaskHandle> SpawnReaders(Env& env, ObjectStore& store, const std::vector<int>& shards,
                                     const IndexReadOptions& options,
                                     const std::shared_ptr<std::map<int, Result<ShardListing>>>& out) {
  std::vector<TaskHandle> handles;
  for (int shard : shards) handles.push_back(env.Spawn(ReadInto(&env, &store, shard, options, out), "read alarm shard"));
  return handles;
}

}  // namespace

Task<Result<ShardListing>> ReadShard(Env& env, ObjectStore& store, int shard, IndexReadOptions options) {
  WK_CHECK(shard >= 0 && shard < kShards, "alarm shard out of range");
  ShardListing out;
  ListOptions list;
  list.prefix = ShardPrefix(shard);
  for (int page = 0; page < options.max_pages; ++page) {
    Result<ListPage> got = Retryable("not listed");
    for (int attempt = 0;; ++attempt) {
      ListOptions copy = list;
      out.lists += 1;
      got = co_await store.List(std::move(copy), CallOptions{options.timeout});
      if (got.ok() || !Transient(got.code()) || attempt + 1 >= options.attempts) break;
      if (!co_await env.SleepFor(Backoff(attempt))) co_return Cancelled("index read cancelled");
    }
    if (!got.ok()) co_return got.status();
    for (const ListEntry& e : got->entries) {
      auto key = ParseEntryKey(e.key);
      if (!key.ok()) {
        out.foreign_keys += 1;
        continue;
      }
      if (options.due_until_ms && key->due_ms > *options.due_until_ms) co_return out;  // the rest are later
      out.entries.push_back(std::move(*key));
    }
    if (!got->next_continuation) co_return out;
    list.continuation = *got->next_continuation;
  }
  out.complete = false;
  co_return out;
}

Task<std::map<int, Result<ShardListing>>> ReadShards(Env& env, ObjectStore& store, std::vector<int> shards,
                                                     IndexReadOptions options) {
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  auto out = std::make_shared<std::map<int, Result<ShardListing>>>();
  std::vector<TaskHandle> readers = SpawnReaders(env, store, shards, options, out);
  bool cancelled = false;
  for (auto& h : readers) {
    if (!co_await h.Join()) cancelled = true;
  }
  if (cancelled) {
    for (auto& h : readers) h.Cancel();
  }
  for (int shard : shards) {
    if (out->count(shard) == 0) out->insert_or_assign(shard, Result<ShardListing>(Cancelled("index read cancelled")));
  }
  co_return std::move(*out);
}

std::map<ActorId, IndexedAlarm> LatestSetPerActor(const std::vector<EntryKey>& entries) {
  std::map<ActorId, IndexedAlarm> out;
  for (const EntryKey& e : entries) {
    auto [it, inserted] = out.try_emplace(e.actor, IndexedAlarm{e, 0});
    IndexedAlarm& a = it->second;
    a.entries += 1;
    if (!inserted && std::tie(e.generation, e.batch) > std::tie(a.latest.generation, a.latest.batch)) a.latest = e;
  }
  return out;
}

}  // namespace wk::alarms
