// V8 behind engine.h. See the header for the shape; notes here are about V8 itself.
#include "engine/engine.h"

#include <libplatform/libplatform.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <v8.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "base/check.h"

// The headers we compile against must be the ones of the library we link (libnode108 ships
// V8 10.2). This machine's /usr/include/node may hold Node 20's V8 11 headers with no
// library behind them (docs/DEPENDENCIES.md); building against those would crash at run time.
static_assert(V8_MAJOR_VERSION == 10 && V8_MINOR_VERSION == 2,
              "compile against libnode108's V8 10.2 headers (see docs/DEPENDENCIES.md)");

namespace wk::engine {
namespace {

constexpr std::size_t kMaxHostParams = 10;  // WASI path_open has 9
// How often the watchdog looks at running calls. A runaway event overruns its limit by at
// most about two ticks (the baseline is taken up to a tick late, the check a tick late)
// plus V8's interrupt latency, well under a millisecond.
constexpr auto kWatchdogTick = std::chrono::milliseconds(1);
// After the last call ends the watchdog keeps ticking this many times before it parks, so
// a busy worker's back-to-back calls do not wake it through the futex on every call.
constexpr int kWatchdogLingerTicks = 200;

std::int64_t ThreadCpuNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::uint64_t HeapUsed(v8::Isolate* isolate) {
  v8::HeapStatistics stats;
  isolate->GetHeapStatistics(&stats);
  return stats.used_heap_size();
}

// The bytes of [data, data + size) the kernel holds in memory (mincore), in whole pages, at
// most `size`.
std::uint64_t ResidentBytes(const void* data, std::uint64_t size) {
  if (size == 0) return 0;
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = start + size;
  // mincore reports one byte per page; a 4,096-byte vector covers 16 MiB per call.
  unsigned char resident[4096];
  std::uint64_t pages_resident = 0;
  for (std::uintptr_t at = start & ~(page - 1); at < end;) {
    const std::size_t pages = std::min<std::size_t>(sizeof resident, (end - at + page - 1) / page);
    if (mincore(reinterpret_cast<void*>(at), pages * page, resident) != 0) {
      // Not expected (the range is a memory's own mapping); count the pages as resident
      // rather than let memory go uncounted.
      pages_resident += pages;
    } else {
      for (std::size_t i = 0; i < pages; ++i) pages_resident += resident[i] & 1u;
    }
    at += pages * page;
  }
  return std::min<std::uint64_t>(size, pages_resident * page);
}

v8::Local<v8::String> V8Str(v8::Isolate* isolate, std::string_view s) {
  return v8::String::NewFromUtf8(isolate, s.data(), v8::NewStringType::kNormal,
                                 static_cast<int>(s.size()))
      .ToLocalChecked();
}

std::string ExceptionText(v8::Isolate* isolate, v8::Local<v8::Value> exception) {
  if (exception.IsEmpty()) return "unknown error";
  v8::String::Utf8Value text(isolate, exception);
  return *text != nullptr ? std::string(*text, text.length()) : std::string("unknown error");
}

// V8's platform is process-wide and cannot be initialized twice (nor again after disposal),
// so the first Engine creates it and it lives until exit.
std::once_flag g_v8_once;
v8::Platform* g_platform = nullptr;

void InitializeV8(const EngineOptions& options) {
  std::call_once(g_v8_once, [&] {
    // Leaked on purpose: see above.
    g_platform = v8::platform::NewDefaultPlatform().release();
    v8::V8::InitializePlatform(g_platform);
    // The JS heap of an isolate only holds wrappers (module objects, instances); WebAssembly
    // memories live outside it. Expose GC so tests can measure resident size reliably.
    static const char kFlags[] = "--expose-gc";
    v8::V8::SetFlagsFromString(kFlags, sizeof(kFlags) - 1);
    // Diagnostics only (docs/configuration.md, "Environment variables"): V8's own flags, such as
    // --trace-gc-nvp, from the environment of the process. Not a setting: flags that change
    // V8's behaviour are untested here.
    if (const char* flags = std::getenv("WASMKEEP_V8_FLAGS"); flags != nullptr && *flags != '\0') {
      v8::V8::SetFlagsFromString(flags, std::strlen(flags));
    }
    v8::V8::Initialize();
    if (options.use_trap_handler) v8::V8::EnableWebAssemblyTrapHandler(true);
  });
}

}  // namespace

// ---------------------------------------------------------------------------------------
// HostInterface

HostInterface::HostInterface(std::vector<HostFunction> functions) : functions_(std::move(functions)) {
  for (const auto& f : functions_) {
    WK_CHECK(f.type.params.size() <= kMaxHostParams, "host function with too many parameters");
    WK_CHECK(f.type.results.size() <= 1, "host function with more than one result");
    for (ValType t : f.type.params) WK_CHECK(t == ValType::kI32 || t == ValType::kI64, "host param type");
    for (ValType t : f.type.results) WK_CHECK(t == ValType::kI32 || t == ValType::kI64, "host result type");
    WK_CHECK(f.fn != nullptr, "host function without a callback");
  }
}

const HostFunction* HostInterface::Find(std::string_view module, std::string_view name) const {
  for (const auto& f : functions_) {
    if (f.module == module && f.name == name) return &f;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// HostCall

Result<std::span<std::uint8_t>> HostCall::Range(std::string_view what, std::uint32_t ptr, std::uint32_t len) {
  if (std::uint64_t{ptr} + len > memory_.size()) {
    return InvalidArgument(fmt::format("{}: {} range [{}, +{}) is outside linear memory ({} bytes)",
                                       function_->name, what, ptr, len, memory_.size()));
  }
  return memory_.subspan(ptr, len);
}

Result<std::string_view> HostCall::Text(std::string_view what, std::uint32_t ptr, std::uint32_t len) {
  auto r = Range(what, ptr, len);
  if (!r.ok()) return r.status();
  return std::string_view(reinterpret_cast<const char*>(r->data()), r->size());
}

// ---------------------------------------------------------------------------------------
// Engine


struct CompiledAccount;

struct Engine::Impl {
  std::atomic<std::uint64_t> next_module_id{1};
  std::shared_ptr<CompiledAccount> compiled;

  // The compile isolate: compilation happens here once per module, then every worker
  // re-creates the module object from the shared compiled code.
  std::mutex compile_mu;
  v8::ArrayBuffer::Allocator* compile_allocator = nullptr;
  v8::Isolate* compile_isolate = nullptr;
  v8::Global<v8::Context> compile_context;

  // The CPU-time watchdog: one thread for all workers. `watch_mu` guards every worker's
  // watch state and the list.
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  std::vector<Worker::Impl*> watched;
  int running_calls = 0;

  // EngineStats, summed by the workers' threads as they go (relaxed: totals only).
  std::array<std::atomic<std::uint64_t>, kGcCauses> collections{};
  std::array<std::atomic<std::uint64_t>, kGcCauses> collection_ns{};
  std::atomic<std::uint64_t> collect_garbage_calls{0};
  std::atomic<std::uint64_t> start_collection_calls{0};
  std::atomic<std::uint64_t> instantiations{0};
  std::atomic<std::uint64_t> instantiation_ns{0};
  std::atomic<std::uint64_t> slow_instantiations{0};
  std::atomic<std::uint64_t> collections_in_instantiations{0};
  std::atomic<std::uint64_t> collection_ns_in_instantiations{0};
  std::atomic<std::uint64_t> linear_memories{0};
  std::atomic<std::uint64_t> linear_reserved_bytes{0};
  std::atomic<std::uint64_t> pooled_memories{0};
  std::atomic<std::uint64_t> pooled_reserved_bytes{0};
  std::atomic<std::uint64_t> reused_memories{0};
  bool stopping = false;
  bool watchdog_parked = false;
  std::thread watchdog;

  void WatchdogLoop();
};

struct Worker::Impl {
  Engine::Impl* engine = nullptr;
  v8::ArrayBuffer::Allocator* allocator = nullptr;
  v8::Isolate* isolate = nullptr;
  v8::Global<v8::Context> context;
  v8::Global<v8::Function> instance_ctor;
  v8::Global<v8::Function> memory_ctor;  // WebAssembly.Memory

  // The heap limit (WorkerOptions). `heap_limit_hit` is set by NearHeapLimit, which V8
  // calls on this thread during a garbage collection, and read after the call or
  // instantiation it interrupted.
  std::uint64_t heap_limit_bytes = 0;
  bool heap_limit_hit = false;
  bool heap_limit_raised = false;  // NearHeapLimit raised it; lowered before the next call
  std::size_t initial_old_space_limit = 0;  // V8's share of heap_limit_bytes for its old generation
  std::uint64_t heap_limit_hits = 0;
  // Garbage collections started on this isolate (a measure of allocation is only good if
  // none ran during it).
  std::uint64_t collections = 0;
  static void CountCollection(v8::Isolate*, v8::GCType, v8::GCCallbackFlags, void* data) {
    ++static_cast<Impl*>(data)->collections;
  }
  // EngineStats' collections: each pause timed from V8's prologue to its epilogue, its cause
  // told by V8's callback flags, or by what this worker asked for.
  std::chrono::steady_clock::time_point gc_started{};
  bool gc_running = false;
  bool collection_requested = false;  // CollectGarbage (synchronous) is running
  bool collection_started = false;    // StartCollection asked; its final pause is still to come
  bool instantiating = false;
  // A full collection is marking (from V8's start of incremental marking to the end of its
  // mark-compact): StartCollection has nothing to add.
  bool marking = false;
  static void MarkingStarted(v8::Isolate*, v8::GCType, v8::GCCallbackFlags, void* data);
  static void GcPrologue(v8::Isolate*, v8::GCType, v8::GCCallbackFlags, void* data);
  static void GcEpilogue(v8::Isolate*, v8::GCType type, v8::GCCallbackFlags flags, void* data);

  // The linear memories this worker made for its instances, until V8 collects them:
  // EngineStats' linear memories and their reservations. Counted, not watched: a weak handle
  // per memory cost every full collection's final pause 3-10 ms of weak callbacks on a
  // worker with 10,000 instances (V8's --trace-gc-nvp, docs/benchmarks.md, "Density"). A
  // memory is garbage once it is let go (its instance destroyed and the memory not kept in
  // the pool: nothing else holds it, as one memory serves one instance at a time), and a full
  // collection frees all the garbage there was when its marking started; so each
  // mark-compact collects the memories let go before its marking began. (A scavenge may free
  // a young one sooner; it stays counted until the next full collection: the count errs
  // high, never low.)
  struct MemoryCount {
    std::uint64_t memories = 0;
    std::uint64_t reserved_bytes = 0;
  };
  MemoryCount made;               // memories made on this worker
  MemoryCount destroyed;          // of them, let go
  MemoryCount destroyed_at_mark;  // `destroyed` when the running full collection began marking
  MemoryCount collected;          // of them, collected
  void CountMemory(std::uint64_t reserved_bytes);
  void CountDestroyed(std::uint64_t reserved_bytes);
  void CountCollected();  // at a mark-compact's end

  // V8's external count, as WorkerOptions::count_touched_memory keeps it: a memory's bytes are
  // taken off when it is made (nothing of it is touched yet), and the pages it holds when it
  // is let go are given back then (LetGoMemory). A memory kept in the pool is zeroed (its
  // pages go back to the kernel), so it has nothing to give back. V8 uses the count
  // only relative to its lowest value since its last full collection (what came since is
  // what might be garbage; its mark is 64 MiB above that low), never as an absolute. When V8
  // frees a memory it takes its whole size off the count, though the untouched part was
  // taken off already, so the absolute count drifts down by that part per memory (about
  // 124 KiB for a counter: an int64 lasts 10^14 of them) and stays meaningless; that part is
  // deliberately not given back: any raise counts as new allocation against V8's mark, and
  // giving it back would bring exactly the collections this exists to avoid (measured: a
  // full collection every ~500 instantiations again).
  bool count_touched_memory = true;
  static std::size_t NearHeapLimit(void* data, std::size_t current_limit, std::size_t initial_limit);
  // Returns whether the heap limit was reached since the last call, and clears it and the
  // termination it requested.
  bool TakeHeapLimitHit();

  // A host function bound to this isolate: the V8 function's data points here.
  struct Binding {
    Impl* worker;
    const HostFunction* fn;
  };
  // A memory kept for reuse, zeroed, with what was taken off V8's count for it.
  struct PooledMemory {
    v8::Global<v8::WasmMemoryObject> memory;
    std::uint64_t discounted_bytes = 0;
  };
  struct ModuleEntry {
    std::weak_ptr<const Module> module;
    v8::Global<v8::WasmModuleObject> object;
    v8::Global<v8::Object> imports;
    // imports[kMemoryImportModule]: its kMemoryImportName is set to the instance's memory for
    // each instantiation, and cleared after it (the pool, not the imports, holds memories).
    v8::Global<v8::Object> memory_import;
    std::vector<PooledMemory> memory_pool;
    std::uint64_t memory_reserved_bytes = 0;  // Module::max_memory_bytes
    std::vector<std::unique_ptr<Binding>> bindings;
    // Instance::HeapBytes: the heap one instantiation took, once measured.
    bool instance_heap_measured = false;
    std::uint64_t instance_heap_bytes = 0;
  };
  std::unordered_map<std::uint64_t, ModuleEntry> modules;

  // Memory pool (WorkerOptions::memory_pool_size): every module imports its memory, made
  // here. TakeMemory gives an instantiation a zeroed one of the module's initial size from
  // the pool, or makes one; LetGoMemory, when an instance goes (or its instantiation
  // failed), zeroes the memory and keeps it if it still has its initial size and the pool
  // has room, or else lets V8 collect it. A memory serves one instance at a time: the
  // instance it served is destroyed (no handle to it, its exports or its functions is left,
  // so none of its code can run again) before the memory is zeroed and handed on.
  std::size_t memory_pool_size = 0;
  std::size_t pooled = 0;                     // in all the entries' pools
  std::uint64_t pooled_reserved_bytes = 0;    // their reservations (kMaxPooledReservationBytes)
  BrokenModels broken;                        // WorkerOptions::broken
  v8::MaybeLocal<v8::WasmMemoryObject> TakeMemory(ModuleEntry& entry, const Module& module,
                                                  std::uint64_t* discounted_bytes);
  // `module_in_use`: someone besides the caller holds the module (an instance or the class
  // registry), so another instance of it may come.
  void LetGoMemory(ModuleEntry& entry, v8::Local<v8::WasmMemoryObject> memory, std::uint64_t discounted_bytes,
                   std::uint64_t initial_bytes, bool module_in_use);
  void EmptyPool(ModuleEntry& entry);

  // The call in progress (one at a time per thread).
  Instance::Impl* current = nullptr;
  void* current_context = nullptr;
  std::optional<Status> host_error;

  // Watch state, guarded by engine->watch_mu.
  clockid_t cpu_clock{};
  bool running = false;
  // The hot path reads no CPU clock: a thread-CPU clock read is a system call (about 0.5 µs
  // on our VMs, measured by bench/actor_bench), several per event. Instead the watchdog takes
  // a call's CPU baseline at its first tick during the call (`baseline_serial == serial`),
  // so calls shorter than a tick never pay for it, and a limit is enforced from at most a
  // tick after the call began.
  bool terminated = false;
  std::uint64_t serial = 0;
  std::uint64_t baseline_serial = 0;
  std::int64_t baseline_cpu_ns = 0;
  std::int64_t limit_ns = 0;

  Result<ModuleEntry*> EntryFor(const std::shared_ptr<const Module>& module);
  void BeginCall(Instance::Impl* inst, void* ctx, std::chrono::milliseconds limit);
  // Returns whether the watchdog terminated the call; sets *cpu_time if given.
  bool EndCall(std::chrono::nanoseconds* cpu_time = nullptr,
               std::chrono::steady_clock::time_point started = {});
  CallResult Run(Instance::Impl* inst, v8::Local<v8::Function> fn, void* ctx, std::chrono::milliseconds limit,
                 std::uint64_t max_memory_bytes, std::uint64_t initial_memory_bytes,
                 std::span<const std::int32_t> args = {});
  static void Trampoline(const v8::FunctionCallbackInfo<v8::Value>& info);
};

struct Instance::Impl {
  Worker::Impl* worker = nullptr;
  v8::Global<v8::Object> exports;
  v8::Global<v8::WasmMemoryObject> memory;
  std::vector<v8::Global<v8::Object>> growable_tables;  // Module::growable_table_exports()
  std::uint64_t resident_high_water = 0;                // ResidentMemoryBytes()
  // What is taken off V8's external count for its memory (Worker::Impl::TakeMemory).
  std::uint64_t discounted_bytes = 0;
  // Resident bytes of its memory, measured now (mincore); see Instance::ResidentMemoryBytes.
  std::uint64_t Resident(v8::Isolate* isolate);
  // Its module's entry in the worker (alive as long as the instance: it holds the module).
  Worker::Impl::ModuleEntry* entry = nullptr;
  // Heap its export wrappers took, made by V8 when each export is first looked up (Call).
  std::uint64_t wrapper_heap_bytes = 0;
  std::map<std::string, v8::Global<v8::Function>, std::less<>> functions;

  std::span<std::uint8_t> Memory(v8::Isolate* isolate) {
    auto buffer = memory.Get(isolate)->Buffer();
    return {static_cast<std::uint8_t*>(buffer->Data()), buffer->ByteLength()};
  }
};

// The compiled modules alive, charged by owner. Shared by the engine and its modules, so
// a module may outlive the engine.
struct CompiledAccount {
  mutable std::mutex mu;
  std::uint64_t total = 0;
  std::map<std::string, std::uint64_t> by_owner;
};

struct Module::Impl {
  std::optional<v8::CompiledWasmModule> compiled;
  std::shared_ptr<const HostInterface> host;
  std::shared_ptr<CompiledAccount> account;
};

Module::~Module() {
  if (!impl_ || !impl_->account) return;
  CompiledAccount& a = *impl_->account;
  std::lock_guard lock(a.mu);
  a.total -= compiled_bytes_;
  auto it = a.by_owner.find(owner_);
  if (it != a.by_owner.end() && (it->second -= compiled_bytes_) == 0) a.by_owner.erase(it);
}

std::uint64_t Engine::compiled_bytes() const {
  std::lock_guard lock(impl_->compiled->mu);
  return impl_->compiled->total;
}

std::uint64_t Engine::compiled_bytes_of(const std::string& owner) const {
  std::lock_guard lock(impl_->compiled->mu);
  auto it = impl_->compiled->by_owner.find(owner);
  return it == impl_->compiled->by_owner.end() ? 0 : it->second;
}

std::vector<std::pair<std::string, std::uint64_t>> Engine::CompiledBytesByOwner() const {
  std::lock_guard lock(impl_->compiled->mu);
  return {impl_->compiled->by_owner.begin(), impl_->compiled->by_owner.end()};
}

void Engine::Impl::WatchdogLoop() {
  std::unique_lock lock(watch_mu);
  int idle_ticks = 0;
  while (!stopping) {
    if (running_calls == 0 && ++idle_ticks > kWatchdogLingerTicks) {
      watchdog_parked = true;
      watch_cv.wait(lock, [&] { return stopping || running_calls > 0; });
      watchdog_parked = false;
      idle_ticks = 0;
      continue;
    }
    if (running_calls > 0) idle_ticks = 0;
    for (Worker::Impl* w : watched) {
      if (!w->running || w->terminated) continue;
      if (w->baseline_serial != w->serial) {
        w->baseline_serial = w->serial;
        w->baseline_cpu_ns = ThreadCpuNs(w->cpu_clock);
      } else if (ThreadCpuNs(w->cpu_clock) - w->baseline_cpu_ns >= w->limit_ns) {
        // Thread-safe by V8's contract; the call sees it at its next interrupt check (loop
        // back-edges and function entries), so even `loop br 0` stops.
        w->isolate->TerminateExecution();
        w->terminated = true;
      }
    }
    watch_cv.wait_for(lock, kWatchdogTick, [&] { return stopping; });
  }
}

Engine::Engine(EngineOptions options) : impl_(std::make_unique<Impl>()) {
  InitializeV8(options);
  impl_->compiled = std::make_shared<CompiledAccount>();
  impl_->compile_allocator = v8::ArrayBuffer::Allocator::NewDefaultAllocator();
  v8::Isolate::CreateParams params;
  params.array_buffer_allocator = impl_->compile_allocator;
  impl_->compile_isolate = v8::Isolate::New(params);
  {
    v8::Locker locker(impl_->compile_isolate);
    v8::Isolate::Scope isolate_scope(impl_->compile_isolate);
    v8::HandleScope scope(impl_->compile_isolate);
    impl_->compile_context.Reset(impl_->compile_isolate, v8::Context::New(impl_->compile_isolate));
  }
  impl_->watchdog = std::thread([this] { impl_->WatchdogLoop(); });
}

EngineStats Engine::stats() const {
  const Impl& e = *impl_;
  EngineStats s;
  auto seconds = [](const std::atomic<std::uint64_t>& ns) { return static_cast<double>(ns.load()) / 1e9; };
  for (std::size_t i = 0; i < kGcCauses; ++i) {
    s.collections[i] = e.collections[i].load();
    s.collection_seconds[i] = seconds(e.collection_ns[i]);
  }
  s.collect_garbage_calls = e.collect_garbage_calls.load();
  s.start_collection_calls = e.start_collection_calls.load();
  s.instantiations = e.instantiations.load();
  s.instantiation_seconds = seconds(e.instantiation_ns);
  s.slow_instantiations = e.slow_instantiations.load();
  s.collections_in_instantiations = e.collections_in_instantiations.load();
  s.collection_seconds_in_instantiations = seconds(e.collection_ns_in_instantiations);
  s.linear_memories = e.linear_memories.load();
  s.linear_reserved_bytes = e.linear_reserved_bytes.load();
  s.pooled_memories = e.pooled_memories.load();
  s.pooled_reserved_bytes = e.pooled_reserved_bytes.load();
  s.reused_memories = e.reused_memories.load();
  return s;
}

std::uint64_t Engine::pooled_reserved_bytes() const {
  return impl_->pooled_reserved_bytes.load(std::memory_order_relaxed);
}

std::string_view GcCauseName(GcCause cause) {
  switch (cause) {
    case GcCause::kYoung: return "young";
    case GcCause::kFull: return "full";
    case GcCause::kExternalMemory: return "external_memory";
    case GcCause::kAllAvailable: return "all_available";
    case GcCause::kRequested: return "requested";
  }
  return "?";
}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->watch_mu);
    WK_CHECK(impl_->watched.empty(), "an Engine destroyed before its Workers");
    impl_->stopping = true;
  }
  impl_->watch_cv.notify_all();
  impl_->watchdog.join();
  {
    v8::Locker locker(impl_->compile_isolate);
    impl_->compile_context.Reset();
  }
  impl_->compile_isolate->Dispose();
  delete impl_->compile_allocator;
}

