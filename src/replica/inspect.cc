#include "replica/inspect.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "replica/format.h"

namespace wk::replica {
namespace {

bool Transient(Code c) { return c == Code::kRetryable || c == Code::kUnknownOutcome; }

Duration Backoff(int attempt) { return std::chrono::milliseconds(50) * (1 << std::min(attempt, 5)); }

// Characters of an actor name (base/ids.h's rule); a prefix or an `after` may be any
// run of them (an empty one included).
bool NamePiece(std::string_view s) {
  if (s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '~' || c == '-';
  });
}

std::string ClassOwnersPrefix(const std::string& tenant, const std::string& class_name) {
  return std::string(kOwnersPrefix) + tenant + "/" + class_name + "/";
}

// One actor's facts, filled by a worker.
struct Job {
  ActorId id;
  StoredActor out;
  Status status;
};

struct JobQueue {
  std::vector<Job> jobs;
  std::size_t next = 0;
  bool failed = false;
};

Task<Result<GetOutput>> GetWithRetry(Env& env, ObjectStore& store, std::string key, const ListActorsOptions& o) {
  for (int attempt = 0;; ++attempt) {
    auto got = co_await store.Get(key, CallOptions{o.timeout});
    if (got.ok() || !Transient(got.code()) || attempt + 1 >= o.attempts) co_return got;
    if (!co_await env.SleepFor(Backoff(attempt))) co_return Cancelled("listing cancelled");
  }
}

Task<Status> FillOne(Env& env, ObjectStore& store, Job& job, ListActorsOptions o) {
  auto record = co_await GetWithRetry(env, store, OwnerKey(job.id), o);
  if (record.ok()) {
    auto decoded = DecodeOwnerRecord(record->body);
    if (decoded.ok()) {
      job.out.record = *decoded;
    } else {
      job.out.record_error = decoded.status().message();
    }
  } else if (record.code() != Code::kNotFound) {
    co_return record.status();
  }
  const std::vector<std::string> prefixes{WalPrefix(job.id), SnapshotPrefix(job.id)};
  for (const std::string& prefix : prefixes) {
    auto listed = co_await ListAll(env, store, prefix, o.timeout, o.attempts);
    if (!listed.ok()) co_return listed.status();
    const bool wal = prefix.starts_with(kWalPrefix);
    for (const auto& e : *listed) {
      job.out.stored_bytes += e.size;
      (wal ? job.out.segments : job.out.snapshots) += 1;
      if (auto p = ParseKeyPosition(prefix, e.key); p.ok()) {
        if (!job.out.newest_generation || p->generation > *job.out.newest_generation) {
          job.out.newest_generation = p->generation;
        }
      }
    }
  }
  co_return Status::Ok();
}

Task<void> FillWorker(Env& env, ObjectStore& store, std::shared_ptr<JobQueue> q, ListActorsOptions o) {
  while (!q->failed && q->next < q->jobs.size()) {
    Job& job = q->jobs[q->next++];
    job.status = co_await FillOne(env, store, job, o);
    if (!job.status.ok()) q->failed = true;
  }
}

// A plain function spawns the workers: GCC 12 miscompiled a coroutine that spawns several
// tasks (docs/DEVELOPING.md).
std::vector<TaskHandle> SpawnFillers(Env& env, ObjectStore& store, const std::shared_ptr<JobQueue>& q,
                                     const ListActorsOptions& o) {
  std::vector<TaskHandle> handles;
  const int workers = std::max(1, std::min<int>(o.parallelism, static_cast<int>(q->jobs.size())));
  for (int i = 0; i < workers && !q->jobs.empty(); ++i) {
    handles.push_back(env.Spawn(FillWorker(env, store, q, o), "list actors"));
  }
  return handles;
}

}  // namespace

