#include "actor/mem_storage.h"

namespace wk::actor {
namespace {

void Apply(MemActorState& s, const Batch& batch) {
  for (const Mutation& m : batch.mutations) {
    switch (m.kind) {
      case Mutation::Kind::kDeleteAll:
        s.data.clear();
        s.bytes = 0;
        break;
      case Mutation::Kind::kDelete: {
        auto it = s.data.find(m.key);
        if (it != s.data.end()) {
          s.bytes -= it->first.size() + it->second.size();
          s.data.erase(it);
        }
        break;
      }
      case Mutation::Kind::kPut: {
        auto it = s.data.find(m.key);
        if (it != s.data.end()) {
          s.bytes -= it->second.size();
          s.bytes += m.value.size();
          it->second = m.value;
        } else {
          s.bytes += m.key.size() + m.value.size();
          s.data.emplace(m.key, m.value);
        }
        break;
      }
    }
  }
  if (batch.alarm.has_value()) s.alarm = *batch.alarm;
  ++s.commits;
}

// The actor's live state is its own copy, taken at Open; a commit applies to it at once and
// to the provider's "durable" state only while durability is not failing. Like the real
// replica, a failure is sticky from the first batch that failed: that batch and every later
// one report an error, and a restore (a new Open) sees only what was durable.
class MemStorage final : public ActorStorage {
 public:
  MemStorage(std::shared_ptr<MemActorState> durable, std::shared_ptr<std::atomic<bool>> fail)
      : live_(*durable), durable_(std::move(durable)), fail_(std::move(fail)) {}

  std::optional<std::string> Get(std::string_view key) const override {
    auto it = live_.data.find(key);
    if (it == live_.data.end()) return std::nullopt;
    return it->second;
  }

  void List(const ListQuery& q, const ListVisitor& visit) const override {
    const auto& m = live_.data;
    const std::string end = q.prefix ? PrefixEnd(q.start) : q.end;
    auto lo = m.lower_bound(q.start);
    auto hi = end.empty() ? m.end() : m.lower_bound(end);
    if (!q.reverse) {
      for (auto it = lo; it != hi; ++it) {
        if (!visit(it->first, it->second)) return;
      }
    } else {
      for (auto it = hi; it != lo;) {
        --it;
        if (!visit(it->first, it->second)) return;
      }
    }
  }

  std::optional<std::int64_t> Alarm() const override { return live_.alarm; }
  std::uint64_t StoredBytes() const override { return live_.bytes; }

  std::uint64_t Commit(Batch batch) override {
    const std::uint64_t seq = ++seq_;
    if (failed_from_ == 0 && fail_->load()) failed_from_ = seq;
    if (failed_from_ == 0) Apply(*durable_, batch);
    Apply(live_, batch);
    return seq;
  }

  void WhenDurable(std::uint64_t seq, std::function<void(Status)> done) override {
    done(failed_from_ != 0 && seq >= failed_from_
             ? Retryable("in-memory storage: durability failure injected by the test")
             : Status::Ok());
  }

 private:
  MemActorState live_;
  std::shared_ptr<MemActorState> durable_;
  std::shared_ptr<std::atomic<bool>> fail_;
  std::uint64_t seq_ = 0;
  std::uint64_t failed_from_ = 0;  // 0: no failure
};

}  // namespace

bool InQuery(const ListQuery& q, std::string_view key) {
  if (q.prefix) return key.starts_with(q.start);
  return key >= q.start && (q.end.empty() || key < q.end);
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) != 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return end;  // every byte 0xff (or empty prefix): no upper bound
}

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