Result<std::shared_ptr<const Module>> Engine::Compile(std::span<const std::uint8_t> bytes,
                                                      std::shared_ptr<const HostInterface> host,
                                                      std::span<const ExportSpec> exports,
                                                      const ModuleLimits& limits) {
  const auto started = std::chrono::steady_clock::now();
  const std::string& prefix = limits.setting_prefix;
  if (bytes.size() > limits.max_module_bytes) {
    return InvalidArgument(fmt::format("the module is {} bytes, over the limit of {} bytes ({}max_module_bytes)",
                                       bytes.size(), limits.max_module_bytes, prefix));
  }
  auto info = ReadModuleInfo(bytes);
  if (!info.ok()) return info.status();

  for (const Import& imp : info->imports) {
    if (imp.kind == ExternKind::kMemory) {
      return InvalidArgument(fmt::format(
          "the module imports its memory ({}.{}); an actor module must define and export its own memory",
          imp.module, imp.name));
    }
    if (imp.kind != ExternKind::kFunc) {
      return InvalidArgument(fmt::format("the module imports the {} {}.{}, which the host does not provide",
                                         ExternKindName(imp.kind), imp.module, imp.name));
    }
    const HostFunction* f = host->Find(imp.module, imp.name);
    if (f == nullptr) {
      return InvalidArgument(fmt::format("the module imports the function {}.{}, which the host does not provide",
                                         imp.module, imp.name));
    }
    if (!(f->type == info->TypeOf(imp))) {
      return InvalidArgument(fmt::format("the module imports {}.{} as {}, but the host provides it as {}",
                                         imp.module, imp.name, FuncTypeString(info->TypeOf(imp)),
                                         FuncTypeString(f->type)));
    }
  }
  const Export* mem_export = info->FindExport("memory");
  if (mem_export == nullptr || mem_export->kind != ExternKind::kMemory) {
    return InvalidArgument("the module does not export its linear memory as \"memory\"");
  }
  for (const ExportSpec& spec : exports) {
    const Export* e = info->FindExport(spec.name);
    if (e == nullptr) {
      if (!spec.required) continue;
      return InvalidArgument(fmt::format("the module does not export the function \"{}\" ({}), which the ABI requires",
                                         spec.name, FuncTypeString(spec.type)));
    }
    if (e->kind != ExternKind::kFunc || !(info->TypeOf(*e) == spec.type)) {
      return InvalidArgument(fmt::format("the module exports \"{}\" as a {} {}, but the ABI expects a function {}",
                                         spec.name, ExternKindName(e->kind),
                                         e->kind == ExternKind::kFunc ? FuncTypeString(info->TypeOf(*e)) : "",
                                         FuncTypeString(spec.type)));
    }
  }
  if (info->memories.size() != 1) {
    return InvalidArgument(fmt::format("the module defines {} memories; an actor module has exactly one",
                                       info->memories.size()));
  }
  const std::uint64_t max_pages = limits.max_memory_bytes / kWasmPageBytes;
  const MemoryLimits& mem = info->memories[0];
  if (mem.min_pages > max_pages) {
    return InvalidArgument(fmt::format(
        "the module's initial memory is {} bytes, over the limit of {} bytes per actor ({}max_memory_bytes)",
        mem.min_pages * kWasmPageBytes, limits.max_memory_bytes, prefix));
  }
  // The memory's maximum (declared, or imposed: actors.max_memory_bytes) goes on the import
  // the memory becomes (WithImportedMemory, below).
  std::vector<std::uint8_t> patched;
  std::span<const std::uint8_t> wire = bytes;
  const std::uint64_t effective_max_pages = mem.max_pages ? std::min(*mem.max_pages, max_pages) : max_pages;

  // Tables live on the worker's V8 heap, so their elements are bounded all together, grown
  // ones included: initial sizes over the limit are refused, and maxima are imposed (like
  // memory's) so that they sum to at most the limit. (Imported tables were refused above.)
  std::uint64_t initial_elements = 0;
  for (const TableLimits& t : info->tables) initial_elements += t.min;
  if (initial_elements > limits.max_table_elements) {
    return InvalidArgument(fmt::format(
        "the module's tables have {} elements initially, over the limit of {} table elements per actor "
        "({}max_table_elements)", initial_elements, limits.max_table_elements, prefix));
  }
  if (info->element_entries > limits.max_table_elements) {
    return InvalidArgument(fmt::format(
        "the module's element segments have {} entries, over the limit of {} table elements per actor "
        "({}max_table_elements)", info->element_entries, limits.max_table_elements, prefix));
  }
  // Growth room goes first to tables with a declared maximum (clamped to what is left), in
  // order, then to tables without one, in order: a toolchain's indirect-call table usually
  // declares its exact size, and a growable table then gets all the room that remains.
  std::uint64_t growth_room = limits.max_table_elements - initial_elements;
  std::vector<std::uint64_t> table_maximums(info->tables.size());
  bool impose_table_maximums = false;
  for (bool declared : {true, false}) {
    for (std::size_t i = 0; i < info->tables.size(); ++i) {
      const TableLimits& t = info->tables[i];
      if (t.max.has_value() != declared) continue;
      const std::uint64_t most = t.min + growth_room;
      const std::uint64_t max = t.max ? std::min(*t.max, most) : most;
      if (!t.max || *t.max != max) impose_table_maximums = true;
      growth_room -= max - t.min;
      table_maximums[i] = max;
    }
  }
  if (impose_table_maximums) {
    auto p = WithTableMaximums(wire, table_maximums);
    if (!p.ok()) return p.status();
    patched = std::move(*p);
    wire = patched;
  }

  // A table that can grow is exported under a reserved name, so that its length can be read
  // after each call (the memory each actor is charged counts its tables); one that cannot
  // has its initial size for good.
  std::uint64_t fixed_table_elements = 0;
  std::vector<TableExport> table_exports;
  for (std::size_t i = 0; i < info->tables.size(); ++i) {
    if (table_maximums[i] > info->tables[i].min) {
      table_exports.push_back({fmt::format("{}{}", kTableExportPrefix, i), static_cast<std::uint32_t>(i)});
    } else {
      fixed_table_elements += info->tables[i].min;
    }
  }
  if (!table_exports.empty()) {
    auto p = WithTableExports(wire, table_exports);
    if (!p.ok()) {
      return InvalidArgument(fmt::format("the module cannot be loaded: {} (names starting with \"{}\" are reserved)",
                                         p.status().message(), kTableExportPrefix));
    }
    patched = std::move(*p);
    wire = patched;
  }

  // The memory becomes an import with the effective maximum, so that workers can hand
  // instances memories they keep for reuse (WorkerOptions::memory_pool_size).
  {
    auto p = WithImportedMemory(wire, effective_max_pages);
    if (!p.ok()) return InvalidArgument(fmt::format("the module cannot be loaded: {}", p.status().message()));
    patched = std::move(*p);
    wire = patched;
  }

  auto module = std::shared_ptr<Module>(new Module());
  module->impl_ = std::make_unique<Module::Impl>();
  module->impl_->host = std::move(host);
  module->info_ = std::move(*info);
  module->max_memory_bytes_ = effective_max_pages * kWasmPageBytes;
  module->initial_memory_bytes_ = mem.min_pages * kWasmPageBytes;
  module->table_maximums_ = std::move(table_maximums);
  module->fixed_table_elements_ = fixed_table_elements;
  for (TableExport& e : table_exports) module->growable_table_exports_.push_back(std::move(e.name));
  module->id_ = impl_->next_module_id.fetch_add(1);
  {
    std::lock_guard lock(impl_->compile_mu);
    v8::Isolate* isolate = impl_->compile_isolate;
    v8::Locker locker(isolate);
    v8::Isolate::Scope isolate_scope(isolate);
    v8::HandleScope scope(isolate);
    v8::Local<v8::Context> context = impl_->compile_context.Get(isolate);
    v8::Context::Scope context_scope(context);
    v8::TryCatch try_catch(isolate);
    auto compiled = v8::WasmModuleObject::Compile(isolate, {wire.data(), wire.size()});
    if (compiled.IsEmpty()) {
      return InvalidArgument("WebAssembly compile error: " + ExceptionText(isolate, try_catch.Exception()));
    }
    module->impl_->compiled.emplace(compiled.ToLocalChecked()->GetCompiledModule());
    // Charged from here: the module's code exists now.
    module->compiled_bytes_ =
        CompiledModuleBytes(wire.size(), module->info_.code_bytes, module->info_.defined_functions);
    module->owner_ = limits.owner;
    module->impl_->account = impl_->compiled;
    CompiledAccount& account = *impl_->compiled;
    std::lock_guard account_lock(account.mu);
    account.total += module->compiled_bytes_;
    account.by_owner[module->owner_] += module->compiled_bytes_;
    // Let V8 finish background tasks that reference this isolate's heap.
    while (v8::platform::PumpMessageLoop(g_platform, isolate)) {
    }
  }
  {
    // The module object this isolate made holds the compiled code too: collected now (a
    // heap of a few objects: about a millisecond), so the code goes with the last Module
    // holder, not at some later compile's collection.
    std::lock_guard lock(impl_->compile_mu);
    v8::Locker locker(impl_->compile_isolate);
    v8::Isolate::Scope isolate_scope(impl_->compile_isolate);
    impl_->compile_isolate->LowMemoryNotification();
  }
  module->compile_time_ = std::chrono::steady_clock::now() - started;
  return std::shared_ptr<const Module>(std::move(module));
}

