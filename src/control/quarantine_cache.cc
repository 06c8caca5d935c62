#include "control/quarantine_cache.h"

#include <algorithm>

namespace wk::control {

QuarantineCache::QuarantineCache(Env& env, ObjectStore& store, QuarantineCacheOptions options)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kControl)), options_(options) {}

void PublishQuarantineCacheMetrics(MetricsRegistry& registry, const QuarantineCache& cache) {
  const QuarantineCacheStats& stats = cache.stats();
  const std::string help = "Quarantine checks of actors, by how they were answered.";
  for (const auto& [answer, field] : {std::pair{"cached", &stats.cached}, std::pair{"listed", &stats.listed},
                                      std::pair{"read", &stats.reads}, std::pair{"failed", &stats.read_failures}}) {
    registry.AddCallbackCounter("wasmkeep_quarantine_checks_total", help, [field] { return static_cast<double>(*field); },
                                {{"answer", answer}});
  }
  registry.AddCallbackCounter("wasmkeep_quarantine_listings_total",
                              "LIST requests of quarantine/ this node's quarantine checks sent (docs/security.md)",
                              [&stats] { return static_cast<double>(stats.listings); });
}

namespace {

// Whether `a` is older news than `b` about one actor: b holds every strike of a, and more
// (strikes are only added to a record, until a lift deletes it or the window drops them).
bool OlderNews(const QuarantineRecord& a, const QuarantineRecord& b) {
  if (a.strikes.size() >= b.strikes.size()) return false;
  for (const Strike& s : a.strikes) {
    if (std::find(b.strikes.begin(), b.strikes.end(), s) == b.strikes.end()) return false;
  }
  return true;
}

}  // namespace

bool QuarantineCache::ListingFresh() const {
  if (!listing_) return false;
  if (options_.broken.on(BrokenModel::kQuarantineListingOutlivesTtl)) return true;
  return env_.MonoNow() - listing_->sent_at < options_.ttl;
}

std::optional<std::optional<QuarantineRecord>> QuarantineCache::Known(const std::string& key, bool settle,
                                                                      bool* from_listing) const {
  using Answer = std::optional<QuarantineRecord>;
  *from_listing = false;
  auto it = entries_.find(key);
  const Entry* e = it == entries_.end() ? nullptr : &it->second;
  const bool entry_fresh = e != nullptr && env_.MonoNow() - e->read_at < options_.ttl;
  // The listing is news about this actor only if it was sent after this node learned what it
  // remembers (or forgot) of it: a listing sent earlier may have been answered before a
  // strike of this node landed.
  const bool listing_is_news =
      ListingFresh() && listing_->sent_at > (e != nullptr ? e->learned_at : forgotten_at_);
  if (listing_is_news) {
    auto listed = listing_->versions.find(key);
    if (listed == listing_->versions.end()) {
      *from_listing = true;
      return Answer();  // no record when the listing was sent
    }
    if (e != nullptr && !e->version.empty() && e->version == listed->second) {
      *from_listing = true;
      return e->record;  // unchanged since it was read
    }
    // The record changed since it was read (or was never read here): ask.
    if (!settle || !entry_fresh) return std::nullopt;
  }
  if (entry_fresh) return e->record;
  return std::nullopt;
}

void QuarantineCache::Dropped(const Entry& entry) { forgotten_at_ = std::max(forgotten_at_, entry.learned_at); }

void QuarantineCache::Insert(std::string key, Entry entry) {
  if (auto it = entries_.find(key);
      it != entries_.end() && !options_.broken.on(BrokenModel::kQuarantineCacheKeepsLateAnswer)) {
    Entry& old = it->second;
    // Older news never replaces newer: an answer whose strikes the remembered record holds
    // (and more) is kept out, whenever it arrived.
    if (old.record && entry.record) {
      if (OlderNews(*entry.record, *old.record)) return;
      if (OlderNews(*old.record, *entry.record)) {
        entry.read_at = std::max(entry.read_at, old.read_at);
        entry.learned_at = std::max(entry.learned_at, old.learned_at);
        old = std::move(entry);
        return;
      }
    }
    // An answer to a request sent before the one remembered is kept out. One sent while the
    // remembered answer was on its way may have been answered before or after it: a
    // quarantine remembered is kept then (refused a little longer, never started on a stale
    // answer).
    if (old.read_at > entry.read_at) return;
    if (entry.read_at < old.learned_at) {
      const WallTime now = env_.WallNow();
      const bool old_quarantines = old.record && old.record->QuarantinedAt(now);
      const bool new_quarantines = entry.record && entry.record->QuarantinedAt(now);
      if (old_quarantines && !new_quarantines) return;
    }
  }
  if (entries_.size() >= options_.max_entries && !entries_.contains(key)) {
    const MonoTime now = env_.MonoNow();
    std::erase_if(entries_, [&](const auto& kv) {
      if (now - kv.second.read_at < options_.ttl) return false;
      Dropped(kv.second);
      return true;
    });
    if (entries_.size() >= options_.max_entries) {
      for (const auto& [k, e] : entries_) Dropped(e);
      entries_.clear();
      ++stats_.clears;
    }
  }
  entries_[std::move(key)] = std::move(entry);
}

void QuarantineCache::NoteDemand() {
  if (options_.list_after == 0) return;
  const MonoTime now = env_.MonoNow();
  const std::size_t needed =
      static_cast<std::size_t>(options_.list_after) * std::max<std::size_t>(1, last_listing_pages_);
  while (!demand_.empty() && now - demand_.front() >= options_.ttl) demand_.pop_front();
  demand_.push_back(now);
  while (demand_.size() > needed) demand_.pop_front();
}

