#include "engine/wasm_module_info.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

namespace wk::engine {
namespace {

std::vector<std::uint8_t> ReadTestModule(const std::string& name) {
  std::ifstream in(std::string(WK_ENGINE_TESTDATA) + "/" + name + ".wasm", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(WasmModuleInfo, ReadsImportsExportsAndMemory) {
  auto info = ReadModuleInfo(ReadTestModule("good"));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->imports.size(), 3u);
  EXPECT_EQ(info->imports[1].module, "test");
  EXPECT_EQ(info->imports[1].name, "inc64");
  EXPECT_EQ(FuncTypeString(info->TypeOf(info->imports[1])), "(i64) -> i64");
  const Export* add = info->FindExport("call_add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->kind, ExternKind::kFunc);
  EXPECT_EQ(FuncTypeString(info->TypeOf(*add)), "() -> i32");
  EXPECT_EQ(FuncTypeString(info->TypeOf(*info->FindExport("returns_nothing"))), "() -> ()");
  EXPECT_EQ(info->FindExport("memory")->kind, ExternKind::kMemory);
  ASSERT_EQ(info->memories.size(), 1u);
  EXPECT_EQ(info->memories[0].min_pages, 1u);
  EXPECT_EQ(info->memories[0].max_pages, 4u);
}

TEST(WasmModuleInfo, ImposesAMemoryMaximum) {
  auto bytes = ReadTestModule("no_max");
  auto before = ReadModuleInfo(bytes);
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->memories[0].max_pages.has_value());
  auto patched = WithImportedMemory(bytes, 300);  // a two-byte LEB on the import
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  auto after = ReadModuleInfo(*patched);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->memories[0].min_pages, 1u);
  EXPECT_EQ(after->memories[0].max_pages, 300u);
  EXPECT_EQ(after->exports.size(), before->exports.size()) << "later sections intact";
  EXPECT_FALSE(WithImportedMemory(ReadTestModule("big_initial"), 1024).ok());
}

// The engine's memory pool: the module's memory becomes an import with the same limits (the
// given maximum), into the existing import section (good: three function imports, which keep
// their indices) or a new one (touch_memory imports nothing); nothing else changes.
TEST(WasmModuleInfo, TurnsTheMemoryIntoAnImport) {
  for (const char* name : {"good", "touch_memory"}) {
    SCOPED_TRACE(name);
    auto bytes = ReadTestModule(name);
    auto before = ReadModuleInfo(bytes);
    ASSERT_TRUE(before.ok()) << before.status().ToString();
    auto patched = WithImportedMemory(bytes, 300);
    ASSERT_TRUE(patched.ok()) << patched.status().ToString();
    auto after = ReadModuleInfo(*patched);
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    ASSERT_EQ(after->imports.size(), before->imports.size() + 1);
    for (std::size_t i = 0; i < before->imports.size(); ++i) {
      EXPECT_EQ(after->imports[i].name, before->imports[i].name);
      EXPECT_EQ(after->imports[i].kind, before->imports[i].kind);
    }
    EXPECT_EQ(after->imports.back().module, kMemoryImportModule);
    EXPECT_EQ(after->imports.back().name, kMemoryImportName);
    EXPECT_EQ(after->imports.back().kind, ExternKind::kMemory);
    ASSERT_EQ(after->memories.size(), 1u);
    EXPECT_TRUE(after->memories[0].imported);
    EXPECT_EQ(after->memories[0].min_pages, before->memories[0].min_pages);
    EXPECT_EQ(after->memories[0].max_pages, 300u);
    EXPECT_EQ(after->exports.size(), before->exports.size());
    EXPECT_EQ(after->data_segments, before->data_segments) << "later sections intact";
    EXPECT_EQ(after->defined_functions, before->defined_functions);
    auto twice = WithImportedMemory(*patched, 300);
    EXPECT_FALSE(twice.ok()) << "a module that imports a memory is refused";
  }
  EXPECT_FALSE(WithImportedMemory(ReadTestModule("big_initial"), 1024).ok());
}

TEST(WasmModuleInfo, AddsTableExportsKeepingTheModulesOwn) {
  auto bytes = ReadTestModule("touch_memory");
  auto before = ReadModuleInfo(bytes);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const std::vector<TableExport> ours = {{"wasmkeep:table:0", 0}};
  auto patched = WithTableExports(bytes, ours);
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  auto after = ReadModuleInfo(*patched);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->exports.size(), before->exports.size() + 1);
  for (std::size_t i = 0; i < before->exports.size(); ++i) EXPECT_EQ(after->exports[i].name, before->exports[i].name);
  EXPECT_EQ(after->exports.back().name, "wasmkeep:table:0");
  EXPECT_EQ(after->exports.back().kind, ExternKind::kTable);
  EXPECT_EQ(after->data_segments, before->data_segments) << "later sections intact";
  auto twice = WithTableExports(*patched, ours);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("already exports \"wasmkeep:table:0\""), std::string::npos);
}

