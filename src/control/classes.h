// Deployed classes: a class's modules, stored content-addressed, and the pointer naming
// the one it currently runs. Operators deploy with the CLI (`wasmkeep deploy`); a node
// reads the pointer and the module when an actor of the class starts (CurrentClass +
// ReadModule; docs/architecture.md "Bucket layout").
//
// Objects (the pointer's format is FROZEN; the decoder is strict and answers
// kFatal("corrupt ...") for anything else, never "empty" or "absent"):
//
//   classes/<t>/<c>/modules/<sha256>  the module's raw bytes (content-addressed)
//   classes/<t>/<c>/current           wasmkeep-class 1
//                                     class <t>/<c>
//                                     module <sha256 hex>
//                                     size <bytes>
//                                     deployed_at <unix ms>
//
// Writes. A module is written create-only under its own SHA-256 before the class's
// `current` pointer names it, so a pointer never names a module that is not stored; the
// pointer is written unconditionally (the last deploy wins).
//
// Threading: every function runs on the Env loop of the given store. No sockets, threads
// or clocks of their own: the same code runs on mem:// in unit tests and in the simulator.
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
// fine) and then points the class at it. The caller validates the module first
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
