// The listing, the read-only restore and the deletion on a simulated bucket: pages in name
// order with holders and sizes, nothing written by a listing or an inspection, and a
// deletion whose every cut point restores to the old state or to nothing.
#include "replica/inspect.h"

#include <gtest/gtest.h>

#include "base/log.h"
#include "cluster/testing/harness.h"
#include "replica/replica.h"

namespace wk::replica {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

actor::Batch Put(std::string key, std::string value) {
  actor::Batch b;
  b.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, std::move(key), std::move(value)});
  return b;
}

class InspectTest : public ::testing::Test {
 protected:
  InspectTest() { log::SetLevel(log::Level::kOff); }

  // A replica of `name` at generation gen with the given writes, closed (durable).
  void Write(const std::string& name, Generation gen, std::vector<std::pair<std::string, std::string>> kv) {
    Replica::Deps deps{env_, *store_, [this](std::function<void()> fn) { env_.Post(std::move(fn)); }, nullptr, {}};
    Replica::Hold hold{gen, [] { return true; }};
    auto r = RunTask(world_, env_, Replica::Open(std::move(deps), ActorId{"t", "c", name}, std::move(hold), {}));
    ASSERT_TRUE(r && r->ok());
    for (auto& [k, v] : kv) (**r)->Commit(Put(k, v));
    ASSERT_TRUE(RunTask(world_, env_, (**r)->Close(seconds(5)))->ok());
  }
  void Record(const std::string& name, OwnerRecord record) {
    ASSERT_TRUE(bucket_->ApplyPut(OwnerKey(ActorId{"t", "c", name}), EncodeOwnerRecord(record), Precondition::None()).ok());
  }
  std::uint64_t Writes() const { return bucket_->counts().put + bucket_->counts().del; }
  Result<ActorPage> List(ListActorsOptions o) {
    auto r = RunTask(world_, env_, ListStoredActors(env_, *store_, "t", "c", std::move(o)));
    return r ? std::move(*r) : Result<ActorPage>(Fatal("did not finish"));
  }
  Result<Restored> Inspect(const std::string& name) {
    auto r = RunTask(world_, env_, RestoreReadOnly(env_, *store_, ActorId{"t", "c", name}, {}));
    return r ? std::move(*r) : Result<Restored>(Fatal("did not finish"));
  }

  SimWorld world_{7};
  std::shared_ptr<MemBucket> bucket_ = std::make_shared<MemBucket>();
  cluster_testing::SimHost host_{world_, bucket_, {.origin_ms = 1'700'000'000'000}};
  SimEnv& env_ = host_.env();
  MemStore* store_ = &host_.store();
};

TEST_F(InspectTest, AListingPagesInNameOrderWithHoldersAndSizesAndWritesNothing) {
  for (const std::string name : {"b", "a", "a.x", "c-1", "c-2"}) {
    Write(name, Generation{1}, {{"k", "value of " + name}});
    Record(name, OwnerRecord::Nobody(Generation{1}));
  }
  Record("c-2", OwnerRecord{NodeId("n2"), InstanceToken("i2"), Generation{2}});
  const std::uint64_t writes = Writes();

  auto first = List({.limit = 2});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->actors.size(), 2u);
  EXPECT_EQ(first->actors[0].name, "a");
  EXPECT_EQ(first->actors[1].name, "a.x");
  ASSERT_TRUE(first->next_after.has_value());
  EXPECT_GT(first->actors[0].stored_bytes, 0u);
  EXPECT_EQ(first->actors[0].segments, 2u) << "the fence and one data segment";
  EXPECT_TRUE(first->actors[0].record->names_nobody());

  auto second = List({.after = *first->next_after, .limit = 2});
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->actors.size(), 2u);
  EXPECT_EQ(second->actors[0].name, "b");
  EXPECT_EQ(second->actors[1].name, "c-1");
  auto last = List({.after = *second->next_after, .limit = 2});
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->actors.size(), 1u);
  EXPECT_FALSE(last->next_after.has_value()) << "the last page";
  EXPECT_EQ(last->actors[0].record->node_id, NodeId("n2"));
  EXPECT_EQ(last->actors[0].record->generation, Generation{2});

  auto prefixed = List({.prefix = "c-", .limit = 10});
  ASSERT_TRUE(prefixed.ok());
  ASSERT_EQ(prefixed->actors.size(), 2u);
  EXPECT_EQ(prefixed->actors[0].name, "c-1");
  EXPECT_FALSE(prefixed->next_after.has_value());
  EXPECT_EQ(Writes(), writes) << "a listing never writes";

  EXPECT_EQ(List({.prefix = "a/b"}).code(), Code::kInvalidArgument);
  EXPECT_EQ(List({.limit = 0}).code(), Code::kInvalidArgument);
  EXPECT_EQ(List({.limit = kMaxListActorsLimit + 1}).code(), Code::kInvalidArgument);
}

