// StorageHistory: the `storage` scenario's checkers 11-13 (docs/simulation.md, "storage"),
// judged from what every acknowledged write and every restore said an actor's log was.
// Each write is one batch that appends a fresh, globally unique id to the actor's key
// "log" and puts "e/<id>" beside it. The log of the latest acknowledged write must be a
// prefix of every later acknowledged or restored log (nothing lost, history in order); no
// id appears twice; a restored state's "e/<id>" keys are exactly its log's ids (a segment
// off the chain shows here). A write never acknowledged may or may not appear.
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
