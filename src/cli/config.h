// The configuration file (TOML) shared by every wasmkeep command.
//
//   [bucket]
//   url = "s3://my-bucket?endpoint=https://s3.eu-west-1.amazonaws.com&region=eu-west-1"
//   [s3]
//   access_key_id = "..."        # used when AWS_ACCESS_KEY_ID is not set
//   secret_access_key = "..."
//   session_token = "..."
//   [log]
//   level = "info"               # debug | info | warn | error
//   [node]
//   id = "node-a"                # default: the host name
//   listen = "127.0.0.1:8080"    # the client API (/v1/actors; and /metrics, /healthz,
//                                #   /readyz unless admin_listen is set)
//   peer_listen = "10.0.0.5:7443"  # the peer listener, TLS between nodes (default: listen's
//                                # host, port 0 = any free port)
//   advertise = "10.0.0.5:7443"  # the peer listener as other nodes reach it, written in the
//                                # node record (default: peer_listen; port 0 = the bound one)
//   tls_cert_file = "node.crt"   # TLS for the client API: certificate chain (PEM)...
//   tls_key_file = "node.key"    # ...and its private key (PEM); both or neither
//   data_dir = "/var/lib/wasmkeep"  # the node's local files (the running-events journal
//                                # that turns a crash during an event into a quarantine
//                                # strike); none by default: crashes then strike nothing
//   admin_listen = "127.0.0.1:9090"  # /metrics, /healthz, /readyz on their own listener,
//                                #   and only there (default: none, they share listen)
//   [server]                     # the client listener's connections (docs/security.md)
//   max_connections = 1024       # open at once; past it, one that sent no request is evicted
//   max_connections_per_client = 64  # from one IPv4 address or IPv6 /64
//   first_request_timeout_ms = 10000 # accept to the end of the first request's header
//   max_buffered_body_bytes = 67108864  # request bodies held at once; past it 503
//   [lease]                      # docs/node-lease.md, "Timings"; in milliseconds
//   ttl_ms = 10000
//   grace_ms = 5000
//   safety_ms = 2000
//   max_skew_ms = 1000
//   heartbeat_period_ms = 3000
//   [actors]                     # the actor runtime and the limits on one actor (docs/abi.md)
//   workers = 0                  # worker threads, one V8 isolate each; 0 = one per core
//   max_memory_bytes = 67108864  # linear memory per actor (a multiple of 65536)
//   max_event_cpu_ms = 1000      # CPU time per event before the watchdog stops it
//   max_request_bytes = 1048576
//   max_response_bytes = 1048576
//   max_key_bytes = 2048
//   max_value_bytes = 131072
//   max_stored_bytes = 67108864  # keys plus values per actor
//   max_queued_events = 64       # per actor, behind the running event; then 503
//   idle_hibernate_ms = 30000    # an idle actor leaves memory (and its hold is released)
//   idle_instance_ms = 10000     # an idle actor drops its instance, keeps its hold and state
//   max_instances = 20000        # live instances at most (each is two memory mappings)
//   spin_us = 50                 # a worker or the loop polls this long before it sleeps; 0 = off
//   memory_budget_bytes = 1073741824  # linear memory touched + state + V8 heaps + bookkeeping;
//                                # then drop idle instances, evict idle actors, refuse new
//   sync_timeout_ms = 30000      # how long exec-durable (sync) waits
//   max_module_bytes = 67108864  # a class's wasm file
//   max_table_elements = 65536   # all of a module's tables together, grown ones included
//   isolate_heap_limit_bytes = 536870912  # each worker's V8 heap (not linear memory)
//   isolate_gc_floor_bytes = 67108864  # V8 runs no full collection of its own below this
//                                # (default: an eighth of the heap limit, at most 64 MiB)
//   compile_timeout_ms = 30000   # a request's wait for its class to compile, then 503
//   quarantine_strikes = 3       # strikes (an event ended its instance at the heap or memory
//                                # limit, or its node's process) within the window that
//                                # quarantine an actor cluster-wide; 0 = off
//   quarantine_window_ms = 600000  # how long a strike counts
//   quarantine_ms = 600000       # how long a quarantine lasts (503 + Retry-After meanwhile)
//   [moves]                      # moving actors between nodes (docs/node-lease.md)
//   per_second = 10              # hand-overs a node starts per second for requested moves
//   [storage]                    # the durable replica (docs/storage.md)
//   segment_max_bytes = 8388608  # a segment closes at this many bytes of batches...
//   segment_max_batches = 10000  # ...or this many batches
//   snapshot_every_segments = 64 # a snapshot after this many segments...
//   snapshot_every_bytes = 33554432  # ...or this many bytes of segments
//   upload_timeout_ms = 10000    # one segment or snapshot PUT
//   restore_read_timeout_ms = 5000   # one read of a restore, then retried
//   restore_read_attempts = 4
//   restore_parallelism = 16     # reads of one restore in flight at once
//   gc_delete_interval_ms = 20   # pacing of garbage collection's deletes
//   gc_max_deletes_per_pass = 500
//   [alarms]                     # alarm delivery (docs/alarms.md); every value in milliseconds
//   scan_period_ms = 10000       # each index shard is listed at least this often
//   scan_lag_ms = 1000           # a scan leaves alarms due more recently to their owner's timer
//   first_retry_ms = 2000        # a failed alarm handler runs again after this, then twice as long
//   max_retries = 6              # retries after the first run; then the alarm is cleared
//   handed_recheck_ms = 30000    # a handed alarm is looked at again after this (default:
//                                # max(30000, 2 * ttl_ms + grace_ms); never less than that)
//
// Precedence: command-line flags, then the environment (AWS_* variables), then the file,
// then the defaults. Unknown sections or keys are refused with their name, so a typo is
// never silently ignored. Documented in docs/configuration.md.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "actor/runtime.h"
#include "alarms/alarm_service.h"
#include "net/http_server.h"
#include "cluster/timing.h"
#include "control/quarantine.h"
#include "replica/replica.h"
#include "store/open_store.h"

