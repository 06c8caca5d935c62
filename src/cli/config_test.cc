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
}

TEST(ConfigTest, DefaultsWithoutTheSection) {
  auto c = Load("[log]\nlevel = \"info\"\n");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->actors.limits.max_value_bytes, 131072u);
  EXPECT_EQ(c->actors.limits.max_event_cpu_ms, 1000u);
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
                 Case{"[actors]\nmax_cpu = 5\n", "unknown setting actors.max_cpu"}}) {
    auto r = Load(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace wk::cli
