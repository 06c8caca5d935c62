#include "actor/txn.h"

#include <fmt/format.h>

namespace wk::actor {

EventTxn::EventTxn(const ActorStorage& storage, const ActorLimits& limits, StoredQuotaScope quota)
    : storage_(storage),
      limits_(limits),
      stored_bytes_(storage.StoredBytes()),
      quota_(std::move(quota)),
      base_(stored_bytes_) {}

EventTxn::~EventTxn() {
  if (quota_.tenants == nullptr) return;
  // An event that took no writes changed nothing: no look at the storage (its size is behind
  // a lock) for the common read-only event.
  if (!took_writes_) {
    quota_.tenants->Settle(quota_.tenant, reserved_, 0);
    return;
  }
  const std::uint64_t now = storage_.StoredBytes();
  quota_.tenants->Settle(quota_.tenant, reserved_, static_cast<std::int64_t>(now) - static_cast<std::int64_t>(base_));
}

Status EventTxn::CheckKey(std::string_view what, std::string_view key) const {
  if (key.empty()) return InvalidArgument(fmt::format("{}: the key is empty", what));
  if (key.size() > limits_.max_key_bytes) {
    return InvalidArgument(fmt::format("{}: the key is {} bytes, over the limit max_key_bytes = {}", what,
                                       key.size(), limits_.max_key_bytes));
  }
  return Status::Ok();
}

std::optional<std::string> EventTxn::Get(std::string_view key) const {
  auto it = writes_.find(key);
  if (it != writes_.end()) return it->second;
  if (cleared_) return std::nullopt;
  return storage_.Get(key);
}

bool EventTxn::Delete(std::string_view key) {
  auto old = Get(key);
  if (old.has_value()) stored_bytes_ -= key.size() + old->size();
  auto it = writes_.find(key);
  if (it != writes_.end()) {
    it->second.reset();
  } else {
    writes_.emplace(std::string(key), std::nullopt);
  }
  return old.has_value();
}

Status EventTxn::Put(std::string_view key, std::string_view value) {
  if (value.size() > limits_.max_value_bytes) {
    return InvalidArgument(fmt::format("storage_put: the value is {} bytes, over the limit max_value_bytes = {}",
                                       value.size(), limits_.max_value_bytes));
  }
  auto old = Get(key);
  const std::uint64_t before = old ? key.size() + old->size() : 0;
  const std::uint64_t after = stored_bytes_ - before + key.size() + value.size();
  if (after > limits_.max_stored_bytes) {
    return InvalidArgument(fmt::format(
        "storage_put: the actor would store {} bytes, over the limit max_stored_bytes = {}", after,
        limits_.max_stored_bytes));
  }
  if (quota_.tenants != nullptr && after > base_ && after - base_ > reserved_) {
    // Reserved before it is the event's, so events of the tenant on other workers see it.
    if (Status s = quota_.tenants->Reserve(quota_.tenant, after - base_ - reserved_, "storage_put"); !s.ok()) return s;
    reserved_ = after - base_;
  }
  stored_bytes_ = after;
  auto it = writes_.find(key);
  if (it != writes_.end()) {
    it->second = std::string(value);
  } else {
    writes_.emplace(std::string(key), std::string(value));
  }
  return Status::Ok();
}

void EventTxn::DeleteAll() {
  writes_.clear();
  cleared_ = true;
  stored_bytes_ = 0;
}

std::optional<std::int64_t> EventTxn::Alarm() const {
  if (alarm_.has_value()) return *alarm_;
  return storage_.Alarm();
}

void EventTxn::List(const ListQuery& q, std::uint32_t limit, const ListVisitor& visit) const {
  // Merge the committed entries (pushed by the storage) with this event's writes (pulled
  // from writes_), in the query's direction. An own write shadows the committed entry.
  const std::string end = q.prefix ? PrefixEnd(q.start) : q.end;
  auto lo = writes_.lower_bound(q.start);
  auto hi = end.empty() ? writes_.end() : writes_.lower_bound(end);
  std::uint32_t emitted = 0;
  bool stopped = false;
  auto emit = [&](std::string_view k, std::string_view v) {
    if (stopped) return false;
    if (!visit(k, v) || (limit != 0 && ++emitted >= limit)) stopped = true;
    return !stopped;
  };
  // Own writes not yet emitted, as [next, stop) forward or (stop, next] backward.
  auto fwd = lo;
  auto bwd = hi;
  auto own_before = [&](std::string_view committed_key) {
    // Emits own writes that come before `committed_key` in the query's direction.
    if (!q.reverse) {
      for (; fwd != hi && fwd->first < committed_key; ++fwd) {
        if (fwd->second && !emit(fwd->first, *fwd->second)) return false;
      }
    } else {
      while (bwd != lo) {
        auto prev = std::prev(bwd);
        if (!(prev->first > committed_key)) break;
        bwd = prev;
        if (prev->second && !emit(prev->first, *prev->second)) return false;
      }
    }
    return true;
  };
  if (!cleared_) {
    storage_.List(q, [&](std::string_view k, std::string_view v) {
      if (!own_before(k)) return false;
      auto own = writes_.find(k);
      if (own != writes_.end()) {
        // Consume it from the pending own writes (it is the next one in order).
        if (!q.reverse) {
          ++fwd;
        } else {
          bwd = own;
        }
        if (own->second) return emit(k, *own->second);
        return true;  // deleted by this event
      }
      return emit(k, v);
    });
  }
  if (stopped) return;
  if (!q.reverse) {
    for (; fwd != hi; ++fwd) {
      if (fwd->second && !emit(fwd->first, *fwd->second)) return;
    }
  } else {
    while (bwd != lo) {
      --bwd;
      if (bwd->second && !emit(bwd->first, *bwd->second)) return;
    }
  }
}

Batch EventTxn::TakeBatch() {
  Batch b;
  if (cleared_) b.mutations.push_back({Mutation::Kind::kDeleteAll, {}, {}});
  for (auto& [k, v] : writes_) {
    if (v) {
      b.mutations.push_back({Mutation::Kind::kPut, k, std::move(*v)});
    } else {
      b.mutations.push_back({Mutation::Kind::kDelete, k, {}});
    }
  }
  b.alarm = alarm_;
  if (!b.mutations.empty()) took_writes_ = true;
  writes_.clear();
  cleared_ = false;
  alarm_.reset();
  return b;
}

}  // namespace wk::actor