// ---------------------------------------------------------------------------------------
// Worker

Worker::Worker(Engine& engine, WorkerOptions options) : impl_(std::make_unique<Impl>()) {
  WK_CHECK(options.heap_limit_bytes >= kMinHeapLimitBytes, "worker heap limit below kMinHeapLimitBytes");
  WK_CHECK(options.gc_floor_bytes <= options.heap_limit_bytes / 2, "worker GC floor above half its heap limit");
  impl_->engine = &engine.impl();
  impl_->allocator = v8::ArrayBuffer::Allocator::NewDefaultAllocator();
  v8::Isolate::CreateParams params;
  params.array_buffer_allocator = impl_->allocator;
  // V8 splits the limit between its young and old generations; the callback below runs
  // when the old generation cannot grow any more, before V8 would abort.
  params.constraints.ConfigureDefaultsFromHeapSize(0, options.heap_limit_bytes);
  impl_->count_touched_memory = options.count_touched_memory;
  impl_->memory_pool_size = options.memory_pool_size;
  impl_->broken = options.broken;
  if (options.gc_floor_bytes > 0) params.constraints.set_initial_old_generation_size_in_bytes(options.gc_floor_bytes);
  impl_->heap_limit_bytes = options.heap_limit_bytes;
  impl_->isolate = v8::Isolate::New(params);
  impl_->isolate->AddNearHeapLimitCallback(&Impl::NearHeapLimit, impl_.get());
  impl_->isolate->AddGCPrologueCallback(&Impl::CountCollection, impl_.get());
  impl_->isolate->AddGCPrologueCallback(&Impl::MarkingStarted, impl_.get(), v8::kGCTypeIncrementalMarking);
  constexpr v8::GCType kPauses = static_cast<v8::GCType>(v8::kGCTypeScavenge | v8::kGCTypeMinorMarkCompact |
                                                         v8::kGCTypeMarkSweepCompact);
  impl_->isolate->AddGCPrologueCallback(&Impl::GcPrologue, impl_.get(), kPauses);
  impl_->isolate->AddGCEpilogueCallback(&Impl::GcEpilogue, impl_.get(), kPauses);
  // The isolate stays entered on this thread for its whole life: a worker is thread-bound.
  impl_->isolate->Enter();
  {
    v8::HandleScope scope(impl_->isolate);
    v8::Local<v8::Context> context = v8::Context::New(impl_->isolate);
    impl_->context.Reset(impl_->isolate, context);
    v8::Context::Scope context_scope(context);
    auto wasm = context->Global()->Get(context, V8Str(impl_->isolate, "WebAssembly")).ToLocalChecked().As<v8::Object>();
    auto ctor = wasm->Get(context, V8Str(impl_->isolate, "Instance")).ToLocalChecked().As<v8::Function>();
    impl_->instance_ctor.Reset(impl_->isolate, ctor);
    auto memory_ctor = wasm->Get(context, V8Str(impl_->isolate, "Memory")).ToLocalChecked().As<v8::Function>();
    impl_->memory_ctor.Reset(impl_->isolate, memory_ctor);
  }
  WK_CHECK(pthread_getcpuclockid(pthread_self(), &impl_->cpu_clock) == 0, "pthread_getcpuclockid");
  std::lock_guard lock(impl_->engine->watch_mu);
  impl_->engine->watched.push_back(impl_.get());
}

