// StorageHistory: the storage invariants of the `storage` scenario (docs/architecture.md,
// invariants 3 and 4), judged from what every acknowledged write and every restore said an
// actor's log was.
//
// The workload's actors keep one key, "log": the comma-separated ids of every write applied
// to the actor, in order. Each write is one batch that appends a fresh, globally unique id
// to it and puts "e/<id>" (empty) beside it. So, per actor:
//   - no acknowledged write lost, history in order: the log each acknowledged write
//     committed, and each restored log, extends the log of the latest acknowledged write
//     (that log is a prefix of it). Acknowledgements come in commit order within a hold, and
//     never from two holds at once, so this holds in the real design;
//   - nothing applied twice: no id appears twice in an acknowledged or a restored log;
//   - consistent state: a restored state's "e/<id>" keys are exactly the ids of its log. A
//     segment that is not on the chain mixed into a restore shows as an entry without its
//     id in the log (or the reverse), even when the log itself looks fine.
// A write that was never acknowledged may or may not appear (its outcome was unknown).
//
// Threading: none of its own; the simulator drives it from its one thread.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace wk::sim {

class StorageHistory {
 public:
  // The ids of a log value ("" is the empty log).
  static std::vector<std::string> SplitLog(std::string_view log);

  // A write whose batch committed `log` was acknowledged durable. Returns what it broke
  // (empty: nothing); the acknowledged log becomes `log` either way, so one fault is
  // reported once.
  std::vector<std::string> OnAcknowledged(const std::string& actor, const std::string& log);

  // A restore of actor produced this log and these "e/<id>" ids. Returns what it broke.
  std::vector<std::string> OnRestored(const std::string& actor, const std::string& log,
                                      const std::set<std::string>& entry_ids) const;

  // The log of the latest acknowledged write ("" if none).
  const std::string& acknowledged(const std::string& actor) const;

 private:
  // What is wrong with `log` as a successor of the acknowledged one: lost or reordered
  // writes, or an id twice. Empty if nothing.
  std::vector<std::string> CheckExtends(const std::string& actor, const std::string& log) const;

  struct Acknowledged {
    std::string log;
    std::set<std::string> ids;  // the ids of log
  };
  std::map<std::string, Acknowledged> acknowledged_;
};

}  // namespace wk::sim
