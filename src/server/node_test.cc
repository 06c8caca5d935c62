// Node (node.h) assembled in-process on a file:// bucket: it becomes ready, serves its
// admin routes on the client API and actors once the cluster secret is read, and a clean
// stop releases its lease.
#include "server/node.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "cluster/node_record.h"
#include "store/open_store.h"

namespace wk {
namespace {

using std::chrono::milliseconds;

LeaseTiming ShortTiming() {
  LeaseTiming t;
  t.ttl = milliseconds(900);
  t.grace = milliseconds(450);
  t.safety = milliseconds(300);
  t.max_skew = milliseconds(150);
  t.heartbeat_period = milliseconds(300);
  return t;
}

class NodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("wk-node-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(NodeTest, BecomesReadyServesActorsAndReleasesItsLeaseOnACleanStop) {
  RealEnv env;
  auto bucket = OpenStore(env, "file://" + dir_.string(), ProcessGetEnv, BucketOpen::kCreateIfMissing);
  ASSERT_TRUE(bucket.ok()) << bucket.status().ToString();
  NodeOptions options;
  options.node_id = NodeId("n1");
  options.listen = "127.0.0.1:0";
  options.peer_listen = "127.0.0.1:0";
  options.timing = ShortTiming();
  ASSERT_TRUE(options.timing.Validate().ok());
  auto started = Node::Start(env, std::move(*bucket), std::move(options));
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  Node& node = **started;
  EXPECT_NE(node.api_port(), 0);
  EXPECT_NE(node.peer_port(), 0);
  EXPECT_EQ(node.identity().address, "127.0.0.1:" + std::to_string(node.peer_port()));

  bool was_ready = false;
  bool had_host = false;
  NodeExit exit = env.RunMain([](RealEnv* e, Node* n, bool* ready, bool* host) -> Task<NodeExit> {
    Latch<int> stop(*e, [] { return -1; });
    // Stops the node (as SIGTERM does) once it is ready and serves actors, or after 20 s.
    e->Spawn([](RealEnv* e, Node* n, Latch<int> stop, bool* ready, bool* host) -> Task<void> {
      for (int i = 0; i < 200; ++i) {
        if (!co_await e->SleepFor(milliseconds(100))) co_return;
        if (n->cluster().lease().IsReady() && n->actor_host() != nullptr) {
          *ready = true;
          *host = true;
          break;
        }
      }
      stop.Set(15);
    }(e, n, stop, ready, host), "stop when ready");
    co_return co_await n->Run(stop);
  }(&env, &node, &was_ready, &had_host));
  node.Close();
  EXPECT_TRUE(was_ready);
  EXPECT_TRUE(had_host);
  EXPECT_EQ(exit.kind, NodeExit::Kind::kCleanStop);
  EXPECT_FALSE(node.cluster().lease().IsValid());
}

}  // namespace
}  // namespace wk