Worker::~Worker() {
  {
    std::lock_guard lock(impl_->engine->watch_mu);
    std::erase(impl_->engine->watched, impl_.get());
  }
  for (auto& [id, entry] : impl_->modules) impl_->EmptyPool(entry);
  impl_->modules.clear();
  // The memories not collected yet (pooled ones too) go with the isolate.
  impl_->engine->linear_memories.fetch_sub(impl_->made.memories - impl_->collected.memories, std::memory_order_relaxed);
  impl_->engine->linear_reserved_bytes.fetch_sub(impl_->made.reserved_bytes - impl_->collected.reserved_bytes,
                                                 std::memory_order_relaxed);
  impl_->instance_ctor.Reset();
  impl_->memory_ctor.Reset();
  impl_->context.Reset();
  impl_->isolate->Exit();
  impl_->isolate->Dispose();
  delete impl_->allocator;
}

std::size_t Worker::Impl::NearHeapLimit(void* data, std::size_t current_limit, std::size_t initial_limit) {
  auto* w = static_cast<Impl*>(data);
  w->initial_old_space_limit = initial_limit;
  // Whatever runs (a call, an instantiation) fails with kHeapLimit. Terminating it is best
  // effort (see WorkerOptions: V8 10.2 ignores it inside table.grow). The slack lets the
  // allocation in progress succeed: returning the current limit would make V8 abort.
  w->isolate->TerminateExecution();
  w->heap_limit_hit = true;
  w->heap_limit_raised = true;
  ++w->heap_limit_hits;
  return current_limit + kHeapLimitSlackBytes;
}

