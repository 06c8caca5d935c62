#include "actor/testing/harness.h"

#include "base/check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace wk::actor::testing {

TestRequest MakeRequest(std::string method, std::string path, std::string query, std::string body) {
  TestRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.query = std::move(query);
  r.body = std::move(body);
  return r;
}

std::string TestResponse::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n.size() == name.size() &&
        std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return v;
    }
  }
  return "";
}

RuntimeOptions DefaultHarnessOptions() {
  RuntimeOptions o;
  o.workers = 1;
  // The broken models named in WASMKEEP_BROKEN_MODELS (scripts/check-proofs.sh).
  auto broken = BrokenModels::FromEnvironment();
  WK_CHECK(broken.ok(), broken.status().message());
  o.broken = *broken;
  return o;
}

std::vector<std::uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

namespace {

// The harness's one node: every message runs on its runtime, answered as a node's front would.
Task<ServerResponse> DeliverHere(ActorRuntime& runtime, ActorId to, IncomingMessage m) {
  const std::string name = to.ToString();
  EventResult r = co_await runtime.HandleMessage(std::move(to), std::move(m));
  co_return MessageAnswer(r, name);
}

}  // namespace

Harness::Harness() : Harness(DefaultHarnessOptions()) {}

Harness::Harness(RuntimeOptions options) : Harness(std::move(options), nullptr) {}

Harness::Harness(RuntimeOptions options, const StorageFactory& make_storage)
    : engine_(std::make_unique<engine::Engine>()) {
  options.wall_clock_ms = [this] { return clock_ms_; };
  if (make_storage) custom_storage_ = make_storage(env_);
  StorageProvider& storage = custom_storage_ ? *custom_storage_ : storage_;
  RuntimeHooks hooks;
  hooks.on_upgrade = [this](const UpgradeReport& report) { upgrades_.push_back(report); };
  runtime_ = std::make_unique<ActorRuntime>(env_, *engine_, classes_, storage, std::move(options), std::move(hooks));
  MessageDeliveryOptions delivery;
  delivery.first_retry = std::chrono::milliseconds(20);
  delivery.max_retry = std::chrono::milliseconds(200);
  messages_ = std::make_unique<MessageDelivery>(
      env_, *runtime_,
      [this](ActorId to, IncomingMessage m) {
        Resolve(to.ToString());  // its class known for its tenant, as a call's
        return DeliverHere(*runtime_, std::move(to), std::move(m));
      },
      delivery, runtime_->options().broken);
  runtime_->SetOutboxListener([this](const ActorId& sender) {
    kicked_.insert(sender);
    messages_->Kick(sender);
  });
  SocketHubOptions hub;
  hub.broken = runtime_->options().broken;
  sockets_ = std::make_unique<SocketHub>(env_, hub);
  runtime_->SetSocketDirectory(sockets_.get());
  sockets_->SetRunEvent([this](ActorId id, SocketEvent event) -> Task<std::optional<EventResult>> {
    return RunSocketHere(*runtime_, std::move(id), std::move(event));
  });
}

bool FakeSocketPeer::Send(bool binary, std::string data) {
  if (close_code != 0) return false;
  sent.push_back(binary ? "<binary>" + data : std::move(data));
  return true;
}

void FakeSocketPeer::Close(int code, std::string reason) {
  if (close_code != 0) return;
  close_code = code;
  close_reason = std::move(reason);
}

namespace {
Task<TestSocket> OpenHere(Env* env, ActorRuntime& runtime, SocketHub& hub, ActorId id, Request handshake) {
  TestSocket out;
  auto reserved = hub.Reserve(id);
  if (!reserved.ok()) {
    out.status = 503;
    out.body = reserved.status().message();
    co_return out;
  }
  SocketEvent event;
  event.kind = SocketEventKind::kOpen;
  event.id = *reserved;
  event.handshake = std::move(handshake);
  EventResult r = co_await runtime.HandleSocket(id, std::move(event));
  if (!r.ok() || r.response.status >= 400) {
    hub.Abort(id, *reserved);
    out.status = r.ok() ? r.response.status : 500;
    out.body = r.ok() ? r.response.body : std::string(EventOutcomeName(r.outcome)) + ": " + r.error;
    co_return out;
  }
  ServerResponse accepted = hub.Accept(id, *reserved, {});
  out.status = accepted.status;
  out.id = *reserved;
  if (accepted.upgrade) {
    out.peer = std::make_shared<FakeSocketPeer>(*env);
    out.handler = accepted.upgrade->attach(out.peer);
  }
  co_return out;
}
}  // namespace

Task<std::optional<EventResult>> Harness::RunSocketHere(ActorRuntime& runtime, ActorId id, SocketEvent event) {
  EventResult r = co_await runtime.HandleSocket(std::move(id), std::move(event));
  co_return r;
}

TestSocket Harness::OpenSocket(const std::string& actor, TestRequest req) {
  Request r;
  r.method = std::move(req.method);
  r.path = std::move(req.path);
  r.query = std::move(req.query);
  r.headers = std::move(req.headers);
  return env_.RunMain(OpenHere(&env_, *runtime_, *sockets_, Resolve(actor), std::move(r)));
}

