// Deployed classes: a class's modules, stored content-addressed under their SHA-256, and
// the pointer classes/<t>/<c>/current (`wasmkeep-class 1`, FROZEN, strict decoder) naming
// the one it runs (docs/tenants.md, "What is stored where"). Guarantees: a module is stored
// before a pointer names it; the last deploy wins. Threading: the given store's Env loop;
// simulator-clean. Details: docs/internals.md, "Class records".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "control/common.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

// The engine's default max_module_bytes (engine/engine.h): a larger module could never run.
inline constexpr std::size_t kMaxModuleBytes = 64u << 20;

// Class names follow ActorId's rules (cluster/owner_record.h): 1..63 of [a-z0-9_-],
// starting with a letter or digit. kInvalidArgument names the field.
Status ValidateClassName(std::string_view class_name);

inline constexpr std::string_view kClassesPrefix = "classes/";

// The SHA-256 of a module's bytes, which names it (a distinct type, never a bare string).
struct ModuleDigest {
  std::string hex;  // 64 lowercase hex characters
  static ModuleDigest Of(std::string_view bytes);
  friend bool operator==(const ModuleDigest&, const ModuleDigest&) = default;
};
// kInvalidArgument unless 64 lowercase hex characters.
Status ValidateModuleDigest(const ModuleDigest& digest);

std::string ModuleKey(std::string_view tenant, std::string_view class_name, const ModuleDigest& digest);
std::string ClassPointerKey(std::string_view tenant, std::string_view class_name);

// The module a class currently runs.
struct ClassVersion {
  ModuleDigest module;
  std::uint64_t size_bytes = 0;
  WallTime deployed_at{};
  friend bool operator==(const ClassVersion&, const ClassVersion&) = default;
};

// REQUIRES: valid names and digest, deployed_at not before 1970 (checked).
std::string EncodeClassPointer(std::string_view tenant, std::string_view class_name, const ClassVersion& v);
// kFatal("corrupt ...: line N: ...") unless a valid pointer naming this tenant and class.
Result<ClassVersion> DecodeClassPointer(std::string_view body, std::string_view tenant, std::string_view class_name);

// Stores the module under its SHA-256 (create-only; an identical module already there is
// fine; a corrupt one is replaced), checking the tenant exists; names no version. Errors as
// DeployClass's.
Task<Result<ClassVersion>> StoreModule(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                       std::string wasm_bytes, CallOptions call = {});
// The deploy of releases before class versions: stores the module (StoreModule) and points
// `current` at it, with no version record (the upgrade path's tests make such classes; the
// CLI deploys with DeployVersion, control/class_versions.h). The caller validates the module first
// (actor::CompileActorModule with the node's limits). kNotFound for an unknown tenant;
// kInvalidArgument for bad names or an empty or oversized module. kUnknownOutcome if the
// pointer's write may not have landed: running the same deploy again is safe.
Task<Result<ClassVersion>> DeployClass(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                       std::string wasm_bytes, CallOptions call = {});
// The class's current version, or nullopt when it was never deployed.
Task<Result<std::optional<ClassVersion>>> CurrentClass(ObjectStore& store, std::string tenant,
                                                       std::string class_name, CallOptions call = {});
// The module's bytes. kNotFound if absent; kFatal if their SHA-256 is not digest (or they
// exceed kMaxModuleBytes).
Task<Result<std::string>> ReadModule(ObjectStore& store, std::string tenant, std::string class_name,
                                     ModuleDigest digest, CallOptions call = {});

struct ClassSummary {
  std::string tenant;
  std::string class_name;
  std::optional<ClassVersion> current;  // absent when error is set
  std::string error;                    // a corrupt pointer: listed, never skipped
};
// Every deployed class (one with a `current` pointer), of one tenant or all, by name.
Task<Result<std::vector<ClassSummary>>> ListClasses(ObjectStore& store, std::optional<std::string> tenant,
                                                    CallOptions call = {});

}  // namespace wk::control
