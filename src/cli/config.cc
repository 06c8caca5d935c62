#include "cli/config.h"

#include "control/tenants.h"

#include <toml++/toml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace wk::cli {
namespace {

// Reads table.key as a string into out; an error names section.key.
Status ReadString(const toml::table& table, std::string_view section, std::string_view key,
                  std::optional<std::string>* out) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return Status::Ok();
  if (!node->is_string()) {
    return InvalidArgument(std::string(section) + "." + std::string(key) + " must be a string");
  }
  *out = node->value<std::string>();
  return Status::Ok();
}

// Reads table.key (milliseconds, a positive integer) into *out.
Status ReadMs(const toml::table& table, std::string_view section, std::string_view key, Duration* out) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return Status::Ok();
  auto v = node->value<std::int64_t>();
  if (!node->is_integer() || !v || *v < 0 || *v > 3'600'000) {
    return InvalidArgument(std::string(section) + "." + std::string(key) +
                           " must be a whole number of milliseconds between 0 and 3600000");
  }
  *out = std::chrono::milliseconds(*v);
  return Status::Ok();
}

Status CheckKeys(const toml::table& table, std::string_view section,
                 const std::set<std::string_view>& allowed) {
  for (auto&& [key, value] : table) {
    if (!allowed.count(key.str())) {
      return InvalidArgument("unknown setting " + std::string(section) + "." +
                             std::string(key.str()));
    }
  }
  return Status::Ok();
}

// Reads table.key (a whole number in [min, max]) into *out.
template <typename T>
Status ReadUint(const toml::table& table, std::string_view section, std::string_view key, std::int64_t min,
                std::int64_t max, T* out) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return Status::Ok();
  auto v = node->value<std::int64_t>();
  if (!node->is_integer() || !v || *v < min || *v > max) {
    return InvalidArgument(std::string(section) + "." + std::string(key) + " must be a whole number between " +
                           std::to_string(min) + " and " + std::to_string(max));
  }
  *out = static_cast<T>(*v);
  return Status::Ok();
}

