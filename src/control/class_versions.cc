#include "control/class_versions.h"

#include <algorithm>
#include <set>

#include "base/check.h"
#include "base/digest.h"
#include "base/line_format.h"
#include "base/log.h"
#include "cluster/owner_record.h"
#include "control/quotas.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

constexpr std::size_t kMaxImports = 256;
// The versions a rollout keeps failure counts for (the newest; older ones are forgotten).
constexpr std::size_t kMaxFailureEntries = 100;
constexpr std::uint32_t kMaxFailureLimit = 1'000'000;
constexpr std::size_t kMaxReasonBytes = 200;

std::string ClassDir(std::string_view tenant, std::string_view class_name) {
  return std::string(kClassesPrefix) + std::string(tenant) + "/" + std::string(class_name) + "/";
}

Status ValidateClassArgs(const std::string& tenant, const std::string& class_name) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) return s;
  return ValidateClassName(class_name);
}

bool ValidImportName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

Status ValidateActorName(std::string_view name) {
  ActorId probe{"t", "c", std::string(name)};
  return ValidateActorId(probe);
}

// A reason as a line's value: printable ASCII, no edge spaces, bounded.
std::string CleanReason(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxReasonBytes)) out.push_back(c >= 0x20 && c < 0x7f ? c : ' ');
  while (!out.empty() && out.back() == ' ') out.pop_back();
  std::size_t start = 0;
  while (start < out.size() && out[start] == ' ') ++start;
  out.erase(0, start);
  return out.empty() ? std::string("unspecified") : out;
}

Result<VersionNumber> ReadVersionPart(line_format::LineReader& r, std::string_view text, std::string_view what) {
  auto n = line_format::ParseUint(text, kMaxVersion);
  if (!n || *n == 0) return r.Corrupt(std::string(what) + " is not a version number");
  return static_cast<VersionNumber>(*n);
}

}  // namespace

std::string VersionsPrefix(std::string_view tenant, std::string_view class_name) {
  return ClassDir(tenant, class_name) + "versions/";
}

std::string VersionKey(std::string_view tenant, std::string_view class_name, VersionNumber n) {
  // Ten digits, so the listing's key order is the numbers' order.
  std::string digits = std::to_string(n);
  return VersionsPrefix(tenant, class_name) + std::string(10 - std::min<std::size_t>(10, digits.size()), '0') + digits;
}

std::string RolloutKey(std::string_view tenant, std::string_view class_name) {
  return ClassDir(tenant, class_name) + "rollout";
}

Status ValidateDeployer(std::string_view by) {
  const bool ok = !by.empty() && by.size() <= 64 && std::all_of(by.begin(), by.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '@' || c == '+' || c == '-';
  });
  if (!ok) return InvalidArgument("deployed_by '" + std::string(by.substr(0, 80)) + "' must be 1 to 64 of [A-Za-z0-9._@+-]");
  return Status::Ok();
}

std::string EncodeVersionRecord(std::string_view tenant, std::string_view class_name, const VersionRecord& v) {
  WK_CHECK(v.number >= 1 && v.number <= kMaxVersion && ValidateModuleDigest(v.module).ok() &&
               ValidateDeployer(v.deployed_by).ok() && v.imports.size() <= kMaxImports,
           "encoding an invalid version record");
  line_format::LineWriter w("class_version", 1);
  w.Field("class", std::string(tenant) + "/" + std::string(class_name)).Field("version", v.number);
  w.Field("module", v.module.hex).Field("size", v.size_bytes).UnixMsField("deployed_at", v.deployed_at);
  w.Field("deployed_by", v.deployed_by).Field("migrates", v.migrates ? "yes" : "no");
  w.Field("imports", v.imports.size());
  for (const std::string& i : v.imports) {
    WK_CHECK(ValidImportName(i), "encoding an invalid import name");
    w.Field("import", i);
  }
  return std::move(w).Take();
}

