#include "store/mem/mem_store.h"

#include <algorithm>

namespace wk {

std::string_view StoreOpName(StoreOp op) {
  switch (op) {
    case StoreOp::kGet: return "get";
    case StoreOp::kHead: return "head";
    case StoreOp::kPut: return "put";
    case StoreOp::kDelete: return "delete";
    case StoreOp::kList: return "list";
  }
  return "?";
}

Result<GetOutput> MemBucket::ApplyGet(const std::string& key) {
  ++counts_.get;
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFound("no object " + key);
  return GetOutput{it->second.body, it->second.version};
}

Result<ObjectMeta> MemBucket::ApplyHead(const std::string& key) {
  ++counts_.head;
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFound("no object " + key);
  return ObjectMeta{it->second.version, it->second.body.size()};
}

Result<Version> MemBucket::ApplyPut(const std::string& key, std::string body,
                                    const Precondition& cond, std::int64_t modified_ms) {
  ++counts_.put;
  auto it = objects_.find(key);
  switch (cond.kind()) {
    case Precondition::Kind::kNone: break;
    case Precondition::Kind::kIfNoneMatchAny:
      if (it != objects_.end()) {
        ++counts_.precondition_failed;
        return PreconditionFailed(key + " exists");
      }
      break;
    case Precondition::Kind::kIfMatch:
      if (it == objects_.end() || it->second.version != cond.version()) {
        ++counts_.precondition_failed;
        return PreconditionFailed(key + " is not at version " + cond.version().token());
      }
      break;
  }
  Version v = NextVersion();
  auto& stored = objects_[key];
  stored = Object{std::move(body), v, modified_ms};
  if (put_observer_) put_observer_(key, stored.body, v);
  return v;
}

Status MemBucket::ApplyDelete(const std::string& key, const Precondition& cond) {
  ++counts_.del;
  auto it = objects_.find(key);
  if (cond.kind() == Precondition::Kind::kIfMatch) {
    if (it == objects_.end() || it->second.version != cond.version()) {
      ++counts_.precondition_failed;
      return PreconditionFailed(key + " is not at version " + cond.version().token());
    }
  } else if (cond.kind() != Precondition::Kind::kNone) {
    return InvalidArgument("a delete takes no condition or If-Match");
  }
  if (it != objects_.end()) objects_.erase(it);
  return Status::Ok();
}

Result<ListPage> MemBucket::ApplyList(const ListOptions& options) {
  ++counts_.list;
  // The continuation token is the last key returned; like S3 it takes precedence over
  // start_after.
  const std::string& after = options.continuation.empty() ? options.start_after
                                                          : options.continuation;
  auto it = after.empty() ? objects_.lower_bound(options.prefix) : objects_.upper_bound(after);
  if (!after.empty() && after < options.prefix) it = objects_.lower_bound(options.prefix);
  ListPage page;
  for (; it != objects_.end(); ++it) {
    if (it->first.compare(0, options.prefix.size(), options.prefix) != 0) break;
    if (static_cast<int>(page.entries.size()) == options.page_size) {
      page.next_continuation = page.entries.back().key;
      break;
    }
    page.entries.push_back(ListEntry{it->first, it->second.version, it->second.body.size(), it->second.modified_ms});
  }
  return page;
}

MemStore::MemStore(Env& env, std::shared_ptr<MemBucket> bucket, FaultHook hook, Env* transit)
    : env_(env), transit_(transit ? *transit : env), bucket_(std::move(bucket)), hook_(std::move(hook)) {}

MemStore::~MemStore() { *alive_ = false; }

template <typename R>
Task<R> MemStore::Run(StoreOp op, std::string key, bool is_write, CallOptions options,
                      std::function<R()> apply) {
  OpFault fault = hook_ ? hook_(OpInfo{op, key}) : OpFault{};
  const bool immediate = fault.request_delay == Duration(0) &&
                         fault.reply_delay == Duration(0) && !fault.lose_reply;
  if (immediate) {
    if (fault.fail_before_apply) co_return R(*fault.fail_before_apply);
    co_return apply();
  }

  Latch<R> reply(env_, [is_write]() -> R {
    if (is_write) return R(UnknownOutcome("cancelled in flight; the request may be applied"));
    return R(Cancelled("cancelled"));
  });
  const Env::TimerId deadline = env_.StartTimer(env_.MonoNow() + options.timeout, [reply] {
    reply.Set(R(UnknownOutcome("no reply before the deadline")));
  });

  // The request travels, is applied (or refused) at the bucket, and the reply travels
  // back. All of it happens whether or not the caller still waits: a write the caller
  // gave up on may still be applied, exactly as on a real bucket.
  Env& env = env_;
  // The reply travels on the caller's clock; a dead caller hears nothing.
  auto deliver = [&env, alive = alive_, reply, fault, apply = std::move(apply)]() mutable {
    R result = fault.fail_before_apply ? R(*fault.fail_before_apply) : apply();
    if (fault.lose_reply || !*alive) return;  // nobody to answer: the caller is gone
    if (fault.reply_delay == Duration(0)) {
      reply.Set(std::move(result));
    } else {
      auto shared = std::make_shared<R>(std::move(result));
      env.StartTimer(env.MonoNow() + fault.reply_delay,
                     [reply, shared] { reply.Set(std::move(*shared)); });
    }
  };
  if (fault.request_delay == Duration(0)) {
    deliver();
  } else {
    transit_.StartTimer(transit_.MonoNow() + fault.request_delay, std::move(deliver));
  }
  R result = co_await reply.Wait();
  env_.CancelTimer(deadline);
  co_return result;
}

// Each operation builds its apply step as a named local before awaiting Run: GCC 12
// mishandles some temporaries inside a co_await operand (a lambda converted to a
// std::function there was destroyed early), so no co_await in this code base takes a
// temporary that owns state.

Task<Result<GetOutput>> MemStore::Get(std::string key, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  std::function<Result<GetOutput>()> apply = [bucket = bucket_, key] {
    return bucket->ApplyGet(key);
  };
  co_return co_await Run<Result<GetOutput>>(StoreOp::kGet, key, false, options, std::move(apply));
}

Task<Result<ObjectMeta>> MemStore::Head(std::string key, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  std::function<Result<ObjectMeta>()> apply = [bucket = bucket_, key] {
    return bucket->ApplyHead(key);
  };
  co_return co_await Run<Result<ObjectMeta>>(StoreOp::kHead, key, false, options, std::move(apply));
}

Task<Result<Version>> MemStore::Put(std::string key, std::string body, Precondition condition,
                                    CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  // The time is the bucket's, read when the write lands (transit_ is the bucket's clock in
  // the simulator and outlives the store).
  std::function<Result<Version>()> apply = [bucket = bucket_, key, body = std::move(body), condition,
                                            clock = &transit_] {
    return bucket->ApplyPut(key, body, condition, ToUnixMs(clock->WallNow()));
  };
  co_return co_await Run<Result<Version>>(StoreOp::kPut, key, true, options, std::move(apply));
}

Task<Status> MemStore::Delete(std::string key, Precondition condition, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  if (condition.kind() == Precondition::Kind::kIfNoneMatchAny) {
    co_return InvalidArgument("a delete takes no condition or If-Match");
  }
  std::function<Status()> apply = [bucket = bucket_, key, condition] {
    return bucket->ApplyDelete(key, condition);
  };
  co_return co_await Run<Status>(StoreOp::kDelete, key, true, options, std::move(apply));
}

Task<Result<ListPage>> MemStore::List(ListOptions options, CallOptions call) {
  if (Status s = ValidateListOptions(options); !s.ok()) co_return s;
  std::function<Result<ListPage>()> apply = [bucket = bucket_, options] {
    return bucket->ApplyList(options);
  };
  co_return co_await Run<Result<ListPage>>(StoreOp::kList, options.prefix, false, call,
                                           std::move(apply));
}

Task<Result<BucketClock>> MemStore::BucketTime(CallOptions) {
  const WallTime now = env_.WallNow();
  co_return BucketClock{now, now};
}

}  // namespace wk
