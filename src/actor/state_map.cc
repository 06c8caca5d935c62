#include "actor/state_map.h"

#include <algorithm>

namespace wk::actor {

bool InQuery(const ListQuery& q, std::string_view key) {
  if (q.prefix) return key.starts_with(q.start);
  return key >= q.start && (q.end.empty() || key < q.end);
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) != 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return end;  // every byte 0xff (or empty prefix): no upper bound
}

namespace {

// libstdc++'s map node for a pair of std::string: the tree links (32) and the two strings
// (32 each), a jemalloc size class of its own.
constexpr std::uint64_t kNodeBytes = 96;
constexpr std::size_t kInlineStringBytes = 15;

// What jemalloc (5.3, 64-bit, 4 KiB pages; the allocator the wasmkeep binary links) hands
// out for a request of n bytes: its size class. 8 and 16, then four classes per doubling
// (32..128 by 16, 160..256 by 32, ... 64 KiB, 80 KiB, 96 KiB, 112 KiB, 128 KiB, 160 KiB, ...).
std::uint64_t SizeClass(std::uint64_t n) {
  if (n <= 8) return 8;
  if (n <= 128) return (n + 15) / 16 * 16;
  const int lg = 63 - __builtin_clzll(n - 1);  // 2^lg < n <= 2^(lg + 1)
  const std::uint64_t delta = std::uint64_t{1} << (lg - 2);
  return (n + delta - 1) / delta * delta;
}

// A string longer than its inline buffer allocates size + 1 (its terminator).
std::uint64_t BufferBytes(std::size_t n) { return n <= kInlineStringBytes ? 0 : SizeClass(n + 1); }

}  // namespace

std::uint64_t EntryMemoryBytes(std::size_t key_bytes, std::size_t value_bytes) {
  return kNodeBytes + BufferBytes(key_bytes) + BufferBytes(value_bytes);
}

std::optional<std::string> StateMap::Get(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

namespace {

void ListEntries(const StateMap::Entries& entries, const ListQuery& q, const ListVisitor& visit) {
  const std::string end = q.prefix ? PrefixEnd(q.start) : q.end;
  auto lo = entries.lower_bound(q.start);
  auto hi = end.empty() ? entries.end() : entries.lower_bound(end);
  if (!q.reverse) {
    for (auto it = lo; it != hi; ++it) {
      if (!visit(it->first, it->second)) return;
    }
  } else {
    for (auto it = hi; it != lo;) {
      --it;
      if (!visit(it->first, it->second)) return;
    }
  }
}

}  // namespace

void StateMap::List(const ListQuery& q, const ListVisitor& visit) const { ListEntries(entries_, q, visit); }

std::optional<std::string> StateMap::GetSystem(std::string_view key) const {
  auto it = system_.find(key);
  if (it == system_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::int64_t> ParseWake(std::optional<std::string_view> value) {
  if (!value || value->empty() || value->size() > 18) return std::nullopt;  // no overflow
  std::int64_t ms = 0;
  for (const char c : *value) {
    if (c < '0' || c > '9') return std::nullopt;
    ms = ms * 10 + (c - '0');
  }
  return ms;
}

std::uint32_t ParseClassVersion(std::optional<std::string_view> value) {
  if (!value || value->empty() || value->size() > 9) return 0;
  std::uint32_t v = 0;
  for (const char c : *value) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return v;
}

std::string EncodeWake(std::int64_t wake_ms) { return std::to_string(std::max<std::int64_t>(0, wake_ms)); }

std::optional<std::int64_t> IndexedTime(std::optional<std::int64_t> alarm, std::optional<std::int64_t> wake) {
  if (!alarm) return wake;
  if (!wake) return alarm;
  return std::min(*alarm, *wake);
}

bool ChangesIndexedTime(const Batch& batch) {
  if (batch.alarm.has_value()) return true;
  return std::any_of(batch.system.begin(), batch.system.end(), [](const Mutation& m) { return m.key == kWakeKey; });
}

std::optional<std::int64_t> StateMap::indexed_time() const {
  auto it = system_.find(kWakeKey);
  return IndexedTime(alarm_, it == system_.end() ? std::nullopt : ParseWake(std::string_view(it->second)));
}

void StateMap::ListSystem(const ListQuery& q, const ListVisitor& visit) const { ListEntries(system_, q, visit); }

void StateMap::PutSystem(std::string key, std::string value) {
  auto it = system_.find(key);
  if (it != system_.end()) {
    system_bytes_ += value.size();
    system_bytes_ -= it->second.size();
    memory_bytes_ -= EntryMemoryBytes(it->first.size(), it->second.size());
    memory_bytes_ += EntryMemoryBytes(it->first.size(), value.size());
    it->second = std::move(value);
  } else {
    system_bytes_ += key.size() + value.size();
    memory_bytes_ += EntryMemoryBytes(key.size(), value.size());
    system_.emplace(std::move(key), std::move(value));
  }
}

void StateMap::Put(std::string key, std::string value) {
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    bytes_ -= it->second.size();
    bytes_ += value.size();
    memory_bytes_ -= EntryMemoryBytes(it->first.size(), it->second.size());
    memory_bytes_ += EntryMemoryBytes(it->first.size(), value.size());
    it->second = std::move(value);
  } else {
    bytes_ += key.size() + value.size();
    memory_bytes_ += EntryMemoryBytes(key.size(), value.size());
    entries_.emplace(std::move(key), std::move(value));
  }
}

void StateMap::Apply(const Batch& batch) {
  for (const Mutation& m : batch.mutations) {
    switch (m.kind) {
      case Mutation::Kind::kDeleteAll:
        for (const auto& [k, v] : entries_) memory_bytes_ -= EntryMemoryBytes(k.size(), v.size());
        entries_.clear();
        bytes_ = 0;
        break;
      case Mutation::Kind::kDelete: {
        auto it = entries_.find(m.key);
        if (it != entries_.end()) {
          bytes_ -= it->first.size() + it->second.size();
          memory_bytes_ -= EntryMemoryBytes(it->first.size(), it->second.size());
          entries_.erase(it);
        }
        break;
      }
      case Mutation::Kind::kPut:
        Put(m.key, m.value);
        break;
    }
  }
  if (batch.alarm.has_value()) alarm_ = *batch.alarm;
  for (const Mutation& m : batch.system) {
    if (m.kind == Mutation::Kind::kPut) {
      PutSystem(m.key, m.value);
    } else if (m.kind == Mutation::Kind::kDelete) {
      auto it = system_.find(m.key);
      if (it != system_.end()) {
        system_bytes_ -= it->first.size() + it->second.size();
        memory_bytes_ -= EntryMemoryBytes(it->first.size(), it->second.size());
        system_.erase(it);
      }
    }
  }
}

}  // namespace wk::actor
