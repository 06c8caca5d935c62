// wasmkeep-sim: runs the deterministic simulator's scenarios over many seeds.
//
//   wasmkeep-sim --scenario lease|ownership|storage|routing|move|alarms|combined|all --seeds N [--first-seed S] [--mutant NAME] [--expect-failure]
//                [--quiet] [--trace LINES] [--digest]
//   wasmkeep-sim --scenario lease|ownership --nodes N [--s3-limits] [--scale-seconds S] [--require-liveness] --seeds 1
//   wasmkeep-sim --list-mutants
// --nodes N (or --s3-limits, at three nodes) runs the scale mode of the lease and ownership
// scenarios (sim/scale.h, docs/scaling.md): N nodes on the S3 bucket model, kills only, and
// a scaling report per seed; --scale-seconds sets its measured window; with
// --require-liveness a view that did not converge after healing fails the seed.
// --list-mutants prints the registry's mutants (sim/scenarios.cc), one a line:
// "<scenario> <mutant> <first seed> <seeds>", the seeds it must be caught within; the test
// suite's rows are made from it (sim/mutant_tests.cmake).
// --trace LINES keeps that many trace lines and prints them for passing seeds too.
// --digest prints each seed's history digest (RunResult::history_digest), so that a
// refactoring can show that it left every history unchanged.
//
// Exit 0 when every seed passes (or, with --expect-failure, when a mutant is caught);
// otherwise non-zero, with the failing seed, the violation and the trace that led to it.
// Replay one failing seed with --first-seed S --seeds 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/log.h"
#include "scenario.h"

