#include "cli/config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace wk::cli {
namespace {

Result<Config> Load(const std::string& text) {
  // One file per test: ctest runs the tests of this file as parallel processes.
  const std::string path = ::testing::TempDir() + "/wasmkeep_config_test_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".toml";
  std::ofstream(path) << text;
  return LoadConfig(path);
}

// A configuration that must be refused, and a piece of the message naming the setting.
struct BadSetting {
  std::string text;
  std::string want;
};

void ExpectRefused(const std::vector<BadSetting>& cases) {
  for (const BadSetting& c : cases) {
    auto r = Load(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().ToString();
  }
}

// One setting as a configuration file writes it, and where LoadConfig puts it (as a
// number: durations in milliseconds).
struct Setting {
  std::string line;  // "workers = 2"
  std::int64_t want;
  std::function<std::int64_t(const Config&)> loaded;
};

std::int64_t Ms(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// Loads header (sections and settings not checked here) followed by the settings' lines,
// checks that each landed where it belongs, and returns the configuration.
Result<Config> ExpectLoaded(const std::string& header, const std::vector<Setting>& settings) {
  std::string text = header;
  for (const Setting& s : settings) text += s.line + "\n";
  auto c = Load(text);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return c;
  for (const Setting& s : settings) EXPECT_EQ(s.loaded(*c), s.want) << s.line;
  return c;
}

TEST(ConfigTest, ActorsSectionSetsTheRuntimeAndLimits) {
  using L = actor::ActorLimits;
  auto limit = [](auto field) {
    return [field](const Config& c) { return static_cast<std::int64_t>(c.actors.limits.*field); };
  };
  (void)ExpectLoaded(
      "[actors]\n",
      {{"workers = 2", 2, [](const Config& c) { return std::int64_t{c.actors.workers}; }},
       {"max_memory_bytes = 1048576", 1048576, limit(&L::max_memory_bytes)},
       {"max_event_cpu_ms = 250", 250, limit(&L::max_event_cpu_ms)},
       {"max_request_bytes = 1000", 1000, limit(&L::max_request_bytes)},
       {"max_response_bytes = 2000", 2000, limit(&L::max_response_bytes)},
       {"max_key_bytes = 64", 64, limit(&L::max_key_bytes)},
       {"idempotency_ttl_ms = 60000", 60000,
        [](const Config& c) { return static_cast<std::int64_t>(c.actors.idempotency_ttl / std::chrono::milliseconds(1)); }},
       {"idempotency_max_answer_bytes = 100", 100,
        [](const Config& c) { return static_cast<std::int64_t>(c.actors.idempotency_max_answer_bytes); }},
       {"max_value_bytes = 4096", 4096, limit(&L::max_value_bytes)},
       {"max_stored_bytes = 100000", 100000, limit(&L::max_stored_bytes)},
       {"max_queued_events = 8", 8, limit(&L::max_queued_events)},
       {"idle_hibernate_ms = 1500", 1500, [](const Config& c) { return Ms(c.actors.idle_hibernate); }},
       {"idle_instance_ms = 700", 700, [](const Config& c) { return Ms(c.actors.idle_instance); }},
       {"max_instances = 5000", 5000, [](const Config& c) { return static_cast<std::int64_t>(c.actors.max_instances); }},
       {"memory_budget_bytes = 8388608", 8388608,
        [](const Config& c) { return static_cast<std::int64_t>(c.actors.memory_budget_bytes); }},
       {"max_compiled_bytes_per_tenant = 33554432", 33554432,
        [](const Config& c) { return static_cast<std::int64_t>(c.actors.max_compiled_bytes_per_tenant); }},
       {"sync_timeout_ms = 700", 700, [](const Config& c) { return Ms(c.actors.sync_timeout); }},
       {"max_module_bytes = 1000000", 1000000, limit(&L::max_module_bytes)},
       {"max_table_elements = 5000", 5000, limit(&L::max_table_elements)},
       {"isolate_heap_limit_bytes = 67108864", 67108864,
        [](const Config& c) { return static_cast<std::int64_t>(c.actors.isolate_heap_limit_bytes); }},
       {"isolate_gc_floor_bytes = 0", 0,
        [](const Config& c) { return static_cast<std::int64_t>(c.actors.isolate_gc_floor_bytes.value_or(99)); }},
       {"spin_us = 200", 200,
        [](const Config& c) { return std::chrono::duration_cast<std::chrono::microseconds>(c.actors.spin).count(); }}});
}

TEST(ConfigTest, NodeSectionSetsTheListenersAndTheClientApiTls) {
  auto c = Load(R"([node]
id = "a"
listen = "0.0.0.0:8080"
peer_listen = "0.0.0.0:7443"
advertise = "10.0.0.5:7443"
tls_cert_file = "/etc/wasmkeep/node.crt"
tls_key_file = "/etc/wasmkeep/node.key"
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->peer_listen.value_or(""), "0.0.0.0:7443");
  EXPECT_EQ(c->advertise.value_or(""), "10.0.0.5:7443");
  EXPECT_EQ(c->tls_cert_file.value_or(""), "/etc/wasmkeep/node.crt");
  EXPECT_EQ(c->tls_key_file.value_or(""), "/etc/wasmkeep/node.key");
  auto half = Load("[node]\ntls_cert_file = \"node.crt\"\n");
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("tls_key_file"), std::string::npos) << half.status().ToString();
  auto defaults = Load("[node]\nid = \"a\"\n");
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->peer_listen.has_value());
  EXPECT_FALSE(defaults->tls_cert_file.has_value());
}

TEST(ConfigTest, DefaultsWithoutTheSection) {
  auto c = Load("[log]\nlevel = \"info\"\n");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->actors.limits.max_value_bytes, 131072u);
  EXPECT_EQ(c->actors.limits.max_event_cpu_ms, 1000u);
  EXPECT_EQ(c->actors.limits.max_module_bytes, 64u << 20);
  EXPECT_EQ(c->actors.limits.max_table_elements, 65536u);
  EXPECT_EQ(c->actors.isolate_heap_limit_bytes, 512u << 20);
  EXPECT_FALSE(c->actors.isolate_gc_floor_bytes.has_value()) << "unset: the runtime's default, 64 MiB";
  EXPECT_EQ(actor::DefaultIsolateGcFloor(c->actors.isolate_heap_limit_bytes), 64u << 20);
  EXPECT_EQ(c->actors.max_compiled_bytes_per_tenant, actor::kDefaultMaxCompiledBytesPerTenant);
  EXPECT_EQ(c->actors.spin, std::chrono::microseconds(50));  // a node spins; the runtime's own default is 0
}

