#include "alarms/alarm_index.h"

#include <algorithm>

#include "base/log.h"

namespace wk::alarms {
namespace {

constexpr Duration kEntryRetryMin = std::chrono::milliseconds(100);
constexpr Duration kEntryRetryMax = std::chrono::seconds(1);
// Pages of one alarm's prefix: one actor's entries for one time (a handful).
constexpr int kPrefixPageSize = 100;

}  // namespace

AlarmIndex::AlarmIndex(Env& env, ObjectStore& store, AlarmIndexOptions options)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kAlarm)), options_(options) {}

AlarmIndex::~AlarmIndex() { *alive_ = false; }

ObjectStore& AlarmIndex::StoreOf(const ActorId& actor) {
  return tenant_stores_ != nullptr ? tenant_stores_->Of(actor).ForPurpose(BucketPurpose::kAlarm) : store_;
}

void AlarmIndex::Opened(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm,
                        std::function<bool()> is_valid, std::uint64_t resumed_after) {
  Open& open = open_[{actor, generation}];
  open = Open{};
  open.generation = generation;
  open.resumed_after = resumed_after;
  open.is_valid = std::move(is_valid);
  open.alarm = alarm;
  open.restored = alarm;
  // The restored alarm is durable, and its entry was written by an earlier hold (rule 1):
  // its key is not known here.
  if (alarm) open.earlier.insert(*alarm);
  if (listener_) listener_(actor, alarm, true);
}

void AlarmIndex::Committed(const ActorId& actor, Generation generation, std::uint64_t seq,
                           std::optional<std::int64_t> alarm, std::function<void(Status)> entry_written) {
  auto it = open_.find({actor, generation});
  if (it == open_.end()) {
    // Not an open replica's (a bug): never let its set go unindexed.
    if (alarm) entry_written(Fatal("the alarm index does not know the replica of " + actor.ToString()));
    return;
  }
  Open& open = it->second;
  open.alarm = alarm;
  if (alarm) {
    open.own[seq] = *alarm;
    EntryKey key{ShardOf(actor), *alarm, actor, generation, seq};
    env_.Spawn(WriteEntry(alive_, this, &StoreOf(actor), EncodeEntryKey(key), std::move(entry_written)), "alarm entry");
  }
  if (listener_) listener_(actor, alarm, true);
}

void AlarmIndex::Durable(const ActorId& actor, Generation generation, std::uint64_t seq,
                         std::optional<std::int64_t> alarm) {
  auto it = open_.find({actor, generation});
  if (it == open_.end()) return;
  Cleanup(actor, it->second, seq, alarm);
}

void AlarmIndex::AfterAlarmEvent(const ActorId& actor, std::int64_t due_ms, std::optional<std::int64_t> alarm_after) {
  // The newest open hold of the actor (the one that ran the event).
  auto it = open_.upper_bound({actor, Generation{UINT64_MAX}});
  if (it == open_.begin()) return;
  --it;
  if (it->first.first != actor || alarm_after == std::optional<std::int64_t>(due_ms)) return;
  Open& open = it->second;
  // The answer was released: the alarm is durably `alarm_after`. Only entries of earlier
  // holds are judged here (batch 0 covers none of this hold's: the replica reports those).
  open.earlier.insert(due_ms);
  Cleanup(actor, open, 0, alarm_after);
}

void AlarmIndex::Fenced(const ActorId& actor, Generation generation) {
  auto it = open_.find({actor, generation});
  if (it == open_.end()) return;
  Open& open = it->second;
  open.fenced = true;
  // Nothing of this hold is durable before its fence (the uploads go in order): the
  // restored alarm is the durable one. Alarm events answered meanwhile left their times
  // in `earlier`.
  Cleanup(actor, open, 0, open.restored);
}

void AlarmIndex::Closed(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm) {
  auto it = open_.find({actor, generation});
  if (it == open_.end()) return;
  open_.erase(it);
  // Another hold of the actor may be open here already: it tells the listener itself.
  auto next = open_.lower_bound({actor, Generation{}});
  if (next != open_.end() && next->first.first == actor) return;
  if (listener_) listener_(actor, alarm, false);
}

