// A small reader of the WebAssembly binary format, enough to check a module against the host
// before V8 sees it: its function types, imports, exports and memory limits.
//
// Why our own reader when V8 compiles the module anyway: V8's C++ API does not list a
// module's imports or exports, and V8 links a host function to an import of *any* signature
// (it coerces arguments), so a module importing `storage_get` with the wrong signature would
// instantiate and then misbehave. Reading the sections ourselves gives clear errors naming
// the import or export at deploy time, and lets us impose a maximum memory (FACTS: without
// one, every instance reserves 4 GiB of address space).
//
// Pure functions over bytes; no V8, no I/O. Malformed input gives an error, never a crash
// (fuzzed by wasm_module_info_test).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace wk::engine {

enum class ValType : std::uint8_t { kI32, kI64, kF32, kF64, kV128, kFuncRef, kExternRef };
std::string_view ValTypeName(ValType t);

struct FuncType {
  std::vector<ValType> params;
  std::vector<ValType> results;
  bool operator==(const FuncType&) const = default;
};
std::string FuncTypeString(const FuncType& t);  // "(i32, i32) -> i32"

enum class ExternKind : std::uint8_t { kFunc = 0, kTable = 1, kMemory = 2, kGlobal = 3, kTag = 4 };
std::string_view ExternKindName(ExternKind k);

struct Import {
  std::string module;
  std::string name;
  ExternKind kind;
  FuncType type;  // for kFunc
};

struct Export {
  std::string name;
  ExternKind kind;
  FuncType type;  // for kFunc (resolved through the function index space)
};

struct MemoryLimits {
  std::uint64_t min_pages = 0;
  std::optional<std::uint64_t> max_pages;
  bool imported = false;
};

struct ModuleInfo {
  std::vector<Import> imports;
  std::vector<Export> exports;
  std::vector<MemoryLimits> memories;  // imported ones first, as in the index space

  const Export* FindExport(std::string_view name) const;
};

inline constexpr std::uint64_t kWasmPageBytes = 65536;

// Reads the sections a host check needs. Sections it does not need are skipped by their
// declared size; custom sections are ignored. Errors say what was malformed and where.
Result<ModuleInfo> ReadModuleInfo(std::span<const std::uint8_t> bytes);

// Returns a copy of `bytes` whose (single, defined) memory declares `max_pages` as its
// maximum. REQUIRES: the module defines exactly one memory (checked: an error otherwise).
Result<std::vector<std::uint8_t>> WithMemoryMaximum(std::span<const std::uint8_t> bytes,
                                                    std::uint64_t max_pages);

}  // namespace wk::engine