bool QuarantineCache::ListingPays() const {
  const MonoTime now = env_.MonoNow();
  if (options_.list_after == 0 || now < no_listing_until_) return false;
  const std::size_t needed =
      static_cast<std::size_t>(options_.list_after) * std::max<std::size_t>(1, last_listing_pages_);
  const auto recent = std::count_if(demand_.begin(), demand_.end(),
                                    [&](MonoTime t) { return now - t < options_.ttl; });
  return static_cast<std::size_t>(recent) >= needed;
}

Task<bool> QuarantineCache::ListRecords() {
  if (listing_in_flight_) {
    // One listing at a time: a burst of starts shares it.
    Latch<bool> done(env_, [] { return false; });
    listing_waiters_.push_back(done);
    co_return co_await done.Wait();
  }
  listing_in_flight_ = true;
  Listing fresh;
  fresh.sent_at = env_.MonoNow();
  bool ok = true;
  std::size_t pages = 0;
  std::string continuation;
  do {
    ListOptions list;
    list.prefix = std::string(kQuarantinePrefix);
    list.continuation = continuation;
    ++pages;
    ++stats_.listings;
    auto page = co_await store_.List(std::move(list), options_.read);
    if (!page.ok()) {
      ok = false;
      break;
    }
    for (ListEntry& e : page->entries) {
      if (!e.key.starts_with(kQuarantinePrefix)) continue;
      fresh.versions.emplace(e.key.substr(kQuarantinePrefix.size()), std::move(e.version));
    }
    continuation = page->next_continuation.value_or("");
    // Too many records to hold: not used, and not tried again for a while (kTooManyPause).
    if (fresh.versions.size() > options_.max_entries) {
      ok = false;
      no_listing_until_ = env_.MonoNow() + kTooManyPause * options_.ttl;
    }
  } while (ok && !continuation.empty());
  last_listing_pages_ = pages;
  if (ok) {
    if (options_.broken.on(BrokenModel::kQuarantineCacheKeepsLateAnswer)) fresh.sent_at = env_.MonoNow();
    if (!listing_ || listing_->sent_at <= fresh.sent_at) listing_ = std::move(fresh);
  } else {
    ++stats_.listing_failures;
  }
  listing_in_flight_ = false;
  std::vector<Latch<bool>> waiters = std::move(listing_waiters_);
  listing_waiters_.clear();
  for (const Latch<bool>& w : waiters) w.Set(ok);
  co_return ok;
}

Task<Result<std::optional<QuarantineRecord>>> QuarantineCache::Check(ActorId actor, QuarantineRead read) {
  using Answer = std::optional<QuarantineRecord>;
  std::string key = actor.ToString();
  // A record answers "quarantined" only until its end, whenever it was read.
  auto answer = [this](const Answer& record) {
    return record && record->QuarantinedAt(env_.WallNow()) ? record : Answer();
  };
  if (read != QuarantineRead::kAlways) {
    bool from_listing = false;
    if (auto known = Known(key, read == QuarantineRead::kNever, &from_listing)) {
      // A start the listing answered counts towards the next one: a node that keeps
      // starting actors keeps listing, once a ttl.
      if (from_listing && read == QuarantineRead::kOnMiss) NoteDemand();
      ++(from_listing ? stats_.listed : stats_.cached);
      co_return answer(*known);
    }
    if (read == QuarantineRead::kNever) {
      ++stats_.cached;
      co_return Answer();
    }
    // Memory cannot answer. A listing under way, or one that pays now (list_after), answers
    // for every actor at once; an actor it shows with a record this node has not read at
    // that version is read below.
    NoteDemand();
    if (listing_in_flight_ || (ListingPays() && !ListingFresh())) {
      if (co_await ListRecords()) {
        if (auto known = Known(key, false, &from_listing)) {
          ++(from_listing ? stats_.listed : stats_.cached);
          co_return answer(*known);
        }
      }
    }
  }
  const MonoTime read_at = env_.MonoNow();
  auto got = co_await ReadQuarantineVersioned(store_, actor, options_.read);
  if (!got.ok()) {
    ++stats_.read_failures;
    co_return got.status();
  }
  ++stats_.reads;
  const bool late_wins = options_.broken.on(BrokenModel::kQuarantineCacheKeepsLateAnswer);
  const MonoTime now = env_.MonoNow();
  Answer result = answer(got->record);
  Insert(key, Entry{late_wins ? now : read_at, now, std::move(got->record), std::move(got->version)});
  // Newer news that arrived first (a strike of this node's) quarantines it: that answer.
  if (auto kept = entries_.find(key); kept != entries_.end()) {
    if (Answer remembered = answer(kept->second.record)) result = std::move(remembered);
  }
  co_return result;
}

std::optional<QuarantineRecord> QuarantineCache::Peek(const ActorId& actor) const {
  bool from_listing = false;
  auto known = Known(actor.ToString(), true, &from_listing);
  if (!known || !*known || !(*known)->QuarantinedAt(env_.WallNow())) return std::nullopt;
  return *known;
}

void QuarantineCache::Remember(const QuarantineRecord& record, std::optional<MonoTime> asked_at) {
  const MonoTime now = env_.MonoNow();
  const bool late_wins = options_.broken.on(BrokenModel::kQuarantineCacheKeepsLateAnswer);
  Entry entry{late_wins ? now : asked_at.value_or(now), now, record, Version()};
  Insert(record.actor.ToString(), std::move(entry));
}

void QuarantineCache::Forget(const ActorId& actor) {
  auto it = entries_.find(actor.ToString());
  if (it == entries_.end()) return;
  Dropped(it->second);
  entries_.erase(it);
}

}  // namespace wk::control