TEST(ConfigTest, BadActorSettingsAreNamed) {
  ExpectRefused({{"[actors]\nmax_memory_bytes = 100000\n", "actors.max_memory_bytes must be a multiple of 65536"},
                 {"[actors]\nmax_event_cpu_ms = 0\n", "actors.max_event_cpu_ms"},
                 {"[actors]\nmax_queued_events = -1\n", "actors.max_queued_events"},
                 {"[actors]\nworkers = \"four\"\n", "actors.workers"},
                 {"[actors]\nmax_memory_bytes = 2147483648\n", "actors.memory_budget_bytes must be at least"},
                 {"[actors]\nmax_stored_bytes = 10\n", "actors.max_stored_bytes"},
                 {"[actors]\nmax_module_bytes = 0\n", "actors.max_module_bytes"},
                 {"[actors]\nmax_module_bytes = 67108865\n", "actors.max_module_bytes"},
                 {"[actors]\nmax_table_elements = 1000001\n", "actors.max_table_elements"},
                 {"[actors]\nisolate_heap_limit_bytes = 1048576\n", "actors.isolate_heap_limit_bytes"},
                 {"[actors]\nisolate_gc_floor_bytes = -1\n", "actors.isolate_gc_floor_bytes"},
                 {"[actors]\nisolate_heap_limit_bytes = 67108864\nisolate_gc_floor_bytes = 33554433\n",
                  "actors.isolate_gc_floor_bytes (33554433) must be at most half of actors.isolate_heap_limit_bytes"},
                 {"[actors]\nspin_us = 1001\n", "actors.spin_us"},
                 {"[actors]\nmax_compiled_bytes_per_tenant = -1\n", "actors.max_compiled_bytes_per_tenant"},
                 {"[actors]\nmax_compiled_bytes_per_tenant = \"lots\"\n", "actors.max_compiled_bytes_per_tenant"},
                 {"[actors]\nspin_us = -1\n", "actors.spin_us"},
                 {"[actors]\nidempotency_ttl_ms = 999\n", "actors.idempotency_ttl_ms"},
                 {"[actors]\nidempotency_max_answer_bytes = 1048577\n", "actors.idempotency_max_answer_bytes"},
                 {"[actors]\nidempotency_max_bytes = 100\n", "actors.idempotency_max_bytes"},
                 {"[actors]\nmax_cpu = 5\n", "unknown setting actors.max_cpu"}});
}

