// The SocketHub (docs/websockets.md) on the simulated timeline, with a scripted actor (the
// RunEvent) and fake connections: what the actor sees, what is released and when, the
// bounds, 1012 for a hold that ended, the turns of one actor's message events, and an
// upgrade lost before its 101 reached anyone.
#include "routing/socket_hub.h"

#include <gtest/gtest.h>

#include <deque>

#include "base/check.h"
#include "cluster/testing/harness.h"
#include "env/sim_env.h"

namespace wk {
namespace {

class FakePeer final : public WebSocketPeer {
 public:
  bool Send(bool binary, std::string data) override {
    if (close_code != 0) return false;
    sent.push_back(binary ? "<b>" + data : data);
    return true;
  }
  void Close(int code, std::string reason) override {
    if (close_code == 0) {
      close_code = code;
      close_reason = std::move(reason);
    }
  }
  std::size_t memory_bytes() const override { return 100; }
  std::size_t queued_bytes() const override { return 0; }
  void WhenQueueAtMost(std::size_t, std::function<void()> ready) override { ready(); }
  const std::string& remote() const override { return remote_; }
  std::vector<std::string> sent;
  int close_code = 0;
  std::string close_reason;

 private:
  std::string remote_ = "test";
};

const ActorId kRoom{"acme", "chat", "lobby"};

class SocketHubTest : public ::testing::Test {
 protected:
  SocketHubTest() : env_(world_, FromUnixMs(cluster_testing::kSimOriginMs)), hub_(env_, Options()) {
    hub_.SetRunEvent([this](ActorId id, actor::SocketEvent event) { return Run(std::move(id), std::move(event)); });
  }
  static SocketHubOptions Options() {
    SocketHubOptions o;
    o.max_connections_per_actor = 3;
    o.max_connections = 4;
    // WASMKEEP_BROKEN_MODELS (scripts/check-proofs.sh: ws-broadcast-at-release).
    auto broken = BrokenModels::FromEnvironment();
    WK_CHECK(broken.ok(), broken.status().message());
    o.broken = *broken;
    return o;
  }
  // The scripted actor: each event is recorded; a message "fail" fails, "slow" takes 1 s,
  // "elsewhere" is answered as held by another node; any other message is echoed to all.
  Task<std::optional<actor::EventResult>> Run(ActorId id, actor::SocketEvent event) {
    events_.push_back(std::string(actor::SocketEventKindName(event.kind)) + ":" + event.data);
    ++running_;
    max_running_ = std::max(max_running_, running_);
    actor::EventResult r;
    if (event.data == "slow") (void)co_await env_.SleepFor(std::chrono::seconds(1));
    --running_;
    if (event.data == "elsewhere") co_return std::nullopt;
    if (event.data == "fail") {
      r.outcome = actor::EventOutcome::kActorFailed;
      r.error = "trap";
      co_return r;
    }
    if (event.kind == actor::SocketEventKind::kMessage) {
      std::vector<actor::SocketAction> actions(1);
      actions[0].kind = actor::SocketAction::Kind::kBroadcast;
      actions[0].data = std::make_shared<const std::string>(event.data);
      if (auto view = hub_in_use_->View(id)) {
        for (const auto& info : view->sockets) actions[0].ids.push_back(info.id);
      }
      hub_in_use_->Release(id, std::move(actions));
    }
    co_return r;
  }
  // A connection opened and attached, as the front and the server do.
  std::pair<std::int64_t, std::shared_ptr<FakePeer>> Open(std::shared_ptr<WebSocketHandler>* handler) {
    auto id = hub_.Reserve(kRoom);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ServerResponse r = hub_.Accept(kRoom, *id, {});
    EXPECT_EQ(r.status, 101);
    auto peer = std::make_shared<FakePeer>();
    *handler = r.upgrade->attach(peer);
    return {*id, peer};
  }
  void Message(const std::shared_ptr<WebSocketHandler>& h, std::string text) {
    env_.Spawn(h->OnMessage(false, std::move(text)), "message");
  }