void Harness::SocketMessage(const std::string& actor, TestSocket& socket, std::string data, bool binary) {
  (void)actor;
  if (!socket.handler) return;
  env_.RunMain(socket.handler->OnMessage(binary, std::move(data)));
}

void Harness::SocketClosed(const std::string& actor, TestSocket& socket, int code, std::string reason) {
  if (!socket.handler) return;
  socket.handler->OnClosed(code, std::move(reason));
  // The close event runs as its own task: wait until the actor has no turn left in the hub.
  const ActorId id = Resolve(actor);
  for (int i = 0; i < 500 && sockets_->HasConnections(id); ++i) RunFor(std::chrono::milliseconds(2));
}

void Harness::DeliverMessages(Duration limit) {
  // Every RunMain ends by cancelling what it spawned, deliveries included: each outbox ever
  // reported is kicked again here (one read if it is empty), and delivered within this run.
  auto run = [](Harness* h, MonoTime deadline) -> Task<void> {
    for (const ActorId& sender : h->kicked_) h->messages_->Kick(sender);
    while (h->messages_->senders() > 0 && h->env_.MonoNow() < deadline) {
      if (!co_await h->env_.SleepFor(std::chrono::milliseconds(2))) break;
    }
  };
  env_.RunMain(run(this, env_.MonoNow() + limit));
}

Harness::~Harness() {
  messages_->Stop();
  env_.RunMain(runtime_->Shutdown(std::chrono::seconds(30)));
  runtime_.reset();
}

Status Harness::TryDeploy(const std::string& class_name, const std::string& wasm_path) {
  auto bytes = ReadFileBytes(wasm_path);
  if (bytes.empty()) return NotFound("cannot read " + wasm_path);
  auto module = CompileActorModule(*engine_, bytes, runtime_->options().limits);
  if (!module.ok()) return module.status();
  for (auto& [name, m] : deployed_) {
    if (name == class_name) {
      m = *module;
      return Status::Ok();
    }
  }
  deployed_.emplace_back(class_name, *module);
  return Status::Ok();
}

void Harness::DeployVersion(const std::string& class_name, std::uint32_t version, const std::string& wasm_path) {
  auto bytes = ReadFileBytes(wasm_path);
  if (bytes.empty()) {
    ADD_FAILURE() << "cannot read " << wasm_path;
    return;
  }
  auto module = CompileActorModule(*engine_, bytes, runtime_->options().limits);
  if (!module.ok()) {
    ADD_FAILURE() << "deploying " << wasm_path << ": " << module.status().ToString();
    return;
  }
  versioned_[class_name].modules[version] = *module;
}

void Harness::SetChooser(const std::string& class_name, VersionChooser chooser, std::uint32_t stable) {
  Versioned& v = versioned_[class_name];
  v.chooser = std::move(chooser);
  v.stable = stable;
}

void Harness::Deploy(const std::string& class_name, const std::string& wasm_path) {
  Status s = TryDeploy(class_name, wasm_path);
  if (!s.ok()) ADD_FAILURE() << "deploying " << wasm_path << " as " << class_name << ": " << s.ToString();
}

ActorId Harness::Resolve(const std::string& actor) {
  auto id = ::wk::ParseActorId(actor);
  if (!id.ok()) {
    ADD_FAILURE() << "bad actor name " << actor << ": " << id.status().ToString();
    return {};
  }
  for (auto& [name, m] : deployed_) {
    if (name == id->class_name) classes_.Set(id->tenant, name, m);
  }
  if (auto v = versioned_.find(id->class_name); v != versioned_.end()) {
    for (const auto& [version, module] : v->second.modules) {
      if (classes_.Find(id->tenant, id->class_name, version) != module) {
        classes_.SetVersion(id->tenant, id->class_name, version, module);
      }
    }
    classes_.SetChooser(id->tenant, id->class_name, v->second.chooser, v->second.stable);
  }
  return *id;
}

EventResult Harness::CallRaw(const std::string& actor, TestRequest req) {
  Request r;
  r.method = std::move(req.method);
  r.path = std::move(req.path);
  r.query = std::move(req.query);
  r.headers = std::move(req.headers);
  r.body = std::move(req.body);
  return env_.RunMain(runtime_->HandleRequest(Resolve(actor), std::move(r)));
}

Result<TestResponse> Harness::Call(const std::string& actor, TestRequest req) {
  EventResult r = CallRaw(actor, std::move(req));
  if (!r.ok()) return InvalidArgument(std::string(EventOutcomeName(r.outcome)) + ": " + r.error);
  TestResponse out;
  out.status = r.response.status;
  out.headers = std::move(r.response.headers);
  out.body = std::move(r.response.body);
  return out;
}

EventResult Harness::Alarm(const std::string& actor, AlarmEvent event) {
  return env_.RunMain(runtime_->HandleAlarm(Resolve(actor), event));
}

void Harness::AdvanceClock(std::int64_t ms) { clock_ms_ += ms; }

void Harness::RunFor(Duration d) {
  auto sleep = [](Env& env, Duration d) -> Task<void> { (void)co_await env.SleepFor(d); };
  env_.RunMain(sleep(env_, d));
}

}  // namespace wk::actor::testing