bool Worker::Impl::TakeHeapLimitHit() {
  if (!heap_limit_hit) return false;
  heap_limit_hit = false;
  isolate->CancelTerminateExecution();
  return true;
}

std::uint64_t Worker::heap_limit_hits() const { return impl_->heap_limit_hits; }

void Worker::CollectGarbage() {
  impl_->engine->collect_garbage_calls.fetch_add(1, std::memory_order_relaxed);
  // Asked for when memory is short or the worker is idle: the memories kept for reuse go
  // too (their address space is released by this collection), and so do the module objects
  // of modules nobody holds any more (their compiled code goes with the last of them).
  for (auto it = impl_->modules.begin(); it != impl_->modules.end();) {
    impl_->EmptyPool(it->second);
    it = it->second.module.expired() ? impl_->modules.erase(it) : std::next(it);
  }
  impl_->collection_requested = true;
  impl_->isolate->LowMemoryNotification();
  impl_->collection_requested = false;
}

void Worker::StartCollection() {
  impl_->engine->start_collection_calls.fetch_add(1, std::memory_order_relaxed);
  if (impl_->marking) return;
  impl_->collection_started = true;
  // V8 starts incremental marking when its external count passes 64 MiB above what it was
  // after the last full collection (and counts nothing else against that mark); a raise
  // just past it from anywhere at or above that base starts one. Lowered again at once: while
  // the count stays over the mark, every allocation V8 counts there (each new memory) would
  // be made to wait for a marking step of 5-10 ms.
  constexpr std::int64_t kPastV8sExternalMark = (64ll << 20) + 1;
  impl_->isolate->AdjustAmountOfExternalAllocatedMemory(kPastV8sExternalMark);
  impl_->isolate->AdjustAmountOfExternalAllocatedMemory(-kPastV8sExternalMark);
}

void Worker::Impl::MarkingStarted(v8::Isolate*, v8::GCType, v8::GCCallbackFlags, void* data) {
  auto* w = static_cast<Impl*>(data);
  w->marking = true;
  w->destroyed_at_mark = w->destroyed;
}

void Worker::Impl::GcPrologue(v8::Isolate*, v8::GCType type, v8::GCCallbackFlags, void* data) {
  auto* w = static_cast<Impl*>(data);
  // A mark-compact with no incremental marking before it marks here, in its pause.
  if ((type & v8::kGCTypeMarkSweepCompact) != 0 && !w->marking) w->destroyed_at_mark = w->destroyed;
  w->gc_started = std::chrono::steady_clock::now();
  w->gc_running = true;
}

void Worker::Impl::GcEpilogue(v8::Isolate*, v8::GCType type, v8::GCCallbackFlags flags, void* data) {
  auto* w = static_cast<Impl*>(data);
  if (!w->gc_running) return;
  w->gc_running = false;
  const auto ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - w->gc_started).count());
  if ((type & v8::kGCTypeMarkSweepCompact) != 0) {
    w->marking = false;
    w->CountCollected();
  }
  GcCause cause;
  if (w->collection_requested) {
    cause = GcCause::kRequested;
  } else if ((type & v8::kGCTypeMarkSweepCompact) == 0) {
    cause = GcCause::kYoung;
  } else if (w->collection_started) {
    // The final pause of the collection StartCollection began (V8 flags it as one for
    // external memory: that is how it was started). It started none while one was marking,
    // so this mark-compact is the end of its own.
    cause = GcCause::kRequested;
    w->collection_started = false;
  } else if ((flags & v8::kGCCallbackFlagCollectAllExternalMemory) != 0) {
    cause = GcCause::kExternalMemory;
  } else if ((flags & v8::kGCCallbackFlagCollectAllAvailableGarbage) != 0) {
    cause = GcCause::kAllAvailable;
  } else {
    cause = GcCause::kFull;
  }
  Engine::Impl& e = *w->engine;
  const auto i = static_cast<std::size_t>(cause);
  e.collections[i].fetch_add(1, std::memory_order_relaxed);
  e.collection_ns[i].fetch_add(ns, std::memory_order_relaxed);
  if (w->instantiating) {
    e.collections_in_instantiations.fetch_add(1, std::memory_order_relaxed);
    e.collection_ns_in_instantiations.fetch_add(ns, std::memory_order_relaxed);
  }
}

void Worker::Impl::CountMemory(std::uint64_t reserved_bytes) {
  ++made.memories;
  made.reserved_bytes += reserved_bytes;
  engine->linear_memories.fetch_add(1, std::memory_order_relaxed);
  engine->linear_reserved_bytes.fetch_add(reserved_bytes, std::memory_order_relaxed);
}

void Worker::Impl::CountDestroyed(std::uint64_t reserved_bytes) {
  ++destroyed.memories;
  destroyed.reserved_bytes += reserved_bytes;
}

void Worker::Impl::CountCollected() {
  const MemoryCount now = destroyed_at_mark;
  engine->linear_memories.fetch_sub(now.memories - collected.memories, std::memory_order_relaxed);
  engine->linear_reserved_bytes.fetch_sub(now.reserved_bytes - collected.reserved_bytes, std::memory_order_relaxed);
  collected = now;
}