  SimWorld world_{5};
  SimEnv env_;
  SocketHub hub_;
  SocketHub* hub_in_use_ = &hub_;  // whose Release the scripted actor calls
  std::vector<std::string> events_;
  int running_ = 0;
  int max_running_ = 0;
};

TEST_F(SocketHubTest, TheViewHasEveryOpenConnectionInOpeningOrderWithItsTags) {
  std::shared_ptr<WebSocketHandler> h1, h2;
  auto [a, pa] = Open(&h1);
  auto [b, pb] = Open(&h2);
  hub_.Tagged(kRoom, {actor::SocketTagged{b, "x"}});
  auto view = hub_.View(kRoom);
  ASSERT_NE(view, nullptr);
  ASSERT_EQ(view->sockets.size(), 2u);
  EXPECT_EQ(view->sockets[0].id, a);
  EXPECT_EQ(view->sockets[1].tags, std::vector<std::string>{"x"});
  EXPECT_LT(a, b);
  EXPECT_LE(b, std::int64_t{1} << 53) << "ids stay exact in a double";
  EXPECT_EQ(hub_.View(ActorId{"acme", "chat", "other"}), nullptr);
}

TEST_F(SocketHubTest, WhatIsReleasedBeforeThe101IsSentAfterItAndAClosedConnectionGetsNothing) {
  auto id = hub_.Reserve(kRoom);
  ASSERT_TRUE(id.ok());
  std::vector<actor::SocketAction> actions(2);
  actions[0].kind = actor::SocketAction::Kind::kSend;
  actions[0].id = *id;
  actions[0].data = std::make_shared<const std::string>("welcome");
  actions[1].kind = actor::SocketAction::Kind::kClose;
  actions[1].id = *id;
  actions[1].code = 4000;
  hub_.Release(kRoom, std::move(actions));
  std::vector<actor::SocketAction> late(1);
  late[0].kind = actor::SocketAction::Kind::kBroadcast;
  late[0].ids = {*id};
  late[0].data = std::make_shared<const std::string>("after the close");
  hub_.Release(kRoom, std::move(late));
  ServerResponse r = hub_.Accept(kRoom, *id, {});
  auto peer = std::make_shared<FakePeer>();
  auto handler = r.upgrade->attach(peer);
  EXPECT_EQ(peer->sent, std::vector<std::string>{"welcome"});
  EXPECT_EQ(peer->close_code, 4000);
}

// The finding of cluster.websocket.file: a member reconnecting with ?since=40 got message 41
// twice, once in its open event's history and once from 41's broadcast, which was released
// after that open event ran and went to every connection open then. A broadcast goes to the
// connections its event saw: the broken model ws-broadcast-at-release (from
// WASMKEEP_BROKEN_MODELS, scripts/check-proofs.sh) fails this test.
TEST_F(SocketHubTest, ABroadcastGoesToTheConnectionsItsEventSawNotToOnesOpenedSince) {
  std::shared_ptr<WebSocketHandler> h1, h2;
  auto [a, pa] = Open(&h1);
  std::vector<actor::SocketAction> broadcast(1);
  broadcast[0].kind = actor::SocketAction::Kind::kBroadcast;
  broadcast[0].data = std::make_shared<const std::string>("41");
  broadcast[0].ids = {a};  // what the event saw
  auto [b, pb] = Open(&h2);  // opened before the broadcast's release
  hub_.Release(kRoom, std::move(broadcast));
  EXPECT_EQ(pa->sent, std::vector<std::string>{"41"});
  EXPECT_TRUE(pb->sent.empty());
}

TEST_F(SocketHubTest, BoundsPerActorAndPerNodeNameTheirSettings) {
  std::shared_ptr<WebSocketHandler> h[4];
  for (int i = 0; i < 3; ++i) Open(&h[i]);
  auto fourth = hub_.Reserve(kRoom);
  ASSERT_FALSE(fourth.ok());
  EXPECT_NE(fourth.status().message().find("websockets.max_connections_per_actor"), std::string::npos);
  ASSERT_TRUE(hub_.Reserve(ActorId{"acme", "chat", "b"}).ok());
  auto fifth = hub_.Reserve(ActorId{"acme", "chat", "c"});
  ASSERT_FALSE(fifth.ok());
  EXPECT_NE(fifth.status().message().find("websockets.max_connections"), std::string::npos);
  EXPECT_EQ(hub_.stats().over_limit, 2u);
  // A refusal a browser can read: a 101 closed at once.
  ServerResponse refusal = hub_.RefuseWithClose(kCloseTryAgain, "full");
  auto peer = std::make_shared<FakePeer>();
  EXPECT_EQ(refusal.upgrade->attach(peer), nullptr);
  EXPECT_EQ(peer->close_code, kCloseTryAgain);
}

TEST_F(SocketHubTest, AHoldThatEndsClosesEveryConnectionWith1012AndRunsNoCloseEventHere) {
  std::shared_ptr<WebSocketHandler> h1, h2;
  auto [a, pa] = Open(&h1);
  auto [b, pb] = Open(&h2);
  hub_.CloseActor(kRoom, kCloseRestart, "moved");
  EXPECT_EQ(pa->close_code, kCloseRestart);
  EXPECT_EQ(pb->close_code, kCloseRestart);
  h1->OnClosed(kCloseRestart, "");
  h2->OnClosed(kCloseRestart, "");
  world_.RunFor(std::chrono::seconds(1));
  EXPECT_TRUE(events_.empty()) << events_[0];
  EXPECT_FALSE(hub_.HasConnections(kRoom));
  EXPECT_EQ(hub_.stats().closed_moved, 2u);
}

TEST_F(SocketHubTest, MessagesRunAsEventsAFailureCloses1011AndElsewhereCloses1012) {
  std::shared_ptr<WebSocketHandler> h1, h2, h3;
  auto [a, pa] = Open(&h1);
  auto [b, pb] = Open(&h2);
  auto [c, pc] = Open(&h3);
  Message(h1, "hello");
  world_.RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(pb->sent, std::vector<std::string>{"hello"});
  Message(h2, "fail");
  world_.RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(pb->close_code, kCloseInternal);
  EXPECT_EQ(pa->close_code, 0);
  Message(h3, "elsewhere");
  world_.RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(pc->close_code, kCloseRestart);
  // A client's close runs the close event (an accepted connection, its actor still here).
  h1->OnClosed(1000, "bye");
  world_.RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(events_.back(), "close:bye");
}

TEST_F(SocketHubTest, AtMostSixteenMessageEventsOfOneActorRunAtOnceTheRestWaitInOrder) {
  SocketHubOptions o;
  SocketHub hub(env_, o);
  hub_in_use_ = &hub;
  hub.SetRunEvent([this](ActorId id, actor::SocketEvent event) { return Run(std::move(id), std::move(event)); });
  std::vector<std::shared_ptr<WebSocketHandler>> handlers;
  std::vector<std::shared_ptr<FakePeer>> peers;
  for (int i = 0; i < 40; ++i) {
    auto id = hub.Reserve(kRoom);
    ServerResponse r = hub.Accept(kRoom, *id, {});
    peers.push_back(std::make_shared<FakePeer>());
    handlers.push_back(r.upgrade->attach(peers.back()));
  }
  for (auto& h : handlers) env_.Spawn(h->OnMessage(false, "slow"), "slow");
  world_.RunFor(std::chrono::seconds(10));
  EXPECT_EQ(max_running_, static_cast<int>(SocketHub::kMaxEventsInFlight));
  EXPECT_EQ(events_.size(), 40u) << "every message ran";
  EXPECT_EQ(peers[0]->sent.size(), 40u);
}

TEST_F(SocketHubTest, AnUpgradeLostBeforeItsAttachEndsItsConnection) {
  auto id = hub_.Reserve(kRoom);
  ASSERT_TRUE(id.ok());
  {
    ServerResponse r = hub_.Accept(kRoom, *id, {});
    EXPECT_TRUE(hub_.HasConnections(kRoom));
  }  // the 101 never reached a server: the upgrade is gone
  world_.RunFor(std::chrono::milliseconds(10));
  EXPECT_EQ(hub_.open_connections(), 0u);
  EXPECT_EQ(events_, std::vector<std::string>{"close:"}) << "the open event committed: its close runs";
}

TEST_F(SocketHubTest, MemoryCountsEachConnectionAndIsRecomputedAtMostOnceASecond) {
  std::shared_ptr<WebSocketHandler> h1;
  Open(&h1);
  const std::uint64_t one = hub_.MemoryBytes();
  EXPECT_EQ(one, SocketHub::kBookkeepingBytesPerConnection + 100);
  std::shared_ptr<WebSocketHandler> h2;
  Open(&h2);
  EXPECT_EQ(hub_.MemoryBytes(), one) << "cached";
  world_.RunFor(std::chrono::seconds(2));
  EXPECT_EQ(hub_.MemoryBytes(), 2 * one);
}

}  // namespace
}  // namespace wk
