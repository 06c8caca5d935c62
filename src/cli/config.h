// The configuration file (TOML) shared by every wasmkeep command: sections [bucket], [s3],
// [log], [node], [server], [lease], [actors], [moves], [storage], [alarms], [messages], [websockets]; every key, its
// default and its range are in docs/configuration.md (packaging/wasmkeep.toml is an
// example). LoadConfig refuses an unknown section or key, a bad value or a broken relation
// between values with an error naming the key, so a typo is never silently ignored.
// Precedence: command-line flags, then the environment (AWS_* variables), then the file,
// then the defaults.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "actor/runtime.h"
#include "alarms/alarm_service.h"
#include "routing/message_delivery.h"
#include "routing/socket_hub.h"
#include "net/http_server.h"
#include "cluster/timing.h"
#include "control/quarantine.h"
#include "control/quarantine_cache.h"
#include "replica/replica.h"
#include "server/usage_meter.h"
#include "store/open_store.h"

namespace wk::cli {

// storage.retention_ms's default: 7 days (docs/storage.md, "History and point-in-time restore").
inline constexpr Duration kDefaultRetention = std::chrono::hours(24 * 7);

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
  // [actors] quarantine_list_after: when a start's quarantine check lists quarantine/
  // instead of reading one record (control/quarantine_cache.h).
  std::uint32_t quarantine_list_after = control::kDefaultQuarantineListAfter;
  // Defaults unless [storage] sets them; validated by LoadConfig. gc_off_chain_after is not
  // a setting: it is the fencing bound, max(ttl + grace, upload_timeout), set from [lease].
  // A node keeps 7 days of history by default (retention_ms); the replica's own default
  // (tests, tools) keeps none.
  replica::ReplicaOptions storage = [] {
    replica::ReplicaOptions o;
    o.retention = kDefaultRetention;
    return o;
  }();
  // [moves] per_second: hand-overs a node starts per second for requested moves (`actor
  // move`, `cluster balance`; cluster/move_control.h).
  std::int64_t moves_per_second = 10;
  // Defaults unless [alarms] sets them; validated by LoadConfig against [lease].
  alarms::AlarmOptions alarms;
  // Defaults unless [messages] sets them (docs/messages.md, "Settings").
  MessageDeliveryOptions messages;
  // Defaults unless [websockets] sets them (docs/websockets.md, "Limits and close codes"); the limits on
  // what one event sends are in actors.sockets.
  SocketHubOptions websockets;
  // [usage] flush_ms: how often a node writes its usage records (docs/tenants.md, "Usage").
  Duration usage_flush = kDefaultUsageFlush;
};

// Reads and validates path. kInvalidArgument names the file and the bad key or value;
// kFatal if the file cannot be read.
Result<Config> LoadConfig(const std::string& path);

// The environment as the store sees it: the process environment first, then the file's
// credentials under the AWS_* names.
GetEnvFn EnvWithConfig(const Config& config);

}  // namespace wk::cli
