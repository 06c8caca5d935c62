#include "control/classes.h"

#include "base/check.h"
#include "base/digest.h"
#include "base/log.h"
#include "cluster/owner_record.h"
#include "control/common.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

using detail::Backoff;
using detail::Field;
using detail::GaveUp;
using detail::IsLowerHex;
using detail::IsRetryableRead;
using detail::Lines;
using detail::ListKeys;
using detail::ParseMs;
using detail::ParseUint;

constexpr std::string_view kClassHeader = "wasmkeep-class 1";

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
  if (!IsLowerHex(digest.hex, 64)) {
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
  return std::string(kClassHeader) + "\nclass " + std::string(tenant) + "/" + std::string(class_name) + "\nmodule " +
         v.module.hex + "\nsize " + std::to_string(v.size_bytes) + "\ndeployed_at " +
         std::to_string(ToUnixMs(v.deployed_at)) + "\n";
}

Result<ClassVersion> DecodeClassPointer(std::string_view body, std::string_view tenant, std::string_view class_name) {
  auto corrupt = [&](const std::string& what) {
    return Fatal("corrupt wasmkeep-class 1 pointer " + ClassPointerKey(tenant, class_name) + ": " + what);
  };
  auto lines = Lines(body);
  if (!lines || lines->size() != 5 || (*lines)[0] != kClassHeader) return corrupt("bad header or not five lines");
  auto cls = Field((*lines)[1], "class");
  if (!cls || *cls != std::string(tenant) + "/" + std::string(class_name)) return corrupt("does not name this class");
  ClassVersion v;
  auto module = Field((*lines)[2], "module");
  if (!module || !IsLowerHex(*module, 64)) return corrupt("bad module line");
  v.module.hex = std::string(*module);
  auto size = Field((*lines)[3], "size");
  if (!size || !ParseUint(*size, &v.size_bytes) || v.size_bytes == 0 || v.size_bytes > kMaxModuleBytes) {
    return corrupt("bad size");
  }
  auto deployed = Field((*lines)[4], "deployed_at");
  if (!deployed || !ParseMs(*deployed, &v.deployed_at)) return corrupt("bad deployed_at");
  return v;
}

Task<Result<ClassVersion>> DeployClass(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
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
    if (attempt > 1) co_await Backoff(env, attempt);
    std::string body = wasm_bytes;
    Precondition create = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(module_key, std::move(body), create, call);
    if (put.ok()) {
      stored = true;
      break;
    }
    if (put.code() != Code::kPreconditionFailed) {
      if (!IsRetryableRead(put.code())) co_return put.status();
      last = put.status();
      continue;
    }
    // Already there (an earlier deploy of the same bytes, or our own lost reply). Check it:
    // the pointer must name a module that reads back whole.
    auto got = co_await store.Get(module_key, call);
    if (!got.ok()) {
      if (got.code() != Code::kNotFound && !IsRetryableRead(got.code())) co_return got.status();
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
    if (fixed.code() != Code::kPreconditionFailed && !IsRetryableRead(fixed.code())) co_return fixed.status();
    last = fixed.status();
  }
  if (!stored) co_return GaveUp("storing " + module_key, last);

  // Only now that the module is stored does the pointer name it.
  const std::string pointer_key = ClassPointerKey(tenant, class_name);
  const std::string pointer = EncodeClassPointer(tenant, class_name, version);
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    std::string body = pointer;
    Precondition none = Precondition::None();
    auto put = co_await store.Put(pointer_key, std::move(body), none, call);
    if (put.ok()) co_return version;
    // Rewriting the same pointer is harmless, so an unknown outcome is simply retried.
    if (!IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return GaveUp("writing " + pointer_key, last);
}

Task<Result<std::optional<ClassVersion>>> CurrentClass(ObjectStore& store, std::string tenant, std::string class_name,
                                                       CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  const std::string key = ClassPointerKey(tenant, class_name);
  auto got = co_await store.Get(key, call);
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
  auto got = co_await store.Get(key, call);
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
  auto keys = co_await ListKeys(store, prefix, call);
  if (!keys.ok()) co_return keys.status();
  std::vector<ClassSummary> out;
  for (const std::string& key : *keys) {
    // classes/<tenant>/<class>/current; everything else (modules/...) is skipped.
    std::string_view rest = std::string_view(key).substr(kClassesPrefix.size());
    std::size_t a = rest.find('/');
    std::size_t b = a == std::string_view::npos ? a : rest.find('/', a + 1);
    if (b == std::string_view::npos || rest.substr(b + 1) != "current") continue;
    ClassSummary summary{std::string(rest.substr(0, a)), std::string(rest.substr(a + 1, b - a - 1)), {}, {}};
    if (!ValidateClassArgs(summary.tenant, summary.class_name).ok()) continue;  // not one of ours
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;
      co_return got.status();
    }
    auto v = DecodeClassPointer(got->body, summary.tenant, summary.class_name);
    if (v.ok()) {
      summary.current = std::move(v).value();
    } else {
      summary.error = v.status().message();
    }
    out.push_back(std::move(summary));
  }
  co_return out;
}

}  // namespace wk::control