TEST(ConfigTest, QuarantineSettingsAndTheDataDir) {
  auto c = Load("[node]\ndata_dir = \"/var/lib/wk\"\n[actors]\nquarantine_strikes = 5\nquarantine_window_ms = 1000\n"
                "quarantine_ms = 2000\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->data_dir, "/var/lib/wk");
  EXPECT_EQ(c->quarantine.strikes, 5u);
  EXPECT_EQ(c->quarantine.window, std::chrono::milliseconds(1000));
  EXPECT_EQ(c->quarantine.duration, std::chrono::milliseconds(2000));
  auto d = Load("[log]\nlevel = \"info\"\n");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->data_dir.has_value());
  EXPECT_EQ(d->quarantine.strikes, 3u);
  EXPECT_EQ(d->quarantine.window, std::chrono::minutes(10));
  EXPECT_EQ(d->quarantine.duration, std::chrono::minutes(10));
  EXPECT_EQ(d->quarantine_list_after, 12u) << "the default: about a LIST's price in GETs";
  auto off = Load("[actors]\nquarantine_strikes = 0\n");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->quarantine.enabled());
  auto never = Load("[actors]\nquarantine_list_after = 0\n");
  ASSERT_TRUE(never.ok()) << never.status().ToString();
  EXPECT_EQ(never->quarantine_list_after, 0u);
  auto always = Load("[actors]\nquarantine_list_after = 1\n");
  ASSERT_TRUE(always.ok()) << always.status().ToString();
  EXPECT_EQ(always->quarantine_list_after, 1u);
  for (const char* bad : {"[actors]\nquarantine_strikes = 101\n", "[actors]\nquarantine_window_ms = 0\n",
                          "[actors]\nquarantine_ms = 604800001\n", "[node]\ndata_dir = \"\"\n",
                          "[actors]\nquarantine_list_after = 10001\n", "[actors]\nquarantine_list_after = -1\n",
                          "[actors]\nquarantine_list_after = \"often\"\n"}) {
    auto r = Load(bad);
    ASSERT_FALSE(r.ok()) << bad;
    const std::string want = std::string(bad).find("data_dir") != std::string::npos ? "node.data_dir" : "actors.quarantine";
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().ToString();
  }
  auto over = Load("[actors]\nquarantine_list_after = 10001\n");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("actors.quarantine_list_after must be a whole number between 0 and 10000"),
            std::string::npos)
      << over.status().ToString();
}

TEST(ConfigTest, ServerSectionAndAdminListenSetTheListeners) {
  auto c = Load(R"([node]
listen = "0.0.0.0:8080"
admin_listen = "127.0.0.1:9090"
[server]
max_connections = 5000
max_connections_per_client = 16
first_request_timeout_ms = 2500
max_buffered_body_bytes = 16777216
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->admin_listen, "127.0.0.1:9090");
  EXPECT_EQ(c->server.max_connections, 5000u);
  EXPECT_EQ(c->server.max_connections_per_client, 16u);
  EXPECT_EQ(c->server.first_request_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c->server.max_buffered_body_bytes, 16777216u);
  // Without them: one listener, and HttpServerLimits' defaults.
  auto d = Load("[log]\nlevel = \"info\"\n");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->admin_listen.has_value());
  EXPECT_EQ(d->server.max_connections, 1024u);
  EXPECT_EQ(d->server.max_connections_per_client, 64u);
  EXPECT_EQ(d->server.first_request_timeout, std::chrono::seconds(10));
  EXPECT_EQ(d->server.max_buffered_body_bytes, 64u << 20);
}

