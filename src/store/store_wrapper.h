// StoreWrapper: an ObjectStore that forwards every call to an inner store, the base of the
// store decorators (fault injection, recording, counting). A decorator derives from it and
// overrides only the calls it changes; the rest, including Describe and
// SupportsConditionalDelete, keep the inner store's behaviour, and a method added to
// ObjectStore later is forwarded here once instead of in every decorator.
//
// Ownership: the wrapper either owns its inner store (the unique_ptr constructor) or
// borrows it (the reference constructor; the inner store must outlive the wrapper).
//
// Threading: as the inner store; every call on the owning Env's loop thread. A forwarded
// call returns the inner store's Task unchanged: the arguments move into the inner
// coroutine's frame, so the wrapper keeps nothing of a call in flight.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "base/check.h"
#include "store/object_store.h"

namespace wk {

class StoreWrapper : public ObjectStore {
 public:
  explicit StoreWrapper(ObjectStore& inner) : inner_(&inner) {}
  explicit StoreWrapper(std::unique_ptr<ObjectStore> inner) : owned_(std::move(inner)), inner_(owned_.get()) {
    WK_CHECK(inner_ != nullptr, "StoreWrapper needs an inner store");
  }

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    return inner_->Get(std::move(key), options);
  }
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override {
    return inner_->Head(std::move(key), options);
  }
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                            CallOptions options) override {
    return inner_->Put(std::move(key), std::move(body), std::move(condition), options);
  }
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override {
    return inner_->Delete(std::move(key), std::move(condition), options);
  }
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override {
    return inner_->List(std::move(options), call);
  }
  std::string Describe() const override { return inner_->Describe(); }
  bool SupportsConditionalDelete() const override { return inner_->SupportsConditionalDelete(); }
  Task<Result<BucketClock>> BucketTime(CallOptions options) override { return inner_->BucketTime(options); }
  std::string IfMatchRefusedHint() const override { return inner_->IfMatchRefusedHint(); }

 protected:
  ObjectStore& inner() const { return *inner_; }

 private:
  std::unique_ptr<ObjectStore> owned_;  // null when borrowed
  ObjectStore* inner_;
};

}  // namespace wk