namespace wk::cli {

struct Config {
  std::optional<std::string> bucket_url;
  std::optional<std::string> access_key_id;
  std::optional<std::string> secret_access_key;
  std::optional<std::string> session_token;
  std::optional<std::string> log_level;
  std::optional<std::string> node_id;
  std::optional<std::string> listen;
  std::optional<std::string> peer_listen;
  std::optional<std::string> advertise;
  std::optional<std::string> data_dir;  // node.data_dir (serve --data-dir wins)
  std::optional<std::string> admin_listen;
  // Defaults unless [server] sets them; validated by LoadConfig. (max_body_bytes is not a
  // setting: `serve` sets it to actors.max_request_bytes.)
  HttpServerLimits server;
  std::optional<std::string> tls_cert_file;
  std::optional<std::string> tls_key_file;
  LeaseTiming lease;  // defaults unless [lease] sets them; validated by LoadConfig
  // Defaults unless [actors] sets them; validated by LoadConfig. A node spins 50 us after
  // work by default (env/spin.h); the runtime's own default (tests, tools) is 0.
  actor::RuntimeOptions actors = [] {
    actor::RuntimeOptions o;
    o.spin = std::chrono::microseconds(50);
    return o;
  }();
  control::QuarantinePolicy quarantine;  // [actors] quarantine_*; validated by LoadConfig
  // Defaults unless [storage] sets them; validated by LoadConfig. gc_off_chain_after is not
  // a setting: it is the fencing bound, max(ttl + grace, upload_timeout), set from [lease].
  replica::ReplicaOptions storage;
  // [moves] per_second: hand-overs a node starts per second for requested moves (`actor
  // move`, `cluster balance`; cluster/move_control.h).
  std::int64_t moves_per_second = 10;
  // Defaults unless [alarms] sets them; validated by LoadConfig against [lease].
  alarms::AlarmOptions alarms;
};

// Reads and validates path. kInvalidArgument names the file and the bad key or value;
// kFatal if the file cannot be read.
Result<Config> LoadConfig(const std::string& path);

// The environment as the store sees it: the process environment first, then the file's
// credentials under the AWS_* names.
GetEnvFn EnvWithConfig(const Config& config);

}  // namespace wk::cli
