// Test helpers shared by the local stores' tests (store/file/file_store_test.cc,
// store/sqlite/sqlite_store_test.cc, store/multiprocess_test.cc): a fresh bucket directory
// per test, a file's bytes, and a fixture that opens a store of one kind on a RealEnv and
// runs its calls to completion.
//
// Test-only. Every helper crashes (WK_CHECK) on a failed system call it cannot recover.
#pragma once

#include <gtest/gtest.h>
#include <cstdlib>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/check.h"
#include "env/real_env.h"
#include "store/object_store.h"

namespace wk::local_store_testing {

// A new empty directory under the system's temp directory, in a folder named for the suite.
inline std::string MakeTempDir(const std::string& suite) {
  auto base = std::filesystem::temp_directory_path() / suite;
  std::filesystem::create_directories(base);
  std::string tmpl = (base / "XXXXXX").string();
  WK_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
  return tmpl;
}

// The whole content of path ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls key every 5 ms until it is readable (a write that was given up on may land later);
// kNotFound after 1,000 tries.
inline Task<Result<GetOutput>> GetEventually(Env& env, ObjectStore& store, std::string key) {
  CallOptions call{std::chrono::seconds(20)};
  for (int i = 0; i < 1000; ++i) {
    auto g = co_await store.Get(key, call);
    if (g.code() != Code::kNotFound) co_return g;
    co_await env.SleepFor(std::chrono::milliseconds(5));
  }
  co_return NotFound(key + " never appeared");
}

// A fixture for one kind of local store: Store::Open(Env&, dir, Options) on a fresh
// directory (removed after the test), and each call run to completion on env_.
template <typename Store, typename Options>
class LocalStoreTest : public ::testing::Test {
 protected:
  explicit LocalStoreTest(std::string suite) : suite_(std::move(suite)) {}

  void SetUp() override { dir_ = MakeTempDir(suite_); }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // (Re)opens the store on dir_; a test fails when it cannot.
  void Open(Options options = {}) {
    store_.reset();
    auto store = Store::Open(env_, dir_, std::move(options));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  template <typename T>
  T Run(Task<T> task) {
    return env_.RunMain(std::move(task));
  }
  Result<Version> Put(const std::string& key, std::string body,
                      Precondition c = Precondition::None()) {
    return Run(store_->Put(key, std::move(body), std::move(c), call_));
  }
  Result<GetOutput> Get(const std::string& key) { return Run(store_->Get(key, call_)); }
  Result<ObjectMeta> Head(const std::string& key) { return Run(store_->Head(key, call_)); }
  Status Delete(const std::string& key, Precondition c = Precondition::None()) {
    return Run(store_->Delete(key, std::move(c), call_));
  }
  Result<ListPage> List(ListOptions options) {
    return Run(store_->List(std::move(options), call_));
  }

  // Every key under prefix after start_after, following continuations; checks that every
  // page but the last is full and none is larger than page_size.
  std::vector<std::string> ListAll(const std::string& prefix, int page_size,
                                   const std::string& start_after = "") {
    std::vector<std::string> keys;
    ListOptions options;
    options.prefix = prefix;
    options.page_size = page_size;
    options.start_after = start_after;
    for (int pages = 0; pages < 100'000; ++pages) {
      auto page = List(options);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      EXPECT_LE(static_cast<int>(page->entries.size()), page_size);
      for (auto& e : page->entries) keys.push_back(e.key);
      if (!page->next_continuation) break;
      EXPECT_EQ(static_cast<int>(page->entries.size()), page_size);
      options.continuation = *page->next_continuation;
    }
    return keys;
  }

  RealEnv env_;
  std::string dir_;
  std::unique_ptr<Store> store_;
  CallOptions call_{std::chrono::seconds(20)};

 private:
  std::string suite_;
};

}  // namespace wk::local_store_testing
