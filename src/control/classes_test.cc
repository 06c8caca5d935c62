// Classes on mem:// in virtual time: the pointer's strict format, deploying content-addressed
// modules, repair of a bad copy, the pointer written last, listing.
#include "control/classes.h"

#include <gtest/gtest.h>

#include <random>

#include "control/testing/fixture.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A pointer as stored, written out byte by byte: it decodes, and encoding the result gives
// the same bytes back.
TEST(ControlFormatTest, AStoredClassPointerDecodesAndReencodesToTheSameBytes) {
  const std::string digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  const std::string stored = "wasmkeep-class 1\n"
                             "class acme/counter\n"
                             "module " + digest + "\n"
                             "size 48213\n"
                             "deployed_at 1764000000000\n";
  auto v = DecodeClassPointer(stored, "acme", "counter");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, (ClassVersion{ModuleDigest{digest}, 48213, FromUnixMs(1'764'000'000'000)}));
  EXPECT_EQ(EncodeClassPointer("acme", "counter", *v), stored);
}

TEST(ControlFormatTest, ClassPointerFormat) {
  ClassVersion v{ModuleDigest{std::string(64, 'c')}, 1234, FromUnixMs(77)};
  const std::string body = EncodeClassPointer("acme", "counter", v);
  EXPECT_EQ(body, "wasmkeep-class 1\nclass acme/counter\nmodule " + std::string(64, 'c') + "\nsize 1234\ndeployed_at 77\n");
  EXPECT_EQ(DecodeClassPointer(body, "acme", "counter").value(), v);
  const std::string module = "module " + std::string(64, 'c') + "\n";
  const std::string head = "wasmkeep-class 1\nclass acme/counter\n" + module;
  ExpectRefused([](const std::string& b) { return DecodeClassPointer(b, "acme", "counter"); },
                {
                    {"wasmkeep-class 1\n", "line 2: missing 'class'"},
                    {"wasmkeep-classes 1\nclass acme/counter\n" + module + "size 1\ndeployed_at 1\n",
                     "line 1: expected the header 'wasmkeep-class 1'"},
                    {"wasmkeep-class 2\nclass acme/counter\n" + module + "size 1\ndeployed_at 1\n", "line 1: expected the header"},
                    {"wasmkeep-class 1\nclass acme/other\n" + module + "size 1\ndeployed_at 1\n",
                     "line 2: 'class' names another class"},
                    {"wasmkeep-class 1\nclass acme/counter\nmodule " + std::string(64, 'C') + "\nsize 1\ndeployed_at 1\n",
                     "line 3: 'module' is not 64 lowercase hex"},
                    {head + "size 01\ndeployed_at 1\n", "line 4: 'size' is not a number"},
                    {head + "size 0\ndeployed_at 1\n", "line 4: 'size' is 0"},
                    {head + "size " + std::to_string(kMaxModuleBytes + 1) + "\ndeployed_at 1\n", "line 4: 'size' is not a number"},
                    {head + "size 1\ndeployed_at 01\n", "line 5: 'deployed_at' is not Unix milliseconds"},
                    {head + "size 1\n", "line 5: missing 'deployed_at'"},
                    {head + "deployed_at 1\nsize 1\n", "line 4: expected the 'size' line, found 'deployed_at'"},
                    {head + "size 1\ndeployed_at 1\nextra 1\n", "line 6: unexpected 'extra 1'"},
                    {head + "size 1 \ndeployed_at 1\n", "line 4: bad 'size' value"},
                });
  EXPECT_EQ(DecodeClassPointer(body, "acme", "other").code(), Code::kFatal) << "a pointer copied to another class";
}

TEST(ControlFormatTest, MutatedClassPointersNeverCrashAndAcceptedOnesRoundTrip) {
  std::mt19937_64 rng(5);
  const std::string good_class =
      EncodeClassPointer("acme", "counter", ClassVersion{ModuleDigest{std::string(64, 'c')}, 10, FromUnixMs(5)});
  for (int i = 0; i < 20'000; ++i) {
    std::string c = good_class;
    c[rng() % c.size()] = static_cast<char>(rng() % 256);
    if (rng() % 4 == 0) c.resize(rng() % c.size());
    if (auto d = DecodeClassPointer(c, "acme", "counter"); d.ok()) {
      EXPECT_EQ(EncodeClassPointer("acme", "counter", *d), c);
    }
  }
}

TEST(ControlFormatTest, ClassNames) {
  Status c = ValidateClassName("Counter");
  EXPECT_EQ(c.code(), Code::kInvalidArgument);
  EXPECT_NE(c.message().find("class 'Counter'"), std::string::npos) << c.message();
}