Result<VersionRecord> DecodeVersionRecord(std::string_view body, std::string_view tenant, std::string_view class_name,
                                          VersionNumber n) {
  auto r = line_format::LineReader::Open(body, "class_version", 1,
                                         "wasmkeep-class_version 1 record " + VersionKey(tenant, class_name, n));
  if (!r.ok()) return r.status();
  auto cls = r->Field("class");
  if (!cls.ok()) return cls.status();
  if (*cls != std::string(tenant) + "/" + std::string(class_name)) return r->Corrupt("'class' names another class");
  VersionRecord v;
  auto number = r->UintField("version", kMaxVersion);
  if (!number.ok()) return number.status();
  if (*number != n) return r->Corrupt("'version' is not the number its key holds");
  v.number = n;
  auto module = r->Field("module");
  if (!module.ok()) return module.status();
  v.module.hex = std::string(*module);
  if (!ValidateModuleDigest(v.module).ok()) return r->Corrupt("'module' is not 64 lowercase hex characters");
  auto size = r->UintField("size", kMaxModuleBytes);
  if (!size.ok()) return size.status();
  if (*size == 0) return r->Corrupt("'size' is 0");
  v.size_bytes = *size;
  auto at = r->UnixMsField("deployed_at");
  if (!at.ok()) return at.status();
  v.deployed_at = *at;
  auto by = r->Field("deployed_by");
  if (!by.ok()) return by.status();
  if (!ValidateDeployer(*by).ok()) return r->Corrupt("'deployed_by' is not 1 to 64 of [A-Za-z0-9._@+-]");
  v.deployed_by = std::string(*by);
  auto migrates = r->Field("migrates");
  if (!migrates.ok()) return migrates.status();
  if (*migrates != "yes" && *migrates != "no") return r->Corrupt("'migrates' is not yes or no");
  v.migrates = *migrates == "yes";
  auto count = r->UintField("imports", kMaxImports);
  if (!count.ok()) return count.status();
  for (std::uint64_t i = 0; i < *count; ++i) {
    auto name = r->Field("import");
    if (!name.ok()) return name.status();
    if (!ValidImportName(*name)) return r->Corrupt("an import name is not 1 to 64 of [A-Za-z0-9_]");
    if (!v.imports.empty() && !(v.imports.back() < *name)) return r->Corrupt("the imports are not sorted and distinct");
    v.imports.emplace_back(*name);
  }
  if (Status s = r->Finish(); !s.ok()) return s;
  return v;
}

Status ValidateRollout(const Rollout& r) {
  auto version_ok = [](VersionNumber v) { return v >= 1 && v <= kMaxVersion; };
  if (!version_ok(r.stable)) return InvalidArgument("the rollout has no stable version");
  if (r.candidate != 0) {
    if (!version_ok(r.candidate)) return InvalidArgument("candidate " + std::to_string(r.candidate) + " is not a version");
    if (r.candidate == r.stable) return InvalidArgument("the candidate is the stable version");
    if (r.percent < 1 || r.percent > 99) {
      return InvalidArgument("percent " + std::to_string(r.percent) + " must be 1..99 while there is a candidate");
    }
  } else if (r.percent != 0) {
    return InvalidArgument("percent " + std::to_string(r.percent) + " without a candidate");
  }
  if (r.paused != !r.paused_reason.empty()) return InvalidArgument("a paused rollout has a reason, and only it");
  if (r.failure_limit < 1 || r.failure_limit > kMaxFailureLimit) {
    return InvalidArgument("failure_limit must be 1.." + std::to_string(kMaxFailureLimit));
  }
  if (r.broken.contains(r.stable)) return InvalidArgument("the stable version " + std::to_string(r.stable) + " is marked broken");
  if (r.candidate != 0 && r.broken.contains(r.candidate)) {
    return InvalidArgument("the candidate " + std::to_string(r.candidate) + " is marked broken");
  }
  if (r.failures.size() > kMaxFailureEntries) {
    return InvalidArgument("failures of more than " + std::to_string(kMaxFailureEntries) + " versions");
  }
  if (r.pins.size() > kMaxPins) return InvalidArgument("more than " + std::to_string(kMaxPins) + " pins");
  for (const auto& [name, v] : r.pins) {
    if (Status s = ValidateActorName(name); !s.ok()) return s;
    if (!version_ok(v)) return InvalidArgument("pin of " + name + " to " + std::to_string(v) + ": not a version");
  }
  if (r.broken.size() > kMaxBroken) return InvalidArgument("more than " + std::to_string(kMaxBroken) + " broken versions");
  for (const auto& [v, run] : r.broken) {
    if (!version_ok(v)) return InvalidArgument("broken version " + std::to_string(v) + " is not a version");
    if (run != 0 && (!version_ok(run) || run == v || r.broken.count(run) != 0)) {
      return InvalidArgument("broken version " + std::to_string(v) + " runs " + std::to_string(run) +
                             ", which is itself broken or not a version");
    }
  }
  for (const auto& [v, n] : r.failures) {
    if (!version_ok(v) || n == 0) return InvalidArgument("failures of " + std::to_string(v) + ": not a version, or none");
  }
  return Status::Ok();
}

