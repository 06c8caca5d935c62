// The deterministic simulator's scenarios: several nodes of the real cluster code in one
// process, on one virtual timeline, driven by one seed (docs/architecture.md, "Testing, in
// layers", 3).
//
// A scenario run is a pure function of (scenario, seed, mutant): the same inputs give the
// same history, which RunResult::history_digest summarises so a test can check it.
//
// Threading: single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/broken_models.h"
#include "base/ids.h"

namespace wk::sim {

// The node id every scenario gives slot `slot` ("n0", "n1", ...): each process started in
// a slot, its restarts and its twins run under it.
inline NodeId SlotNodeId(int slot) { return NodeId("n" + std::to_string(slot)); }

struct RunOptions {
  std::uint64_t seed = 0;
  // "" (the real design) or one of Mutants() of the scenario: a deliberately broken model
  // the checkers must catch (a name of base/broken_models.h).
  std::string mutant;
  // The switch `mutant` names. REQUIRES: BrokenModels::Parse(mutant) succeeds (main checks).
  BrokenModels broken() const { return BrokenModels::Parse(mutant).value(); }
  // Keep the last N trace lines for a failure report.
  std::size_t trace_lines = 60;
  // The scale mode of the lease and ownership scenarios (sim/scale.h, docs/scaling.md):
  // `nodes` node slots (0: the scenario's own three) on the S3 bucket model, with kills
  // only, and a scaling report. On with nodes > 0 or s3_limits; off, every history is
  // the scenario's own.
  int nodes = 0;
  bool s3_limits = false;
  // Seconds of the measured window (0: the scale mode's default for the node count).
  int scale_seconds = 0;
  // Scale mode: a liveness failure after healing (checker 7, 7b) is a violation, not only
  // a line of the report.
  bool require_liveness = false;
  bool scaled() const { return nodes > 0 || s3_limits; }
};

struct RunResult {
  bool ok = true;
  std::vector<std::string> violations;  // what broke, first first
  std::vector<std::string> trace;       // the last events before the end
  std::uint64_t history_digest = 0;     // hash of every traced event
  // Coverage, so a report can say what the runs exercised.
  std::uint64_t lease_writes = 0;
  std::uint64_t fences = 0;
  std::uint64_t kills = 0;
  std::uint64_t twins = 0;
  std::uint64_t partitions = 0;
  std::uint64_t outages = 0;
  std::uint64_t lost_leases = 0;
  std::uint64_t lapses = 0;
  std::uint64_t adoptions = 0;
  std::uint64_t clean_stops = 0;
  // the listing (every process's Membership, summed at its end)
  std::uint64_t listings = 0;
  std::uint64_t listing_reads = 0;     // bodies of nodes/ read
  std::uint64_t listing_renewals = 0;  // new versions taken for renewals, not read
  std::uint64_t listing_failures = 0;  // listings that failed (a LIST or a body read refused)
  double listing_seconds = 0;          // the listings' durations, summed
  // The scale mode's report (sim/scale.h): printed after each seed; `scale_row` is its
  // one-line summary (scripts/scale.sh collects them).
  std::string scale_report;
  std::string scale_row;
  // ownership scenario
  std::uint64_t acquire_attempts = 0;
  std::uint64_t acquisitions = 0;  // owner records that landed naming a node
  std::uint64_t holds = 0;         // acquisitions a workload got back as holds
  std::uint64_t pending_releases = 0;
  std::uint64_t drains = 0;
  std::uint64_t deleted_heartbeats = 0;
  // storage scenario
  std::uint64_t writes = 0;              // batches committed
  std::uint64_t acked_writes = 0;        // WhenReleasable said Ok
  std::uint64_t restores = 0;            // Replica::Open succeeded
  std::uint64_t restore_failures = 0;    // Replica::Open failed (transient; kFatal is a violation)
  std::uint64_t segments = 0;            // segment PUTs that landed (fences included)
  std::uint64_t snapshots = 0;           // snapshot PUTs that landed
  std::uint64_t gc_deletes = 0;          // deletes garbage collection sent
  std::uint64_t late_uploads = 0;        // replicas failed by a Late upload
  std::uint64_t off_chain_segments = 0;  // segments that landed after a later hold restored
  std::uint64_t replica_failures = 0;    // replicas failed (upload failed, unknown or Late)
  std::uint64_t cuts = 0;                // replicas cut because their hold ended
  std::uint64_t upload_kills = 0;        // processes killed with a segment upload in flight
  std::uint64_t moves = 0;               // holds released under their replica
  // routing scenario
  std::uint64_t freezes = 0;        // nodes frozen past their lease, then resumed
  std::uint64_t appends = 0;        // appends clients sent
  std::uint64_t acked_appends = 0;  // appends answered 200
  std::uint64_t reads = 0;          // reads clients sent
  std::uint64_t ok_reads = 0;       // reads answered 200
  std::uint64_t keyed_retries = 0;  // keyed appends sent again with their Idempotency-Key
  // move scenario (moves and drains count in `moves` and `drains`)
  std::uint64_t moved = 0;          // hand-overs whose target took the actor
  // combined scenario: the operators' requests in the bucket (operators.h)
  std::uint64_t drain_requests = 0;    // control/drain/ requests sent
  std::uint64_t drained_restarts = 0;  // nodes killed or stopped while their drain request stood
  std::uint64_t move_requests = 0;     // control/move/ requests sent (balances' included)
  std::uint64_t balances = 0;          // `cluster balance` runs
  // alarms scenario
  std::uint64_t alarm_sets = 0;             // sets clients sent
  std::uint64_t alarm_acked_sets = 0;       // sets answered 200
  std::uint64_t alarm_runs = 0;             // handler runs (in memory, on any node)
  std::uint64_t alarm_failed_runs = 0;      // handler runs that failed (retried)
  std::uint64_t alarm_fired = 0;            // fired records in the actors' durable logs
  std::uint64_t alarm_given_up = 0;         // alarms cleared after their last attempt failed
  std::uint64_t alarm_lost = 0;             // alarms never fired (violations)
  std::uint64_t alarm_handovers = 0;        // hand-overs received
  std::uint64_t alarm_entries_deleted = 0;  // index entry deletes sent
  // combined scenario: poisoned actors (poison_clients.h)
  std::uint64_t poison_arms = 0;   // alarm sets sent to poison actors
  std::uint64_t poison_hits = 0;   // poisoned requests sent
  std::uint64_t quarantines = 0;   // quarantine records that landed quarantining an actor
  // restores and forks (history_operators.h)
  std::uint64_t history_changes = 0;       // restores and forks asked
  std::uint64_t history_restores = 0;      // restores made
  std::uint64_t history_forks = 0;         // forks made
  std::uint64_t history_reads = 0;         // sampled history and state reads answered (H3)
  std::uint64_t history_judged_reads = 0;  // restore actors' reads judged by H2 (serving)
  // messages between actors (message_clients.h)
  std::uint64_t message_sends = 0;        // sends clients asked for
  std::uint64_t message_acked_sends = 0;  // answered 200
  std::uint64_t message_applied = 0;      // messages in the receivers' durable state at the end
  // WebSockets (socket_clients.h)
  std::uint64_t socket_connections = 0;  // connections opened (a 101 received)
  std::uint64_t socket_received = 0;     // messages clients received, each judged by S1 and S2
  // class versions (version_clients.h)
  std::uint64_t version_deploys = 0;  // versions the operator deployed
  std::uint64_t version_answers = 0;  // ledger answers judged by V5 (and V3, V6 for appends)
  std::uint64_t migrations = 0;       // migrations in the ledgers' final states (V1)
};

// A broken model a scenario's checkers must catch within seeds first_seed ..
// first_seed + seeds - 1 (what the test suite runs: `sim.<scenario>.mutant.<name>`).
struct Mutant {
  std::string name;
  std::uint64_t first_seed = 1;
  std::uint64_t seeds = 200;
};

struct Scenario {
  std::string name;
  std::string description;
  std::vector<Mutant> mutants;
  RunResult (*run)(const RunOptions&);
};

// Every scenario, in a fixed order: the one registry (sim/scenarios.cc). The test suite's
// mutant rows are generated from it (`wasmkeep-sim --list-mutants`).
const std::vector<Scenario>& Scenarios();

// The node lease scenario (ADR 0020 §1, §2, §5).
RunResult RunLeaseScenario(const RunOptions& options);
// The ownership scenario (ADR 0020 §3, §4): the lease scenario plus actors.
RunResult RunOwnershipScenario(const RunOptions& options);
// The storage scenario (docs/architecture.md, "How a write flows"): the ownership scenario with a
// durable replica writing on every hold.
RunResult RunStorageScenario(const RunOptions& options);
// The routing scenario (docs/architecture.md, "How a request flows"): the front, the forwarder,
// ownership and the durable replica of 3 nodes end to end, clients checking linearizability
// (sim/routing_scenario.cc).
RunResult RunRoutingScenario(const RunOptions& options);
// The messages scenario (docs/messages.md): mail actors sending round a ring and in
// fan-outs on 3 nodes, with moves, drains and the serving faults (sim/messages_scenario.cc).
RunResult RunMessagesScenario(const RunOptions& options);
// The move scenario (docs/architecture.md, "Drain and move"): the routing scenario with
// actors moved between nodes and nodes drained, racing kills, frozen nodes and lost
// replies; never two owners, no acknowledged write lost, a drain ends only with nothing
// pending (sim/routing_scenario.cc).
RunResult RunMoveScenario(const RunOptions& options);
// The alarms scenario (docs/alarms.md): the routing scenario's nodes with the alarm index,
// delivery and shard scanning; clients set, delete and read alarms (sim/alarms_scenario.cc).
RunResult RunAlarmsScenario(const RunOptions& options);
// The combined scenario (issue 34): the routing, alarms and move scenarios' workloads and
// checkers at once, with drains and moves requested through the bucket and drained nodes
// restarted (sim/combined_scenario.cc).
RunResult RunCombinedScenario(const RunOptions& options);

}  // namespace wk::sim
