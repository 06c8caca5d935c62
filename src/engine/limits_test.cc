// Engine limits (docs/abi.md, "Limits"): every resource a module can declare or grow is
// bounded before V8 sees it, and what V8's heap still takes at run time is bounded by the
// worker isolate's heap limit, which fails the event instead of aborting the process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <random>

#include "engine/engine.h"
#include "engine/testing/module_builder_test_util.h"

namespace wk::engine {
namespace {

using std::chrono::milliseconds;
using testing::ModuleBuilder;

const std::vector<ExportSpec> kRunExport = {{"run", {{}, {ValType::kI32}}, true}};

std::shared_ptr<const HostInterface> NoHost() { return std::make_shared<HostInterface>(std::vector<HostFunction>{}); }

// A tiny module that crashed the node: 30 funcref tables of 10,000,000 entries each and no
// maximum, about 200 bytes. V8 10.2 accepts it (its own limits are 100,000 tables of up to
// 10,000,000 initial entries) and allocates every table on the isolate's heap when
// instantiating: 2.4 GB of table entries. Before the table bounds, Compile accepted this
// module and the first event's Instantiate made V8 abort the whole process after about 20 s
// of garbage collection ("Fatal javascript OOM in Reached heap limit", then SIGTRAP),
// taking every actor on the node with it; run through the engine of that time (the same
// Compile, Worker and Instantiate calls as below, in a program of their own) it ended so,
// and this death test failed with "killed by signal 5".
std::vector<std::uint8_t> HugeTablesModule() {
  ModuleBuilder b;
  for (int i = 0; i < 30; ++i) b.tables.push_back({10'000'000, std::nullopt});
  b.funcs.push_back(ModuleBuilder::Returns(0));
  b.func_exports.push_back("run");
  return b.Build();
}

// Compiles and runs the module in a fresh engine; any outcome but a crash exits 0.
[[noreturn]] void CompileAndRunHugeTables() {
  Engine engine;
  auto bytes = HugeTablesModule();
  auto module = engine.Compile(bytes, NoHost(), kRunExport, ModuleLimits{});
  if (module.ok()) {
    Worker worker(engine);
    auto instance = worker.Instantiate(*module, nullptr, milliseconds(10'000));
    if (instance.ok()) (void)(*instance)->Call("run", nullptr, milliseconds(10'000));
  }
  std::_Exit(0);
}

TEST(EngineLimitsTest, HugeTablesModuleDoesNotCrashTheProcess) {
  EXPECT_LT(HugeTablesModule().size(), 250u);
  // In a child process, so that the old behaviour (an abort) fails this test instead of
  // killing the test binary.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CompileAndRunHugeTables(), ::testing::ExitedWithCode(0), "");
}

TEST(EngineLimitsTest, HugeTablesAreRefusedNamingTheBound) {
  Engine engine;
  ModuleLimits limits;
  limits.setting_prefix = "actors.";
  auto module = engine.Compile(HugeTablesModule(), NoHost(), kRunExport, limits);
  ASSERT_FALSE(module.ok());
  EXPECT_NE(module.status().message().find("30 tables, over the limit of 16"), std::string::npos)
      << module.status().ToString();
  // One such table is within the count but not within the elements setting.
  ModuleBuilder b;
  b.tables.push_back({10'000'000, std::nullopt});
  b.funcs.push_back(ModuleBuilder::Returns(0));
  b.func_exports.push_back("run");
  module = engine.Compile(b.Build(), NoHost(), kRunExport, limits);
  ASSERT_FALSE(module.ok());
  EXPECT_NE(module.status().message().find("10000000 elements initially, over the limit of 65536 table elements"),
            std::string::npos) << module.status().ToString();
  EXPECT_NE(module.status().message().find("(actors.max_table_elements)"), std::string::npos);
}

// A table without a maximum gets one imposed, as memory does: growth stops at the limit.
TEST(EngineLimitsTest, TablesGetMaximaImposedWithinTheLimit) {
  Engine engine;
  ModuleBuilder b;
  b.tables = {{10, std::nullopt}, {5, 100}, {0, std::nullopt}};
  b.funcs.push_back(ModuleBuilder::Returns(0));
  b.func_exports.push_back("run");
  // grow: table.grow 0 by 1000 (ref.null func), returning the old size or -1.
  ModuleBuilder::Func grow;
  grow.locals = {0};
  grow.body = {0xd0, 0x70, 0x41};
  testing::Leb(grow.body, 1000);
  grow.body.insert(grow.body.end(), {0xfc, 0x0f, 0x00});
  b.funcs.push_back(grow);
  b.func_exports.push_back("grow");
  ModuleLimits limits;
  limits.max_table_elements = 2000;
  auto module = engine.Compile(b.Build(), NoHost(), kRunExport, limits);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  // 15 elements initially, room for 1985 more: table 1 keeps its declared maximum (95 more),
  // then table 0, the first without one, takes the rest (1890), leaving table 2 none.
  EXPECT_EQ((*module)->table_maximums(), (std::vector<std::uint64_t>{1900, 100, 0}));
  Worker worker(engine);
  auto instance = worker.Instantiate(*module, nullptr, milliseconds(1000));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  EXPECT_EQ((*instance)->Call("grow", nullptr, milliseconds(1000)).value, 10);
  EXPECT_EQ((*instance)->Call("grow", nullptr, milliseconds(1000)).value, -1) << "past the imposed maximum";
}

// Heap limit (item 3): after the bounds above, one instance's tables fit in any heap the
// settings allow (actors.max_table_elements is at most 1,000,000 elements, 8 MB; the heap
// at least 32 MiB), so what can fill a worker's heap is many instances' tables, or an
// embedder whose table budget is larger than its heap. This test is the second, which is
// the same thing in one event: 2 tables of up to 1,000,000 elements (16 MB in all) grown
// in steps of 100,000 in a 16 MiB heap. Before the heap limit and its callback, V8 aborted
// the process here ("Fatal javascript OOM in Reached heap limit"; with V8's default limit
// and the 16 tables of up to 10,000,000 elements that the bounds now refuse).
//
// What V8 10.2 does not do: act on the termination the callback requests while the module
// is in table.grow (observed: the call runs on to its end, the callback raising the limit
// as needed). So an event that reaches the limit is failed after it returns; what it can
// allocate meanwhile is bounded by its tables' imposed maxima (max_table_elements). Linear memory is not on the V8 heap, and other growth (function
// wrappers, tag objects) is bounded by the module's declared counts, so tables are the one
// way a module can make the heap grow at run time that we found.
std::vector<std::uint8_t> TableGrowerModule() {
  ModuleBuilder b;
  for (int t = 0; t < 2; ++t) b.tables.push_back({0, 1'000'000});
  b.funcs.push_back(ModuleBuilder::Returns(7));
  b.func_exports.push_back("run");
  ModuleBuilder::Func grow;
  grow.locals = {0};
  grow.body = {0x02, 0x40, 0x03, 0x40};  // block, loop
  for (std::uint8_t t = 0; t < 2; ++t) {
    grow.body.insert(grow.body.end(), {0xd0, 0x70, 0x41});
    testing::Leb(grow.body, 100'000);
    // table.grow t; i32.const -1; i32.eq; br_if 1 (out of the block)
    grow.body.insert(grow.body.end(), {0xfc, 0x0f, t, 0x41, 0x7f, 0x46, 0x0d, 0x01});
  }
  grow.body.insert(grow.body.end(), {0x0c, 0x00, 0x0b, 0x0b, 0x41, 0x00});  // br 0, end, end, i32.const 0
  b.funcs.push_back(grow);
  b.func_exports.push_back("grow");
  return b.Build();
}

TEST(EngineLimitsTest, AnEventThatFillsTheHeapFailsAndTheWorkerGoesOn) {
  Engine engine;
  ModuleLimits limits;
  limits.max_table_elements = 2'000'000;
  auto module = engine.Compile(TableGrowerModule(), NoHost(), kRunExport, limits);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  Worker worker(engine, WorkerOptions{.heap_limit_bytes = kMinHeapLimitBytes});
  for (int round = 0; round < 2; ++round) {
    auto instance = worker.Instantiate(*module, nullptr, milliseconds(10'000));
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    CallResult r = (*instance)->Call("grow", nullptr, milliseconds(10'000));
    EXPECT_EQ(r.outcome, CallOutcome::kHeapLimit) << r.message;
    EXPECT_FALSE(r.instance_usable);
    EXPECT_NE(r.message.find("heap limit of 16777216 bytes"), std::string::npos) << r.message;
    EXPECT_GE(worker.heap_limit_hits(), static_cast<std::uint64_t>(round + 1));
    instance->reset();  // what the runtime does with an unusable instance
    worker.PumpMessageLoop();
    // The next event on the same worker runs normally.
    auto next = worker.Instantiate(*module, nullptr, milliseconds(1000));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    CallResult ok = (*next)->Call("run", nullptr, milliseconds(1000));
    EXPECT_TRUE(ok.ok()) << ok.message;
    EXPECT_EQ(ok.value, 7);
  }
}

// Many instances, each within its table bound, fill a worker's heap too: the instantiation
// that reaches the limit fails (not the process), and the worker goes on once instances go.
TEST(EngineLimitsTest, ManyInstancesThatFillTheHeapFailOneAtATime) {
  Engine engine;
  ModuleBuilder b;
  b.tables.push_back({1'000'000, std::nullopt});
  b.funcs.push_back(ModuleBuilder::Returns(7));
  b.func_exports.push_back("run");
  ModuleLimits limits;
  limits.max_table_elements = 1'000'000;
  auto module = engine.Compile(b.Build(), NoHost(), kRunExport, limits);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  Worker worker(engine, WorkerOptions{.heap_limit_bytes = 32ull << 20});
  std::vector<std::unique_ptr<Instance>> live;
  Status failure;
  for (int i = 0; i < 64 && failure.ok(); ++i) {
    auto instance = worker.Instantiate(*module, nullptr, milliseconds(10'000));
    if (instance.ok()) {
      live.push_back(std::move(*instance));
    } else {
      failure = instance.status();
    }
  }
  ASSERT_FALSE(failure.ok()) << "64 instances of 8 MB tables fit a 32 MiB heap?";
  EXPECT_NE(failure.message().find("heap limit of 33554432 bytes"), std::string::npos) << failure.ToString();
  EXPECT_GE(worker.heap_limit_hits(), 1u);
  live.clear();
  worker.PumpMessageLoop();
  auto next = worker.Instantiate(*module, nullptr, milliseconds(1000));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ((*next)->Call("run", nullptr, milliseconds(1000)).value, 7);
}

// ---------------------------------------------------------------------------------------
// The limits fuzzer: for every bound, modules generated from a seed exactly at the bound
// (accepted, compiled, instantiated and run) and one past it (refused, the error naming the
// bound); then mutants of them, which must never crash. Deterministic: the seed is fixed
// unless WK_LIMITS_SEED is set, and a failure prints the seed and the case.

Status ReturnZero(HostCall& c) {
  c.ReturnI32(0);
  return Status::Ok();
}

// Provides "x"."f0" .. "x"."f{kMaxImports}" as `() -> i32`.
std::shared_ptr<const HostInterface> ImportsHost() {
  std::vector<HostFunction> fns;
  for (std::uint32_t i = 0; i <= kMaxImports; ++i) {
    fns.push_back({"x", "f" + std::to_string(i), {{}, {ValType::kI32}}, &ReturnZero});
  }
  return std::make_shared<HostInterface>(std::move(fns));
}

// Splits n into `parts` random non-negative parts.
std::vector<std::uint64_t> Split(std::uint64_t n, std::size_t parts, std::mt19937_64& rng) {
  std::vector<std::uint64_t> cuts = {0, n};
  for (std::size_t i = 1; i < parts; ++i) cuts.push_back(std::uniform_int_distribution<std::uint64_t>(0, n)(rng));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::uint64_t> out;
  for (std::size_t i = 1; i < cuts.size(); ++i) out.push_back(cuts[i] - cuts[i - 1]);
  return out;
}

struct BoundCase {
  std::string name;
  std::uint64_t bound;
  // Makes the module with `n` of the bounded thing; may set limits (the configurable bounds).
  std::function<ModuleBuilder(std::uint64_t n, std::mt19937_64& rng, ModuleLimits& limits)> make;
  std::string want;  // in the refusal of bound + 1, with "{}" replaced by bound + 1
  bool instantiate = true;  // false for the big ones: compiling them is the slow part already
};

ModuleBuilder RunModule() {
  ModuleBuilder b;
  b.funcs.push_back(ModuleBuilder::Returns(0));
  b.func_exports.push_back("run");
  return b;
}

std::vector<BoundCase> BoundCases(std::mt19937_64& seed_rng) {
  const std::uint64_t table_limit = std::uniform_int_distribution<std::uint64_t>(1, 5000)(seed_rng);
  const std::uint64_t memory_pages = std::uniform_int_distribution<std::uint64_t>(1, 64)(seed_rng);
  std::vector<BoundCase> cases;
  cases.push_back({"types", kMaxTypes, [](std::uint64_t n, auto&, auto&) {
                     ModuleBuilder b = RunModule();
                     b.extra_types = static_cast<std::uint32_t>(n - 1);
                     return b;
                   }, "{} types, over the limit of 100000", false});
  cases.push_back({"imports", kMaxImports, [](std::uint64_t n, auto&, auto&) {
                     ModuleBuilder b = RunModule();
                     b.extra_imports = static_cast<std::uint32_t>(n);
                     return b;
                   }, "{} imports, over the limit of 1000"});
  cases.push_back({"exports", kMaxExports, [](std::uint64_t n, auto&, auto&) {
                     ModuleBuilder b = RunModule();
                     b.extra_exports = static_cast<std::uint32_t>(n - 2);  // and "memory", "run"
                     return b;
                   }, "{} exports, over the limit of 10000"});
  cases.push_back({"functions", kMaxFunctions, [](std::uint64_t n, auto& rng, auto&) {
                     ModuleBuilder b = RunModule();
                     // Some of them imported: the bound is on the whole function index space.
                     b.extra_imports = std::uniform_int_distribution<std::uint32_t>(0, kMaxImports)(rng);
                     b.funcs.resize(n - b.extra_imports, ModuleBuilder::Returns(1));
                     return b;
                   }, "over the limit of 200000", false});
  cases.push_back({"tables", kMaxTables, [](std::uint64_t n, auto& rng, auto&) {
                     ModuleBuilder b = RunModule();
                     for (std::uint64_t i = 0; i < n; ++i) {
                       const bool with_max = rng() % 2 == 0;
                       b.tables.push_back({static_cast<std::uint32_t>(rng() % 4),
                                           with_max ? std::optional<std::uint32_t>(8) : std::nullopt});
                     }
                     return b;
                   }, "{} tables, over the limit of 16"});
  cases.push_back({"table elements", table_limit, [table_limit](std::uint64_t n, auto& rng, ModuleLimits& limits) {
                     limits.max_table_elements = table_limit;
                     ModuleBuilder b = RunModule();
                     for (std::uint64_t part : Split(n, 1 + rng() % 4, rng)) {
                       b.tables.push_back({static_cast<std::uint32_t>(part), std::nullopt});
                     }
                     return b;
                   }, "{} elements initially, over the limit of " + std::to_string(table_limit) + " table elements"});
  cases.push_back({"element entries", table_limit, [table_limit](std::uint64_t n, auto& rng, ModuleLimits& limits) {
                     limits.max_table_elements = table_limit;
                     ModuleBuilder b = RunModule();
                     b.tables.push_back({static_cast<std::uint32_t>(table_limit), std::nullopt});
                     for (std::uint64_t part : Split(n, 1 + rng() % 3, rng)) {
                       b.elem_segments.push_back(static_cast<std::uint32_t>(part));
                     }
                     return b;
                   }, "element segments have {} entries, over the limit of " + std::to_string(table_limit)});
  cases.push_back({"globals", kMaxGlobals, [](std::uint64_t n, auto&, auto&) {
                     ModuleBuilder b = RunModule();
                     b.globals = static_cast<std::uint32_t>(n);
                     return b;
                   }, "{} globals, over the limit of 10000"});
  cases.push_back({"element segments", kMaxElementSegments, [](std::uint64_t n, auto&, auto&) {
                     ModuleBuilder b = RunModule();
                     b.tables.push_back({0, std::nullopt});
                     b.elem_segments.resize(n, 0);
                     return b;
                   }, "{} element segments, over the limit of 10000"});
  cases.push_back({"data segments", kMaxDataSegments, [](std::uint64_t n, auto& rng, auto&) {
                     ModuleBuilder b = RunModule();
                     b.data_segments.resize(n, 0);
                     b.data_segments[rng() % n] = 100;
                     return b;
                   }, "{} data segments, over the limit of 10000"});
  cases.push_back({"exception tags", kMaxTags, [](std::uint64_t n, auto&, auto&) {
                     ModuleBuilder b = RunModule();
                     b.extra_types = 1;
                     b.tags = static_cast<std::uint32_t>(n);
                     return b;
                   }, "{} exception tags, over the limit of 1000"});
  cases.push_back({"locals", kMaxFunctionLocals, [](std::uint64_t n, auto& rng, auto&) {
                     ModuleBuilder b = RunModule();
                     ModuleBuilder::Func f = ModuleBuilder::Returns(3);
                     const auto groups = Split(n, 1 + rng() % 5, rng);
                     f.locals.clear();
                     testing::Leb(f.locals, groups.size());
                     for (std::uint64_t g : groups) {
                       testing::Leb(f.locals, g);
                       f.locals.push_back(rng() % 2 ? 0x7f : 0x7c);  // i32 or f64
                     }
                     b.funcs.push_back(f);
                     b.func_exports.push_back("many_locals");
                     return b;
                   }, "declares {} or more locals, over the limit of 20000"});
  cases.push_back({"function body bytes", kMaxFunctionBodyBytes, [](std::uint64_t n, auto&, auto&) {
                     ModuleBuilder b = RunModule();
                     ModuleBuilder::Func f;
                     f.locals = {0};
                     f.body.assign(n - 5, 0x01);  // nops, then i32.const 0, end
                     f.body.insert(f.body.end(), {0x41, 0x00, 0x01});
                     b.funcs.push_back(f);
                     b.func_exports.push_back("big");
                     return b;
                   }, "a body of {} bytes, over the limit of 2097152 bytes", false});
  cases.push_back({"memory pages", memory_pages, [memory_pages](std::uint64_t n, auto& rng, ModuleLimits& limits) {
                     limits.max_memory_bytes = memory_pages * kWasmPageBytes;
                     ModuleBuilder b = RunModule();
                     b.memory_min = static_cast<std::uint32_t>(n);
                     b.memory_max = rng() % 2 ? std::nullopt : std::optional<std::uint32_t>(n + rng() % 100);
                     return b;
                   }, "over the limit of " + std::to_string(memory_pages * kWasmPageBytes) + " bytes per actor"});
  return cases;
}

std::string Fill(std::string pattern, std::uint64_t n) {
  auto at = pattern.find("{}");
  if (at != std::string::npos) pattern.replace(at, 2, std::to_string(n));
  return pattern;
}

std::uint64_t FuzzSeed() {
  const char* env = std::getenv("WK_LIMITS_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20261202;
}

TEST(EngineLimitsFuzzTest, AtEveryBoundAcceptedPastItRefusedNamingIt) {
  const std::uint64_t seed = FuzzSeed();
  std::mt19937_64 rng(seed);
  Engine engine;
  auto host = ImportsHost();
  Worker worker(engine, WorkerOptions{.heap_limit_bytes = 64ull << 20});
  std::vector<std::vector<std::uint8_t>> accepted;
  for (const BoundCase& c : BoundCases(rng)) {
    SCOPED_TRACE("seed " + std::to_string(seed) + ", bound " + c.name + " = " + std::to_string(c.bound));
    ModuleLimits at_limits;
    auto at = c.make(c.bound, rng, at_limits).Build();
    auto module = engine.Compile(at, host, kRunExport, at_limits);
    ASSERT_TRUE(module.ok()) << "at the bound: " << module.status().ToString();
    if (c.instantiate) {
      auto instance = worker.Instantiate(*module, nullptr, milliseconds(10'000));
      ASSERT_TRUE(instance.ok()) << "at the bound: " << instance.status().ToString();
      CallResult r = (*instance)->Call("run", nullptr, milliseconds(10'000));
      EXPECT_TRUE(r.ok()) << r.message;
    }
    if (at.size() < 64 * 1024) accepted.push_back(std::move(at));

    ModuleLimits past_limits;
    auto past = c.make(c.bound + 1, rng, past_limits).Build();
    auto refused = engine.Compile(past, host, kRunExport, past_limits);
    ASSERT_FALSE(refused.ok()) << "one past the bound was accepted";
    EXPECT_NE(refused.status().message().find(Fill(c.want, c.bound + 1)), std::string::npos)
        << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("over the limit of"), std::string::npos);
  }
  // The module size, a setting: a module exactly at it is accepted, one byte over refused.
  {
    auto bytes = RunModule().Build();
    ModuleLimits limits;
    limits.max_module_bytes = bytes.size();
    limits.setting_prefix = "actors.";
    EXPECT_TRUE(engine.Compile(bytes, host, kRunExport, limits).ok());
    limits.max_module_bytes = bytes.size() - 1;
    auto refused = engine.Compile(bytes, host, kRunExport, limits);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("over the limit of " + std::to_string(bytes.size() - 1) +
                                              " bytes (actors.max_module_bytes)"),
              std::string::npos) << refused.status().ToString();
  }

  // Mutants of the small accepted modules and of the two table modules above: every outcome
  // is fine but a crash; what compiles is instantiated and run.
  accepted.push_back(HugeTablesModule());
  accepted.push_back(TableGrowerModule());
  int compiled = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<std::uint8_t> m = accepted[rng() % accepted.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = 8 + rng() % (m.size() - 8);
      switch (rng() % 3) {
        case 0: m[at] = static_cast<std::uint8_t>(rng()); break;
        case 1: m[at] |= 0x80; break;  // lengthen a LEB128 number
        case 2: m[at] = static_cast<std::uint8_t>(m[at] + 1); break;
      }
    }
    ModuleLimits limits;
    limits.max_table_elements = 1'000'000;
    auto module = engine.Compile(m, host, kRunExport, limits);
    if (!module.ok()) continue;
    ++compiled;
    auto instance = worker.Instantiate(*module, nullptr, milliseconds(20));
    if (!instance.ok()) continue;
    for (const char* name : {"run", "grow"}) {
      if ((*instance)->HasExport(name)) (void)(*instance)->Call(name, nullptr, milliseconds(20));
    }
  }
  EXPECT_GT(compiled, 0) << "no mutant compiled: the mutations are too coarse to test anything";
}

}  // namespace
}  // namespace wk::engine