int main(int argc, char** argv) {
  using namespace wk::sim;
  std::string scenario = "all", mutant;
  std::uint64_t seeds = 200, first = 1, trace_lines = 60;
  bool expect_failure = false, quiet = false, print_trace = false, print_digest = false;
  int nodes = 0, scale_seconds = 0;
  bool s3_limits = false, require_liveness = false;
  // The nodes' own log lines would drown the report; the trace says what happened.
  wk::log::SetLevel(wk::log::Level::kOff);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "wasmkeep-sim: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--scenario") scenario = next();
      else if (a == "--seeds") seeds = std::stoull(next());
      else if (a == "--first-seed") first = std::stoull(next());
      else if (a == "--mutant") mutant = next();
      else if (a == "--trace") {
        trace_lines = std::stoull(next());
        print_trace = true;
      }
      else if (a == "--expect-failure") expect_failure = true;
      else if (a == "--quiet") quiet = true;
      else if (a == "--digest") print_digest = true;
      else if (a == "--nodes") {
        nodes = std::stoi(next());
        if (nodes < 2 || nodes > 100000) {
          std::fprintf(stderr, "wasmkeep-sim: --nodes takes 2 to 100000\n");
          return 2;
        }
      }
      else if (a == "--s3-limits") s3_limits = true;
      else if (a == "--scale-seconds") scale_seconds = std::stoi(next());
      else if (a == "--require-liveness") require_liveness = true;
      else if (a == "--verbose") wk::log::SetLevel(wk::log::Level::kInfo);
      else if (a == "--list-mutants") {
        for (const auto& sc : Scenarios())
          for (const auto& m : sc.mutants)
            std::printf("%s %s %llu %llu\n", sc.name.c_str(), m.name.c_str(),
                        static_cast<unsigned long long>(m.first_seed), static_cast<unsigned long long>(m.seeds));
        return 0;
      }
      else {
        std::fprintf(stderr,
                     "usage: wasmkeep-sim --scenario NAME|all --seeds N [--first-seed S] [--mutant NAME] "
                     "[--expect-failure] [--quiet] [--trace LINES] [--digest] [--nodes N] [--s3-limits] "
                     "[--scale-seconds S] [--require-liveness] | --list-mutants\n");
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "wasmkeep-sim: %s needs a number\n", a.c_str());
      return 2;
    }
  }
  bool found = false;
  int exit_code = 0;
  for (const auto& sc : Scenarios()) {
    if (scenario != "all" && scenario != sc.name) continue;
    const bool scaled = nodes > 0 || s3_limits;
    if (scaled && sc.name != "lease" && sc.name != "ownership") {
      if (scenario == "all") continue;
      std::fprintf(stderr, "wasmkeep-sim: --nodes and --s3-limits run the lease and ownership scenarios only\n");
      return 2;
    }
    found = true;
    if (!mutant.empty()) {
      if (auto parsed = wk::BrokenModels::Parse(mutant); !parsed.ok()) {
        std::fprintf(stderr, "wasmkeep-sim: %s\n", parsed.status().message().c_str());
        return 2;
      }
      bool known = false;
      for (const auto& m : sc.mutants) known |= m.name == mutant;
      if (!known) {
        std::fprintf(stderr, "wasmkeep-sim: scenario %s has no mutant '%s'\n", sc.name.c_str(), mutant.c_str());
        return 2;
      }
    }
    RunResult total;
    auto start = std::chrono::steady_clock::now();
    std::uint64_t ran = 0, failed_seed = 0;
    RunResult failure;
    for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
      RunOptions options;
      options.seed = seed;
      options.mutant = mutant;
      options.trace_lines = trace_lines;
      options.nodes = nodes;
      options.s3_limits = s3_limits;
      options.scale_seconds = scale_seconds;
      options.require_liveness = require_liveness;
      RunResult r = sc.run(options);
      if (!r.scale_report.empty()) {
        std::printf("%s%s\n", r.scale_report.c_str(), r.scale_row.c_str());
        std::fflush(stdout);
      }
      ++ran;
      if (print_digest) {
        std::printf("seed %llu digest %016llx\n", static_cast<unsigned long long>(seed),
                    static_cast<unsigned long long>(r.history_digest));
      }
      if (print_trace && r.ok) {
        std::printf("seed %llu trace (last %zu events):\n", static_cast<unsigned long long>(seed), r.trace.size());
        for (const auto& t : r.trace) std::printf("    %s\n", t.c_str());
      }
      total.lease_writes += r.lease_writes;
      total.fences += r.fences;
      total.kills += r.kills;
      total.twins += r.twins;
      total.partitions += r.partitions;
      total.outages += r.outages;
      total.lost_leases += r.lost_leases;
      total.lapses += r.lapses;
      total.adoptions += r.adoptions;
      total.clean_stops += r.clean_stops;
      total.listings += r.listings;
      total.listing_reads += r.listing_reads;
      total.listing_renewals += r.listing_renewals;
      total.acquire_attempts += r.acquire_attempts;
      total.acquisitions += r.acquisitions;
      total.holds += r.holds;
      total.pending_releases += r.pending_releases;
      total.drains += r.drains;
      total.deleted_heartbeats += r.deleted_heartbeats;
      total.writes += r.writes;
      total.acked_writes += r.acked_writes;
      total.restores += r.restores;
      total.restore_failures += r.restore_failures;
      total.segments += r.segments;
      total.snapshots += r.snapshots;
      total.gc_deletes += r.gc_deletes;
      total.late_uploads += r.late_uploads;
      total.off_chain_segments += r.off_chain_segments;
      total.replica_failures += r.replica_failures;
      total.cuts += r.cuts;
      total.upload_kills += r.upload_kills;
      total.moves += r.moves;
      total.freezes += r.freezes;
      total.appends += r.appends;
      total.acked_appends += r.acked_appends;
      total.reads += r.reads;
      total.ok_reads += r.ok_reads;
      total.keyed_retries += r.keyed_retries;
      total.moved += r.moved;
      total.drain_requests += r.drain_requests;
      total.drained_restarts += r.drained_restarts;
      total.move_requests += r.move_requests;
      total.balances += r.balances;
      total.alarm_sets += r.alarm_sets;
      total.alarm_acked_sets += r.alarm_acked_sets;
      total.alarm_runs += r.alarm_runs;
      total.alarm_failed_runs += r.alarm_failed_runs;
      total.alarm_fired += r.alarm_fired;
      total.alarm_given_up += r.alarm_given_up;
      total.alarm_lost += r.alarm_lost;
      total.alarm_handovers += r.alarm_handovers;
      total.alarm_entries_deleted += r.alarm_entries_deleted;
      total.poison_arms += r.poison_arms;
      total.poison_hits += r.poison_hits;
      total.message_sends += r.message_sends;
      total.message_acked_sends += r.message_acked_sends;
      total.message_applied += r.message_applied;
      total.socket_connections += r.socket_connections;
      total.socket_received += r.socket_received;
      total.version_deploys += r.version_deploys;
      total.version_answers += r.version_answers;
      total.migrations += r.migrations;
      total.quarantines += r.quarantines;
      total.history_changes += r.history_changes;
      total.history_restores += r.history_restores;
      total.history_forks += r.history_forks;
      total.history_reads += r.history_reads;
      total.history_judged_reads += r.history_judged_reads;
      if (!r.ok) {
        failed_seed = seed;
        failure = std::move(r);
        break;
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("scenario %s%s: %llu seeds from %llu in %.1f s (%.1f seeds/s): %llu lease writes, %llu fences, "
                "%llu kills, %llu twins, %llu partitions, %llu outages, %llu clean stops, %llu lost leases, "
                "%llu lapses, %llu adoptions\n",
                sc.name.c_str(), mutant.empty() ? "" : (" --mutant " + mutant).c_str(),
                static_cast<unsigned long long>(ran), static_cast<unsigned long long>(first), secs,
                static_cast<double>(ran) / secs, static_cast<unsigned long long>(total.lease_writes),
                static_cast<unsigned long long>(total.fences), static_cast<unsigned long long>(total.kills),
                static_cast<unsigned long long>(total.twins), static_cast<unsigned long long>(total.partitions),
                static_cast<unsigned long long>(total.outages), static_cast<unsigned long long>(total.clean_stops),
                static_cast<unsigned long long>(total.lost_leases), static_cast<unsigned long long>(total.lapses),
                static_cast<unsigned long long>(total.adoptions));
    if (total.listings > 0) {
      std::printf("  listing: %llu listings, %llu bodies read (%.2f per listing), %llu renewals taken unread\n",
                  static_cast<unsigned long long>(total.listings), static_cast<unsigned long long>(total.listing_reads),
                  static_cast<double>(total.listing_reads) / static_cast<double>(total.listings),
                  static_cast<unsigned long long>(total.listing_renewals));
    }
    if (total.acquire_attempts > 0) {
      std::printf("  ownership: %llu acquire attempts, %llu acquisitions landed, %llu holds, %llu releases parked, "
                  "%llu drains, %llu heartbeats deleted\n",
                  static_cast<unsigned long long>(total.acquire_attempts), static_cast<unsigned long long>(total.acquisitions),
                  static_cast<unsigned long long>(total.holds), static_cast<unsigned long long>(total.pending_releases),
                  static_cast<unsigned long long>(total.drains), static_cast<unsigned long long>(total.deleted_heartbeats));
    }
    if (total.writes > 0) {
      using ull = unsigned long long;
      std::printf("  storage: %llu writes, %llu acknowledged, %llu restores (%llu failed), %llu segments landed, "
                  "%llu snapshots, %llu gc deletes, %llu late uploads, %llu off-chain segments, %llu replica failures, "
                  "%llu cuts, %llu kills mid-upload, %llu moves\n",
                  static_cast<ull>(total.writes), static_cast<ull>(total.acked_writes), static_cast<ull>(total.restores),
                  static_cast<ull>(total.restore_failures), static_cast<ull>(total.segments),
                  static_cast<ull>(total.snapshots), static_cast<ull>(total.gc_deletes),
                  static_cast<ull>(total.late_uploads), static_cast<ull>(total.off_chain_segments),
                  static_cast<ull>(total.replica_failures), static_cast<ull>(total.cuts),
                  static_cast<ull>(total.upload_kills), static_cast<ull>(total.moves));
    }
    if (total.appends > 0) {
      using ull = unsigned long long;
      std::printf("  routing: %llu appends sent (%llu acknowledged, %llu keyed retries), %llu reads sent (%llu answered), "
                  "%llu freezes\n",
                  static_cast<ull>(total.appends), static_cast<ull>(total.acked_appends),
                  static_cast<ull>(total.keyed_retries), static_cast<ull>(total.reads), static_cast<ull>(total.ok_reads),
                  static_cast<ull>(total.freezes));
    }
    if (sc.name == "move" || sc.name == "combined") {
      using ull = unsigned long long;
      std::printf("  move: %llu moves (%llu taken by their target), %llu drains reported drained\n",
                  static_cast<ull>(total.moves), static_cast<ull>(total.moved), static_cast<ull>(total.drains));
    }
    if (total.drain_requests + total.move_requests > 0) {
      using ull = unsigned long long;
      std::printf("  operators: %llu drain requests, %llu drained nodes restarted, %llu move requests, %llu balances, "
                  "%llu heartbeats deleted\n",
                  static_cast<ull>(total.drain_requests), static_cast<ull>(total.drained_restarts),
                  static_cast<ull>(total.move_requests), static_cast<ull>(total.balances),
                  static_cast<ull>(total.deleted_heartbeats));
    }
    if (total.alarm_sets > 0) {
      using ull = unsigned long long;
      std::printf("  alarms: %llu sets sent (%llu acknowledged), %llu handler runs (%llu failed), %llu fired in the "
                  "durable logs, %llu given up, %llu hand-overs, %llu index entries deleted, %llu freezes\n",
                  static_cast<ull>(total.alarm_sets), static_cast<ull>(total.alarm_acked_sets),
                  static_cast<ull>(total.alarm_runs), static_cast<ull>(total.alarm_failed_runs),
                  static_cast<ull>(total.alarm_fired), static_cast<ull>(total.alarm_given_up),
                  static_cast<ull>(total.alarm_handovers), static_cast<ull>(total.alarm_entries_deleted),
                  static_cast<ull>(total.freezes));
    }
    if (total.poison_arms + total.poison_hits > 0) {
      using ull = unsigned long long;
      std::printf("  quarantine: %llu poisoned requests, %llu alarms armed, %llu actors quarantined\n",
                  static_cast<ull>(total.poison_hits), static_cast<ull>(total.poison_arms),
                  static_cast<ull>(total.quarantines));
    }
    if (total.message_sends > 0) {
      using ull = unsigned long long;
      std::printf("  messages: %llu sends asked (%llu acknowledged), %llu messages applied in the durable states\n",
                  static_cast<ull>(total.message_sends), static_cast<ull>(total.message_acked_sends),
                  static_cast<ull>(total.message_applied));
    }
    if (total.socket_connections > 0) {
      using ull = unsigned long long;
      std::printf("  websockets: %llu connections opened, %llu messages received (each judged by S1, S2)\n",
                  static_cast<ull>(total.socket_connections), static_cast<ull>(total.socket_received));
    }
    if (total.version_deploys > 0) {
      using ull = unsigned long long;
      std::printf("  class versions: %llu versions deployed, %llu ledger answers judged (V3-V6), %llu migrations in "
                  "the final states (V1, V2)\n",
                  static_cast<ull>(total.version_deploys), static_cast<ull>(total.version_answers),
                  static_cast<ull>(total.migrations));
    }
    if (total.history_changes > 0) {
      using ull = unsigned long long;
      std::printf("  history: %llu restores and forks asked, %llu restores and %llu forks made, %llu history reads, "
                  "%llu reads judged after restores\n",
                  static_cast<ull>(total.history_changes), static_cast<ull>(total.history_restores),
                  static_cast<ull>(total.history_forks), static_cast<ull>(total.history_reads),
                  static_cast<ull>(total.history_judged_reads));
    }
    if (failed_seed != 0) {
      std::printf("FAILED at seed %llu (replay: wasmkeep-sim --scenario %s --first-seed %llu --seeds 1%s)\n",
                  static_cast<unsigned long long>(failed_seed), sc.name.c_str(),
                  static_cast<unsigned long long>(failed_seed), mutant.empty() ? "" : (" --mutant " + mutant).c_str());
      for (const auto& v : failure.violations) std::printf("  violation: %s\n", v.c_str());
      if (!quiet) {
        std::printf("  trace (last %zu events):\n", failure.trace.size());
        for (const auto& t : failure.trace) std::printf("    %s\n", t.c_str());
      }
      if (!expect_failure) exit_code = 1;
    } else if (expect_failure) {
      std::printf("NOT CAUGHT: mutant %s passed %llu seeds\n", mutant.c_str(), static_cast<unsigned long long>(ran));
      exit_code = 1;
    }
  }
  if (!found) {
    std::fprintf(stderr, "wasmkeep-sim: no scenario '%s'\n", scenario.c_str());
    return 2;
  }
  return exit_code;
}