TEST(ConfigTest, BadServerSettingsAreNamed) {
  struct Case {
    const char* text;
    const char* want;
  };
  for (Case c : {Case{"[server]\nmax_connections = 0\n", "server.max_connections"},
                 Case{"[server]\nmax_connections_per_client = -3\n", "server.max_connections_per_client"},
                 Case{"[server]\nfirst_request_timeout_ms = 0\n", "server.first_request_timeout_ms"},
                 Case{"[server]\nmax_buffered_body_bytes = 1000\n",
                      "server.max_buffered_body_bytes (1000) must be at least actors.max_request_bytes"},
                 Case{"[server]\nidle_timeout_ms = 5\n", "unknown setting server.idle_timeout_ms"},
                 Case{"[node]\nadmin_listen = 9090\n", "node.admin_listen must be a string"}}) {
    auto r = Load(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().ToString();
  }
}

TEST(ConfigTest, StorageSectionSetsTheReplica) {
  auto n = [](auto field) {
    return [field](const Config& c) { return static_cast<std::int64_t>(c.storage.*field); };
  };
  auto ms = [](Duration replica::ReplicaOptions::*field) {
    return [field](const Config& c) { return Ms(c.storage.*field); };
  };
  using R = replica::ReplicaOptions;
  auto loaded = ExpectLoaded(
      "[lease]\nttl_ms = 4000\ngrace_ms = 2000\nsafety_ms = 1000\nmax_skew_ms = 500\nheartbeat_period_ms = 1000\n[storage]\n",
      {{"segment_max_bytes = 65536", 65536, n(&R::segment_max_bytes)},
       {"segment_max_batches = 50", 50, n(&R::segment_max_batches)},
       {"snapshot_every_segments = 10", 10, n(&R::snapshot_every_segments)},
       {"snapshot_every_bytes = 1048576", 1048576, n(&R::snapshot_every_bytes)},
       {"upload_timeout_ms = 3000", 3000, ms(&R::upload_timeout)},
       {"restore_read_timeout_ms = 800", 800, [](const Config& c) { return Ms(c.storage.restore.read_timeout); }},
       {"restore_read_attempts = 3", 3, [](const Config& c) { return std::int64_t{c.storage.restore.read_attempts}; }},
       {"restore_parallelism = 4", 4, [](const Config& c) { return std::int64_t{c.storage.restore.parallelism}; }},
       {"gc_delete_interval_ms = 0", 0, ms(&R::gc_delete_interval)},
       {"gc_max_deletes_per_pass = 10", 10, n(&R::gc_max_deletes_per_pass)},
       {"retention_ms = 0", 0, [](const Config& c) { return Ms(c.storage.retention.all); }}});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->storage.gc_off_chain_after, std::chrono::milliseconds(6000)) << "ttl + grace, the fencing bound";

  auto d = Load("[log]\nlevel = \"info\"\n");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->storage.snapshot_every_segments, 64u);
  EXPECT_EQ(d->storage.retention.all, std::chrono::hours(24 * 7)) << "a node keeps 7 days of history by default";
  auto by = Load("[storage]\nretention_ms = 0\n[storage.retention_ms_by_tenant]\nacme = 86400000\n");
  ASSERT_TRUE(by.ok()) << by.status().ToString();
  EXPECT_EQ(by->storage.retention.For("acme"), std::chrono::hours(24)) << "a tenant's own window";
  EXPECT_EQ(by->storage.retention.For("globex"), Duration(0)) << "the others': retention_ms";
  EXPECT_EQ(d->storage.gc_off_chain_after, std::chrono::seconds(15));
}

