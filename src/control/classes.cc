#include "control/classes.h"

#include "base/check.h"
#include "base/digest.h"
#include "base/line_format.h"
#include "base/log.h"
#include "cluster/owner_record.h"
#include "control/common.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

Status ValidateClassArgs(const std::string& tenant, const std::string& class_name) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) return s;
  return ValidateClassName(class_name);
}

}  // namespace

Status ValidateClassName(std::string_view class_name) {
  ActorId probe{"t", std::string(class_name), "n"};
  return ValidateActorId(probe);
}

ModuleDigest ModuleDigest::Of(std::string_view bytes) { return ModuleDigest{Sha256Hex(bytes)}; }

Status ValidateModuleDigest(const ModuleDigest& digest) {
  if (!detail::IsLowerHex(digest.hex, 64)) {
    return InvalidArgument("module digest '" + digest.hex.substr(0, 80) + "' must be 64 lowercase hex characters (SHA-256)");
  }
  return Status::Ok();
}

std::string ModuleKey(std::string_view tenant, std::string_view class_name, const ModuleDigest& digest) {
  return std::string(kClassesPrefix) + std::string(tenant) + "/" + std::string(class_name) + "/modules/" + digest.hex;
}

std::string ClassPointerKey(std::string_view tenant, std::string_view class_name) {
  return std::string(kClassesPrefix) + std::string(tenant) + "/" + std::string(class_name) + "/current";
}

std::string EncodeClassPointer(std::string_view tenant, std::string_view class_name, const ClassVersion& v) {
  WK_CHECK(ValidateTenantName(tenant).ok() && ValidateClassName(class_name).ok() && ValidateModuleDigest(v.module).ok(),
           "encoding an invalid class pointer");
  line_format::LineWriter w("class", 1);
  w.Field("class", std::string(tenant) + "/" + std::string(class_name)).Field("module", v.module.hex);
  w.Field("size", v.size_bytes).UnixMsField("deployed_at", v.deployed_at);
  return std::move(w).Take();
}

Result<ClassVersion> DecodeClassPointer(std::string_view body, std::string_view tenant, std::string_view class_name) {
  auto reader = line_format::LineReader::Open(body, "class", 1,
                                              "wasmkeep-class 1 pointer " + ClassPointerKey(tenant, class_name));
  if (!reader.ok()) return reader.status();
  auto cls = reader->Field("class");
  if (!cls.ok()) return cls.status();
  if (*cls != std::string(tenant) + "/" + std::string(class_name)) return reader->Corrupt("'class' names another class");
  ClassVersion v;
  auto module = reader->Field("module");
  if (!module.ok()) return module.status();
  v.module.hex = std::string(*module);
  if (!ValidateModuleDigest(v.module).ok()) return reader->Corrupt("'module' is not 64 lowercase hex characters");
  auto size = reader->UintField("size", kMaxModuleBytes);
  if (!size.ok()) return size.status();
  if (*size == 0) return reader->Corrupt("'size' is 0 (a module is never empty)");
  v.size_bytes = *size;
  auto deployed = reader->UnixMsField("deployed_at");
  if (!deployed.ok()) return deployed.status();
  v.deployed_at = *deployed;
  if (Status s = reader->Finish(); !s.ok()) return s;
  return v;
}

