// The actor runtime over durable replicas on a file:// bucket: the counter example's state
// survives hibernation and a restart of the whole node (a new runtime on the same
// directory), every restore at a new generation; a hold that ends answers "unavailable"
// and nothing unacknowledged comes back.
#include "replica/provider.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "actor/testing/harness.h"
#include "base/log.h"
#include "store/counting_store.h"
#include "store/open_store.h"
#include "store/tenant_store.h"

namespace wk::replica {
namespace {

using actor::testing::Harness;
using actor::testing::MakeRequest;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string ActorWasm(const std::string& name) { return std::string(WK_ACTORS_DIR) + "/" + name + ".wasm"; }

// Holds without the cluster: a new generation per acquisition, valid until the test says.
class TestHolds final : public HoldSource {
 public:
  explicit TestHolds(Generation first_generation) : next_(first_generation) {}
  Task<Result<Replica::Hold>> Acquire(ActorId) override {
    const Generation g = next_;
    next_ = next_.Next();
    ++acquisitions;
    std::shared_ptr<bool> valid = valid_;
    co_return Replica::Hold{g, [valid] { return *valid; }};
  }
  Task<void> Release(ActorId, Generation) override {
    ++releases;
    co_return;
  }
  // Sleeping holds, when the test asks for them (docs/node-lease.md, "Sleeping holds").
  bool Sleep(const ActorId& actor, Generation generation, HoldResume resume) override {
    if (!keep_asleep) return false;
    ++sleeps;
    asleep_[actor] = {generation, resume};
    return true;
  }
  Task<std::optional<std::pair<Replica::Hold, HoldResume>>> Wake(ActorId actor) override {
    auto it = asleep_.find(actor);
    if (it == asleep_.end()) co_return std::nullopt;
    auto [generation, resume] = it->second;
    asleep_.erase(it);
    ++wakes;
    std::shared_ptr<bool> valid = valid_;
    co_return std::make_pair(Replica::Hold{generation, [valid] { return *valid; }}, resume);
  }
  void EndEveryHold() {
    *valid_ = false;
    valid_ = std::make_shared<bool>(true);
  }
  int acquisitions = 0;
  int releases = 0;
  bool keep_asleep = false;
  int sleeps = 0;
  int wakes = 0;

 private:
  Generation next_;
  std::shared_ptr<bool> valid_ = std::make_shared<bool>(true);
  std::map<ActorId, std::pair<Generation, HoldResume>> asleep_;
};

// The store (counted by purpose, as a node's), the holds and the provider, made on the
// harness's env; with per_tenant, the provider's replicas send through the tenants' stores
// and every request they report is kept in `reported`.
class DurableStorage final : public actor::StorageProvider {
 public:
  DurableStorage(RealEnv& env, const std::string& dir, Generation first_generation, bool per_tenant = false)
      : holds(first_generation) {
    auto s = OpenStore(env, "file://" + dir);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    auto counted = std::make_unique<CountingStore>(std::move(*s));
    counting = counted.get();
    store = std::move(counted);
    Replica::Deps deps{env, *store, [&env](std::function<void()> fn) { env.PostFromAnyThread(std::move(fn)); }};
    provider = std::make_unique<ReplicaProvider>(std::move(deps), holds, ReplicaOptions{}, seconds(10));
    if (per_tenant) {
      tenants = std::make_unique<TenantStores>(*store);
      tenants->set_sink([this](const TenantRequest& r) { ++reported[std::string(r.tenant)][{r.purpose, r.op}]; });
      provider->set_tenant_stores(tenants.get());
    }
  }
  // What the sink got for tenant: requests of purpose (every op, or only op).
  int Reported(const std::string& tenant, BucketPurpose purpose, std::optional<BucketOp> op = std::nullopt) const {
    auto t = reported.find(tenant);
    if (t == reported.end()) return 0;
    int n = 0;
    for (const auto& [key, count] : t->second) n += key.first == purpose && (!op || key.second == *op) ? count : 0;
    return n;
  }
  Task<Result<std::unique_ptr<actor::ActorStorage>>> Open(const ActorId& id) override { return provider->Open(id); }
  void Close(const ActorId& id, std::unique_ptr<actor::ActorStorage> s, actor::CloseIntent intent) override {
    provider->Close(id, std::move(s), intent);
  }

  TestHolds holds;
  CountingStore* counting = nullptr;  // store
  std::unique_ptr<ObjectStore> store;
  std::unique_ptr<ReplicaProvider> provider;
  std::unique_ptr<TenantStores> tenants;
  std::map<std::string, std::map<std::pair<BucketPurpose, BucketOp>, int>> reported;
};

class ProviderTest : public ::testing::Test {
 protected:
  ProviderTest() {
    log::SetLevel(log::Level::kOff);
    dir_ = std::filesystem::temp_directory_path() / ("wk-provider-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~ProviderTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Harness> Node(Generation first_generation, std::uint64_t idempotency_max_bytes = 1 << 20,
                                bool per_tenant = false) {
    actor::RuntimeOptions o = actor::testing::DefaultHarnessOptions();
    o.idle_hibernate = milliseconds(200);
    o.idempotency_max_bytes = idempotency_max_bytes;
    auto h = std::make_unique<Harness>(o, [this, first_generation, per_tenant](RealEnv& env) {
      auto d = std::make_unique<DurableStorage>(env, dir_.string(), first_generation, per_tenant);
      storage_ = d.get();
      return d;
    });
    h->Deploy("counter", ActorWasm("counter"));
    return h;
  }
  std::size_t Objects(const std::string& sub) const {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
      n += e.is_regular_file() && e.path().string().find(sub) != std::string::npos;
    }
    return n;
  }

