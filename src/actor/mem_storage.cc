#include "actor/mem_storage.h"

namespace wk::actor {
namespace {

// The actor's live state is its own copy, taken at Open; a commit applies to it at once and
// to the provider's "durable" state only while durability is not failing. Like the real
// replica, a failure is sticky from the first batch that failed: that batch and every later
// one report an error, and a restore (a new Open) sees only what was durable.
class MemStorage final : public ActorStorage {
 public:
  MemStorage(std::shared_ptr<MemActorState> durable, std::shared_ptr<std::atomic<bool>> fail)
      : live_(durable->map), durable_(std::move(durable)), fail_(std::move(fail)) {}

  std::optional<std::string> Get(std::string_view key) const override { return live_.Get(key); }
  void List(const ListQuery& q, const ListVisitor& visit) const override { live_.List(q, visit); }
  std::optional<std::int64_t> Alarm() const override { return live_.alarm(); }
  std::uint64_t StoredBytes() const override { return live_.bytes(); }

  std::uint64_t Commit(Batch batch) override {
    const std::uint64_t seq = ++seq_;
    if (failed_from_ == 0 && fail_->load()) failed_from_ = seq;
    if (failed_from_ == 0) {
      durable_->map.Apply(batch);
      ++durable_->commits;
    }
    live_.Apply(batch);
    return seq;
  }

  void WhenDurable(std::uint64_t seq, std::function<void(Status)> done) override {
    done(failed_from_ != 0 && seq >= failed_from_
             ? Retryable("in-memory storage: durability failure injected by the test")
             : Status::Ok());
  }

 private:
  StateMap live_;
  std::shared_ptr<MemActorState> durable_;
  std::shared_ptr<std::atomic<bool>> fail_;
  std::uint64_t seq_ = 0;
  std::uint64_t failed_from_ = 0;  // 0: no failure
};

}  // namespace

Task<Result<std::unique_ptr<ActorStorage>>> MemStorageProvider::Open(const ActorId& id) {
  ++opens_;
  if (fail_opens_) co_return Retryable("in-memory storage: restore failure injected by the test");
  auto& state = states_[id.ToString()];
  if (!state) state = std::make_shared<MemActorState>();
  std::unique_ptr<ActorStorage> storage = std::make_unique<MemStorage>(state, fail_durability_);
  co_return storage;
}

void MemStorageProvider::Close(const ActorId&, std::unique_ptr<ActorStorage> storage) {
  ++closes_;
  storage.reset();
}

std::shared_ptr<const MemActorState> MemStorageProvider::State(const ActorId& id) const {
  auto it = states_.find(id.ToString());
  return it == states_.end() ? nullptr : it->second;
}

}  // namespace wk::actor