TEST(WasmModuleInfo, RefusesNonModules) {
  for (std::string s : {std::string(""), std::string("\0asm", 4), std::string("\0asm\x02\0\0\0", 8),
                        std::string("hello world, not wasm")}) {
    auto r = ReadModuleInfo({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
    EXPECT_FALSE(r.ok());
  }
  // A section that claims more bytes than there are.
  std::vector<std::uint8_t> b = {0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0xff, 0x01, 0x00};
  auto r = ReadModuleInfo(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("runs past the end"), std::string::npos) << r.status().ToString();
}

// A small module with a huge function type exported many times: refused by V8's limits,
// and in any case the reader holds each type once (the reviewer's 1 MB module once cost
// 981 MiB).
TEST(WasmModuleInfo, HostileCountsAreRefusedCheaply) {
  auto leb = [](std::vector<std::uint8_t>& out, std::uint64_t v) {
    do {
      std::uint8_t b = v & 0x7f;
      v >>= 7;
      if (v) b |= 0x80;
      out.push_back(b);
    } while (v);
  };
  auto section = [&](std::vector<std::uint8_t>& m, std::uint8_t id, const std::vector<std::uint8_t>& payload) {
    m.push_back(id);
    leb(m, payload.size());
    m.insert(m.end(), payload.begin(), payload.end());
  };
  std::vector<std::uint8_t> m = {0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00};
  std::vector<std::uint8_t> types = {0x01, 0x60};
  leb(types, 5000);  // params: over V8's 1000
  types.insert(types.end(), 5000, 0x7f);
  types.push_back(0x00);
  section(m, 1, types);
  auto r = ReadModuleInfo(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("5000 parameters (more than 1000)"), std::string::npos) << r.status().ToString();

  // 1000 params (allowed), one function, exported kMaxExports times: one copy of the type.
  std::vector<std::uint8_t> m2 = {0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00};
  std::vector<std::uint8_t> t2 = {0x01, 0x60};
  leb(t2, 1000);
  t2.insert(t2.end(), 1000, 0x7f);
  t2.push_back(0x00);
  section(m2, 1, t2);
  section(m2, 3, {0x01, 0x00});
  std::vector<std::uint8_t> ex;
  leb(ex, kMaxExports);
  for (std::uint32_t i = 0; i < kMaxExports; ++i) {
    std::string name = "e" + std::to_string(i);
    leb(ex, name.size());
    ex.insert(ex.end(), name.begin(), name.end());
    ex.push_back(0x00);
    ex.push_back(0x00);
  }
  section(m2, 7, ex);
  auto ok = ReadModuleInfo(m2);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->exports.size(), kMaxExports);
  EXPECT_EQ(ok->types.size(), 1u);
  EXPECT_EQ(ok->TypeOf(ok->exports[kMaxExports - 1]).params.size(), 1000u);
}

// Random corruption of a real module never crashes the reader (AddressSanitizer watches).
TEST(WasmModuleInfo, SurvivesCorruption) {
  const auto original = ReadTestModule("good");
  std::mt19937 rng(20261202);
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[8 + rng() % (bytes.size() - 8)] = static_cast<std::uint8_t>(rng());
    if (rng() % 4 == 0) bytes.resize(8 + rng() % (bytes.size() - 8));
    auto r = ReadModuleInfo(bytes);
    if (!r.ok()) ++refused;
    (void)WithImportedMemory(bytes, 16);
  }
  EXPECT_GT(refused, 1000) << "corruption is noticed";
}

}  // namespace
}  // namespace wk::engine
