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

// Function types are held once in ModuleInfo::types and named by index, so a module with
// many imports or exports of a large type costs no more memory than its own bytes.
struct Import {
  std::string module;
  std::string name;
  ExternKind kind;
  std::uint32_t type_index = 0;  // for kFunc
};

struct Export {
  std::string name;
  ExternKind kind;
  std::uint32_t type_index = 0;  // for kFunc (resolved through the function index space)
};

struct MemoryLimits {
  std::uint64_t min_pages = 0;
  std::optional<std::uint64_t> max_pages;
  bool imported = false;
};

struct ModuleInfo {
  std::vector<FuncType> types;
  std::vector<Import> imports;
  std::vector<Export> exports;
  std::vector<MemoryLimits> memories;  // imported ones first, as in the index space

  const Export* FindExport(std::string_view name) const;
  // REQUIRES: the import or export is a function.
  const FuncType& TypeOf(const Import& i) const { return types[i.type_index]; }
  const FuncType& TypeOf(const Export& e) const { return types[e.type_index]; }
};

// V8's own limits (wasm-limits.h), enforced here because this reader runs first: a hostile
// module must not make it allocate more than V8 would accept.
inline constexpr std::uint32_t kMaxTypes = 1'000'000;
inline constexpr std::uint32_t kMaxFunctions = 1'000'000;
inline constexpr std::uint32_t kMaxImports = 100'000;
inline constexpr std::uint32_t kMaxExports = 100'000;
inline constexpr std::uint32_t kMaxFunctionParams = 1000;
inline constexpr std::uint32_t kMaxFunctionResults = 1000;

inline constexpr std::uint64_t kWasmPageBytes = 65536;

// Reads the sections a host check needs. Sections it does not need are skipped by their
// declared size; custom sections are ignored. Errors say what was malformed and where.
Result<ModuleInfo> ReadModuleInfo(std::span<const std::uint8_t> bytes);

// Returns a copy of `bytes` whose (single, defined) memory declares `max_pages` as its
// maximum. REQUIRES: the module defines exactly one memory (checked: an error otherwise).
Result<std::vector<std::uint8_t>> WithMemoryMaximum(std::span<const std::uint8_t> bytes,
                                                    std::uint64_t max_pages);

}  // namespace wk::engine