std::string EncodeRollout(std::string_view tenant, std::string_view class_name, const Rollout& r) {
  WK_CHECK(ValidateRollout(r).ok(), "encoding an invalid rollout");
  line_format::LineWriter w("rollout", 1);
  w.Field("class", std::string(tenant) + "/" + std::string(class_name)).Field("revision", r.revision);
  w.Field("stable", r.stable).Field("candidate", r.candidate).Field("percent", r.percent);
  w.Field("paused", r.paused ? 1 : 0);
  if (r.paused) w.Field("reason", r.paused_reason);
  w.Field("failure_limit", r.failure_limit).UnixMsField("updated_at", r.updated_at);
  w.Field("failures", r.failures.size());
  for (const auto& [v, n] : r.failures) w.FieldParts("failure", {std::to_string(v), std::to_string(n)});
  w.Field("pins", r.pins.size());
  for (const auto& [name, v] : r.pins) w.FieldParts("pin", {name, std::to_string(v)});
  w.Field("broken", r.broken.size());
  for (const auto& [v, run] : r.broken) w.FieldParts("redirect", {std::to_string(v), std::to_string(run)});
  return std::move(w).Take();
}

Result<Rollout> DecodeRollout(std::string_view body, std::string_view tenant, std::string_view class_name) {
  auto r = line_format::LineReader::Open(body, "rollout", 1, "wasmkeep-rollout 1 record " + RolloutKey(tenant, class_name));
  if (!r.ok()) return r.status();
  auto cls = r->Field("class");
  if (!cls.ok()) return cls.status();
  if (*cls != std::string(tenant) + "/" + std::string(class_name)) return r->Corrupt("'class' names another class");
  Rollout out;
  auto revision = r->UintField("revision");
  if (!revision.ok()) return revision.status();
  out.revision = *revision;
  auto stable = r->UintField("stable", kMaxVersion);
  if (!stable.ok()) return stable.status();
  out.stable = static_cast<VersionNumber>(*stable);
  auto candidate = r->UintField("candidate", kMaxVersion);
  if (!candidate.ok()) return candidate.status();
  out.candidate = static_cast<VersionNumber>(*candidate);
  auto percent = r->UintField("percent", 100);
  if (!percent.ok()) return percent.status();
  out.percent = static_cast<std::uint32_t>(*percent);
  auto paused = r->UintField("paused", 1);
  if (!paused.ok()) return paused.status();
  out.paused = *paused == 1;
  if (out.paused) {
    auto reason = r->Field("reason");
    if (!reason.ok()) return reason.status();
    out.paused_reason = std::string(*reason);
  }
  auto limit = r->UintField("failure_limit", kMaxFailureLimit);
  if (!limit.ok()) return limit.status();
  out.failure_limit = static_cast<std::uint32_t>(*limit);
  auto at = r->UnixMsField("updated_at");
  if (!at.ok()) return at.status();
  out.updated_at = *at;
  auto failures = r->UintField("failures", kMaxFailureEntries);
  if (!failures.ok()) return failures.status();
  for (std::uint64_t i = 0; i < *failures; ++i) {
    auto parts = r->FieldParts("failure", 2);
    if (!parts.ok()) return parts.status();
    auto v = ReadVersionPart(*r, (*parts)[0], "a failure's version");
    if (!v.ok()) return v.status();
    auto n = line_format::ParseUint((*parts)[1]);
    if (!n || *n == 0) return r->Corrupt("a failure count is not a positive number");
    if (!out.failures.empty() && !(out.failures.rbegin()->first < *v)) {
      return r->Corrupt("the failures are not in increasing version order");
    }
    out.failures.emplace(*v, *n);
  }
  auto pins = r->UintField("pins", kMaxPins);
  if (!pins.ok()) return pins.status();
  for (std::uint64_t i = 0; i < *pins; ++i) {
    auto parts = r->FieldParts("pin", 2);
    if (!parts.ok()) return parts.status();
    auto v = ReadVersionPart(*r, (*parts)[1], "a pin's version");
    if (!v.ok()) return v.status();
    const std::string name((*parts)[0]);
    if (!out.pins.empty() && !(out.pins.rbegin()->first < name)) {
      return r->Corrupt("the pins are not in increasing name order (or an actor is pinned twice)");
    }
    out.pins.emplace(name, *v);
  }
  auto broken = r->UintField("broken", kMaxBroken);
  if (!broken.ok()) return broken.status();
  for (std::uint64_t i = 0; i < *broken; ++i) {
    auto parts = r->FieldParts("redirect", 2);
    if (!parts.ok()) return parts.status();
    auto v = ReadVersionPart(*r, (*parts)[0], "a broken version");
    if (!v.ok()) return v.status();
    auto run = line_format::ParseUint((*parts)[1], kMaxVersion);
    if (!run) return r->Corrupt("a broken version's replacement is not a number");
    if (!out.broken.empty() && !(out.broken.rbegin()->first < *v)) {
      return r->Corrupt("the broken versions are not in increasing order");
    }
    out.broken.emplace(*v, static_cast<VersionNumber>(*run));
  }
  if (Status s = r->Finish(); !s.ok()) return s;
  if (Status s = ValidateRollout(out); !s.ok()) return r->Corrupt(s.message());
  return out;
}