Status ReadActors(const toml::table& t, actor::RuntimeOptions* o, control::QuarantinePolicy* q,
                  std::uint32_t* list_after) {
  constexpr std::string_view sec = "actors";
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 40;
  Status s = CheckKeys(t, sec,
                       {"workers", "max_memory_bytes", "max_event_cpu_ms", "max_request_bytes", "max_response_bytes",
                        "max_key_bytes", "max_value_bytes", "max_stored_bytes", "max_queued_events",
                        "idle_hibernate_ms", "idle_instance_ms", "max_instances", "memory_budget_bytes",
                        "sync_timeout_ms", "max_module_bytes", "max_table_elements", "isolate_heap_limit_bytes",
                        "isolate_gc_floor_bytes", "compile_timeout_ms", "quarantine_strikes",
                        "quarantine_window_ms", "quarantine_ms", "quarantine_list_after", "spin_us", "max_compiled_bytes_per_tenant",
                        "idempotency_ttl_ms", "idempotency_max_answer_bytes", "idempotency_max_bytes",
                        "max_message_bytes", "max_messages_per_event", "sleeping_hold_ms", "max_sleeping_holds"});
  actor::ActorLimits& l = o->limits;
  if (s.ok()) s = ReadUint(t, sec, "workers", 0, 256, &o->workers);
  if (s.ok()) s = ReadUint(t, sec, "max_memory_bytes", 65536, std::int64_t{4} << 30, &l.max_memory_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_event_cpu_ms", 1, 600'000, &l.max_event_cpu_ms);
  if (s.ok()) s = ReadUint(t, sec, "max_request_bytes", 1, kMaxBytes, &l.max_request_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_response_bytes", 1, kMaxBytes, &l.max_response_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_key_bytes", 1, 1 << 20, &l.max_key_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_value_bytes", 0, 64 << 20, &l.max_value_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_stored_bytes", 1, kMaxBytes, &l.max_stored_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_queued_events", 1, 100'000, &l.max_queued_events);
  if (s.ok()) s = ReadUint(t, sec, "memory_budget_bytes", 65536, kMaxBytes, &o->memory_budget_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_compiled_bytes_per_tenant", 0, kMaxBytes, &o->max_compiled_bytes_per_tenant);
  if (s.ok()) {
    s = ReadUint(t, sec, "max_instances", 1, static_cast<std::int64_t>(actor::kMaxInstancesSetting), &o->max_instances);
  }
  if (s.ok()) {
    s = ReadUint(t, sec, "max_module_bytes", 8, static_cast<std::int64_t>(actor::kMaxModuleBytesSetting),
                 &l.max_module_bytes);
  }
  if (s.ok()) {
    s = ReadUint(t, sec, "max_table_elements", 0, static_cast<std::int64_t>(actor::kMaxTableElementsSetting),
                 &l.max_table_elements);
  }
  if (s.ok()) {
    s = ReadUint(t, sec, "isolate_heap_limit_bytes", static_cast<std::int64_t>(actor::kMinIsolateHeapLimitBytes),
                 static_cast<std::int64_t>(actor::kMaxIsolateHeapLimitBytes), &o->isolate_heap_limit_bytes);
  }
  std::int64_t gc_floor = -1;  // at most half the heap limit: ValidateRuntimeOptions
  if (s.ok()) {
    s = ReadUint(t, sec, "isolate_gc_floor_bytes", 0, static_cast<std::int64_t>(actor::kMaxIsolateHeapLimitBytes),
                 &gc_floor);
  }
  if (gc_floor >= 0) o->isolate_gc_floor_bytes = static_cast<std::uint64_t>(gc_floor);
  std::int64_t idle_ms = -1, instance_ms = -1, sync_ms = -1, compile_ms = -1, spin_us = -1;
  if (s.ok()) s = ReadUint(t, sec, "spin_us", 0, 1000, &spin_us);
  if (spin_us >= 0) o->spin = std::chrono::microseconds(spin_us);
  if (s.ok()) s = ReadUint(t, sec, "idle_hibernate_ms", 1, 86'400'000, &idle_ms);
  if (s.ok()) s = ReadUint(t, sec, "idle_instance_ms", 1, 86'400'000, &instance_ms);
  if (s.ok()) s = ReadUint(t, sec, "sync_timeout_ms", 1, 3'600'000, &sync_ms);
  if (s.ok()) s = ReadUint(t, sec, "compile_timeout_ms", 1, 600'000, &compile_ms);
  std::int64_t idem_ttl_ms = -1;
  if (s.ok()) s = ReadUint(t, sec, "idempotency_ttl_ms", 1000, std::int64_t{90} * 86'400'000, &idem_ttl_ms);
  if (idem_ttl_ms >= 0) o->idempotency_ttl = std::chrono::milliseconds(idem_ttl_ms);
  if (s.ok()) {
    s = ReadUint(t, sec, "idempotency_max_answer_bytes", 0, std::int64_t{1} << 20, &o->idempotency_max_answer_bytes);
  }
  if (s.ok()) s = ReadUint(t, sec, "idempotency_max_bytes", 4096, std::int64_t{1} << 30, &o->idempotency_max_bytes);
  // A message is one outbox entry in one batch: bounded like a stored value's neighbours.
  if (s.ok()) s = ReadUint(t, sec, "max_message_bytes", 1, std::int64_t{1} << 20, &o->messages.max_message_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_messages_per_event", 0, 10'000, &o->messages.max_messages_per_event);
  // Sleeping holds (docs/node-lease.md, "Sleeping holds"): up to a day, and up to a million
  // (about 300 bytes each: docs/configuration.md).
  std::int64_t sleeping_ms = -1;
  if (s.ok()) s = ReadUint(t, sec, "sleeping_hold_ms", 0, 86'400'000, &sleeping_ms);
  if (sleeping_ms >= 0) o->sleeping_hold = std::chrono::milliseconds(sleeping_ms);
  if (s.ok()) s = ReadUint(t, sec, "max_sleeping_holds", 0, 1'000'000, &o->max_sleeping_holds);
  if (idle_ms >= 0) o->idle_hibernate = std::chrono::milliseconds(idle_ms);
  if (instance_ms >= 0) o->idle_instance = std::chrono::milliseconds(instance_ms);
  if (sync_ms >= 0) o->sync_timeout = std::chrono::milliseconds(sync_ms);
  if (compile_ms >= 0) o->compile_timeout = std::chrono::milliseconds(compile_ms);
  if (s.ok()) s = actor::ValidateRuntimeOptions(*o);
  // Quarantine (docs/security.md, "Poisoned actors").
  std::int64_t window_ms = -1, quarantine_ms = -1;
  if (s.ok()) s = ReadUint(t, sec, "quarantine_strikes", 0, control::kMaxStrikes, &q->strikes);
  if (s.ok()) s = ReadUint(t, sec, "quarantine_window_ms", 1, 604'800'000, &window_ms);
  if (s.ok()) s = ReadUint(t, sec, "quarantine_ms", 1, 604'800'000, &quarantine_ms);
  if (window_ms >= 0) q->window = std::chrono::milliseconds(window_ms);
  if (quarantine_ms >= 0) q->duration = std::chrono::milliseconds(quarantine_ms);
  if (s.ok()) s = control::ValidateQuarantinePolicy(*q);
  if (s.ok()) s = ReadUint(t, sec, "quarantine_list_after", 0, control::kMaxQuarantineListAfter, list_after);
  return s;
}

Status ReadStorage(const toml::table& t, replica::ReplicaOptions* o) {
  constexpr std::string_view sec = "storage";
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 40;
  Status s = CheckKeys(t, sec,
                       {"segment_max_bytes", "segment_max_batches", "snapshot_every_segments", "snapshot_every_bytes",
                        "upload_timeout_ms", "restore_read_timeout_ms", "restore_read_attempts", "restore_parallelism",
                        "gc_delete_interval_ms", "gc_max_deletes_per_pass", "retention_ms", "retention_ms_by_tenant"});
  if (s.ok()) s = ReadUint(t, sec, "segment_max_bytes", 1024, std::int64_t{5} << 30, &o->segment_max_bytes);
  if (s.ok()) s = ReadUint(t, sec, "segment_max_batches", 1, 1'000'000, &o->segment_max_batches);
  if (s.ok()) s = ReadUint(t, sec, "snapshot_every_segments", 1, 1'000'000, &o->snapshot_every_segments);
  if (s.ok()) s = ReadUint(t, sec, "snapshot_every_bytes", 1024, kMaxBytes, &o->snapshot_every_bytes);
  if (s.ok()) s = ReadUint(t, sec, "restore_read_attempts", 1, 100, &o->restore.read_attempts);
  if (s.ok()) s = ReadUint(t, sec, "restore_parallelism", 1, 256, &o->restore.parallelism);
  if (s.ok()) s = ReadUint(t, sec, "gc_max_deletes_per_pass", 0, 1'000'000, &o->gc_max_deletes_per_pass);
  std::int64_t upload_ms = -1, read_ms = -1, gc_ms = -1, retention_ms = -1;
  // At most a year: what a bucket keeps for history is paid for every month.
  if (s.ok()) s = ReadUint(t, sec, "retention_ms", 0, std::int64_t{366} * 86'400'000, &retention_ms);
  if (retention_ms >= 0) o->retention.all = std::chrono::milliseconds(retention_ms);
  // [storage.retention_ms_by_tenant]: tenant = ms, overriding retention_ms for that tenant.
  if (const toml::node* by = t.get("retention_ms_by_tenant"); s.ok() && by != nullptr) {
    const toml::table* tenants = by->as_table();
    if (tenants == nullptr) return InvalidArgument("storage.retention_ms_by_tenant is a table: tenant = milliseconds");
    for (auto&& [key, value] : *tenants) {
      const std::string tenant(key.str());
      if (Status v = control::ValidateTenantName(tenant); !v.ok()) {
        return InvalidArgument("storage.retention_ms_by_tenant: " + v.message());
      }
      std::int64_t ms = -1;
      Status r = ReadUint(*tenants, "storage.retention_ms_by_tenant", tenant, 0, std::int64_t{366} * 86'400'000, &ms);
      if (!r.ok()) return r;
      o->retention.tenants[tenant] = std::chrono::milliseconds(ms);
    }
  }
  if (s.ok()) s = ReadUint(t, sec, "upload_timeout_ms", 1, 3'600'000, &upload_ms);
  if (s.ok()) s = ReadUint(t, sec, "restore_read_timeout_ms", 1, 3'600'000, &read_ms);
  if (s.ok()) s = ReadUint(t, sec, "gc_delete_interval_ms", 0, 60'000, &gc_ms);
  if (upload_ms >= 0) o->upload_timeout = std::chrono::milliseconds(upload_ms);
  if (read_ms >= 0) o->restore.read_timeout = std::chrono::milliseconds(read_ms);
  if (gc_ms >= 0) o->gc_delete_interval = std::chrono::milliseconds(gc_ms);
  if (s.ok()) {
    s = replica::ValidateReplicaOptions(*o);
    if (!s.ok()) s = InvalidArgument("storage." + s.message());
  }
  return s;
}

// [websockets] (docs/websockets.md, "Limits and close codes"): the hub's and each connection's bounds, and
// what one event may send (actors.sockets).
Status ReadWebSockets(const toml::table& t, SocketHubOptions* o, actor::SocketLimits* events) {
  constexpr std::string_view sec = "websockets";
  Status s = CheckKeys(t, sec,
                       {"max_message_bytes", "max_send_queue_bytes", "max_messages_per_second", "ping_interval_ms",
                        "close_timeout_ms", "max_connections_per_actor", "max_connections", "max_event_send_bytes",
                        "max_event_sends"});
  std::int64_t rate = static_cast<std::int64_t>(o->connection.max_messages_per_second);
  if (s.ok()) s = ReadUint(t, sec, "max_message_bytes", 125, std::int64_t{16} << 20, &o->connection.max_message_bytes);
  if (s.ok()) {
    s = ReadUint(t, sec, "max_send_queue_bytes", 1024, std::int64_t{1} << 30, &o->connection.max_send_queue_bytes);
  }
  if (s.ok()) s = ReadUint(t, sec, "max_messages_per_second", 0, 1'000'000, &rate);
  if (s.ok()) s = ReadMs(t, sec, "ping_interval_ms", &o->connection.ping_interval);
  if (s.ok()) s = ReadMs(t, sec, "close_timeout_ms", &o->connection.close_timeout);
  if (s.ok()) s = ReadUint(t, sec, "max_connections_per_actor", 1, 1'000'000, &o->max_connections_per_actor);
  if (s.ok()) s = ReadUint(t, sec, "max_connections", 1, 10'000'000, &o->max_connections);
  if (s.ok()) s = ReadUint(t, sec, "max_event_send_bytes", 1024, std::int64_t{1} << 30, &events->max_event_send_bytes);
  if (s.ok()) s = ReadUint(t, sec, "max_event_sends", 1, 10'000'000, &events->max_event_sends);
  if (!s.ok()) return s;
  o->connection.max_messages_per_second = static_cast<double>(rate);
  events->max_message_bytes = o->connection.max_message_bytes;
  if (o->connection.max_send_queue_bytes < o->connection.max_message_bytes) {
    return InvalidArgument("websockets.max_send_queue_bytes must be at least websockets.max_message_bytes (one message must fit)");
  }
  if (o->connection.ping_interval < std::chrono::seconds(1) || o->connection.close_timeout < std::chrono::milliseconds(100)) {
    return InvalidArgument("websockets.ping_interval_ms must be at least 1000 and close_timeout_ms at least 100");
  }
  if (events->max_event_send_bytes < o->connection.max_message_bytes) {
    return InvalidArgument("websockets.max_event_send_bytes must be at least websockets.max_message_bytes");
  }
  if (o->max_connections_per_actor > o->max_connections) {
    return InvalidArgument("websockets.max_connections_per_actor must be at most websockets.max_connections");
  }
  return Status::Ok();
}

Status ReadServer(const toml::table& t, HttpServerLimits* o) {
  constexpr std::string_view sec = "server";
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 40;
  Status s = CheckKeys(t, sec,
                       {"max_connections", "max_connections_per_client", "first_request_timeout_ms",
                        "max_buffered_body_bytes"});
  if (s.ok()) s = ReadUint(t, sec, "max_connections", 1, 1'000'000, &o->max_connections);
  if (s.ok()) s = ReadUint(t, sec, "max_connections_per_client", 1, 1'000'000, &o->max_connections_per_client);
  if (s.ok()) s = ReadUint(t, sec, "max_buffered_body_bytes", 1, kMaxBytes, &o->max_buffered_body_bytes);
  std::int64_t first_ms = -1;
  if (s.ok()) s = ReadUint(t, sec, "first_request_timeout_ms", 1, 3'600'000, &first_ms);
  if (first_ms >= 0) o->first_request_timeout = std::chrono::milliseconds(first_ms);
  return s;
}

}  // namespace

Result<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Fatal("cannot read config file " + path);
  std::stringstream text;
  text << in.rdbuf();
  toml::table root;
  try {
    root = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return InvalidArgument(path + ":" + std::to_string(where.line) + ":" +
                           std::to_string(where.column) + ": " + std::string(e.description()));
  }
  Config config;
  bool handed_recheck_set = false;  // [alarms] handed_recheck_ms (its default follows [lease])
  std::int64_t usage_flush_ms = 0;
  for (auto&& [name, node] : root) {
    std::string section(name.str());
    const toml::table* table = node.as_table();
    if (table == nullptr) return InvalidArgument(path + ": " + section + " must be a [section]");
    Status s;
    if (section == "bucket") {
      s = CheckKeys(*table, section, {"url"});
      if (s.ok()) s = ReadString(*table, section, "url", &config.bucket_url);
    } else if (section == "s3") {
      s = CheckKeys(*table, section, {"access_key_id", "secret_access_key", "session_token"});
      if (s.ok()) s = ReadString(*table, section, "access_key_id", &config.access_key_id);
      if (s.ok()) s = ReadString(*table, section, "secret_access_key", &config.secret_access_key);
      if (s.ok()) s = ReadString(*table, section, "session_token", &config.session_token);
    } else if (section == "node") {
      s = CheckKeys(*table, section,
                    {"id", "listen", "peer_listen", "advertise", "tls_cert_file", "tls_key_file", "data_dir", "admin_listen"});
      if (s.ok()) s = ReadString(*table, section, "id", &config.node_id);
      if (s.ok()) s = ReadString(*table, section, "listen", &config.listen);
      if (s.ok()) s = ReadString(*table, section, "peer_listen", &config.peer_listen);
      if (s.ok()) s = ReadString(*table, section, "advertise", &config.advertise);
      if (s.ok()) s = ReadString(*table, section, "tls_cert_file", &config.tls_cert_file);
      if (s.ok()) s = ReadString(*table, section, "tls_key_file", &config.tls_key_file);
      if (s.ok() && config.tls_cert_file.has_value() != config.tls_key_file.has_value()) {
        s = InvalidArgument("node.tls_cert_file and node.tls_key_file go together: set both or neither");
      }
      if (s.ok()) s = ReadString(*table, section, "data_dir", &config.data_dir);
      if (s.ok() && config.data_dir && config.data_dir->empty()) s = InvalidArgument("node.data_dir must not be empty");
      if (s.ok()) s = ReadString(*table, section, "admin_listen", &config.admin_listen);
    } else if (section == "server") {
      s = ReadServer(*table, &config.server);
    } else if (section == "lease") {
      s = CheckKeys(*table, section, {"ttl_ms", "grace_ms", "safety_ms", "max_skew_ms", "heartbeat_period_ms"});
      if (s.ok()) s = ReadMs(*table, section, "ttl_ms", &config.lease.ttl);
      if (s.ok()) s = ReadMs(*table, section, "grace_ms", &config.lease.grace);
      if (s.ok()) s = ReadMs(*table, section, "safety_ms", &config.lease.safety);
      if (s.ok()) s = ReadMs(*table, section, "max_skew_ms", &config.lease.max_skew);
      if (s.ok()) s = ReadMs(*table, section, "heartbeat_period_ms", &config.lease.heartbeat_period);
      if (s.ok()) s = config.lease.Validate();
    } else if (section == "actors") {
      s = ReadActors(*table, &config.actors, &config.quarantine, &config.quarantine_list_after);
    } else if (section == "moves") {
      s = CheckKeys(*table, section, {"per_second"});
      if (s.ok()) s = ReadUint(*table, section, "per_second", 1, 1000, &config.moves_per_second);
    } else if (section == "storage") {
      s = ReadStorage(*table, &config.storage);
    } else if (section == "alarms") {
      s = CheckKeys(*table, section,
                    {"scan_period_ms", "scan_lag_ms", "first_retry_ms", "max_retries", "handed_recheck_ms",
                     "min_interval_ms", "max_events_per_second"});
      if (s.ok()) s = ReadMs(*table, section, "scan_period_ms", &config.alarms.scan_period);
      if (s.ok()) s = ReadMs(*table, section, "scan_lag_ms", &config.alarms.scan_lag);
      if (s.ok()) s = ReadMs(*table, section, "first_retry_ms", &config.alarms.first_retry);
      if (s.ok()) s = ReadUint(*table, section, "max_retries", 0, 20, &config.alarms.max_retries);
      if (s.ok()) s = ReadMs(*table, section, "min_interval_ms", &config.alarms.min_interval);
      if (s.ok()) {
        s = ReadUint(*table, section, "max_events_per_second", 1, alarms::kMaxAlarmEventsPerSecondSetting,
                     &config.alarms.max_events_per_second);
      }
      if (s.ok() && table->get("handed_recheck_ms") != nullptr) {
        handed_recheck_set = true;
        s = ReadMs(*table, section, "handed_recheck_ms", &config.alarms.handed_recheck);
      }
    } else if (section == "messages") {
      s = CheckKeys(*table, section, {"first_retry_ms", "max_retry_ms", "max_attempts", "wake_after_ms"});
      if (s.ok()) {
        s = ReadUint(*table, section, "wake_after_ms", 0, actor::kMaxWakeAfterMs,
                     &config.actors.messages.wake_after_ms);
      }
      if (s.ok()) s = ReadMs(*table, section, "first_retry_ms", &config.messages.first_retry);
      if (s.ok()) s = ReadMs(*table, section, "max_retry_ms", &config.messages.max_retry);
      if (s.ok()) s = ReadUint(*table, section, "max_attempts", 1, 1000, &config.messages.max_attempts);
      if (s.ok()) s = ValidateMessageDeliveryOptions(config.messages);
    } else if (section == "websockets") {
      s = ReadWebSockets(*table, &config.websockets, &config.actors.sockets);
    } else if (section == "usage") {
      s = CheckKeys(*table, section, {"flush_ms"});
      if (s.ok()) s = ReadUint(*table, section, "flush_ms", 1000, 3'600'000, &usage_flush_ms);
      if (s.ok()) config.usage_flush = std::chrono::milliseconds(usage_flush_ms);
    } else if (section == "log") {
      s = CheckKeys(*table, section, {"level"});
      if (s.ok()) s = ReadString(*table, section, "level", &config.log_level);
    } else {
      s = InvalidArgument("unknown section [" + section + "]");
    }
    if (!s.ok()) return InvalidArgument(path + ": " + s.message());
  }
  config.storage.gc_off_chain_after = std::max(config.lease.takeover_after(), config.storage.upload_timeout);
  // 30 s, or twice ttl plus grace (docs/node-lease.md, "Bounds").
  if (!handed_recheck_set) {
    config.alarms.handed_recheck = std::max<Duration>(std::chrono::seconds(30), 2 * config.lease.ttl + config.lease.grace);
  }
  if (Status s = alarms::ValidateAlarmOptions(config.alarms, config.lease); !s.ok()) return InvalidArgument(path + ": " + s.message());
  if (config.server.max_buffered_body_bytes < config.actors.limits.max_request_bytes) {
    // One maximal request must fit, or no request of that size could ever be served.
    return InvalidArgument(path + ": server.max_buffered_body_bytes (" +
                           std::to_string(config.server.max_buffered_body_bytes) +
                           ") must be at least actors.max_request_bytes (" +
                           std::to_string(config.actors.limits.max_request_bytes) + ")");
  }
  return config;
}

GetEnvFn EnvWithConfig(const Config& config) {
  return [config](const char* name) -> std::optional<std::string> {
    if (auto v = ProcessGetEnv(name)) return v;
    std::string_view n(name);
    if (n == "AWS_ACCESS_KEY_ID") return config.access_key_id;
    if (n == "AWS_SECRET_ACCESS_KEY") return config.secret_access_key;
    if (n == "AWS_SESSION_TOKEN") return config.session_token;
    return std::nullopt;
  };
}

}  // namespace wk::cli