  std::filesystem::path dir_;
  DurableStorage* storage_ = nullptr;
};

// An actor that hibernates keeps its hold asleep and its next event wakes it: no
// acquisition, no release, no second fence; the log goes on in the same generation and the
// counter where it was.
TEST_F(ProviderTest, AHibernatedCounterWakesInTheHoldItSleptIn) {
  auto node = Node(Generation{1});
  storage_->holds.keep_asleep = true;
  const ActorId id{"acme", "counter", "a"};
  for (int i = 1; i <= 5; ++i) {
    auto r = node->Call("acme/counter/a", MakeRequest("POST", "/increment"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  node->RunFor(seconds(1));  // idle: hibernated, its hold asleep
  ASSERT_FALSE(node->runtime().IsResident(id));
  EXPECT_EQ(storage_->holds.sleeps, 1);
  EXPECT_EQ(storage_->holds.releases, 0);
  const std::size_t fences = Objects("-00000000000000000000");
  for (int i = 6; i <= 8; ++i) {
    auto r = node->Call("acme/counter/a", MakeRequest("POST", "/increment"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->body, std::to_string(i) + "\n");
  }
  EXPECT_EQ(storage_->holds.wakes, 1);
  EXPECT_EQ(storage_->holds.acquisitions, 1) << "a woken hold was acquired";
  EXPECT_EQ(Objects("-00000000000000000000"), fences) << "a woken hold wrote a second fence";
  node->RunFor(seconds(1));
  EXPECT_EQ(storage_->holds.sleeps, 2);
}

// Usage per tenant (store/tenant_store.h, docs/tenants.md "Usage"): N acknowledged writes of
// a tenant's actor are N segment PUTs and its hold's fence, attributed to that tenant; its
// restore's listings are its too; another tenant's actor's are that tenant's; a tenant that
// did nothing has none; and every segment PUT the node sent is someone's.
TEST_F(ProviderTest, ATenantsWritesAreItsSegmentPutsAndNoOtherTenants) {
  auto node = Node(Generation{1}, 1 << 20, true);
  constexpr int kAcme = 5;
  constexpr int kBeta = 3;
  for (int i = 1; i <= kAcme; ++i) {
    auto r = node->Call("acme/counter/a", MakeRequest("POST", "/increment"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->body, std::to_string(i) + "\n");
  }
  for (int i = 1; i <= kBeta; ++i) ASSERT_TRUE(node->Call("beta/counter/b", MakeRequest("POST", "/increment")).ok());
  node->RunFor(milliseconds(100));
  EXPECT_EQ(storage_->Reported("acme", BucketPurpose::kSegment, BucketOp::kPut), kAcme + 1) << "each write and the fence";
  EXPECT_EQ(storage_->Reported("acme", BucketPurpose::kSegment), kAcme + 1) << "segments are PUTs only";
  EXPECT_EQ(storage_->Reported("beta", BucketPurpose::kSegment, BucketOp::kPut), kBeta + 1);
  EXPECT_EQ(storage_->Reported("acme", BucketPurpose::kRestore, BucketOp::kList), 2) << "its log and its snapshots";
  EXPECT_EQ(storage_->Reported("beta", BucketPurpose::kRestore, BucketOp::kList), 2);
  EXPECT_EQ(storage_->reported.count("idle"), 0u);
  EXPECT_EQ(storage_->reported.size(), 2u) << "acme's and beta's only";
  const BucketRequestStats& node_stats = storage_->counting->stats();
  EXPECT_EQ(node_stats.Requests(BucketOp::kPut, BucketPurpose::kSegment),
            static_cast<std::uint64_t>(kAcme + 1 + kBeta + 1))
      << "the node counts what the tenants were given, no more";
  EXPECT_EQ(node_stats.Requests(BucketPurpose::kOther), 0u) << "the tenants' views go through the node's purposes";
  // Hibernated (its hold released: no sleeping holds here), then woken by one more write: a
  // new hold, so a second fence, a second restore, and the write.
  node->RunFor(seconds(1));
  ASSERT_FALSE(node->runtime().IsResident(ActorId{"acme", "counter", "a"}));
  ASSERT_TRUE(node->Call("acme/counter/a", MakeRequest("POST", "/increment")).ok());
  EXPECT_EQ(storage_->Reported("acme", BucketPurpose::kSegment, BucketOp::kPut), kAcme + 3);
  EXPECT_EQ(storage_->Reported("acme", BucketPurpose::kRestore, BucketOp::kList), 4);
  EXPECT_EQ(storage_->Reported("beta", BucketPurpose::kSegment, BucketOp::kPut), kBeta + 1) << "beta's unchanged";
}

TEST_F(ProviderTest, TheCounterSurvivesHibernationAndARestartOfTheNode) {
  {
    auto node = Node(Generation{1});
    for (int i = 1; i <= 20; ++i) {
      auto r = node->Call("acme/counter/a", MakeRequest("POST", "/increment"));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->body, std::to_string(i) + "\n");
    }
    EXPECT_GT(Objects("wal"), 1u) << "segments in the bucket";
    node->RunFor(seconds(1));  // idle: hibernated, replica closed, hold released
    EXPECT_FALSE(node->runtime().IsResident(ActorId{"acme", "counter", "a"}));
    EXPECT_GE(storage_->holds.releases, 1);
    auto again = node->Call("acme/counter/a", MakeRequest("POST", "/increment"));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->body, "21\n") << "restored at a new generation";
    EXPECT_EQ(storage_->holds.acquisitions, 2);
  }
  // A new node process on the same bucket (generations go on from 10).
  auto node = Node(Generation{10});
  auto r = node->Call("acme/counter/a", MakeRequest("GET", "/"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "21\n");
}

TEST_F(ProviderTest, AHoldThatEndsAnswersUnavailableAndLosesNothingAcknowledged) {
  auto node = Node(Generation{1});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(node->Call("acme/counter/a", MakeRequest("POST", "/increment")).ok());
  storage_->holds.EndEveryHold();
  auto cut = node->CallRaw("acme/counter/a", MakeRequest("POST", "/increment"));
  EXPECT_EQ(cut.outcome, actor::EventOutcome::kUnavailable) << "not acknowledged: the hold ended";
  node->RunFor(milliseconds(100));
  auto r = node->Call("acme/counter/a", MakeRequest("GET", "/"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The sixth increment was never acknowledged; whether its segment was sent or not, the
  // acknowledged five are there.
  EXPECT_TRUE(r->body == "5\n" || r->body == "6\n") << r->body;
  EXPECT_GE(storage_->holds.acquisitions, 2) << "restored under a new hold";
}

// An Idempotency-Key's answer is durable with the writes it answers for, in segments and
// in snapshots (format version 2, docs/storage.md): a retry after the node restarted, its
// actor restored from the bucket at a new generation, gets the first answer without a
// second increment.
TEST_F(ProviderTest, AKeyedRequestsAnswerSurvivesARestartOfTheNode) {
  auto keyed = [](std::string key) {
    auto r = MakeRequest("POST", "/increment");
    r.headers = {{"Idempotency-Key", std::move(key)}};
    return r;
  };
  {
    auto node = Node(Generation{1});
    // More segments than snapshot_every_segments (64): the snapshot holds the early records.
    for (int i = 1; i <= 70; ++i) {
      auto r = node->Call("acme/counter/k", keyed("key-" + std::to_string(i)));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->body, std::to_string(i) + "\n");
    }
  }
  EXPECT_GE(Objects("snapshot"), 1u) << "a snapshot carries the records too";
  auto node = Node(Generation{10});
  for (int i : {1, 2, 40, 64, 65, 70}) {
    auto again = node->CallRaw("acme/counter/k", keyed("key-" + std::to_string(i)));
    ASSERT_TRUE(again.ok()) << again.error;
    EXPECT_EQ(again.response.body, std::to_string(i) + "\n");
    EXPECT_EQ(again.replayed, "1");
  }
  auto next = node->Call("acme/counter/k", keyed("key-71"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->body, "71\n") << "nothing ran twice";
}

// Over the durable replica (whose listing holds its lock), an actor whose records reach
// actors.idempotency_max_bytes forgets the oldest as each new one comes, and goes on
// answering: the pruning reads the records' sizes after the listing, never inside it (the
// first cut did, and the actor's first event past the bound hung).
TEST_F(ProviderTest, AnActorAtItsIdempotencyBoundForgetsTheOldestAndGoesOn) {
  auto node = Node(Generation{1}, 4096);
  for (int i = 1; i <= 60; ++i) {
    auto r = MakeRequest("POST", "/increment");
    r.headers = {{"Idempotency-Key", "key-" + std::to_string(i)}};
    auto got = node->Call("acme/counter/b", r);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->body, std::to_string(i) + "\n");
  }
  EXPECT_GT(node->runtime().stats().idempotency_keys_forgotten, 20u);
  auto newest = MakeRequest("POST", "/increment");
  newest.headers = {{"Idempotency-Key", "key-60"}};
  auto again = node->CallRaw("acme/counter/b", newest);
  EXPECT_EQ(again.replayed, "1") << "the newest key is remembered";
  auto oldest = MakeRequest("POST", "/increment");
  oldest.headers = {{"Idempotency-Key", "key-1"}};
  auto forgotten = node->Call("acme/counter/b", oldest);
  ASSERT_TRUE(forgotten.ok());
  EXPECT_EQ(forgotten->body, "61\n") << "a forgotten key runs again (documented)";
}

}  // namespace
}  // namespace wk::replica
