// A test harness for actors: one ActorRuntime over in-memory storage on a RealEnv, with
// synchronous calls, so example and runtime tests read like a conversation with an actor.
// Not for production code. Single-threaded use from the test's thread (it runs the loop).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actor/testing/mem_storage.h"
#include "actor/runtime.h"
#include "engine/engine.h"
#include "env/real_env.h"
#include "net/websocket.h"
#include "routing/message_delivery.h"
#include "routing/socket_hub.h"

namespace wk::actor::testing {

struct TestRequest {
  std::string method = "GET";
  std::string path;
  std::string query;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

TestRequest MakeRequest(std::string method, std::string path, std::string query = "", std::string body = "");

struct TestResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The first header with this name (case-insensitive), or "" if absent.
  std::string header(std::string_view name) const;
};

// The client's end of a WebSocket the harness opened: what the node sent it, in order, and
// how the node closed it.
class FakeSocketPeer final : public WebSocketPeer {
 public:
  explicit FakeSocketPeer(Env& env) : env_(env) {}
  bool Send(bool binary, std::string data) override;
  void Close(int code, std::string reason) override;
  std::size_t memory_bytes() const override { return 0; }
  // Nothing is queued: what is sent is in `sent` at once.
  std::size_t queued_bytes() const override { return 0; }
  void WhenQueueAtMost(std::size_t, std::function<void()> ready) override { env_.Post(std::move(ready)); }
  const std::string& remote() const override { return remote_; }
  // The text messages sent (binary ones as "<binary>" + data).
  std::vector<std::string> sent;
  int close_code = 0;  // 0: not closed by the node
  std::string close_reason;

 private:
  Env& env_;
  std::string remote_ = "127.0.0.1:1";
};

struct TestSocket {
  int status = 0;     // 101 once accepted; else the refusal's status
  std::string body;   // the refusal's body
  std::int64_t id = 0;
  std::shared_ptr<FakeSocketPeer> peer;
  std::shared_ptr<WebSocketHandler> handler;
};

// Options for the harness; defaults: one worker, default limits.
RuntimeOptions DefaultHarnessOptions();

class Harness {
 public:
  Harness();
  explicit Harness(RuntimeOptions options);
  // With another storage provider, made on the harness's env (the durable replica's tests).
  using StorageFactory = std::function<std::unique_ptr<StorageProvider>(RealEnv&)>;
  Harness(RuntimeOptions options, const StorageFactory& make_storage);
  ~Harness();

  // Compiles the module at `wasm_path` and serves it as `class_name` for every tenant.
  // Fails the current test (gtest ADD_FAILURE) on error.
  void Deploy(const std::string& class_name, const std::string& wasm_path);
  // Same, returning the compile error instead.
  Status TryDeploy(const std::string& class_name, const std::string& wasm_path);
  // Class versions (docs/tenants.md): `version` of class_name, for every tenant, and the
  // chooser of the version each actor runs (a test builds it with control::ChooseVersion).
  // Every version is loaded here: nothing is ever missing.
  void DeployVersion(const std::string& class_name, std::uint32_t version, const std::string& wasm_path);
  void SetChooser(const std::string& class_name, VersionChooser chooser, std::uint32_t stable);
  // The migrations that ran (RuntimeHooks::on_upgrade), in order.
  const std::vector<UpgradeReport>& upgrades() const { return upgrades_; }

  // A request to "tenant/class/name". Ok with the response, or an error whose message is
  // the event's outcome name and error ("actor_failed: trap: unreachable").
  Result<TestResponse> Call(const std::string& actor, TestRequest req);
  // The same, with the runtime's full EventResult.
  EventResult CallRaw(const std::string& actor, TestRequest req);
  EventResult Alarm(const std::string& actor, AlarmEvent event = {});

  // Runs the event loop until every outbox the runtime reported is delivered (a node's
  // MessageDelivery, delivering straight to this runtime), or `limit` passed.
  void DeliverMessages(Duration limit = std::chrono::seconds(5));
  MessageDelivery& messages() { return *messages_; }

  // WebSockets, held by the harness's SocketHub as a node's are (routing/socket_hub.h), the
  // handshake run as the front runs it (Front::OpenSocket). Each call runs to completion.
  TestSocket OpenSocket(const std::string& actor, TestRequest handshake);
  // A message from the client; returns once its event was answered.
  void SocketMessage(const std::string& actor, TestSocket& socket, std::string data, bool binary = false);
  // The client closed; returns once the close event ran.
  void SocketClosed(const std::string& actor, TestSocket& socket, int code = 1000, std::string reason = "");
  SocketHub& sockets() { return *sockets_; }

  // The actors' now_ms() moves forward by ms.
  void AdvanceClock(std::int64_t ms);
  // Runs the event loop for `d` (idle timers fire).
  void RunFor(Duration d);

  ActorRuntime& runtime() { return *runtime_; }
  MemStorageProvider& storage() { return storage_; }
  engine::Engine& engine() { return *engine_; }
  RealEnv& env() { return env_; }

 private:
  ActorId Resolve(const std::string& actor);
  static Task<std::optional<EventResult>> RunSocketHere(ActorRuntime& runtime, ActorId id, SocketEvent event);

  RealEnv env_;
  std::unique_ptr<engine::Engine> engine_;
  MemStorageProvider storage_;
  std::unique_ptr<StorageProvider> custom_storage_;
  ClassRegistry classes_;
  std::vector<std::pair<std::string, std::shared_ptr<const engine::Module>>> deployed_;
  struct Versioned {
    std::map<std::uint32_t, std::shared_ptr<const engine::Module>> modules;
    VersionChooser chooser;
    std::uint32_t stable = 0;
  };
  std::map<std::string, Versioned> versioned_;  // by class name
  std::vector<UpgradeReport> upgrades_;
  std::int64_t clock_ms_ = 1'800'000'000'000;  // a fixed, readable start (2027-01-15)
  std::unique_ptr<ActorRuntime> runtime_;
  std::unique_ptr<MessageDelivery> messages_;
  std::unique_ptr<SocketHub> sockets_;  // before runtime_ is destroyed: reset first in ~Harness
  std::set<ActorId> kicked_;  // every sender the runtime reported (DeliverMessages)
};

// Reads a whole file (test data); empty on error.
std::vector<std::uint8_t> ReadFileBytes(const std::string& path);

}  // namespace wk::actor::testing