v8::MaybeLocal<v8::WasmMemoryObject> Worker::Impl::TakeMemory(ModuleEntry& entry, const Module& module,
                                                              std::uint64_t* discounted_bytes) {
  if (!entry.memory_pool.empty()) {
    PooledMemory kept = std::move(entry.memory_pool.back());
    entry.memory_pool.pop_back();
    --pooled;
    pooled_reserved_bytes -= entry.memory_reserved_bytes;
    engine->pooled_memories.fetch_sub(1, std::memory_order_relaxed);
    engine->pooled_reserved_bytes.fetch_sub(entry.memory_reserved_bytes, std::memory_order_relaxed);
    engine->reused_memories.fetch_add(1, std::memory_order_relaxed);
    *discounted_bytes = kept.discounted_bytes;
    return kept.memory.Get(isolate);
  }
  v8::Local<v8::Context> ctx = context.Get(isolate);
  v8::Local<v8::Object> descriptor = v8::Object::New(isolate);
  const auto pages = [](std::uint64_t bytes) { return static_cast<double>(bytes / kWasmPageBytes); };
  // (A set that fails, the heap limit reached meanwhile, fails the instantiation.)
  if (!descriptor->Set(ctx, V8Str(isolate, "initial"), v8::Number::New(isolate, pages(module.initial_memory_bytes())))
           .FromMaybe(false) ||
      !descriptor->Set(ctx, V8Str(isolate, "maximum"), v8::Number::New(isolate, pages(module.max_memory_bytes())))
           .FromMaybe(false)) {
    return {};
  }
  v8::Local<v8::Value> args[] = {descriptor};
  v8::Local<v8::Object> made;
  if (!memory_ctor.Get(isolate)->NewInstance(ctx, 1, args).ToLocal(&made)) return {};
  WK_CHECK(made->IsWasmMemoryObject(), "WebAssembly.Memory made a memory");
  auto memory = made.As<v8::WasmMemoryObject>();
  CountMemory(module.max_memory_bytes());
  *discounted_bytes = 0;
  if (count_touched_memory) {
    // New: nothing of it is resident yet but what the kernel may have mapped eagerly.
    auto buffer = memory->Buffer();
    const std::uint64_t size = buffer->ByteLength();
    const std::uint64_t resident = ResidentBytes(buffer->Data(), size);
    *discounted_bytes = size > resident ? size - resident : 0;
    if (*discounted_bytes > 0) isolate->AdjustAmountOfExternalAllocatedMemory(-static_cast<std::int64_t>(*discounted_bytes));
  }
  return memory;
}

void Worker::Impl::LetGoMemory(ModuleEntry& entry, v8::Local<v8::WasmMemoryObject> memory,
                               std::uint64_t discounted_bytes, std::uint64_t initial_bytes, bool module_in_use) {
  auto buffer = memory->Buffer();
  const std::uint64_t size = buffer->ByteLength();
  // Zeroed by the kernel: every page of it, resident, swapped out or never touched, reads
  // as zero afterwards, as a new memory's would. A memory that grew is not kept (an
  // instance must start at its module's initial size), nor one the kernel would not zero,
  // nor one of a module nobody else uses (redeployed or unloaded: no instance of it will
  // come), nor one past the pool's bound on address space.
  if (module_in_use && pooled < memory_pool_size && size == initial_bytes &&
      pooled_reserved_bytes + entry.memory_reserved_bytes <= kMaxPooledReservationBytes &&
      (size == 0 || broken.on(BrokenModel::kPoolSkipsZeroing) || madvise(buffer->Data(), size, MADV_DONTNEED) == 0)) {
    entry.memory_pool.push_back(PooledMemory{v8::Global<v8::WasmMemoryObject>(isolate, memory), discounted_bytes});
    ++pooled;
    pooled_reserved_bytes += entry.memory_reserved_bytes;
    engine->pooled_memories.fetch_add(1, std::memory_order_relaxed);
    engine->pooled_reserved_bytes.fetch_add(entry.memory_reserved_bytes, std::memory_order_relaxed);
    return;
  }
  // Garbage from here on: what it holds is given back to V8's count, so that garbage which
  // really holds memory brings V8's collections (a module that touched all its memory is
  // counted in full, however late it touched it).
  if (discounted_bytes > 0) {
    const std::uint64_t back = std::min(ResidentBytes(buffer->Data(), size), discounted_bytes);
    if (back > 0) isolate->AdjustAmountOfExternalAllocatedMemory(static_cast<std::int64_t>(back));
  }
  CountDestroyed(entry.memory_reserved_bytes);
}

void Worker::Impl::EmptyPool(ModuleEntry& entry) {
  for (std::size_t i = 0; i < entry.memory_pool.size(); ++i) CountDestroyed(entry.memory_reserved_bytes);
  pooled -= entry.memory_pool.size();
  pooled_reserved_bytes -= entry.memory_pool.size() * entry.memory_reserved_bytes;
  engine->pooled_memories.fetch_sub(entry.memory_pool.size(), std::memory_order_relaxed);
  engine->pooled_reserved_bytes.fetch_sub(entry.memory_pool.size() * entry.memory_reserved_bytes,
                                          std::memory_order_relaxed);
  entry.memory_pool.clear();
}

std::uint64_t Worker::HeapUsedBytes() const { return HeapUsed(impl_->isolate); }

void Worker::PumpMessageLoop() {
  while (v8::platform::PumpMessageLoop(g_platform, impl_->isolate)) {
  }
}

void Worker::Impl::Trampoline(const v8::FunctionCallbackInfo<v8::Value>& info) {
  auto* binding = static_cast<Binding*>(info.Data().As<v8::External>()->Value());
  Impl& w = *binding->worker;
  const HostFunction& f = *binding->fn;
  v8::Isolate* isolate = w.isolate;
  // A module that catches the first host error (wasm exception handling can) gets no
  // further service: the event has already failed.
  if (w.host_error.has_value() || w.current == nullptr) {
    isolate->ThrowException(v8::Exception::Error(V8Str(isolate, "wasmkeep: event already failed")));
    return;
  }
  v8::Local<v8::Context> context = isolate->GetCurrentContext();
  std::int64_t args[kMaxHostParams] = {};
  const std::size_t n = f.type.params.size();
  for (std::size_t i = 0; i < n; ++i) {
    v8::Local<v8::Value> v = info[static_cast<int>(i)];
    if (f.type.params[i] == ValType::kI32) {
      args[i] = v->Int32Value(context).FromMaybe(0);
    } else {
      // The import's signature was checked at compile time, so an i64 arrives as a BigInt.
      args[i] = v->IsBigInt() ? v.As<v8::BigInt>()->Int64Value() : 0;
    }
  }
  HostCall call(&f, w.current_context, w.current->Memory(isolate), {args, n});
  Status status = f.fn(call);
  if (!status.ok()) {
    w.host_error = std::move(status);
    isolate->ThrowException(v8::Exception::Error(V8Str(isolate, "wasmkeep: host call failed")));
    return;
  }
  if (!f.type.results.empty()) {
    if (f.type.results[0] == ValType::kI32) {
      info.GetReturnValue().Set(static_cast<std::int32_t>(call.result()));
    } else {
      info.GetReturnValue().Set(v8::BigInt::New(isolate, call.result()));
    }
  }
}

Result<Worker::Impl::ModuleEntry*> Worker::Impl::EntryFor(const std::shared_ptr<const Module>& module) {
  auto it = modules.find(module->id());
  if (it != modules.end()) return &it->second;
  // A module new to this worker: first forget modules nobody uses any more (their classes
  // were redeployed or unloaded). Done here, on a miss, rather than after every event.
  for (auto at = modules.begin(); at != modules.end();) {
    if (at->second.module.expired()) {
      EmptyPool(at->second);
      at = modules.erase(at);
    } else {
      ++at;
    }
  }
  v8::Local<v8::Context> ctx = context.Get(isolate);
  v8::TryCatch try_catch(isolate);
  auto object = v8::WasmModuleObject::FromCompiledModule(isolate, *module->impl().compiled);
  if (object.IsEmpty()) {
    return Fatal("WebAssembly module could not be loaded into a worker: " +
                 ExceptionText(isolate, try_catch.Exception()));
  }
  ModuleEntry entry;
  entry.module = module;
  entry.object.Reset(isolate, object.ToLocalChecked());
  // The imports object: { module: { name: host function } } for what this module imports.
  v8::Local<v8::Object> imports = v8::Object::New(isolate);
  for (const Import& imp : module->info().imports) {
    const HostFunction* f = module->impl().host->Find(imp.module, imp.name);
    WK_CHECK(f != nullptr, "import checked at compile time");
    auto binding = std::make_unique<Binding>(Binding{this, f});
    auto tmpl = v8::FunctionTemplate::New(isolate, &Trampoline, v8::External::New(isolate, binding.get()));
    entry.bindings.push_back(std::move(binding));
    v8::Local<v8::String> mod_name = V8Str(isolate, imp.module);
    v8::Local<v8::Object> mod_obj;
    auto existing = imports->Get(ctx, mod_name).ToLocalChecked();
    if (existing->IsObject()) {
      mod_obj = existing.As<v8::Object>();
    } else {
      mod_obj = v8::Object::New(isolate);
      imports->Set(ctx, mod_name, mod_obj).Check();
    }
    mod_obj->Set(ctx, V8Str(isolate, imp.name), tmpl->GetFunction(ctx).ToLocalChecked()).Check();
  }
  v8::Local<v8::Object> memory_import = v8::Object::New(isolate);
  imports->Set(ctx, V8Str(isolate, kMemoryImportModule), memory_import).Check();
  entry.memory_import.Reset(isolate, memory_import);
  entry.memory_reserved_bytes = module->max_memory_bytes();
  entry.imports.Reset(isolate, imports);
  auto [pos, inserted] = modules.emplace(module->id(), std::move(entry));
  return &pos->second;
}