std::uint32_t RolloutPlace(std::string_view actor_name) {
  const std::string hex = Sha256Hex(actor_name);
  // The first 8 hex digits: uniform enough for a share in hundredths of a percent.
  const std::uint64_t x = std::stoull(hex.substr(0, 8), nullptr, 16);
  return static_cast<std::uint32_t>(x % 10'000);
}

VersionChoice ChooseVersion(const Rollout& r, std::string_view actor_name, VersionNumber mark, bool empty,
                            BrokenModels broken) {
  VersionNumber target = r.stable;
  if (auto pin = r.pins.find(std::string(actor_name)); pin != r.pins.end()) {
    target = pin->second;
  } else if (r.candidate != 0 && !r.paused) {
    std::uint32_t place = RolloutPlace(actor_name);
    if (broken.on(BrokenModel::kRolloutUnstable)) {
      // Broken: the place drawn again for every share, so raising it moves actors both ways.
      place = RolloutPlace(std::string(actor_name) + "@" + std::to_string(r.percent));
    }
    if (place < r.percent * 100) target = r.candidate;
  }
  // A state with no mark was written before versions: by version 1. An empty one by nobody.
  const VersionNumber state = mark != 0 ? mark : empty ? 0 : 1;
  // What a broken version's actors run instead (the operator's choice).
  auto redirect = [&r](VersionNumber v) {
    auto b = r.broken.find(v);
    return b == r.broken.end() ? v : b->second != 0 ? b->second : r.stable;
  };
  const bool state_broken = state != 0 && r.broken.contains(state);
  // Never run a state on an older version than the one that committed it, unless that
  // version is broken (docs/tenants.md, "Rolling back"); while the rollout is paused,
  // convert nothing (a state stays on its version, or its replacement).
  VersionNumber run = 0;
  if (r.paused && state != 0) {
    run = state_broken ? redirect(state) : state;
  } else {
    run = std::max(redirect(target), state);
    if (run == state && state_broken) run = redirect(state);
  }
  VersionChoice choice;
  choice.run = run;
  if (state != 0 && run > state) {
    choice.upgrade_from = state;
    choice.no_fallback = state_broken;
  }
  return choice;
}

std::vector<VersionNumber> VersionsInPlay(const Rollout& r) {
  std::set<VersionNumber> in{r.stable};
  if (r.candidate != 0) in.insert(r.candidate);
  for (const auto& [name, v] : r.pins) in.insert(v);
  for (const auto& [v, run] : r.broken) in.insert(run != 0 ? run : r.stable);
  return {in.begin(), in.end()};
}

// ---- The bucket

Task<Result<std::set<VersionNumber>>> ListVersionNumbers(ObjectStore& store, std::string tenant,
                                                        std::string class_name, CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  const std::string prefix = VersionsPrefix(tenant, class_name);
  auto keys = co_await detail::ListKeys(store.ForPurpose(BucketPurpose::kClass), prefix, call);
  if (!keys.ok()) co_return keys.status();
  std::set<VersionNumber> out;
  for (const std::string& key : *keys) {
    // versions/<10 digits>; anything else under the prefix is not one of ours.
    const std::string_view digits = std::string_view(key).substr(prefix.size());
    if (digits.size() != 10 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const auto n = std::stoull(std::string(digits));
    if (n != 0 && n <= kMaxVersion) out.insert(static_cast<VersionNumber>(n));
  }
  co_return out;
}

Task<Result<std::vector<VersionRecord>>> ListVersions(ObjectStore& store, std::string tenant, std::string class_name,
                                                      CallOptions call) {
  auto numbers = co_await ListVersionNumbers(store, tenant, class_name, call);
  if (!numbers.ok()) co_return numbers.status();
  std::vector<VersionRecord> out;
  for (VersionNumber n : *numbers) {
    auto v = co_await ReadVersion(store, tenant, class_name, n, call);
    if (v.code() == Code::kNotFound) continue;  // not there any more (nothing deletes them today)
    if (!v.ok()) co_return v.status();
    out.push_back(std::move(v).value());
  }
  co_return out;
}

Task<Result<VersionRecord>> ReadVersion(ObjectStore& store, std::string tenant, std::string class_name,
                                        VersionNumber n, CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  if (n < 1 || n > kMaxVersion) co_return InvalidArgument("version " + std::to_string(n) + " is not a version number");
  const std::string key = VersionKey(tenant, class_name, n);
  auto got = co_await store.ForPurpose(BucketPurpose::kClass).Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) {
      co_return NotFound("class " + tenant + "/" + class_name + " has no version " + std::to_string(n));
    }
    co_return got.status();
  }
  co_return DecodeVersionRecord(got->body, tenant, class_name, n);
}