TEST_F(InspectTest, ACorruptRecordIsListedWithItsError) {
  ASSERT_TRUE(bucket_->ApplyPut(OwnerKey(ActorId{"t", "c", "bad"}), "garbage", Precondition::None()).ok());
  auto page = List({});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->actors.size(), 1u);
  EXPECT_FALSE(page->actors[0].record.has_value());
  EXPECT_NE(page->actors[0].record_error.find("corrupt"), std::string::npos);
}

TEST_F(InspectTest, AReadOnlyRestoreSeesTheLogAndNeverWrites) {
  Write("a", Generation{1}, {{"k1", "v1"}, {"k2", "v2"}});
  Write("a", Generation{2}, {{"k2", "v2b"}});
  const std::uint64_t writes = Writes();
  auto restored = Inspect("a");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->state.Get("k1"), "v1");
  EXPECT_EQ(restored->state.Get("k2"), "v2b");
  EXPECT_EQ(Writes(), writes) << "never acquires, never writes";
  auto none = Inspect("never-ran");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->state.entries().empty());
}

TEST_F(InspectTest, ADeletionEmptiesTheLogAndTheNextHoldStartsEmpty) {
  Write("a", Generation{1}, {{"k1", "v1"}});
  Write("a", Generation{2}, {{"k2", "v2"}});
  auto deleted = RunTask(world_, env_, DeleteStoredActor(env_, *store_, ActorId{"t", "c", "a"}, Generation{3}, [] { return true; }));
  ASSERT_TRUE(deleted && deleted->ok()) << (deleted ? deleted->status().ToString() : "");
  EXPECT_EQ((*deleted)->objects, 4u) << "two fences, two data segments";
  std::size_t left = 0;
  for (const auto& [k, v] : bucket_->objects()) left += k.starts_with("wal/") || k.starts_with("snapshot/");
  EXPECT_EQ(left, 1u) << "only the empty fence of the deleting hold";
  auto restored = Inspect("a");
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(restored->state.entries().empty());

  // A late upload of an older hold landing after the deletion is off the chain.
  Segment late;
  late.actor = ActorId{"t", "c", "a"};
  late.position = Position{Generation{2}, 7};
  late.batches.push_back(Put("zombie", "x"));
  ASSERT_TRUE(bucket_->ApplyPut(SegmentKey(late.actor, late.position), EncodeSegment(late), Precondition::None()).ok());
  Write("a", Generation{4}, {{"fresh", "1"}});
  restored = Inspect("a");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->state.entries().size(), 1u);
  EXPECT_EQ(restored->state.Get("fresh"), "1");
  EXPECT_FALSE(restored->state.Get("zombie").has_value());
}

TEST_F(InspectTest, ADeletionCutAtAnyPointRestoresToNothing) {
  // The hold stops being valid after n deletes: whatever is left restores empty (the fence
  // went first), never to part of the old state.
  for (int n = 0; n < 4; ++n) {
    const std::string name = "a" + std::to_string(n);
    Write(name, Generation{1}, {{"k1", "v1"}});
    Write(name, Generation{2}, {{"k2", "v2"}});
    int allowed = n + 2;  // the two checks before the fence, then one per delete
    auto deleted = RunTask(world_, env_,
                           DeleteStoredActor(env_, *store_, ActorId{"t", "c", name}, Generation{3}, [&allowed] {
                             return allowed-- > 0;
                           }));
    ASSERT_TRUE(deleted.has_value());
    EXPECT_EQ(deleted->code(), Code::kRetryable) << n;
    auto restored = Inspect(name);
    ASSERT_TRUE(restored.ok()) << n << ": " << restored.status().ToString();
    EXPECT_TRUE(restored->state.entries().empty()) << n;
  }
}

TEST_F(InspectTest, ADeletionRefusesALogOfItsOwnOrALaterGeneration) {
  Write("a", Generation{5}, {{"k", "v"}});
  auto deleted = RunTask(world_, env_, DeleteStoredActor(env_, *store_, ActorId{"t", "c", "a"}, Generation{4}, [] { return true; }));
  ASSERT_TRUE(deleted.has_value());
  EXPECT_EQ(deleted->code(), Code::kFatal);
  auto restored = Inspect("a");
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->state.Get("k"), "v") << "nothing of generation 5 was deleted";
}

}  // namespace
}  // namespace wk::replica
