// The WebAssembly engine: V8 (Debian's libnode) behind Engine (process-wide, owns the CPU
// watchdog), Module (compiled once, shared by every worker; immutable, thread-safe), Worker
// (one isolate, bound to the thread that made it) and Instance (one per resident actor);
// no V8 type appears outside src/engine/. Guarantees: imports are checked by name and
// signature at compile; host callbacks see bounds-checked memory; a trap, stack overflow,
// host error, proc_exit or CPU-time termination comes back as a CallResult, never a crash.
// Details: docs/internals.md, "The engine".
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/broken_models.h"
#include "base/status.h"
#include "engine/wasm_module_info.h"

namespace wk::engine {

class HostCall;

// A host function. `fn` returns Ok, or an error that fails the event with its message.
// `fn` runs on the worker thread inside the module's call; it must not block for long.
struct HostFunction {
  std::string module;
  std::string name;
  FuncType type;  // only i32 and i64 parameters and results are supported
  Status (*fn)(HostCall& call);
};

// The set of host functions an embedder provides. Immutable once given to Compile.
class HostInterface {
 public:
  explicit HostInterface(std::vector<HostFunction> functions);
  const HostFunction* Find(std::string_view module, std::string_view name) const;
  const std::vector<HostFunction>& functions() const { return functions_; }

