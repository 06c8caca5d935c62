// StorageHistory: the `storage` scenario's checkers 11-13 (docs/simulation.md, "storage"),
// judged from what every acknowledged write and every restore said an actor's log was.
// Each write is one batch that appends a fresh, globally unique id to the actor's key
// "log" and puts "e/<id>" beside it. The log of the latest acknowledged write must be a
// prefix of every later acknowledged or restored log (nothing lost, history in order); no
// id appears twice; a restored state's "e/<id>" keys are exactly its log's ids (a segment
// off the chain shows here). A write never acknowledged may or may not appear. A restore or
// fork replaces the log (its batch puts the whole state of a point); the history then goes on
// from the replaced log (OnReplacementLanded, OnReplacementAcknowledged).
//
// Threading: none of its own; the simulator drives it from its one thread.
#pragma once

#include <cstdint>
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

  // Restores and forks (H2, docs/simulation.md): a batch replacing actor's state with `log`
  // landed. Until the next acknowledgement, a later log may extend it instead of the
  // acknowledged one (a restore whose answer was lost may still have taken effect).
  void OnReplacementLanded(const std::string& actor, const std::string& log);
  // A restore or fork of actor, asked for when acks() was issued_at, was acknowledged with
  // `log` (the point's state, checked by H1): from now on every later log extends it (or a
  // write acknowledged since that extends it), and no write among the first issued_at
  // acknowledgements that the point does not hold comes back (H2).
  void OnReplacementAcknowledged(const std::string& actor, const std::string& log, std::uint64_t issued_at);
  // Acknowledgements so far (every actor's).
  std::uint64_t acks() const { return acks_; }

 private:
  // What is wrong with `log` as a successor of the acknowledged one: lost or reordered
  // writes, or an id twice. Empty if nothing.
  std::vector<std::string> CheckExtends(const std::string& actor, const std::string& log) const;

  struct Acknowledged {
    std::string log;
    std::set<std::string> ids;  // the ids of log
    // Replacements that landed since `log` was acknowledged: a later log may extend one.
    std::vector<std::string> replacements;
    std::uint64_t acked_at = 0;                        // acks() when `log` was acknowledged
    std::map<std::string, std::uint64_t> first_acked;  // each id's first acknowledgement
    std::set<std::string> wiped;  // acknowledged before the last acknowledged restore, not in its point
  };
  std::map<std::string, Acknowledged> acknowledged_;
  std::uint64_t acks_ = 0;
};

}  // namespace wk::sim