void Worker::Impl::BeginCall(Instance::Impl* inst, void* ctx, std::chrono::milliseconds limit) {
  // A limit reached between calls (garbage collection while loading a module) must not stop
  // this call.
  TakeHeapLimitHit();
  if (heap_limit_raised) {
    // Back to the configured limit, or, while the heap still holds more (the instance that
    // reached it is still alive), to the least V8 allows for the heap's size. Not done
    // during the call that raised it: V8 would collect garbage at every allocation.
    // The failed call's instance is gone by now (the caller throws unusable ones away), so a
    // full collection brings the heap back under the limit; rare: only after a limit hit.
    heap_limit_raised = false;
    collection_requested = true;
    isolate->LowMemoryNotification();
    collection_requested = false;
    isolate->RemoveNearHeapLimitCallback(&NearHeapLimit, initial_old_space_limit);
    isolate->AddNearHeapLimitCallback(&NearHeapLimit, this);
  }
  current = inst;
  current_context = ctx;
  host_error.reset();
  std::lock_guard lock(engine->watch_mu);
  running = true;
  terminated = false;
  ++serial;
  limit_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
  ++engine->running_calls;
  if (engine->watchdog_parked) engine->watch_cv.notify_all();
}

bool Worker::Impl::EndCall(std::chrono::nanoseconds* cpu_time, std::chrono::steady_clock::time_point started) {
  current = nullptr;
  current_context = nullptr;
  std::lock_guard lock(engine->watch_mu);
  running = false;
  --engine->running_calls;
  const bool was_terminated = terminated;
  terminated = false;
  if (cpu_time != nullptr) {
    // A call the watchdog saw has a CPU baseline; a shorter one reports its wall time, an
    // upper bound of its CPU time (under one tick).
    *cpu_time = baseline_serial == serial ? std::chrono::nanoseconds(ThreadCpuNs(cpu_clock) - baseline_cpu_ns)
                                          : std::chrono::steady_clock::now() - started;
  }
  // Clear a termination that the watchdog requested but the call outran (it finished
  // before V8 checked for the interrupt): otherwise it would hit the next call.
  if (was_terminated) isolate->CancelTerminateExecution();
  return was_terminated;
}

CallResult Worker::Impl::Run(Instance::Impl* inst, v8::Local<v8::Function> fn, void* ctx,
                             std::chrono::milliseconds limit, std::uint64_t max_memory_bytes,
                             std::uint64_t initial_memory_bytes, std::span<const std::int32_t> args) {
  CallResult result;
  v8::Local<v8::Context> v8ctx = context.Get(isolate);
  const auto started = std::chrono::steady_clock::now();
  v8::MaybeLocal<v8::Value> ret;
  std::string exception;
  bool has_exception = false;
  {
    v8::TryCatch try_catch(isolate);
    BeginCall(inst, ctx, limit);
    // At most two i32 arguments (the ABI's exports take none or one: abi.h).
    std::array<v8::Local<v8::Value>, 2> argv;
    const std::size_t argc = std::min(args.size(), argv.size());
    for (std::size_t i = 0; i < argc; ++i) argv[i] = v8::Integer::New(isolate, args[i]);
    ret = fn->Call(v8ctx, v8::Undefined(isolate), static_cast<int>(argc), argc == 0 ? nullptr : argv.data());
    if (ret.IsEmpty()) {
      has_exception = true;
      if (!try_catch.HasTerminated()) exception = ExceptionText(isolate, try_catch.Exception());
    }
  }
  const bool terminated_by_watchdog = EndCall(&result.cpu_time, started);
  const bool heap_limit = TakeHeapLimitHit();
  if (isolate->IsExecutionTerminating()) isolate->CancelTerminateExecution();

  if (heap_limit) {
    // Even if the call returned (it outran the termination), what it allocated stays
    // reachable from its instance: throwing the instance away is what frees the heap.
    result.outcome = CallOutcome::kHeapLimit;
    result.message = fmt::format("the event reached the worker's V8 heap limit of {} bytes (tables grown too far?)",
                                 heap_limit_bytes);
    result.instance_usable = false;
    host_error.reset();
  } else if (has_exception && terminated_by_watchdog) {
    result.outcome = CallOutcome::kTerminated;
    result.message = fmt::format("the event exceeded its CPU time limit of {} ms and was terminated", limit.count());
    result.instance_usable = false;
  } else if (host_error.has_value()) {
    // Checked before `ret`: a module may have caught the host's exception and returned.
    result.outcome = CallOutcome::kHostError;
    result.message = host_error->message();
    result.instance_usable = false;
    host_error.reset();
  } else if (has_exception) {
    result.instance_usable = false;
    if (exception.starts_with("RangeError: Maximum call stack size exceeded")) {
      result.outcome = CallOutcome::kTrapped;
      result.message = "trap: stack overflow (unbounded recursion?)";
    } else if (exception.starts_with("RuntimeError: ")) {
      result.outcome = CallOutcome::kTrapped;
      result.message = "trap: " + exception.substr(std::strlen("RuntimeError: "));
    } else {
      result.outcome = CallOutcome::kEngineError;
      result.message = exception;
    }
    // A module that runs out of memory usually traps (abort) right after memory.grow
    // failed; V8 does not tell us that, so say when memory is near its limit (within an
    // eighth, the size of a typical last allocation attempt) and has grown to get there. A
    // memory that never grew (a one-page module whose maximum is one page is always "near
    // its limit") cannot have been refused a grow: its trap is only a trap.
    const std::uint64_t memory_bytes = inst->memory.Get(isolate)->Buffer()->ByteLength();
    if (result.outcome == CallOutcome::kTrapped && memory_bytes > initial_memory_bytes &&
        memory_bytes >= max_memory_bytes - max_memory_bytes / 8) {
      result.outcome = CallOutcome::kOutOfMemory;
      result.message += fmt::format(" (linear memory is {} bytes, near its limit of {} bytes: out of memory?)",
                                    memory_bytes, max_memory_bytes);
    }
  } else {
    v8::Local<v8::Value> v = ret.ToLocalChecked();
    result.value = v->IsInt32() ? v.As<v8::Int32>()->Value() : 0;
  }
  return result;
}

