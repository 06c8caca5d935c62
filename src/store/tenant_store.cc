#include "store/tenant_store.h"

#include <array>
#include <utility>

#include "store/store_wrapper.h"

namespace wk {

// What calls in flight keep: the sink (cleared when the TenantStores goes).
struct TenantStores::Shared {
  TenantRequestSink sink;
};

namespace {

using Shared = TenantStores::Shared;
using Name = std::shared_ptr<const std::string>;

void Report(const Shared& s, const std::string& tenant, BucketPurpose p, BucketOp op, Code code, std::uint64_t sent,
            std::uint64_t received) {
  if (!s.sink) return;
  s.sink(TenantRequest{tenant, p, op, code, sent, received});
}

// The reporting calls: each a coroutine of its own holding what it reports with (the shared
// state and the tenant's name), reporting once the inner call completed.
Task<Result<GetOutput>> ReportedGet(ObjectStore& inner, std::shared_ptr<Shared> s, Name tenant, BucketPurpose p,
                                    std::string key, CallOptions options) {
  auto got = co_await inner.Get(std::move(key), options);
  Report(*s, *tenant, p, BucketOp::kGet, got.code(), 0, got.ok() ? got->body.size() : 0);
  co_return got;
}

Task<Result<ObjectMeta>> ReportedHead(ObjectStore& inner, std::shared_ptr<Shared> s, Name tenant, BucketPurpose p,
                                      std::string key, CallOptions options) {
  auto got = co_await inner.Head(std::move(key), options);
  Report(*s, *tenant, p, BucketOp::kHead, got.code(), 0, 0);
  co_return got;
}

Task<Result<Version>> ReportedPut(ObjectStore& inner, std::shared_ptr<Shared> s, Name tenant, BucketPurpose p,
                                  std::string key, std::string body, Precondition condition, CallOptions options) {
  const std::uint64_t bytes = body.size();
  auto put = co_await inner.Put(std::move(key), std::move(body), std::move(condition), options);
  Report(*s, *tenant, p, BucketOp::kPut, put.code(), put.code() == Code::kInvalidArgument ? 0 : bytes, 0);
  co_return put;
}

Task<Status> ReportedDelete(ObjectStore& inner, std::shared_ptr<Shared> s, Name tenant, BucketPurpose p,
                            std::string key, Precondition condition, CallOptions options) {
  Status st = co_await inner.Delete(std::move(key), std::move(condition), options);
  Report(*s, *tenant, p, BucketOp::kDelete, st.code(), 0, 0);
  co_return st;
}

Task<Result<ListPage>> ReportedList(ObjectStore& inner, std::shared_ptr<Shared> s, Name tenant, BucketPurpose p,
                                    ListOptions options, CallOptions call) {
  auto page = co_await inner.List(std::move(options), call);
  std::uint64_t bytes = 0;
  if (page.ok()) {
    for (const auto& e : page->entries) bytes += e.key.size();
  }
  Report(*s, *tenant, p, BucketOp::kList, page.code(), 0, bytes);
  co_return page;
}

}  // namespace

// One (tenant, purpose): forwards to the node store's view of the purpose, reporting.
class TenantStores::View final : public StoreWrapper {
 public:
  View(ObjectStore& inner, std::shared_ptr<Shared> shared, Name tenant, BucketPurpose purpose,
       const std::array<std::unique_ptr<View>, kBucketPurposes>& siblings)
      : StoreWrapper(inner), shared_(std::move(shared)), tenant_(std::move(tenant)), purpose_(purpose),
        siblings_(siblings) {}

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override {
    return ReportedGet(inner(), shared_, tenant_, purpose_, std::move(key), options);
  }
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override {
    return ReportedHead(inner(), shared_, tenant_, purpose_, std::move(key), options);
  }
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition, CallOptions options) override {
    return ReportedPut(inner(), shared_, tenant_, purpose_, std::move(key), std::move(body), std::move(condition),
                       options);
  }
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override {
    return ReportedDelete(inner(), shared_, tenant_, purpose_, std::move(key), std::move(condition), options);
  }
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override {
    return ReportedList(inner(), shared_, tenant_, purpose_, std::move(options), call);
  }
  // The same tenant's view of another purpose.
  ObjectStore& ForPurpose(BucketPurpose purpose) override {
    const auto p = static_cast<std::size_t>(purpose);
    WK_CHECK(p < kBucketPurposes, "ForPurpose: not a purpose");
    return *siblings_[p];
  }

 private:
  std::shared_ptr<Shared> shared_;
  Name tenant_;
  BucketPurpose purpose_;
  const std::array<std::unique_ptr<View>, kBucketPurposes>& siblings_;
};

struct TenantStores::Tenant {
  std::array<std::unique_ptr<View>, kBucketPurposes> views;
};

TenantStores::TenantStores(ObjectStore& store) : store_(store), shared_(std::make_shared<Shared>()) {}

TenantStores::~TenantStores() { shared_->sink = nullptr; }

void TenantStores::set_sink(TenantRequestSink sink) { shared_->sink = std::move(sink); }

ObjectStore& TenantStores::For(const std::string& tenant) {
  WK_CHECK(!tenant.empty(), "TenantStores::For: an empty tenant");
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) {
    auto made = std::make_unique<Tenant>();
    const Name name = std::make_shared<const std::string>(tenant);
    for (std::size_t p = 0; p < kBucketPurposes; ++p) {
      const auto purpose = static_cast<BucketPurpose>(p);
      made->views[p] = std::make_unique<View>(store_.ForPurpose(purpose), shared_, name, purpose, made->views);
    }
    it = tenants_.emplace(tenant, std::move(made)).first;
  }
  return *it->second->views[static_cast<std::size_t>(BucketPurpose::kOther)];
}

ObjectStore& TenantStores::Of(const ActorId& actor) {
  if (actor.tenant.empty() || IsSystemActor(actor)) return store_;
  return For(actor.tenant);
}

}  // namespace wk