 private:
  std::vector<HostFunction> functions_;
};

// What a module must (or may) export besides memory.
struct ExportSpec {
  std::string name;
  FuncType type;
  bool required = false;
};

// The bounds an embedder sets on one module (docs/abi.md, "Limits"); the fixed ones are in
// wasm_module_info.h. All are checked by Compile before V8 sees the module.
struct ModuleLimits {
  // The most linear memory one instance may have. A module without a declared maximum, or
  // with a larger one, gets this maximum imposed; a larger initial memory is refused.
  std::uint64_t max_memory_bytes = 64ull << 20;
  std::uint64_t max_module_bytes = 64ull << 20;  // the wasm file itself
  // Elements of all the module's tables together, initial and grown (table.grow), and of all
  // its element segments together. Table elements live on the worker's V8 heap, up to about
  // 32 bytes each with V8's dispatch data, per instance: 65,536 is 2 MiB. Initial sizes over
  // it are refused; tables get maxima imposed so that their maxima sum to at most this:
  // growth room goes first to declared maxima, in order, then to tables without one.
  std::uint64_t max_table_elements = 65'536;
  // Put before the field names above in error messages, so that errors name the embedder's
  // setting ("actors." gives "actors.max_table_elements").
  std::string setting_prefix;
  // Whom the compiled module is charged to (Engine::CompiledBytesByOwner): the runtime
  // passes the deploying tenant.
  std::string owner;
};

// What a compiled module holds in the process, as the engine charges it
// (Module::compiled_bytes): the wire bytes V8 keeps, its machine code per byte of function
// bodies and its per-function metadata. V8 10.2's public API gives no size of a module's
// code (its code space is outside the isolates' heaps, and v8-metrics.h is not shipped),
// so the factors are measured: EngineTest.CompiledCodeCostsWhatItsChargeSays compiles the
// instruction mixes that make the most code per byte and prints the process's growth (the
// figures and the machine: docs/security.md, "Compiled code").
inline constexpr std::uint64_t kCompiledBytesPerCodeByte = 16;
inline constexpr std::uint64_t kCompiledBytesPerFunction = 512;
constexpr std::uint64_t CompiledModuleBytes(std::uint64_t wire_bytes, std::uint64_t code_bytes,
                                            std::uint64_t functions) {
  return wire_bytes + kCompiledBytesPerCodeByte * code_bytes + kCompiledBytesPerFunction * functions;
}

// What one table element costs, for the memory each instance is charged
// (Instance::TableElements): the element on the worker's V8 heap (8 bytes) and V8 10.2's
// indirect-call dispatch data for it (signature id, call target, instance reference: 20
// more), rounded up. An upper bound: an externref table has no dispatch data.
inline constexpr std::uint64_t kTableElementHeapBytes = 32;
// The prefix of the export names the engine gives growable tables ("wasmkeep:table:0"); a
// module that exports such a name itself is refused.
inline constexpr std::string_view kTableExportPrefix = "wasmkeep:table:";

// A compiled, checked class module. Thread-safe; share it with shared_ptr.
class Module {
 public:
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const ModuleInfo& info() const { return info_; }
  std::uint64_t max_memory_bytes() const { return max_memory_bytes_; }
  // The linear memory an instance starts with (the module's declared minimum).
  std::uint64_t initial_memory_bytes() const { return initial_memory_bytes_; }
  // The maxima of the module's tables as compiled (declared or imposed), in order.
  const std::vector<std::uint64_t>& table_maximums() const { return table_maximums_; }
  // Elements of the tables that cannot grow (maximum = minimum): every instance has them.
  std::uint64_t fixed_table_elements() const { return fixed_table_elements_; }
  // The names under which the engine exports the tables that can grow (a reserved name per
  // table, kTableExportPrefix + its index), so an instance's table sizes can be read.
  const std::vector<std::string>& growable_table_exports() const { return growable_table_exports_; }
  bool HasExport(std::string_view name) const { return info_.FindExport(name) != nullptr; }
  std::chrono::nanoseconds compile_time() const { return compile_time_; }
  std::uint64_t id() const { return id_; }
  // What the module holds in the process (CompiledModuleBytes): counted in
  // Engine::compiled_bytes from its compile to its destruction.
  std::uint64_t compiled_bytes() const { return compiled_bytes_; }
  const std::string& owner() const { return owner_; }

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  friend class Engine;
  Module() = default;
  std::unique_ptr<Impl> impl_;
  ModuleInfo info_;
  std::uint64_t max_memory_bytes_ = 0;
  std::uint64_t initial_memory_bytes_ = 0;
  std::vector<std::uint64_t> table_maximums_;
  std::uint64_t fixed_table_elements_ = 0;
  std::vector<std::string> growable_table_exports_;
  std::chrono::nanoseconds compile_time_{0};
  std::uint64_t id_ = 0;
  std::uint64_t compiled_bytes_ = 0;
  std::string owner_;
};

// Why a worker's V8 heap was collected (EngineStats).
enum class GcCause : std::uint8_t {
  kYoung,           // a scavenge of the young generation (allocation; short)
  kFull,            // a full collection V8 chose for its own heap's growth
  kExternalMemory,  // a full collection because memory outside the heap grew (linear memories count)
  kAllAvailable,    // a collection of all that can be collected, which V8 ran on its own: when it
                    // could not reserve a new linear memory's address space (up to three per
                    // attempt, inside the instantiation; kLinearReservationLimitBytes), or when
                    // its heap ran out
  kRequested,       // Worker::CollectGarbage or Worker::StartCollection (the runtime asked)
};
inline constexpr std::size_t kGcCauses = 5;
std::string_view GcCauseName(GcCause cause);

// With the trap handler off (EngineOptions), V8 10.2 reserves address space for a linear
// memory's whole maximum when it makes it, and refuses to reserve more than about 1 TiB for
// all the process's WebAssembly memories together (its backing store's address space limit,
// 1 TiB + 4 GiB on 64-bit). Past it, an instantiation runs up to three critical garbage
// collections (GcCause::kAllAvailable), then tries smaller maxima, collecting again each
// time: slow, so callers keep live and dropped-but-uncollected memories well below this.
// A memory's reservation is released only when V8 collects it (EngineStats).
inline constexpr std::uint64_t kLinearReservationLimitBytes = 1ull << 40;
// An instantiation slower than this counts in EngineStats::slow_instantiations.
inline constexpr std::chrono::milliseconds kSlowInstantiation{10};

// What all the engine's workers did since the engine started. Read from any thread.
struct EngineStats {
  // Garbage collections of the workers' heaps, and their pauses on the worker's thread
  // (from V8's prologue to its epilogue: the atomic pause; incremental and concurrent
  // marking outside it are not counted), by cause.
  std::array<std::uint64_t, kGcCauses> collections{};
  std::array<double, kGcCauses> collection_seconds{};
  // Calls of Worker::CollectGarbage (each runs one or more full collections on the thread)
  // and of Worker::StartCollection.
  std::uint64_t collect_garbage_calls = 0;
  std::uint64_t start_collection_calls = 0;
  // Instantiations (Worker::Instantiate, _initialize included) and their wall time; those
  // slower than kSlowInstantiation; the collections that ran inside them and their pauses.
  std::uint64_t instantiations = 0;
  double instantiation_seconds = 0;
  std::uint64_t slow_instantiations = 0;
  std::uint64_t collections_in_instantiations = 0;
  double collection_seconds_in_instantiations = 0;
  // Linear memories V8 still holds: those of live instances, those kept for reuse, and those
  // let go that V8 has not collected yet (each until the end of the first full collection
  // whose marking began after it was let go; V8 then frees it beside the thread); and the
  // address space they reserve (each memory's maximum, Module::max_memory_bytes; V8 may have
  // reserved less after a failed attempt).
  std::uint64_t linear_memories = 0;
  std::uint64_t linear_reserved_bytes = 0;
  // Of those, the memories kept for reuse (WorkerOptions::memory_pool_size; zeroed: no
  // resident data page, though the kernel keeps the page tables of pages once touched) and
  // their reservations, and the instantiations that were given one instead of a new memory.
  std::uint64_t pooled_memories = 0;
  std::uint64_t pooled_reserved_bytes = 0;
  std::uint64_t reused_memories = 0;
};

struct EngineOptions {
  // V8's trap handler turns out-of-bounds memory accesses into signals instead of explicit
  // bounds checks (faster), at the price of reserving 8 GiB of address space per instance
  // beyond the memory maximum. Off by default: with a declared maximum per actor explicit
  // checks cost little and keep thousands of actors within Linux's map-count limit.
  bool use_trap_handler = false;
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks the module's imports against `host`, its exports against `exports` (plus a
  // memory export named "memory"), imposes the memory maximum, and compiles it. Errors name
  // the cause: not WebAssembly, a missing export, an import the host does not provide, a
  // signature mismatch, memory too large, or V8's own compile error. Thread-safe.
  Result<std::shared_ptr<const Module>> Compile(std::span<const std::uint8_t> bytes,
                                                std::shared_ptr<const HostInterface> host,
                                                std::span<const ExportSpec> exports,
                                                const ModuleLimits& limits);