Result<std::unique_ptr<Instance>> Worker::Instantiate(const std::shared_ptr<const Module>& module, void* context,
                                                      std::chrono::milliseconds cpu_limit) {
  Impl& w = *impl_;
  const auto started = std::chrono::steady_clock::now();
  // Counted however it ends (EngineStats).
  struct Timed {
    Impl& w;
    std::chrono::steady_clock::time_point started;
    ~Timed() {
      w.instantiating = false;
      const auto took = std::chrono::steady_clock::now() - started;
      Engine::Impl& e = *w.engine;
      e.instantiations.fetch_add(1, std::memory_order_relaxed);
      e.instantiation_ns.fetch_add(
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()),
          std::memory_order_relaxed);
      if (took > kSlowInstantiation) e.slow_instantiations.fetch_add(1, std::memory_order_relaxed);
    }
  } timed{w, started};
  w.instantiating = true;
  v8::Isolate* isolate = w.isolate;
  v8::HandleScope scope(isolate);
  v8::Local<v8::Context> ctx = w.context.Get(isolate);
  v8::Context::Scope context_scope(ctx);
  auto entry = w.EntryFor(module);
  if (!entry.ok()) return entry.status();

  auto instance = std::unique_ptr<Instance>(new Instance());
  instance->impl_ = std::make_unique<Instance::Impl>();
  instance->impl_->worker = &w;
  instance->module_ = module;

  v8::Local<v8::Value> args[] = {(*entry)->object.Get(isolate), (*entry)->imports.Get(isolate)};
  v8::Local<v8::Object> object;
  instance->impl_->entry = *entry;
  const std::uint64_t collections_before = w.collections;
  const std::uint64_t heap_before = HeapUsedBytes();
  v8::Local<v8::WasmMemoryObject> memory;
  std::uint64_t discounted = 0;
  {
    v8::TryCatch try_catch(isolate);
    // A module's start function runs here; it is under the CPU limit like any call. Host
    // calls from a start function fail (there is no instance to read memory from yet).
    w.BeginCall(nullptr, context, cpu_limit);
    v8::MaybeLocal<v8::Object> made;
    v8::Local<v8::Object> holder = (*entry)->memory_import.Get(isolate);
    v8::Local<v8::String> name = V8Str(isolate, kMemoryImportName);
    const bool have_memory = w.TakeMemory(**entry, *module, &discounted).ToLocal(&memory);
    // (A failed Set leaves the import missing: the instantiation fails and says so.)
    if (have_memory && holder->Set(ctx, name, memory).FromMaybe(false)) {
      made = w.instance_ctor.Get(isolate)->NewInstance(ctx, 2, args);
      // V8 10.2 hands back an instance object even when the module's start function trapped
      // (the constructor's exception is caught here all the same): that instance is unusable.
      if (try_catch.HasCaught()) made = {};
    }
    const bool terminated = w.EndCall();
    const bool heap_limit = w.TakeHeapLimitHit();
    if (isolate->IsExecutionTerminating()) isolate->CancelTerminateExecution();
    // Once no termination is pending (V8 refuses property sets until then). Should it fail,
    // the next instantiation replaces the memory there anyway.
    if (have_memory) (void)holder->Set(ctx, name, v8::Undefined(isolate)).FromMaybe(false);
    // A failed instantiation may have written the memory (data segments, a start function):
    // it is zeroed like any other before it serves again.
    // (Also one V8 finished making although the heap limit was reached: it is not returned.)
    if (have_memory && (made.IsEmpty() || heap_limit)) {
      w.LetGoMemory(**entry, memory, discounted, module->initial_memory_bytes(), true);
    }
    if (heap_limit) {
      w.host_error.reset();
      return InvalidArgument(fmt::format(
          "instantiating the module reached the worker's V8 heap limit of {} bytes", w.heap_limit_bytes));
    }
    if (!have_memory) {
      w.host_error.reset();
      if (terminated) return InvalidArgument("the module's start function exceeded the CPU time limit");
      return InvalidArgument("the module's linear memory could not be made: " +
                             ExceptionText(isolate, try_catch.Exception()));
    }
    if (made.IsEmpty()) {
      w.host_error.reset();
      if (terminated) return InvalidArgument("the module's start function exceeded the CPU time limit");
      return InvalidArgument("WebAssembly instantiation failed: " + ExceptionText(isolate, try_catch.Exception()));
    }
    object = made.ToLocalChecked();
  }
  if (!(*entry)->instance_heap_measured && w.collections == collections_before) {
    const std::uint64_t heap_after = HeapUsedBytes();
    (*entry)->instance_heap_bytes = heap_after > heap_before ? heap_after - heap_before : 0;
    (*entry)->instance_heap_measured = true;
  }
  // The memory is let go with the instance from here on, whatever happens next.
  instance->impl_->memory.Reset(isolate, memory);
  instance->impl_->discounted_bytes = discounted;
  v8::Local<v8::Value> exports_value;
  if (!object->Get(ctx, V8Str(isolate, "exports")).ToLocal(&exports_value) || !exports_value->IsObject()) {
    return InvalidArgument("WebAssembly instantiation failed: the instance has no exports object");
  }
  auto exports = exports_value.As<v8::Object>();
  instance->impl_->exports.Reset(isolate, exports);
  for (const std::string& name : module->growable_table_exports()) {
    auto table = exports->Get(ctx, V8Str(isolate, name)).ToLocalChecked();
    WK_CHECK(table->IsObject(), "table export added at compile time");
    instance->impl_->growable_tables.emplace_back(isolate, table.As<v8::Object>());
  }

  if (module->HasExport("_initialize")) {
    CallResult init = instance->Call("_initialize", context, cpu_limit);
    if (!init.ok()) return InvalidArgument("the module's _initialize failed: " + init.message);
  }
  return instance;
}

// ---------------------------------------------------------------------------------------
// Instance

Instance::~Instance() {
  if (impl_) {
    impl_->growable_tables.clear();
    impl_->functions.clear();
    impl_->exports.Reset();
    if (!impl_->memory.IsEmpty()) {
      // Nothing of this instance is reachable any more: its memory may serve another.
      Worker::Impl& w = *impl_->worker;
      v8::HandleScope scope(w.isolate);
      // (use_count is a hint across threads; it only decides whether the memory is kept.)
      w.LetGoMemory(*impl_->entry, impl_->memory.Get(w.isolate), impl_->discounted_bytes,
                    module_->initial_memory_bytes(), module_.use_count() > 1);
      impl_->memory.Reset();
    }
  }
}

std::uint64_t Instance::MemoryBytes() const {
  v8::Isolate* isolate = impl_->worker->isolate;
  v8::HandleScope scope(isolate);
  return impl_->memory.Get(isolate)->Buffer()->ByteLength();
}

std::uint64_t Instance::ResidentMemoryBytes() {
  v8::Isolate* isolate = impl_->worker->isolate;
  v8::HandleScope scope(isolate);
  return impl_->Resident(isolate);
}

std::uint64_t Instance::Impl::Resident(v8::Isolate* isolate) {
  auto buffer = memory.Get(isolate)->Buffer();
  const std::uint64_t size = buffer->ByteLength();
  // Every page seen already: nothing more to learn (memory never shrinks).
  if (size == 0 || resident_high_water >= size) return resident_high_water = size;
  resident_high_water = std::max(resident_high_water, ResidentBytes(buffer->Data(), size));
  return resident_high_water;
}

std::uint64_t Instance::TableElements() const {
  std::uint64_t elements = module_->fixed_table_elements();
  if (impl_->growable_tables.empty()) return elements;
  Worker::Impl& w = *impl_->worker;
  v8::Isolate* isolate = w.isolate;
  v8::HandleScope scope(isolate);
  v8::Local<v8::Context> ctx = w.context.Get(isolate);
  v8::Context::Scope context_scope(ctx);
  for (const auto& table : impl_->growable_tables) {
    auto length = table.Get(isolate)->Get(ctx, V8Str(isolate, "length"));
    std::uint32_t n = 0;
    if (!length.IsEmpty() && length.ToLocalChecked()->Uint32Value(ctx).To(&n)) elements += n;
  }
  return elements;
}

std::uint64_t Instance::HeapBytes() const {
  std::uint64_t initial_elements = 0;
  for (const TableLimits& t : module_->info().tables) initial_elements += t.min;
  const std::uint64_t elements = TableElements();
  const std::uint64_t grown = elements > initial_elements ? elements - initial_elements : 0;
  return impl_->entry->instance_heap_bytes + impl_->wrapper_heap_bytes + grown * kTableElementHeapBytes;
}

CallResult Instance::Call(std::string_view name, void* context, std::chrono::milliseconds cpu_limit,
                          std::span<const std::int32_t> args) {
  Worker::Impl& w = *impl_->worker;
  v8::Isolate* isolate = w.isolate;
  v8::HandleScope scope(isolate);
  v8::Local<v8::Context> ctx = w.context.Get(isolate);
  v8::Context::Scope context_scope(ctx);

  v8::Local<v8::Function> fn;
  auto it = impl_->functions.find(name);
  // The first lookup of an export makes its wrapper on the heap: counted in HeapBytes.
  const bool measure_wrapper = it == impl_->functions.end();
  const std::uint64_t collections_before = w.collections;
  const std::uint64_t heap_before = measure_wrapper ? HeapUsed(isolate) : 0;
  if (it != impl_->functions.end()) {
    fn = it->second.Get(isolate);
  } else {
    auto value = impl_->exports.Get(isolate)->Get(ctx, V8Str(isolate, name)).ToLocalChecked();
    if (!value->IsFunction()) {
      CallResult r;
      r.outcome = CallOutcome::kEngineError;
      r.message = fmt::format("the module does not export a function \"{}\"", name);
      return r;
    }
    fn = value.As<v8::Function>();
    impl_->functions.emplace(std::string(name), v8::Global<v8::Function>(isolate, fn));
  }
  if (measure_wrapper) {
    const std::uint64_t heap_after = HeapUsed(isolate);
    if (w.collections == collections_before && heap_after > heap_before) {
      impl_->wrapper_heap_bytes += heap_after - heap_before;
    }
  }
  return w.Run(impl_.get(), fn, context, cpu_limit, module_->max_memory_bytes(), module_->initial_memory_bytes(), args);
}

}  // namespace wk::engine
