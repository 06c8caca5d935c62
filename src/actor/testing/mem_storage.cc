#include "actor/testing/mem_storage.h"

namespace wk::actor {
namespace {

// The actor's live state is its own copy, taken at Open; a commit applies to it at once and
// to the provider's "durable" state only while durability is not failing. Its gate is
// always valid unless the test ends the holds (EndHolds). Like the real replica's gate
// (replica/hold_gate.h), a failure is sticky: once a batch could not be made durable, or a
// release found the hold ended, or the runtime broke it, nothing more is released, and a
// restore (a new Open) sees only what was durable.
class MemStorage final : public ActorStorage {
 public:
  MemStorage(std::shared_ptr<MemActorState> durable, std::shared_ptr<std::atomic<bool>> fail,
             std::shared_ptr<std::atomic<bool>> valid)
      : live_(durable->map), durable_(std::move(durable)), fail_(std::move(fail)), valid_(std::move(valid)) {}

  std::optional<std::string> Get(std::string_view key) const override { return live_.Get(key); }
  void List(const ListQuery& q, const ListVisitor& visit) const override { live_.List(q, visit); }
  std::optional<std::int64_t> Alarm() const override { return live_.alarm(); }
  std::optional<std::string> GetSystem(std::string_view key) const override { return live_.GetSystem(key); }
  void ListSystem(const ListQuery& q, const ListVisitor& visit) const override { live_.ListSystem(q, visit); }
  std::uint64_t SystemBytes() const override { return live_.system_bytes(); }
  std::uint64_t StoredBytes() const override { return live_.bytes(); }
  std::uint64_t MemoryBytes() const override { return live_.memory_bytes(); }

  std::uint64_t Commit(Batch batch) override {
    const std::uint64_t seq = ++seq_;
    if (fail_->load()) Fail(Retryable("in-memory storage: the writes could not be made durable (failure injected by the test)"));
    if (failure().ok()) {
      durable_->map.Apply(batch);
      ++durable_->commits;
    }
    live_.Apply(batch);
    return seq;
  }

  void WhenReleasable(std::uint64_t, std::function<void(Status)> done) override {
    if (!valid_->load()) Fail(Retryable("in-memory storage: the hold ended (injected by the test)"));
    done(failure());
  }

  Status failure() const override {
    std::lock_guard lock(mu_);
    return failure_.value_or(Status::Ok());
  }

  void Break(Status why) override { Fail(std::move(why)); }

 private:
  void Fail(Status why) {
    std::lock_guard lock(mu_);
    if (!failure_) failure_ = std::move(why);
  }

  StateMap live_;
  std::shared_ptr<MemActorState> durable_;
  std::shared_ptr<std::atomic<bool>> fail_;
  std::shared_ptr<std::atomic<bool>> valid_;
  std::uint64_t seq_ = 0;
  mutable std::mutex mu_;
  std::optional<Status> failure_;  // sticky
};

}  // namespace

Task<Result<std::unique_ptr<ActorStorage>>> MemStorageProvider::Open(const ActorId& id) {
  ++opens_;
  if (fail_opens_) co_return Retryable("in-memory storage: restore failure injected by the test");
  auto& state = states_[id.ToString()];
  if (!state) state = std::make_shared<MemActorState>();
  std::unique_ptr<ActorStorage> storage = std::make_unique<MemStorage>(state, fail_durability_, valid_);
  co_return storage;
}

void MemStorageProvider::Close(const ActorId&, std::unique_ptr<ActorStorage> storage, CloseIntent) {
  ++closes_;
  storage.reset();
}

std::shared_ptr<const MemActorState> MemStorageProvider::State(const ActorId& id) const {
  auto it = states_.find(id.ToString());
  return it == states_.end() ? nullptr : it->second;
}

}  // namespace wk::actor