  // Totals over all workers (any thread).
  EngineStats stats() const;
  // Module::compiled_bytes of every module alive now (compiled and not yet destroyed, by
  // whoever holds it), in all and by ModuleLimits::owner (owners holding none are left
  // out). Any thread.
  std::uint64_t compiled_bytes() const;
  std::uint64_t compiled_bytes_of(const std::string& owner) const;
  std::vector<std::pair<std::string, std::uint64_t>> CompiledBytesByOwner() const;
  // EngineStats::pooled_reserved_bytes alone (read before each instantiation by the runtime).
  std::uint64_t pooled_reserved_bytes() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// How one call into an instance ended.
enum class CallOutcome : std::uint8_t {
  kReturned,     // the export returned; `value` holds its i32 result (0 if none)
  kTrapped,      // a WebAssembly trap or stack overflow; `message` says which
  kOutOfMemory,  // a trap with linear memory grown to near its maximum (within an eighth):
                 // most likely an allocation failed after memory.grow was refused
  kHostError,    // a host function failed the event; `message` is its error
  kTerminated,   // the CPU-time limit was hit and the watchdog terminated the call
  kHeapLimit,    // the worker's V8 heap reached its limit during the call (WorkerOptions)
  kEngineError,  // anything else V8 reported
};

struct CallResult {
  CallOutcome outcome = CallOutcome::kReturned;
  std::int32_t value = 0;
  std::string message;
  // False after anything that unwound through the module's frames: throw the instance away.
  bool instance_usable = true;
  // CPU time of the call when it ran longer than the watchdog's tick (1 ms); for a shorter
  // call its wall time, an upper bound (reading a thread's CPU clock costs a system call).
  std::chrono::nanoseconds cpu_time{0};
  bool ok() const { return outcome == CallOutcome::kReturned; }
};

class Instance;

// WorkerOptions::memory_pool_size by default: enough for a worker whose instances come and go
// one for one (the runtime drops one before it makes one when at its limit), and for bursts.
inline constexpr std::size_t kDefaultMemoryPoolSize = 64;
// The address space a worker's kept memories may reserve together (each its maximum): 64 of
// the default 64 MiB maximum take 4 GiB; of 4 GiB maxima, two are kept. The runtime counts
// it with the live instances' reservations (kLiveReservationBytes, actor/runtime.h).
inline constexpr std::uint64_t kMaxPooledReservationBytes = 8ull << 30;

struct WorkerOptions {
  // The most V8 heap the worker's isolate may use (everything but linear memories: module
  // and instance objects, tables, wrappers). Reaching it never aborts the process: the call
  // running (or the instantiation) fails with CallOutcome::kHeapLimit and its instance is
  // unusable. V8 is asked to terminate it at once, but V8 10.2 does not act on that while
  // the module is in table.grow, so such a call runs on to its end, and V8 gets room above
  // the limit (kHeapLimitSlackBytes, again each time it is reached) meanwhile; what one call
  // can allocate is bounded by its module's tables (ModuleLimits::max_table_elements). The
  // limit is set back before the next call.
  std::uint64_t heap_limit_bytes = 512ull << 20;
  // The old generation's size below which V8 runs no full collection of its own (V8 keeps
  // an embedder-configured initial old generation as the floor of its allocation limit).
  // V8 counts toward that limit the heap's old generation plus the external memory (linear
  // memories: see count_touched_memory) allocated since its last full collection. Without a
  // floor V8 sets the limit a little above what the last collection left alive; a worker
  // whose live heap is a few MiB of instances, while instances are made and thrown away
  // (a counter's leaves about 16 KiB of heap and a 128 KiB memory), then stops for a full
  // mark-sweep after every hundred or so: hundreds of pauses a minute at 50,000 actors
  // (docs/benchmarks.md, "Density"). With a floor they come once per `floor` of that
  // instead, and the worker holds up to that much garbage meanwhile: heap objects and linear
  // memories thrown away, whose resident part is only their touched pages (RSS; the memory
  // budget counts the heap under the node). 0: V8's own heuristics.
  // REQUIRES: gc_floor_bytes <= heap_limit_bytes / 2 (V8 clamps it there anyway).
  std::uint64_t gc_floor_bytes = 0;
  // Whether V8 is told a linear memory costs what the kernel holds of it, not its whole
  // size. V8 counts each memory it makes at its whole size as "external memory" (on top of
  // the old generation, above), and once 64 MiB of it has come since its last full
  // collection it starts one, then makes every further allocation over that mark (each
  // instantiation) wait for a 5-10 ms marking step until the collection ends: a counter's
  // 128 KiB memory, of which it touches a few pages, brought a full collection every 512
  // instantiations and stopped the worker for tens of milliseconds each time
  // (docs/benchmarks.md, "Density"). With this on, a memory's bytes are taken off V8's count
  // when the worker makes it (nothing of it is touched yet), and the pages it holds are given
  // back when it is let go (its instance destroyed, the memory not kept for reuse:
  // memory_pool_size), so V8 sees thrown-away memories at their resident size: a module that
  // touches all its memory is counted in full, one that touches none almost not at all. Dropped memories' address space and mappings are the embedder's to
  // watch (EngineStats; the runtime starts collections for them: StartCollection). Off: V8's
  // own count (tests use it as the control).
  bool count_touched_memory = true;
  // Linear memories kept for reuse, at most, for all the worker's modules together (the
  // memory pool: Worker::Instantiate). Every module's memory is imported (the engine rewrites
  // it so when it compiles it), and the worker hands each instance one it made: a memory whose
  // instance is destroyed without having grown it is zeroed (the kernel drops its pages:
  // madvise MADV_DONTNEED, so it reads as a new one's zeros, swapped-out pages included) and
  // kept for the module's next instance, rather than left to V8's collector with its address
  // space reserved; one that grew (or finds the pool full) goes as before. At 50,000 counters
  // this spares every warm call a memory's reservation, its mapping changes and later its
  // unmapping, and V8 the collections for them (docs/benchmarks.md, "Density"). Each kept
  // memory holds its address space (its maximum; kMaxPooledReservationBytes for them all)
  // but no resident data page. The pool is the worker's, shared by its modules; a module
  // nobody uses any more keeps nothing in it, and CollectGarbage empties it. 0: every
  // instance gets a memory of its own that goes with it.
  std::size_t memory_pool_size = kDefaultMemoryPoolSize;
  // Broken models (base/broken_models.h: pool-skips-zeroing): tests only.
  BrokenModels broken;
};

// Room V8 gets above the heap limit each time it is reached, to complete the allocation in
// progress and the call. At least the largest single allocation a module can make (growing
// a table to its limit: actors.max_table_elements, at most 1,000,000, of 8 bytes each).
inline constexpr std::uint64_t kHeapLimitSlackBytes = 64ull << 20;
// The smallest heap limit a worker accepts: V8's own start-up heap is a few MiB.
inline constexpr std::uint64_t kMinHeapLimitBytes = 16ull << 20;

// One isolate on the calling thread. Not thread-safe except Terminate (see above).
class Worker {
 public:
  // REQUIRES: options.heap_limit_bytes >= kMinHeapLimitBytes.
  explicit Worker(Engine& engine, WorkerOptions options = {});
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Creates an instance and runs its `_initialize` export if it has one (host calls made
  // from it see `context`). Errors: V8's instantiation error, or the initializer failing.
  Result<std::unique_ptr<Instance>> Instantiate(const std::shared_ptr<const Module>& module,
                                                void* context,
                                                std::chrono::milliseconds cpu_limit);

  // How many times the heap limit has been reached (each stopped a call or instantiation).
  std::uint64_t heap_limit_hits() const;
  // The bytes of live objects on this isolate's V8 heap now (instances, tables, wrappers;
  // not linear memory, which lives outside it). The node's memory budget counts it.
  std::uint64_t HeapUsedBytes() const;
  // A full garbage collection now (V8's low-memory notification): tens of milliseconds on
  // a large heap, so only when memory is short (or the worker idle). The memories kept for
  // reuse are let go first, so their address space goes with it.
  void CollectGarbage();
  // Starts a full collection that runs mostly beside the thread and finishes in short steps
  // from PumpMessageLoop and the worker's allocations: frees dropped instances' linear
  // memories without stopping the worker for a whole collection. It is V8's ordinary
  // incremental and concurrent marking, started the way V8 starts it for external memory
  // (the external count raised past V8's 64 MiB mark and lowered again at once, so no later
  // allocation is made to wait for a marking step), compacting only what V8 would compact
  // anyway: its final pause is a normal one (5-7 ms at 10,000 live instances). V8's
  // memory-pressure notification, used before, asks for a collection that reduces memory
  // (compacting the old generation), whose final pause took about 80 ms there. Nothing if a
  // full collection is marking already (it frees the same garbage). With a heap limit so
  // small that the raise passes V8's hard external limit (half the old generation's maximum
  // in V8 10.2: a heap limit under about 128 MiB), V8 collects at once instead.
  void StartCollection();

  // Runs V8's pending platform tasks for this isolate (background compilation results,
  // garbage-collection tasks). Call it between events. (Modules no longer referenced are
  // dropped from the worker when the next new module is loaded.)
  void PumpMessageLoop();

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

class Instance {
 public:
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  // Calls the export `name` with `args` (at most two i32 parameters, as its type has; it
  // returns nothing or one i32). Host functions called from it see `context`. The call is
  // terminated if it uses more than `cpu_limit` of CPU time on this thread. REQUIRES: on the
  // worker's thread.
  CallResult Call(std::string_view name, void* context, std::chrono::milliseconds cpu_limit,
                  std::span<const std::int32_t> args = {});

  bool HasExport(std::string_view name) const { return module_->HasExport(name); }
  // Current size of the linear memory (grows while the actor runs): what is mapped.
  std::uint64_t MemoryBytes() const;
  // The part of the linear memory the process really holds: its pages (the kernel's, 4 KiB)
  // that are resident now, by mincore(2), as a high-water mark over this instance's calls
  // (never less than an earlier answer, never more than MemoryBytes()). A page the module
  // has written or read is resident (a read maps the kernel's zero page: counted too, so a
  // module cannot touch memory unseen); a page it never touched is not. WebAssembly cannot
  // give pages back, and the high-water mark keeps pages the kernel swapped out counted.
  // Cost: one system call per 16 MiB of memory, none once every page has been seen.
  // REQUIRES: on the worker's thread.
  std::uint64_t ResidentMemoryBytes();
  // Elements of all the instance's tables now (they live on the worker's V8 heap, about
  // kTableElementHeapBytes each). REQUIRES: on the worker's thread.
  std::uint64_t TableElements() const;
  // What this instance holds on its worker's V8 heap: the bytes V8 allocated to instantiate
  // its module on this worker (measured once per module and worker, at the first
  // instantiation no garbage collection interrupted: the instance's objects and initial
  // tables, plus that instantiation's garbage; 0 until then), the bytes the wrapper of each
  // export it called took when first looked up (likewise), and kTableElementHeapBytes for
  // every element its tables grew by since. REQUIRES: on the worker's thread.
  std::uint64_t HeapBytes() const;
  const Module& module() const { return *module_; }

  struct Impl;

 private:
  friend class Worker;
  Instance() = default;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const Module> module_;
};

// What a host function sees. Valid only during the callback.
class HostCall {
 public:
  std::int32_t I32(std::size_t i) const { return static_cast<std::int32_t>(args_[i]); }
  std::uint32_t U32(std::size_t i) const { return static_cast<std::uint32_t>(args_[i]); }
  std::int64_t I64(std::size_t i) const { return args_[i]; }

  // The bytes [ptr, ptr + len) of linear memory, or an error naming `what`, the range and
  // the memory's size. Views are invalidated by anything that can grow memory (only the
  // module itself can, so they stay valid for the rest of this callback).
  Result<std::span<std::uint8_t>> Range(std::string_view what, std::uint32_t ptr, std::uint32_t len);
  // Same, as text.
  Result<std::string_view> Text(std::string_view what, std::uint32_t ptr, std::uint32_t len);

  void ReturnI32(std::int32_t v) { result_ = v; }
  void ReturnI64(std::int64_t v) { result_ = v; }

  // The `context` given to Instance::Call.
  void* context() const { return context_; }
  const HostFunction& function() const { return *function_; }

  // For the engine: filled in before the callback.
  HostCall(const HostFunction* function, void* context, std::span<std::uint8_t> memory,
           std::span<const std::int64_t> args)
      : function_(function), context_(context), memory_(memory), args_(args) {}
  std::int64_t result() const { return result_; }

 private:
  const HostFunction* function_;
  void* context_;
  std::span<std::uint8_t> memory_;
  std::span<const std::int64_t> args_;
  std::int64_t result_ = 0;
};

}  // namespace wk::engine