Task<Result<ActorPage>> ListStoredActors(Env& env, ObjectStore& store, std::string tenant, std::string class_name,
                                         ListActorsOptions o) {
  if (Status s = ValidateActorId(ActorId{tenant, class_name, "n"}); !s.ok()) co_return s;
  if (!NamePiece(o.prefix)) co_return InvalidArgument("prefix must be characters of an actor name ([A-Za-z0-9._~-], at most 128)");
  if (!NamePiece(o.after)) co_return InvalidArgument("after must be an actor name");
  if (o.limit < 1 || o.limit > kMaxListActorsLimit) {
    co_return InvalidArgument("limit must be 1.." + std::to_string(kMaxListActorsLimit));
  }
  const std::string base = ClassOwnersPrefix(tenant, class_name);
  ListOptions list;
  list.prefix = base + o.prefix;
  if (!o.after.empty()) list.start_after = base + o.after;
  list.page_size = o.limit + 1;  // one more than asked: says whether a next page exists
  Result<ListPage> page = Retryable("not listed");
  for (int attempt = 0;; ++attempt) {
    ListOptions copy = list;
    page = co_await store.List(std::move(copy), CallOptions{o.timeout});
    if (page.ok() || !Transient(page.code()) || attempt + 1 >= o.attempts) break;
    if (!co_await env.SleepFor(Backoff(attempt))) co_return Cancelled("listing cancelled");
  }
  if (!page.ok()) co_return page.status();

  auto q = std::make_shared<JobQueue>();
  ActorPage out;
  for (const auto& e : page->entries) {
    if (static_cast<int>(q->jobs.size()) == o.limit) {
      out.next_after = q->jobs.back().id.name;
      break;
    }
    std::string name = e.key.substr(base.size());
    ActorId id{tenant, class_name, name};
    if (!ValidateActorId(id).ok()) continue;  // not an actor's record (nothing else is written there)
    Job job;
    job.id = std::move(id);
    job.out.name = std::move(name);
    q->jobs.push_back(std::move(job));
  }
  if (!out.next_after && page->next_continuation && static_cast<int>(q->jobs.size()) == o.limit) {
    out.next_after = q->jobs.back().id.name;  // a store that pages below our page size
  }
  std::vector<TaskHandle> handles = SpawnFillers(env, store, q, o);
  for (auto& h : handles) {
    if (!co_await h.Join()) {
      for (auto& other : handles) other.Cancel();
      co_return Cancelled("listing cancelled");
    }
  }
  for (auto& job : q->jobs) {
    if (!job.status.ok()) co_return job.status;
    out.actors.push_back(std::move(job.out));
  }
  co_return out;
}

Task<Result<Restored>> RestoreReadOnly(Env& env, ObjectStore& store, ActorId actor, RestoreOptions options,
                                       int attempts) {
  // The highest generation there is: restore.h refuses a log holding a generation at or
  // above the one asked for, and no log can hold this one.
  const Generation above_all{std::numeric_limits<std::uint64_t>::max()};
  for (int attempt = 0;; ++attempt) {
    auto restored = co_await Restore(env, store, actor, above_all, options);
    if (restored.ok()) co_return std::move(restored);
    // A chain object missing: most likely collected by a live owner between our listing
    // and our read (a restore under a hold never meets this: nobody collects meanwhile).
    const bool collected = restored.code() == Code::kFatal &&
                           restored.status().message().find("missing") != std::string::npos;
    if (!(collected || Transient(restored.code())) || attempt + 1 >= attempts) co_return std::move(restored);
    if (!co_await env.SleepFor(Backoff(attempt))) co_return Cancelled("restore cancelled");
  }
}

Task<Result<Deleted>> DeleteStoredActor(Env& env, ObjectStore& store, ActorId actor, Generation g,
                                        std::function<bool()> is_valid, Duration timeout) {
  const CallOptions call{timeout};
  if (!is_valid()) co_return Retryable("the hold of " + actor.ToString() + " is no longer valid");
  const std::string fence_key = SegmentKey(actor, Position{g, 0});
  // What there is: every object must belong to an older generation (a later one is not
  // ours to delete; one of ours would mean this hold already wrote, which only an earlier
  // attempt of this deletion does: its fence).
  std::vector<ListEntry> victims;
  const std::vector<std::string> prefixes{WalPrefix(actor), SnapshotPrefix(actor)};
  for (const std::string& prefix : prefixes) {
    auto listed = co_await ListAll(env, store, prefix, timeout, 3);
    if (!listed.ok()) co_return listed.status();
    for (auto& e : *listed) {
      auto p = ParseKeyPosition(prefix, e.key);
      if (!p.ok()) co_return p.status();
      if (e.key == fence_key) continue;
      if (p->generation >= g) {
        co_return Fatal(e.key + " belongs to generation " + std::to_string(p->generation.value) +
                        ", not below this hold's " + std::to_string(g.value) + ": refusing to delete it");
      }
      victims.push_back(std::move(e));
    }
  }
  // 1. The empty fence of this hold: from now on every restore finds no state.
  Segment fence;
  fence.actor = actor;
  fence.position = Position{g, 0};
  if (!is_valid()) co_return Retryable("the hold of " + actor.ToString() + " is no longer valid");
  auto put = co_await store.Put(fence_key, EncodeSegment(fence), Precondition::IfNoneMatchAny(), call);
  if (!put.ok() && put.code() != Code::kPreconditionFailed) {
    // kPreconditionFailed: an earlier attempt of this very hold landed it (nobody else
    // writes generation g's keys). Anything else: nothing may be deleted before it is known.
    co_return put.status();
  }
  // 2. Everything listed, older generations only. (What lands after the listing can only
  // be a late upload of an older hold: off the chain of the new fence, collected later.)
  Deleted out;
  for (const auto& e : victims) {
    if (!is_valid()) co_return Retryable("the hold of " + actor.ToString() + " ended during the deletion");
    Status s = co_await store.Delete(e.key, Precondition::None(), call);
    if (!s.ok() && s.code() != Code::kNotFound) co_return s;
    out.objects += 1;
    out.bytes += e.size;
  }
  co_return out;
}

}  // namespace wk::replica
