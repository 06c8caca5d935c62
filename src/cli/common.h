// What every wasmkeep command shares: the global options, the exit codes, loading the
// config file and opening the bucket it names.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "base/time.h"
#include "cli/config.h"
#include "env/real_env.h"
#include "store/object_store.h"

namespace wk::cli {

// Exit codes are part of the interface (docs/cli.md): scripts tell a lost race from an
// error, and a supervisor tells a lost lease from a bad config.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,               // fatal or retryable failure
  kExitUsage = 2,               // bad arguments, input or configuration
  kExitPreconditionFailed = 3,  // the condition did not hold; nothing changed
  kExitNotFound = 4,            // no such key or node
  kExitUnknownOutcome = 5,      // the write may or may not have been applied
  kExitLeaseLost = 6,           // serve: the node lease was lost (fenced, replaced, deleted)
  kExitTwin = 7,                // serve: another process runs under this node id
  kExitNoBucket = 8,            // no bucket at that sqlite:// or file:// path (commands that
                                //   only read never create one)
  kExitOldVersionRunning = 9,   // serve: an old (per-actor-lease) version runs against the
                                //   bucket (the start guard: docs/node-lease.md,
                                //   "Upgrading from per-actor leases")
};

int ExitCodeFor(const Status& status);
// Prints "wasmkeep: CODE: message" to stderr and returns the exit code for status.
int Fail(const Status& status);

struct GlobalOptions {
  std::string bucket_url;   // empty: config file, then the default
  std::string config_path;  // empty: none
  double timeout_seconds = 30;
};

// The config file named by the options (an empty Config when none), with its log level
// applied.
Result<Config> LoadConfigFromOptions(const GlobalOptions& g);
// Opens the bucket: --bucket, else the config file's, else the default. mode: only `serve`
// and the commands that create things pass kCreateIfMissing (store/open_store.h); the rest
// fail with kNotFound on a path that holds no bucket. The test hooks may wrap it
// (cli/test_hooks.h: bucket faults).
Result<std::unique_ptr<ObjectStore>> OpenBucket(RealEnv& env, const GlobalOptions& g, const Config& config,
                                                BucketOpen mode);
// Fail for an OpenBucket error: kNotFound (no bucket there) exits kExitNoBucket.
int FailOpen(const Status& status);
// t as ISO 8601 UTC to the second ("2026-12-02T14:48:04Z"), for command output. Any time
// a WallTime holds prints as its true date: see UtcFromUnixMs.
std::string IsoUtc(WallTime t);
// ms since the epoch as ISO 8601 UTC to the millisecond ("2026-12-02T14:48:04.123Z"), for
// any int64: an alarm may be set at any time up to the largest (year 292,278,994), and a
// year past 9999 is written with ISO 8601's expanded form ("+292278994-08-17T07:12:55.807Z"),
// one before year 0 with a minus sign. (The C library's gmtime and C++'s year_month_day
// stop at years that fit an int or a short: their overflow printed such an alarm as a year
// before the epoch.)
std::string UtcFromUnixMs(std::int64_t ms, bool with_ms = true);
// The per-request deadline from --timeout, or kInvalidArgument.
Result<CallOptions> CallOptionsFrom(const GlobalOptions& g);

}  // namespace wk::cli
