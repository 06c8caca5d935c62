#include "cli/config.h"

#include <gtest/gtest.h>

#include <fstream>

namespace wk::cli {
namespace {

Result<Config> Load(const std::string& text) {
  const std::string path = ::testing::TempDir() + "/wasmkeep_config_test.toml";
  std::ofstream(path) << text;
  return LoadConfig(path);
}

TEST(ConfigTest, ActorsSectionSetsTheRuntimeAndLimits) {
  auto c = Load(R"([actors]
workers = 2
max_memory_bytes = 1048576
max_event_cpu_ms = 250
max_request_bytes = 1000
max_response_bytes = 2000
max_key_bytes = 64
max_value_bytes = 4096
max_stored_bytes = 100000
max_queued_events = 8
idle_hibernate_ms = 1500
memory_budget_bytes = 8388608
sync_timeout_ms = 700
max_module_bytes = 1000000
max_table_elements = 5000
isolate_heap_limit_bytes = 67108864
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& a = c->actors;
  EXPECT_EQ(a.workers, 2);
  EXPECT_EQ(a.limits.max_memory_bytes, 1048576u);
  EXPECT_EQ(a.limits.max_event_cpu_ms, 250u);
  EXPECT_EQ(a.limits.max_request_bytes, 1000u);
  EXPECT_EQ(a.limits.max_response_bytes, 2000u);
  EXPECT_EQ(a.limits.max_key_bytes, 64u);
  EXPECT_EQ(a.limits.max_value_bytes, 4096u);
  EXPECT_EQ(a.limits.max_stored_bytes, 100000u);
  EXPECT_EQ(a.limits.max_queued_events, 8u);
  EXPECT_EQ(a.idle_hibernate, std::chrono::milliseconds(1500));
  EXPECT_EQ(a.memory_budget_bytes, 8388608u);
  EXPECT_EQ(a.sync_timeout, std::chrono::milliseconds(700));
  EXPECT_EQ(a.limits.max_module_bytes, 1000000u);
  EXPECT_EQ(a.limits.max_table_elements, 5000u);
  EXPECT_EQ(a.isolate_heap_limit_bytes, 67108864u);
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
}

TEST(ConfigTest, BadActorSettingsAreNamed) {
  struct Case {
    const char* text;
    const char* want;
  };
  for (Case c : {Case{"[actors]\nmax_memory_bytes = 100000\n", "actors.max_memory_bytes must be a multiple of 65536"},
                 Case{"[actors]\nmax_event_cpu_ms = 0\n", "actors.max_event_cpu_ms"},
                 Case{"[actors]\nmax_queued_events = -1\n", "actors.max_queued_events"},
                 Case{"[actors]\nworkers = \"four\"\n", "actors.workers"},
                 Case{"[actors]\nmax_memory_bytes = 2147483648\n", "actors.memory_budget_bytes must be at least"},
                 Case{"[actors]\nmax_stored_bytes = 10\n", "actors.max_stored_bytes"},
                 Case{"[actors]\nmax_module_bytes = 0\n", "actors.max_module_bytes"},
                 Case{"[actors]\nmax_module_bytes = 67108865\n", "actors.max_module_bytes"},
                 Case{"[actors]\nmax_table_elements = 1000001\n", "actors.max_table_elements"},
                 Case{"[actors]\nisolate_heap_limit_bytes = 1048576\n", "actors.isolate_heap_limit_bytes"},
                 Case{"[actors]\nmax_cpu = 5\n", "unknown setting actors.max_cpu"}}) {
    auto r = Load(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().ToString();
  }
}

TEST(ConfigTest, StorageSectionSetsTheReplica) {
  auto c = Load(R"([lease]
ttl_ms = 4000
grace_ms = 2000
safety_ms = 1000
max_skew_ms = 500
heartbeat_period_ms = 1000
[storage]
segment_max_bytes = 65536
segment_max_batches = 50
snapshot_every_segments = 10
snapshot_every_bytes = 1048576
upload_timeout_ms = 3000
restore_read_timeout_ms = 800
restore_read_attempts = 3
restore_parallelism = 4
gc_delete_interval_ms = 0
gc_max_deletes_per_pass = 10
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& s = c->storage;
  EXPECT_EQ(s.segment_max_bytes, 65536u);
  EXPECT_EQ(s.segment_max_batches, 50u);
  EXPECT_EQ(s.snapshot_every_segments, 10u);
  EXPECT_EQ(s.snapshot_every_bytes, 1048576u);
  EXPECT_EQ(s.upload_timeout, std::chrono::milliseconds(3000));
  EXPECT_EQ(s.restore.read_timeout, std::chrono::milliseconds(800));
  EXPECT_EQ(s.restore.read_attempts, 3);
  EXPECT_EQ(s.restore.parallelism, 4);
  EXPECT_EQ(s.gc_delete_interval, std::chrono::milliseconds(0));
  EXPECT_EQ(s.gc_max_deletes_per_pass, 10);
  EXPECT_EQ(s.gc_off_chain_after, std::chrono::milliseconds(6000)) << "ttl + grace, the fencing bound";

  auto d = Load("[log]\nlevel = \"info\"\n");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->storage.snapshot_every_segments, 64u);
  EXPECT_EQ(d->storage.gc_off_chain_after, std::chrono::seconds(15));
}

TEST(ConfigTest, BadStorageSettingsAreNamed) {
  struct Case {
    const char* text;
    const char* want;
  };
  for (Case c : {Case{"[storage]\nsegment_max_bytes = 10\n", "storage.segment_max_bytes"},
                 Case{"[storage]\nrestore_parallelism = 0\n", "storage.restore_parallelism"},
                 Case{"[storage]\nsnapshot_every_segments = \"often\"\n", "storage.snapshot_every_segments"},
                 Case{"[storage]\nupload_timeout_ms = 0\n", "storage.upload_timeout_ms"},
                 Case{"[storage]\nsegment_size = 5\n", "unknown setting storage.segment_size"}}) {
    auto r = Load(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace wk::cli