Task<Result<ClassVersion>> StoreModule(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                       std::string wasm_bytes, CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  if (wasm_bytes.empty()) co_return InvalidArgument("the module is empty");
  if (wasm_bytes.size() > kMaxModuleBytes) {
    co_return InvalidArgument("the module is " + std::to_string(wasm_bytes.size()) + " bytes, over the limit of " +
                              std::to_string(kMaxModuleBytes));
  }
  // The tenant must exist (and be readable): a class of no tenant could never be called.
  auto record = co_await ReadTenant(store, tenant, call);
  if (!record.ok()) co_return record.status();

  ClassVersion version{ModuleDigest::Of(wasm_bytes), wasm_bytes.size(), env.WallNow()};
  const std::string module_key = ModuleKey(tenant, class_name, version.module);
  bool stored = false;
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts && !stored; ++attempt) {
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    std::string body = wasm_bytes;
    Precondition create = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(module_key, std::move(body), create, call);
    if (put.ok()) {
      stored = true;
      break;
    }
    if (put.code() != Code::kPreconditionFailed) {
      if (!detail::IsRetryableRead(put.code())) co_return put.status();
      last = put.status();
      continue;
    }
    // Already there (an earlier deploy of the same bytes, or our own lost reply). Check it:
    // the pointer must name a module that reads back whole.
    auto got = co_await store.Get(module_key, call);
    if (!got.ok()) {
      if (got.code() != Code::kNotFound && !detail::IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    if (got->body == wasm_bytes) {
      stored = true;
      break;
    }
    WK_LOG_WARN("replacing a corrupt stored module", {{"key", module_key}});
    std::string repair = wasm_bytes;
    Precondition same = Precondition::IfMatch(got->version);
    auto fixed = co_await store.Put(module_key, std::move(repair), same, call);
    if (fixed.ok()) {
      stored = true;
      break;
    }
    if (fixed.code() != Code::kPreconditionFailed && !detail::IsRetryableRead(fixed.code())) co_return fixed.status();
    last = fixed.status();
  }
  if (!stored) co_return detail::GaveUp("storing " + module_key, last);

  co_return version;
}

Task<Result<ClassVersion>> DeployClass(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                       std::string wasm_bytes, CallOptions call) {
  auto stored = co_await StoreModule(store, env, tenant, class_name, std::move(wasm_bytes), call);
  if (!stored.ok()) co_return stored.status();
  const ClassVersion version = *stored;
  Status last = Retryable("no attempt made");
  // Only now that the module is stored does the pointer name it.
  const std::string pointer_key = ClassPointerKey(tenant, class_name);
  const std::string pointer = EncodeClassPointer(tenant, class_name, version);
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    std::string body = pointer;
    Precondition none = Precondition::None();
    auto put = co_await store.Put(pointer_key, std::move(body), none, call);
    if (put.ok()) co_return version;
    // Rewriting the same pointer is harmless, so an unknown outcome is simply retried.
    if (!detail::IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return detail::GaveUp("writing " + pointer_key, last);
}

Task<Result<std::optional<ClassVersion>>> CurrentClass(ObjectStore& store, std::string tenant, std::string class_name,
                                                       CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  const std::string key = ClassPointerKey(tenant, class_name);
  auto got = co_await store.ForPurpose(BucketPurpose::kClass).Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return std::optional<ClassVersion>();
    co_return got.status();
  }
  auto v = DecodeClassPointer(got->body, tenant, class_name);
  if (!v.ok()) co_return v.status();
  co_return std::optional<ClassVersion>(std::move(v).value());
}

Task<Result<std::string>> ReadModule(ObjectStore& store, std::string tenant, std::string class_name,
                                     ModuleDigest digest, CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  if (Status s = ValidateModuleDigest(digest); !s.ok()) co_return s;
  const std::string key = ModuleKey(tenant, class_name, digest);
  auto got = co_await store.ForPurpose(BucketPurpose::kClass).Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return NotFound("no module " + key);
    co_return got.status();
  }
  if (got->body.size() > kMaxModuleBytes) co_return Fatal("corrupt module " + key + ": over the size limit");
  const ModuleDigest actual = ModuleDigest::Of(got->body);
  if (actual != digest) co_return Fatal("corrupt module " + key + ": its SHA-256 is " + actual.hex);
  co_return std::move(got->body);
}

Task<Result<std::vector<ClassSummary>>> ListClasses(ObjectStore& store, std::optional<std::string> tenant,
                                                    CallOptions call) {
  std::string prefix(kClassesPrefix);
  if (tenant) {
    if (Status s = ValidateTenantName(*tenant); !s.ok()) co_return s;
    prefix += *tenant + "/";
  }
  // classes/<tenant>/<class>/current; everything else (modules/...) is skipped.
  auto parse = [](const std::string& key) -> std::optional<ClassSummary> {
    std::string_view rest = std::string_view(key).substr(kClassesPrefix.size());
    std::size_t a = rest.find('/');
    std::size_t b = a == std::string_view::npos ? a : rest.find('/', a + 1);
    if (b == std::string_view::npos || rest.substr(b + 1) != "current") return std::nullopt;
    ClassSummary summary{std::string(rest.substr(0, a)), std::string(rest.substr(a + 1, b - a - 1)), {}, {}};
    if (!ValidateClassArgs(summary.tenant, summary.class_name).ok()) return std::nullopt;  // not one of ours
    return summary;
  };
  auto decode = [](std::string_view body, ClassSummary& summary) {
    auto v = DecodeClassPointer(body, summary.tenant, summary.class_name);
    if (v.ok()) {
      summary.current = std::move(v).value();
    } else {
      summary.error = v.status().message();
    }
  };
  co_return co_await detail::ListAndDecode<ClassSummary>(store, std::move(prefix), call, parse, decode);
}

}  // namespace wk::control