TEST_F(ControlTest, DeployStoresTheModuleContentAddressedThenThePointer) {
  Create("acme");
  const std::string wasm = std::string("\0asm\1\0\0\0", 8) + "payload";
  auto v = Run(DeployClass(store, env, "acme", "counter", wasm));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->module, ModuleDigest::Of(wasm));
  EXPECT_EQ(v->size_bytes, wasm.size());
  const std::string module_key = "classes/acme/counter/modules/" + v->module.hex;
  EXPECT_EQ(bucket->objects().at(module_key).body, wasm);
  auto current = Run(CurrentClass(store, "acme", "counter"));
  ASSERT_TRUE(current.ok());
  ASSERT_TRUE(current->has_value());
  EXPECT_EQ(**current, *v);
  auto bytes = Run(ReadModule(store, "acme", "counter", v->module));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, wasm);

  // Deploying the same bytes again is fine; another module moves the pointer; the old
  // module stays.
  world.RunFor(seconds(1));
  auto again = Run(DeployClass(store, env, "acme", "counter", wasm));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->module, v->module);
  const std::string wasm2 = wasm + "2";
  auto v2 = Run(DeployClass(store, env, "acme", "counter", wasm2));
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(Run(CurrentClass(store, "acme", "counter")).value()->module, v2->module);
  EXPECT_TRUE(bucket->objects().contains(module_key));

  EXPECT_FALSE(Run(CurrentClass(store, "acme", "other")).value().has_value());
}

TEST_F(ControlTest, DeployRefusesUnknownTenantsAndBadInputWritingNothing) {
  const std::string wasm = "module";
  auto r = Run(DeployClass(store, env, "ghost", "counter", wasm));
  EXPECT_EQ(r.code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("no tenant 'ghost'"), std::string::npos);
  Create("acme");
  auto bad_class = Run(DeployClass(store, env, "acme", "Bad", wasm));
  EXPECT_EQ(bad_class.code(), Code::kInvalidArgument);
  EXPECT_NE(bad_class.status().message().find("class 'Bad'"), std::string::npos);
  EXPECT_EQ(Run(DeployClass(store, env, "acme", "counter", "")).code(), Code::kInvalidArgument);
  for (const auto& [key, obj] : bucket->objects()) EXPECT_FALSE(key.starts_with("classes/")) << key;
}

TEST_F(ControlTest, AModuleWhoseHashDoesNotMatchIsRefusedAndRepairedByTheNextDeploy) {
  Create("acme");
  const std::string wasm = "the module bytes";
  auto v = Run(DeployClass(store, env, "acme", "counter", wasm));
  ASSERT_TRUE(v.ok());
  const std::string key = ModuleKey("acme", "counter", v->module);
  Corrupt(key, "the module bytez");
  auto read = Run(ReadModule(store, "acme", "counter", v->module));
  EXPECT_EQ(read.code(), Code::kFatal);
  EXPECT_NE(read.status().message().find("corrupt module"), std::string::npos);
  EXPECT_EQ(Run(ReadModule(store, "acme", "counter", ModuleDigest{std::string(64, '0')})).code(), Code::kNotFound);
  EXPECT_EQ(Run(ReadModule(store, "acme", "counter", ModuleDigest{"xyz"})).code(), Code::kInvalidArgument);
  // Deploying the same module again finds the bad copy and replaces it.
  ASSERT_TRUE(Run(DeployClass(store, env, "acme", "counter", wasm)).ok());
  EXPECT_EQ(Run(ReadModule(store, "acme", "counter", v->module)).value(), wasm);
  // A corrupt pointer is refused, not read as "never deployed".
  Corrupt(ClassPointerKey("acme", "counter"), "wasmkeep-class 1\n");
  EXPECT_EQ(Run(CurrentClass(store, "acme", "counter")).code(), Code::kFatal);
}

TEST_F(ControlTest, ThePointerIsWrittenOnlyAfterTheModuleIsStored) {
  Create("acme");
  // Module puts fail: nothing points at a module that is not there.
  store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.find("/modules/") != std::string::npos) f.fail_before_apply = Fatal("denied");
    return f;
  });
  EXPECT_EQ(Run(DeployClass(store, env, "acme", "counter", "bytes")).code(), Code::kFatal);
  EXPECT_FALSE(bucket->objects().contains(ClassPointerKey("acme", "counter")));
}

TEST_F(ControlTest, ListClassesOfOneTenantOrAll) {
  Create("acme");
  Create("globex");
  ASSERT_TRUE(Run(DeployClass(store, env, "acme", "counter", "a")).ok());
  ASSERT_TRUE(Run(DeployClass(store, env, "acme", "chat", "b")).ok());
  ASSERT_TRUE(Run(DeployClass(store, env, "globex", "counter", "c")).ok());
  Corrupt(ClassPointerKey("globex", "broken"), "nonsense");
  auto all = Run(ListClasses(store, std::nullopt));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].tenant + "/" + (*all)[0].class_name, "acme/chat");
  EXPECT_EQ((*all)[3].tenant + "/" + (*all)[3].class_name, "globex/counter");
  EXPECT_FALSE((*all)[2].current.has_value());
  EXPECT_NE((*all)[2].error.find("corrupt"), std::string::npos);
  auto acme = Run(ListClasses(store, std::string("acme")));
  ASSERT_TRUE(acme.ok());
  ASSERT_EQ(acme->size(), 2u);
  EXPECT_EQ((*acme)[1].class_name, "counter");
  EXPECT_EQ((*acme)[1].current->module, ModuleDigest::Of("a"));
  EXPECT_EQ(Run(ListClasses(store, std::string("Bad!"))).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace wk::control
