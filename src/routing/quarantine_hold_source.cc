#include "routing/quarantine_hold_source.h"

namespace wk {

Task<Result<replica::Replica::Hold>> QuarantineHoldSource::Acquire(ActorId actor) {
  if (cache_ == nullptr) co_return co_await inner_.Acquire(std::move(actor));
  if (broken_.on(BrokenModel::kStartSkipsQuarantineRead)) {
    if (auto q = cache_->Peek(actor)) co_return Retryable(control::DescribeQuarantine(*q));
    co_return co_await inner_.Acquire(std::move(actor));
  }
  auto quarantined = co_await cache_->Check(actor, control::QuarantineRead::kOnMiss);
  if (quarantined.ok() && quarantined->has_value()) co_return Retryable(control::DescribeQuarantine(**quarantined));
  co_return co_await inner_.Acquire(std::move(actor));
}

Task<void> QuarantineHoldSource::Release(ActorId actor, Generation generation) {
  co_await inner_.Release(std::move(actor), generation);
}

bool QuarantineHoldSource::Sleep(const ActorId& actor, Generation generation, HoldResume resume) {
  return inner_.Sleep(actor, generation, resume);
}

Task<std::optional<std::pair<replica::Replica::Hold, HoldResume>>> QuarantineHoldSource::Wake(ActorId actor) {
  if (cache_ == nullptr) co_return co_await inner_.Wake(std::move(actor));
  if (broken_.on(BrokenModel::kStartSkipsQuarantineRead)) {
    if (cache_->Peek(actor)) co_return std::nullopt;
    co_return co_await inner_.Wake(std::move(actor));
  }
  auto quarantined = co_await cache_->Check(actor, control::QuarantineRead::kOnMiss);
  if (quarantined.ok() && quarantined->has_value()) co_return std::nullopt;
  co_return co_await inner_.Wake(std::move(actor));
}

}  // namespace wk
