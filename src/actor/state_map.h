// StateMap: an actor's state as the storage interface shows it — a sorted key-value map,
// the alarm, and the stored size — and the one definition of how a Batch applies to it.
// Both storage implementations (the durable replica and the tests' MemStorage) keep their
// state in one, so they cannot disagree on what a batch means.
//
// Threading: none of its own (a plain value); callers synchronise.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "actor/storage.h"

namespace wk::actor {

// The heap bytes one entry of a StateMap takes with the allocator the binary links
// (jemalloc, whose size classes have no header: src/cli/CMakeLists.txt) and libstdc++,
// 64-bit: the map node with its two std::string objects (96 bytes), plus, for a key or value
// longer than a std::string's 15 inline bytes, its buffer (size + 1, rounded up to jemalloc's
// size class: up to 25 % more, so a 64 KiB value takes 80 KiB). Measured with jemalloc's
// stats.allocated (StateMapAllocatorTest, state_map_allocator_test.cc: exact for 8- and 16-byte
// and 64 KiB values); 8-byte keys and values take 96 bytes (6x what they store).
std::uint64_t EntryMemoryBytes(std::size_t key_bytes, std::size_t value_bytes);

class StateMap {
 public:
  using Entries = std::map<std::string, std::string, std::less<>>;

  std::optional<std::string> Get(std::string_view key) const;
  // Visits the entries of query in order (reverse if asked) until visit returns false.
  void List(const ListQuery& query, const ListVisitor& visit) const;
  std::optional<std::int64_t> alarm() const { return alarm_; }
  // The earlier of the alarm and the wake entry's time (storage.h, kWakeKey).
  std::optional<std::int64_t> indexed_time() const;
  // Keys plus values of the module's entries, in bytes (the system entries not counted).
  std::uint64_t bytes() const { return bytes_; }
  // What the entries, the system entries included, take in memory (EntryMemoryBytes
  // summed): what the node's memory budget counts for this actor's state.
  std::uint64_t memory_bytes() const { return memory_bytes_; }
  const Entries& entries() const { return entries_; }
  // The runtime's own entries (Batch::system): a namespace of their own, which the module's
  // reads, lists and delete_all never reach.
  std::optional<std::string> GetSystem(std::string_view key) const;
  void ListSystem(const ListQuery& query, const ListVisitor& visit) const;
  const Entries& system_entries() const { return system_; }
  std::uint64_t system_bytes() const { return system_bytes_; }

  // Applies every mutation in order, then the alarm change if any, then the system entries.
  void Apply(const Batch& batch);
  void Put(std::string key, std::string value);
  void PutSystem(std::string key, std::string value);
  void set_alarm(std::optional<std::int64_t> alarm) { alarm_ = alarm; }

  friend bool operator==(const StateMap&, const StateMap&) = default;

 private:
  Entries entries_;
  Entries system_;
  std::optional<std::int64_t> alarm_;
  std::uint64_t bytes_ = 0;
  std::uint64_t system_bytes_ = 0;
  std::uint64_t memory_bytes_ = 0;
};

}  // namespace wk::actor
