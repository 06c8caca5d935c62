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
#include <string_view>
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

// A table's limits, in elements. Same shape as memory limits (the binary format shares it).
struct TableLimits {
  ValType element = ValType::kFuncRef;
  std::uint64_t min = 0;
  std::optional<std::uint64_t> max;
  bool imported = false;
};

// The largest per-function figures, with the function (in the function index space) that has
// them, so a limit error can name it.
struct FunctionExtreme {
  std::uint64_t value = 0;
  std::uint32_t function = 0;
};

struct ModuleInfo {
  std::vector<FuncType> types;
  std::vector<Import> imports;
  std::vector<Export> exports;
  std::vector<MemoryLimits> memories;  // imported ones first, as in the index space
  std::vector<TableLimits> tables;     // imported ones first, as in the index space

  // What the module declares beyond the host check, for the engine's limits (engine.h).
  std::uint32_t defined_functions = 0;  // the function section's count (imports excluded)
  std::uint32_t globals = 0;            // defined globals
  std::uint32_t element_segments = 0;
  std::uint64_t element_entries = 0;    // over every element segment
  std::uint32_t data_segments = 0;
  std::uint64_t data_bytes = 0;         // over every data segment
  FunctionExtreme most_locals;          // declared locals of one function (parameters excluded)
  FunctionExtreme largest_body;         // bytes of one function body
  std::uint64_t code_bytes = 0;         // bytes of every function body together

  const Export* FindExport(std::string_view name) const;
  // REQUIRES: the import or export is a function.
  const FuncType& TypeOf(const Import& i) const { return types[i.type_index]; }
  const FuncType& TypeOf(const Export& e) const { return types[e.type_index]; }
};

// Fixed limits on what a module may declare, checked by this reader before V8 sees the
// module (docs/abi.md, "Limits"). Each is at or below V8 10.2's own limit (wasm-limits.h),
// so a module this reader accepts never reaches one of V8's (some of which V8 enforces by
// aborting), and each is far above what a compiler emits for a real actor. Reasons:
//
// Function types: V8 keeps a canonical signature per type for every module, and the reader
// keeps them too; real modules have tens to hundreds.
inline constexpr std::uint32_t kMaxTypes = 100'000;
// Functions (imports plus definitions): V8 keeps per-function code and jump-table slots per
// module and per-function state per instance; large C++ or Rust modules have tens of
// thousands.
inline constexpr std::uint32_t kMaxFunctions = 200'000;
// Imports: every import is bound to a host function, which costs a V8 function object per
// worker; the ABI has a few dozen functions, so more imports are duplicates.
inline constexpr std::uint32_t kMaxImports = 1'000;
// Exports: V8 makes a wrapper function for every export of every instance, on the worker's
// heap; the ABI needs a handful.
inline constexpr std::uint32_t kMaxExports = 10'000;
inline constexpr std::uint32_t kMaxFunctionParams = 1000;   // V8's own
inline constexpr std::uint32_t kMaxFunctionResults = 1000;  // V8's own
// Tables: each is a heap object per instance with its own dispatch data; toolchains emit one
// (the indirect-call table), reference-types code a few. Their elements are bounded by
// ModuleLimits::max_table_elements (a setting), all tables together.
inline constexpr std::uint32_t kMaxTables = 16;
// Globals (defined ones): every instance holds their values (up to 16 bytes each) and V8 a
// slot for each; compilers emit a few (the stack pointer, TLS base). 10,000 is 160 KiB.
inline constexpr std::uint32_t kMaxGlobals = 10'000;
// Element and data segments: V8 keeps per-instance bookkeeping for each (dropped flags,
// start and size of each data segment); linkers emit a few. Their contents are bounded by
// the table-elements and module-size limits.
inline constexpr std::uint32_t kMaxElementSegments = 10'000;
inline constexpr std::uint32_t kMaxDataSegments = 10'000;
// Exception tags (exception handling): V8 makes a tag object for each in every instance;
// code compiled with exceptions uses one or two.
inline constexpr std::uint32_t kMaxTags = 1'000;
// Locals of one function (its parameters excluded): each is a stack slot of up to 16 bytes
// (v128), so 20,000 keep one frame under 320 KiB, a third of V8's ~1 MB stack, and one
// call cannot overflow the stack on entry. Compilers emit at most a few thousand.
inline constexpr std::uint32_t kMaxFunctionLocals = 20'000;
// Bytes of one function body: V8's optimizing compiler's time and memory grow faster than
// linearly in a function's size, and compiling happens on the node at deploy and on first
// call; the biggest functions of real programs (interpreter loops) are a few hundred KiB.
inline constexpr std::uint32_t kMaxFunctionBodyBytes = 2u << 20;

inline constexpr std::uint64_t kWasmPageBytes = 65536;

// Reads every section but custom ones and the instructions of function bodies (which V8
// validates): types, imports, functions, tables, memories, globals, exports, element and
// data segments, and the local declarations and size of each function body. Errors say what
// was malformed and where; a count over one of the limits above is an error naming it
// ("... over the limit of N ...").
Result<ModuleInfo> ReadModuleInfo(std::span<const std::uint8_t> bytes);

// Returns a copy of `bytes` whose defined tables declare `max` as their maxima (one entry per
// table in the table section, in order). REQUIRES: max.size() is the table section's count
// and each max[i] >= that table's minimum (checked: an error otherwise).
Result<std::vector<std::uint8_t>> WithTableMaximums(std::span<const std::uint8_t> bytes,
                                                    std::span<const std::uint64_t> max);

// The import a module's memory becomes under WithImportedMemory: module and field name.
inline constexpr std::string_view kMemoryImportModule = "wasmkeep:engine";
inline constexpr std::string_view kMemoryImportName = "memory";

// Returns a copy of `bytes` whose (single, defined) memory is imported instead, as
// kMemoryImportModule.kMemoryImportName with the same limits (`max_pages` as its maximum):
// the memory section goes, the import section gains one entry (or is made, before the first
// section that must follow it). Memory indices are unchanged (the module's memory was index 0
// and the import is the only memory), and so is every other index space: a memory import adds
// no function, table or global. The engine hands each instance a memory it made and can use
// again (engine.cc, "Memory pool"). REQUIRES: the module defines exactly one memory and
// imports none (checked: an error otherwise).
Result<std::vector<std::uint8_t>> WithImportedMemory(std::span<const std::uint8_t> bytes,
                                                     std::uint64_t max_pages);

// An export the engine adds to a module: table `table_index` under `name`.
struct TableExport {
  std::string name;
  std::uint32_t table_index = 0;
};

// Returns a copy of `bytes` whose export section also exports the given tables (the engine
// reads a growable table's length through such an export, engine.h). The module's own
// exports are kept byte for byte. Errors: no export section, a malformed one, or a module
// that already exports one of the names.
Result<std::vector<std::uint8_t>> WithTableExports(std::span<const std::uint8_t> bytes,
                                                   std::span<const TableExport> exports);

// Appends v to out as unsigned LEB128, WebAssembly's integer encoding (also used by the
// engine's tests to build modules byte by byte).
void AppendUleb128(std::vector<std::uint8_t>& out, std::uint64_t v);

}  // namespace wk::engine
