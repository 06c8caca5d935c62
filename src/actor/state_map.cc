#include "actor/state_map.h"

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

constexpr std::uint64_t kNodeBytes = 112;
constexpr std::size_t kInlineStringBytes = 15;

std::uint64_t BufferBytes(std::size_t n) {
  if (n <= kInlineStringBytes) return 0;
  const std::uint64_t chunk = (static_cast<std::uint64_t>(n) + 1 + 8 + 15) / 16 * 16;
  return chunk < 32 ? 32 : chunk;
}

}  // namespace

std::uint64_t EntryMemoryBytes(std::size_t key_bytes, std::size_t value_bytes) {
  return kNodeBytes + BufferBytes(key_bytes) + BufferBytes(value_bytes);
}

std::optional<std::string> StateMap::Get(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void StateMap::List(const ListQuery& q, const ListVisitor& visit) const {
  const std::string end = q.prefix ? PrefixEnd(q.start) : q.end;
  auto lo = entries_.lower_bound(q.start);
  auto hi = end.empty() ? entries_.end() : entries_.lower_bound(end);
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
        entries_.clear();
        bytes_ = 0;
        memory_bytes_ = 0;
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
}

}  // namespace wk::actor