void AlarmIndex::Cleanup(const ActorId& actor, Open& open, std::uint64_t durable_seq,
                         std::optional<std::int64_t> durable_alarm) {
  const auto stale = [&durable_alarm](std::int64_t t) { return durable_alarm != std::optional<std::int64_t>(t); };
  // This hold's entries, written at or before the durable batch, for another time.
  for (auto it = open.own.begin(); it != open.own.end() && it->first <= durable_seq;) {
    if (stale(it->second)) {
      EntryKey key{ShardOf(actor), it->second, actor, open.generation, it->first};
      env_.Spawn(DeleteEntry(alive_, this, &StoreOf(actor), EncodeEntryKey(key), open.is_valid), "alarm entry delete");
      it = open.own.erase(it);
    } else {
      ++it;
    }
  }
  // Earlier holds' entries for times the durable state no longer holds; only once this
  // hold's fence landed (Fenced: an earlier hold's segment in flight is off the chain then).
  if (!open.fenced && !options_.broken.on(BrokenModel::kEarlierEntriesBeforeFence)) return;
  for (auto it = open.earlier.begin(); it != open.earlier.end();) {
    if (stale(*it)) {
      env_.Spawn(DeleteEarlier(alive_, this, actor, open.generation, open.resumed_after, *it, open.is_valid), "alarm entries of earlier holds");
      it = open.earlier.erase(it);
    } else {
      ++it;
    }
  }
}

Task<void> AlarmIndex::WriteEntry(std::shared_ptr<bool> alive, AlarmIndex* self, ObjectStore* store, std::string key,
                                  std::function<void(Status)> done) {
  ++self->in_flight_;
  const MonoTime deadline = self->env_.MonoNow() + self->options_.entry_timeout;
  Duration backoff = kEntryRetryMin;
  Status last = Retryable("not sent");
  for (;;) {
    ++self->stats_.puts;
    // The key is this set's alone, so a retry after an unknown outcome rewrites the same
    // object: the PUT is unconditional.
    std::string k = key;
    std::string body(kEntryBody);
    auto put = co_await store->Put(std::move(k), std::move(body), Precondition::None(),
                                         CallOptions{self->options_.request_timeout});
    if (!*alive) co_return;
    if (put.ok()) {
      ++self->stats_.entries_written;
      --self->in_flight_;
      done(Status::Ok());
      co_return;
    }
    last = put.status();
    if (put.code() == Code::kInvalidArgument || put.code() == Code::kFatal || put.code() == Code::kCancelled ||
        self->env_.MonoNow() + backoff >= deadline) {
      break;
    }
    const bool slept = co_await self->env_.SleepFor(backoff);
    if (!*alive) co_return;
    if (!slept) break;
    backoff = std::min(backoff * 2, kEntryRetryMax);
  }
  ++self->stats_.entry_failures;
  --self->in_flight_;
  WK_LOG_WARN("alarm index entry not written: the event that set it is not acknowledged",
              {{"key", key}, {"error", last.ToString()}});
  done(Retryable("alarm index entry " + key + " not written: " + last.ToString()));
}

Task<void> AlarmIndex::DeleteEntry(std::shared_ptr<bool> alive, AlarmIndex* self, ObjectStore* store, std::string key,
                                   std::function<bool()> is_valid) {
  // Only an owner removes entries (rule 2); a hold that ended leaves them, stale, to the
  // next owner.
  if (!is_valid()) co_return;
  ++self->in_flight_;
  ++self->stats_.deletes;
  std::string k = key;
  Status st = co_await store->Delete(std::move(k), Precondition::None(),
                                           CallOptions{self->options_.request_timeout});
  if (!*alive) co_return;
  --self->in_flight_;
  if (st.ok()) {
    ++self->stats_.entries_deleted;
  } else {
    ++self->stats_.delete_failures;  // stale now: rule 3 keeps it harmless
  }
}

Task<void> AlarmIndex::DeleteEarlier(std::shared_ptr<bool> alive, AlarmIndex* self, ActorId actor,
                                     Generation generation, std::uint64_t resumed_after, std::int64_t due_ms,
                                     std::function<bool()> is_valid) {
  if (!is_valid()) co_return;
  ++self->in_flight_;
  ++self->stats_.lists;
  ListOptions lo;
  lo.prefix = AlarmPrefix(actor, due_ms);
  lo.page_size = kPrefixPageSize;
  ObjectStore& store = self->StoreOf(actor);
  auto page = co_await store.List(std::move(lo), CallOptions{self->options_.request_timeout});
  if (!*alive) co_return;
  --self->in_flight_;
  if (!page.ok()) co_return;  // stale entries stay; a later delivery finds them
  for (const ListEntry& e : page->entries) {
    auto key = ParseEntryKey(e.key);
    if (!key.ok() || key->actor != actor || key->due_ms != due_ms) continue;  // foreign: left alone
    // Earlier holds' only: this hold's are removed by batch (Cleanup), a later hold's
    // never (rule 2).
    // (A woken sleeping hold's entries from before it slept count as an earlier hold's.)
    if (key->generation > generation || (key->generation == generation && key->batch > resumed_after)) continue;
    self->env_.Spawn(DeleteEntry(alive, self, &store, e.key, is_valid), "alarm entry delete");
  }
}

}  // namespace wk::alarms