Task<Result<std::optional<Rollout>>> ReadRollout(ObjectStore& store, std::string tenant, std::string class_name,
                                                 CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  auto got = co_await store.ForPurpose(BucketPurpose::kClass).Get(RolloutKey(tenant, class_name), call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return std::optional<Rollout>();
    co_return got.status();
  }
  auto r = DecodeRollout(got->body, tenant, class_name);
  if (!r.ok()) co_return r.status();
  co_return std::optional<Rollout>(std::move(r).value());
}

namespace {

// Points `current` at the stable version's module (for nodes that predate versions, and
// `class list`). Rewriting the same pointer is harmless.
Task<Status> WriteCurrent(ObjectStore& store, Env& env, const std::string& tenant, const std::string& class_name,
                          const VersionRecord& stable, CallOptions call) {
  const std::string key = ClassPointerKey(tenant, class_name);
  const std::string body = EncodeClassPointer(tenant, class_name, ClassVersion{stable.module, stable.size_bytes, stable.deployed_at});
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    std::string copy = body;
    auto put = co_await store.Put(key, std::move(copy), Precondition::None(), call);
    if (put.ok()) co_return Status::Ok();
    if (!detail::IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return detail::GaveUp("writing " + key, last);
}

// Creates versions/<n> for the first free n at or after `from`; returns the record made.
Task<Result<VersionRecord>> CreateVersion(ObjectStore& store, Env& env, const std::string& tenant,
                                          const std::string& class_name, VersionRecord v, VersionNumber from,
                                          CallOptions call) {
  Status last = Retryable("no attempt made");
  VersionNumber n = from;
  for (int attempt = 1; attempt <= kMaxUpdateAttempts * 4 && n <= kMaxVersion; ++attempt) {
    v.number = n;
    const std::string key = VersionKey(tenant, class_name, n);
    std::string body = EncodeVersionRecord(tenant, class_name, v);
    auto put = co_await store.Put(key, std::string(body), Precondition::IfNoneMatchAny(), call);
    if (put.ok()) co_return v;
    if (put.code() != Code::kPreconditionFailed && !detail::IsRetryableRead(put.code())) co_return put.status();
    // Taken, or an unknown outcome: read it; ours (a lost reply) is ours, another's moves us on.
    auto got = co_await store.Get(key, call);
    if (got.ok()) {
      if (got->body == body) co_return v;
      ++n;
      continue;
    }
    if (got.code() != Code::kNotFound && !detail::IsRetryableRead(got.code())) co_return got.status();
    last = got.status();
    co_await detail::Backoff(env, attempt);
  }
  co_return detail::GaveUp("numbering a version of " + tenant + "/" + class_name, last);
}

}  // namespace

Task<Result<Rollout>> UpdateRollout(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                    RolloutChange change, CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  const std::string key = RolloutKey(tenant, class_name);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    // The numbers only (one LIST): a change needs to know which versions exist, and only
    // the stable one's record is read, when `current` is written.
    auto versions = co_await ListVersionNumbers(store, tenant, class_name, call);
    if (!versions.ok()) co_return versions.status();
    auto got = co_await store.ForPurpose(BucketPurpose::kClass).Get(key, call);
    Rollout r;
    Precondition cond = Precondition::IfNoneMatchAny();
    if (got.ok()) {
      auto decoded = DecodeRollout(got->body, tenant, class_name);
      if (!decoded.ok()) co_return decoded.status();
      r = std::move(decoded).value();
      cond = Precondition::IfMatch(got->version);
    } else if (got.code() != Code::kNotFound) {
      if (!detail::IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    } else if (versions->empty()) {
      co_return NotFound("class " + tenant + "/" + class_name + " has no versions (deploy it with `wasmkeep deploy`)");
    } else {
      r.stable = *versions->begin();  // a rollout made for a class that has versions only
    }
    const Rollout before = r;
    auto write = change(r, *versions);
    if (!write.ok()) co_return write.status();
    if (!*write) co_return r;
    if (Status s = ValidateRollout(r); !s.ok()) co_return s;
    for (VersionNumber v : VersionsInPlay(r)) {
      if (!versions->contains(v)) {
        co_return NotFound("class " + tenant + "/" + class_name + " has no version " + std::to_string(v));
      }
    }
    r.revision = before.revision + 1;
    r.updated_at = env.WallNow();
    auto put = co_await store.Put(key, EncodeRollout(tenant, class_name, r), cond, call);
    if (!put.ok()) {
      if (put.code() != Code::kPreconditionFailed && !detail::IsRetryableRead(put.code())) co_return put.status();
      last = put.status();
      continue;  // read again: the change sees whether an unknown outcome landed
    }
    // The stable version's module in `current`: when it changed, and after a retry (an
    // earlier attempt's write may have landed with its stable change, unseen).
    if (r.stable != before.stable || !got.ok() || attempt > 1) {
      auto stable = co_await ReadVersion(store, tenant, class_name, r.stable, call);
      if (!stable.ok()) co_return stable.status();
      if (Status s = co_await WriteCurrent(store, env, tenant, class_name, *stable, call); !s.ok()) co_return s;
    }
    co_return r;
  }
  co_return detail::GaveUp("updating " + key, last);
}

Task<Result<std::uint64_t>> TenantModuleBytes(ObjectStore& store, std::string tenant, CallOptions call) {
  auto classes = co_await ListClasses(store, tenant, call);
  if (!classes.ok()) co_return classes.status();
  std::uint64_t total = 0;
  for (const ClassSummary& c : *classes) {
    auto rollout = co_await ReadRollout(store, tenant, c.class_name, call);
    if (!rollout.ok()) co_return rollout.status();
    if (!rollout->has_value()) {
      if (c.current) total += c.current->size_bytes;  // deployed before versions: its one module
      continue;
    }
    for (VersionNumber v : VersionsInPlay(**rollout)) {
      auto record = co_await ReadVersion(store, tenant, c.class_name, v, call);
      if (!record.ok()) co_return record.status();
      total += record->size_bytes;
    }
  }
  co_return total;
}

Task<Result<Deployed>> DeployVersion(ObjectStore& store, Env& env, DeployRequest request, CallOptions call) {
  if (Status s = ValidateClassArgs(request.tenant, request.class_name); !s.ok()) co_return s;
  if (Status s = ValidateDeployer(request.deployed_by); !s.ok()) co_return s;
  if (request.percent && *request.percent > 100) {
    co_return InvalidArgument("--rollout " + std::to_string(*request.percent) + " is not a percentage (0..100)");
  }
  std::sort(request.imports.begin(), request.imports.end());
  request.imports.erase(std::unique(request.imports.begin(), request.imports.end()), request.imports.end());
  if (request.imports.size() > kMaxImports) co_return InvalidArgument("the module imports more than 256 host calls");
  for (const std::string& i : request.imports) {
    if (!ValidImportName(i)) co_return InvalidArgument("import '" + i.substr(0, 80) + "' is not a host call name");
  }
  const std::string tenant = request.tenant;
  const std::string class_name = request.class_name;
  // Only the newest version's record is needed (is this module already it?).
  auto numbers = co_await ListVersionNumbers(store, tenant, class_name, call);
  if (!numbers.ok()) co_return numbers.status();
  std::optional<VersionRecord> newest;
  if (!numbers->empty()) {
    auto read = co_await ReadVersion(store, tenant, class_name, *numbers->rbegin(), call);
    if (!read.ok()) co_return read.status();
    newest = std::move(read).value();
  }
  auto rollout = co_await ReadRollout(store, tenant, class_name, call);
  if (!rollout.ok()) co_return rollout.status();
  // A class deployed before versions: its current module becomes version 1 first.
  if (!newest) {
    auto current = co_await CurrentClass(store, tenant, class_name, call);
    if (!current.ok()) co_return current.status();
    if (current->has_value()) {
      VersionRecord first;
      first.module = (*current)->module;
      first.size_bytes = (*current)->size_bytes;
      first.deployed_at = (*current)->deployed_at;
      first.deployed_by = "before-versions";
      auto made = co_await CreateVersion(store, env, tenant, class_name, first, 1, call);
      if (!made.ok()) co_return made.status();
      newest = std::move(made).value();
    }
  }
  // The tenant's module_bytes quota (docs/tenants.md, "Quotas"), unless this module is the
  // newest version already (a deploy run again adds nothing).
  const std::size_t size = request.wasm_bytes.size();
  if (!newest || newest->module != ModuleDigest::Of(request.wasm_bytes)) {
    auto quotas = co_await ReadQuotas(store, tenant, call);
    if (!quotas.ok()) co_return quotas.status();
    if (const auto limit = quotas->Get(Quota::kModuleBytes)) {
      auto used = co_await TenantModuleBytes(store, tenant, call);
      if (!used.ok()) co_return used.status();
      if (*used + size > *limit) {
        co_return InvalidArgument("tenant " + tenant + " is over its quota module_bytes=" + std::to_string(*limit) +
                                  ": its classes' modules in play take " + std::to_string(*used) +
                                  " bytes and this one " + std::to_string(size) +
                                  " (raise it with `wasmkeep tenant set " + tenant + " --quota module_bytes=...`)");
      }
    }
  }
  // The module, stored (and checked) as every deploy stores it; `current` is left alone here.
  auto stored = co_await StoreModule(store, env, tenant, class_name, std::move(request.wasm_bytes), call);
  if (!stored.ok()) co_return stored.status();
  Result<VersionRecord> made = Retryable("not made");
  if (newest && newest->module == stored->module) {
    // The newest version already is this module (a deploy run again, say after exit 5):
    // no new number, only the rollout asked for.
    if (rollout->has_value() && (*rollout)->broken.contains(newest->number)) {
      co_return InvalidArgument("this module is version " + std::to_string(newest->number) +
                                ", marked broken: clear it with `wasmkeep class broken " + tenant + "/" + class_name +
                                " " + std::to_string(newest->number) + " --clear` to run it again");
    }
    made = *newest;
  } else {
    VersionRecord v;
    v.module = stored->module;
    v.size_bytes = size;
    v.deployed_at = env.WallNow();
    v.deployed_by = request.deployed_by;
    v.migrates = request.migrates;
    v.imports = request.imports;
    const VersionNumber next = newest ? newest->number + 1 : 1;
    made = co_await CreateVersion(store, env, tenant, class_name, v, next, call);
    if (!made.ok()) co_return made.status();
  }
  const VersionNumber number = made->number;
  const bool staged = request.percent && *request.percent < 100 && newest.has_value();
  auto updated = co_await UpdateRollout(
      store, env, tenant, class_name,
      [number, staged, percent = request.percent.value_or(100)](Rollout& r, const std::set<VersionNumber>&)
          -> Result<bool> {
        if (staged && number == r.stable) return false;  // the stable module deployed again: nothing to stage
        if (!staged) {
          r.stable = number;
          r.candidate = 0;
          r.percent = 0;
        } else if (percent == 0) {
          // Recorded, run by nobody yet: `class rollout` starts it.
          return true;
        } else {
          r.candidate = number;
          r.percent = percent;
        }
        r.paused = false;
        r.paused_reason.clear();
        r.failures.erase(number);
        return true;
      },
      call);
  if (!updated.ok()) co_return updated.status();
  co_return Deployed{std::move(made).value(), std::move(updated).value()};
}

RolloutChange SetShare(VersionNumber version, std::uint32_t percent) {
  return [version, percent](Rollout& r, const std::set<VersionNumber>& versions) -> Result<bool> {
    if (percent > 100) return InvalidArgument("percent " + std::to_string(percent) + " is not 0..100");
    if (!versions.contains(version)) return NotFound("no version " + std::to_string(version));
    if (r.broken.count(version) != 0) {
      return InvalidArgument("version " + std::to_string(version) +
                             " is marked broken (clear it with `wasmkeep class broken T/C V --clear` first)");
    }
    if (percent == 100) {
      r.stable = version;
      r.candidate = 0;
      r.percent = 0;
    } else if (percent == 0) {
      if (r.candidate != version) {
        return InvalidArgument("version " + std::to_string(version) + " is not the candidate: 0 ends a candidate's rollout");
      }
      r.candidate = 0;
      r.percent = 0;
    } else {
      if (version == r.stable) return InvalidArgument("version " + std::to_string(version) + " is already stable");
      r.candidate = version;
      r.percent = percent;
    }
    r.paused = false;
    r.paused_reason.clear();
    r.failures.erase(version);
    return true;
  };
}

RolloutChange Pin(std::string actor_name, VersionNumber version) {
  return [actor_name, version](Rollout& r, const std::set<VersionNumber>&) -> Result<bool> {
    if (Status s = ValidateActorName(actor_name); !s.ok()) return s;
    if (r.broken.contains(version)) {
      return InvalidArgument("version " + std::to_string(version) +
                             " is marked broken (clear it with `wasmkeep class broken T/C V --clear` first)");
    }
    auto it = r.pins.find(actor_name);
    if (it != r.pins.end() && it->second == version) return false;
    if (it == r.pins.end() && r.pins.size() >= kMaxPins) {
      return InvalidArgument("the class already has " + std::to_string(kMaxPins) + " pins (unpin some first)");
    }
    r.pins[actor_name] = version;
    return true;
  };
}

RolloutChange Unpin(std::string actor_name) {
  return [actor_name](Rollout& r, const std::set<VersionNumber>&) -> Result<bool> {
    return r.pins.erase(actor_name) != 0;
  };
}

RolloutChange MarkBroken(VersionNumber version, VersionNumber run) {
  return [version, run](Rollout& r, const std::set<VersionNumber>& versions) -> Result<bool> {
    if (!versions.contains(version)) return NotFound("no version " + std::to_string(version));
    if (version == r.stable) {
      return InvalidArgument("version " + std::to_string(version) +
                             " is stable: make another version stable first (`class rollout T/C V 100`)");
    }
    if (r.candidate == version) {
      r.candidate = 0;
      r.percent = 0;
    }
    // The rollout stops naming it: its pins go (those actors follow the rollout).
    std::erase_if(r.pins, [version](const auto& pin) { return pin.second == version; });
    r.broken[version] = run;
    return true;
  };
}

RolloutChange ClearBroken(VersionNumber version) {
  return [version](Rollout& r, const std::set<VersionNumber>&) -> Result<bool> {
    return r.broken.erase(version) != 0;
  };
}

RolloutChange Pause(std::string reason) {
  return [reason](Rollout& r, const std::set<VersionNumber>&) -> Result<bool> {
    if (r.paused) return false;
    r.paused = true;
    r.paused_reason = CleanReason(reason);
    return true;
  };
}

RolloutChange CountFailure(VersionNumber version, std::string detail, std::uint64_t count) {
  return [version, detail, count](Rollout& r, const std::set<VersionNumber>&) -> Result<bool> {
    // Once paused nothing more is migrated here: later reports (in flight) change nothing.
    if (r.paused) return false;
    std::uint64_t& n = r.failures[version];
    n += count;
    while (r.failures.size() > kMaxFailureEntries) r.failures.erase(r.failures.begin());
    if ((r.candidate == version || r.stable == version) && !r.paused && n >= r.failure_limit) {
      r.paused = true;
      r.paused_reason = CleanReason("paused after " + std::to_string(n) + " failed migrations to version " +
                                    std::to_string(version) + "; last: " + detail);
    }
    return true;
  };
}

}  // namespace wk::control