TEST(ConfigTest, BadStorageSettingsAreNamed) {
  ExpectRefused({{"[storage]\nsegment_max_bytes = 10\n", "storage.segment_max_bytes"},
                 {"[storage]\nrestore_parallelism = 0\n", "storage.restore_parallelism"},
                 {"[storage]\nsnapshot_every_segments = \"often\"\n", "storage.snapshot_every_segments"},
                 {"[storage]\nretention_ms = -1\n", "storage.retention_ms"},
                 {"[storage.retention_ms_by_tenant]\nAcme = 5\n", "storage.retention_ms_by_tenant"},
                 {"[storage.retention_ms_by_tenant]\nacme = -5\n", "storage.retention_ms_by_tenant.acme"},
                 {"[storage]\nretention_ms_by_tenant = 5\n", "storage.retention_ms_by_tenant"},
                 {"[storage]\nupload_timeout_ms = 0\n", "storage.upload_timeout_ms"},
                 {"[storage]\nsegment_size = 5\n", "unknown setting storage.segment_size"}});
}

TEST(ConfigTest, AlarmsSectionSetsDeliveryAndItsRecheckFollowsTheLease) {
  auto loaded = Load(
      "[alarms]\nscan_period_ms = 2000\nscan_lag_ms = 300\nfirst_retry_ms = 500\nmax_retries = 2\n"
      "handed_recheck_ms = 40000\nmin_interval_ms = 250\nmax_events_per_second = 2000\n");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(Ms(loaded->alarms.scan_period), 2000);
  EXPECT_EQ(Ms(loaded->alarms.scan_lag), 300);
  EXPECT_EQ(Ms(loaded->alarms.first_retry), 500);
  EXPECT_EQ(loaded->alarms.max_retries, 2);
  EXPECT_EQ(Ms(loaded->alarms.handed_recheck), 40000);
  EXPECT_EQ(Ms(loaded->alarms.min_interval), 250);
  EXPECT_EQ(loaded->alarms.max_events_per_second, 2000);
  auto d = Load("[log]\nlevel = \"info\"\n");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(Ms(d->alarms.handed_recheck), 30000) << "30 s by default";
  EXPECT_EQ(Ms(d->alarms.scan_period), 10000);
  EXPECT_EQ(d->alarms.max_retries, 6);
  EXPECT_EQ(Ms(d->alarms.min_interval), 1000) << "1 s by default";
  EXPECT_EQ(d->alarms.max_events_per_second, 500);
  auto longer = Load("[lease]\nttl_ms = 20000\ngrace_ms = 5000\nsafety_ms = 2000\nmax_skew_ms = 1000\n");
  ASSERT_TRUE(longer.ok()) << longer.status().ToString();
  EXPECT_EQ(Ms(longer->alarms.handed_recheck), 45000) << "or twice ttl plus grace, when that is longer";
}

TEST(ConfigTest, BadAlarmSettingsAreNamed) {
  ExpectRefused({{"[alarms]\nscan_period_ms = 10\n", "alarms.scan_period_ms"},
                 {"[alarms]\nscan_lag_ms = 20000\n", "alarms.scan_lag_ms"},
                 {"[alarms]\nmax_retries = 50\n", "alarms.max_retries"},
                 {"[alarms]\nhanded_recheck_ms = 1000\n", "alarms.handed_recheck_ms must be at least"},
                 {"[alarms]\nmin_interval_ms = 120000\n", "alarms.min_interval_ms"},
                 {"[alarms]\nmax_events_per_second = 0\n", "alarms.max_events_per_second"},
                 {"[alarms]\nscan_every = 5\n", "unknown setting alarms.scan_every"}});
}

TEST(ConfigTest, UsageFlushPeriod) {
  EXPECT_EQ(Ms(Load("[log]\nlevel = \"info\"\n")->usage_flush), 60'000);
  EXPECT_TRUE(ExpectLoaded("[usage]\n", {{"flush_ms = 5000", 5000, [](const Config& c) { return Ms(c.usage_flush); }}}).ok());
  ExpectRefused({{"[usage]\nflush_ms = 999\n", "usage.flush_ms must be a whole number between 1000 and 3600000"},
                 {"[usage]\nflush_ms = \"1m\"\n", "usage.flush_ms must be a whole number"},
                 {"[usage]\nperiod_ms = 5000\n", "unknown setting usage.period_ms"}});
}

}  // namespace
}  // namespace wk::cli
