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

class StateMap {
 public:
  using Entries = std::map<std::string, std::string, std::less<>>;

  std::optional<std::string> Get(std::string_view key) const;
  // Visits the entries of query in order (reverse if asked) until visit returns false.
  void List(const ListQuery& query, const ListVisitor& visit) const;
  std::optional<std::int64_t> alarm() const { return alarm_; }
  // Keys plus values, in bytes.
  std::uint64_t bytes() const { return bytes_; }
  const Entries& entries() const { return entries_; }

  // Applies every mutation in order, then the alarm change if any.
  void Apply(const Batch& batch);
  void Put(std::string key, std::string value);
  void set_alarm(std::optional<std::int64_t> alarm) { alarm_ = alarm; }

  friend bool operator==(const StateMap&, const StateMap&) = default;

 private:
  Entries entries_;
  std::optional<std::int64_t> alarm_;
  std::uint64_t bytes_ = 0;
};

}  // namespace wk::actor
