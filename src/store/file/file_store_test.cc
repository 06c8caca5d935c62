#include "store/file/file_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "base/crc32c.h"
#include "env/real_env.h"
#include "store/file/file_layout.h"
#include "store/testing/local_store_fixture.h"
#include "store/testing/process_testing.h"

namespace wk {
namespace {

namespace fl = file_layout;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

using local_store_testing::ReadFile;

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

// Every key in the tests that catch a store that orders by directory instead of by bytes,
// mangles unusual bytes, or lets a key escape or collide.
std::vector<std::string> TrickyKeys() {
  const std::string x200(fl::kSegmentChunkBytes, 'x');
  std::vector<std::string> keys = {
      "a-c",
      "a/b",
      "a/b/c",
      "a b",
      "a%2Fb",
      "\xc3\xbc",
      "..",
      "/lead",
      ".",
      "a/.",
      "a/..",
      "a/./b",
      "a//b",
      "a/",
      "/",
      "//",
      "a0",
      "a/b-",
      "a/b0",
      "A",
      "a\\b",
      "a*",
      "~t",
      "objects",
      "tmp/x",
      "locks/000",
      "FORMAT",
      "dx",
      "ox",
      "cx",
      "a.tmp",
      x200,
      x200 + "-",
      x200 + "/y",
      x200 + "0",
      x200 + "x",
      x200 + "x/z",
      x200 + "/",
      std::string(1019, 'L') + "/tail",  // full length, one long segment
      std::string(kMaxKeyBytes, 'x'),    // five chunks and a rest
      std::string(kMaxKeyBytes, '/'),    // 1025 levels of directories
  };
  std::string euros;  // multi-byte characters cut by the chunk boundary
  while (euros.size() + 3 <= kMaxKeyBytes) euros += "\xe2\x82\xac";
  keys.push_back(euros);
  std::string as;  // "a/a/.../a/": 512 levels, the last segment empty
  while (as.size() < kMaxKeyBytes) as += "a/";
  keys.push_back(as);
  return keys;
}

// ---- The layout (pure functions).

TEST(FileLayoutTest, KeyComponentsAreTaggedAndChunked) {
  using V = std::vector<std::string>;
  EXPECT_EQ(fl::KeyComponents("wal/t/a-1"), (V{"dwal", "dt", "oa-1"}));
  EXPECT_EQ(fl::KeyComponents("/x"), (V{"d", "ox"}));
  EXPECT_EQ(fl::KeyComponents("a/"), (V{"da", "o"}));
  EXPECT_EQ(fl::KeyComponents("a/./.."), (V{"da", "d.", "o.."}));
  const std::string s(450, 's');
  EXPECT_EQ(fl::KeyComponents(s),
            (V{"c" + s.substr(0, 200), "c" + s.substr(200, 200), "o" + s.substr(400)}));
  EXPECT_EQ(fl::KeyComponents(std::string(200, 'q')), (V{"o" + std::string(200, 'q')}));
  EXPECT_EQ(fl::KeyComponents(std::string(201, 'q') + "/"),
            (V{"c" + std::string(200, 'q'), "dq", "o"}));
  EXPECT_EQ(fl::ObjectPath("a/b"), "objects/da/ob");
}

TEST(FileLayoutTest, MappingIsInjectiveAndPathSafe) {
  std::set<std::string> paths;
  for (const std::string& key : TrickyKeys()) {
    ASSERT_TRUE(ValidateKey(key).ok()) << key;
    const std::string path = fl::ObjectPath(key);
    EXPECT_TRUE(paths.insert(path).second) << "collision on " << path;
    EXPECT_LE(path.size(), fl::kMaxObjectPathBytes);
    for (const std::string& c : fl::KeyComponents(key)) {
      EXPECT_TRUE(c.size() >= 1 && c.size() <= 1 + fl::kSegmentChunkBytes) << key;
      EXPECT_TRUE(c[0] == 'd' || c[0] == 'o' || c[0] == 'c') << key;
      EXPECT_EQ(c.find('/'), std::string::npos);
      EXPECT_NE(c, ".");
      EXPECT_NE(c, "..");
    }
    // Lexically inside objects/: no component can climb out.
    EXPECT_TRUE(fs::path(path).lexically_normal().string().starts_with("objects/")) << key;
  }
}

TEST(FileLayoutTest, LockStripeIsFrozen) {
  // Processes of different builds must agree on the stripe of a key: FNV-1a 64, mod 256.
  EXPECT_EQ(fl::LockStripe(""), 14695981039346656037ull % 256);
  EXPECT_EQ(fl::LockStripe("a"), 0xaf63dc4c8601ec8cull % 256);
  EXPECT_EQ(fl::LockPath(7), "locks/007");
}

TEST(FileLayoutTest, HeaderRoundTripsAndEveryHeaderByteIsChecked) {
  fl::VersionBytes v;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(i * 17);
  const std::string key = "wal/t/c/n/0001";
  const std::string body = "the body";
  const std::string header = fl::EncodeHeader(key, v, body);
  ASSERT_EQ(header.size(), fl::kFixedHeaderBytes + key.size() + fl::kHeaderCrcBytes);
  const std::string file = header + body;
  auto h = fl::DecodeHeader(file, file.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->key, key);
  EXPECT_EQ(h->version.token(), "00112233445566778899aabbccddeeff");
  EXPECT_EQ(h->body_size, body.size());
  EXPECT_EQ(h->header_bytes, header.size());
  EXPECT_EQ(h->body_crc, Crc32c(body));
  for (std::size_t i = 0; i < header.size(); ++i) {
    std::string bad = file;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_FALSE(fl::DecodeHeader(bad, bad.size()).ok()) << "byte " << i;
  }
  EXPECT_FALSE(fl::DecodeHeader(file, file.size() + 1).ok());  // appended bytes
  EXPECT_FALSE(fl::DecodeHeader(file.substr(0, file.size() - 1), file.size() - 1).ok());
  EXPECT_FALSE(fl::DecodeHeader("", 0).ok());
  EXPECT_FALSE(fl::DecodeHeader(std::string(100, '\0'), 100).ok());
}

// ---- The store.

class FileStoreTest : public local_store_testing::LocalStoreTest<FileStore, FileStoreOptions> {
 protected:
  FileStoreTest() : LocalStoreTest("wasmkeep-file-test") {}

  std::string ObjectFile(const std::string& key) const { return dir_ + "/" + fl::ObjectPath(key); }
};

TEST_F(FileStoreTest, OpenCreatesTheDirectoryAndDescribesItsAbsolutePath) {
  const std::string nested = dir_ + "/new/../bucket/deeper";
  auto store = FileStore::Open(env_, nested, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string abs = fs::canonical(dir_).string() + "/bucket/deeper";
  EXPECT_EQ((*store)->Describe(), "file://" + abs);
  EXPECT_EQ(ReadFile(abs + "/FORMAT"), "wasmkeep-file-store 1\n");
  EXPECT_TRUE(fs::is_directory(abs + "/objects"));
  EXPECT_TRUE(fs::is_directory(abs + "/tmp"));
  EXPECT_TRUE(fs::is_empty(abs + "/tmp"));  // the probe is gone
  // Reopening an existing bucket works, from another instance at the same time too.
  auto again = FileStore::Open(env_, abs, {});
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  // A relative path is from the working directory (file://./wasmkeep-data).
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  auto relative = FileStore::Open(env_, "./wasmkeep-data", {});
  fs::current_path(cwd);
  ASSERT_TRUE(relative.ok()) << relative.status().ToString();
  EXPECT_EQ((*relative)->Describe(), "file://" + fs::canonical(dir_).string() + "/wasmkeep-data");
}

TEST_F(FileStoreTest, OpenRefusesUnusableDirectoriesWithOneLine) {
  // A regular file stops even root: a path under it cannot be created, and the file itself
  // is not a directory.
  const std::string file = dir_ + "/plain-file";
  WriteFile(file, "x");
  auto under = FileStore::Open(env_, file + "/bucket", {});
  EXPECT_EQ(under.code(), Code::kFatal);
  EXPECT_NE(under.status().message().find(file + "/bucket"), std::string::npos)
      << under.status().message();
  EXPECT_NE(under.status().message().find("Not a directory"), std::string::npos)
      << under.status().message();
  EXPECT_EQ(under.status().message().find('\n'), std::string::npos);
  auto is_file = FileStore::Open(env_, file, {});
  EXPECT_EQ(is_file.code(), Code::kFatal);
  EXPECT_NE(is_file.status().message().find(file), std::string::npos) << is_file.status().message();

  // A directory of someone's files is not turned into a bucket.
  const std::string other = dir_ + "/home";
  fs::create_directories(other);
  WriteFile(other + "/notes.txt", "mine");
  auto foreign = FileStore::Open(env_, other, {});
  EXPECT_EQ(foreign.code(), Code::kFatal);
  EXPECT_NE(foreign.status().message().find("not a WasmKeep bucket"), std::string::npos)
      << foreign.status().message();
  EXPECT_FALSE(fs::exists(other + "/objects"));

  // A newer format is not read as this one.
  const std::string newer = dir_ + "/newer";
  fs::create_directories(newer);
  WriteFile(newer + "/FORMAT", "wasmkeep-file-store 2\n");
  auto v2 = FileStore::Open(env_, newer, {});
  EXPECT_EQ(v2.code(), Code::kFatal);
  EXPECT_NE(v2.status().message().find("wasmkeep-file-store 2"), std::string::npos);

  EXPECT_EQ(FileStore::Open(env_, "", {}).code(), Code::kInvalidArgument);
  FileStoreOptions no_threads;
  no_threads.io_threads = 0;
  EXPECT_EQ(FileStore::Open(env_, dir_ + "/b", no_threads).code(), Code::kInvalidArgument);
}

TEST_F(FileStoreTest, RoundTrip) {
  Open();
  auto v = Put("actors/a", "hello");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->token().size(), 32u);
  auto g = Get("actors/a");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->body, "hello");
  EXPECT_EQ(g->version, *v);
  auto h = Head("actors/a");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->version, *v);
  EXPECT_EQ(h->size, 5u);
  EXPECT_EQ(Get("actors/b").code(), Code::kNotFound);
  EXPECT_EQ(Head("actors").code(), Code::kNotFound);  // a directory is not an object
  EXPECT_TRUE(Delete("actors/a").ok());
  EXPECT_EQ(Get("actors/a").code(), Code::kNotFound);
  EXPECT_TRUE(Delete("actors/a").ok());  // a missing key: S3 cannot tell either
}

TEST_F(FileStoreTest, ConditionalPuts) {
  Open();
  auto v1 = Put("c", "first", Precondition::IfNoneMatchAny());
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto again = Put("c", "second", Precondition::IfNoneMatchAny());
  EXPECT_EQ(again.code(), Code::kPreconditionFailed) << again.status().ToString();
  EXPECT_EQ(Get("c")->body, "first");

  auto v2 = Put("c", "two", Precondition::IfMatch(*v1));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_NE(*v1, *v2);
  EXPECT_EQ(Get("c")->version, *v2);
  auto stale = Put("c", "three", Precondition::IfMatch(*v1));
  EXPECT_EQ(stale.code(), Code::kPreconditionFailed);
  EXPECT_EQ(Get("c")->body, "two");
  EXPECT_EQ(Put("c", "x", Precondition::IfMatch(Version())).code(), Code::kPreconditionFailed);

  auto missing = Put("never", "x", Precondition::IfMatch(*v2));
  EXPECT_EQ(missing.code(), Code::kPreconditionFailed);
  EXPECT_EQ(Get("never").code(), Code::kNotFound);

  auto v3 = Put("c", "unconditional");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(Get("c")->version, *v3);
  // Nothing a refused write did is left behind.
  EXPECT_TRUE(fs::is_empty(dir_ + "/tmp"));
}

TEST_F(FileStoreTest, ConditionalDeletes) {
  Open();
  EXPECT_TRUE(store_->SupportsConditionalDelete());
  auto v1 = Put("d", "x");
  auto v2 = Put("d", "y");
  ASSERT_TRUE(v1.ok() && v2.ok());
  EXPECT_EQ(Delete("d", Precondition::IfMatch(*v1)).code(), Code::kPreconditionFailed);
  EXPECT_TRUE(Get("d").ok());
  EXPECT_TRUE(Delete("d", Precondition::IfMatch(*v2)).ok());
  EXPECT_EQ(Get("d").code(), Code::kNotFound);
  EXPECT_EQ(Delete("d", Precondition::IfMatch(*v2)).code(), Code::kPreconditionFailed);
  EXPECT_EQ(Delete("d", Precondition::IfNoneMatchAny()).code(), Code::kInvalidArgument);
}

TEST_F(FileStoreTest, DeleteThenRecreateNeverReusesAVersion) {
  Open();
  std::set<std::string> seen;
  for (int round = 0; round < 20; ++round) {
    if (round == 10) Open();  // a new instance (as another process would be)
    auto v = Put("r/k", "same body", Precondition::IfNoneMatchAny());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_TRUE(seen.insert(v->token()).second) << "version reused: " << v->token();
    // A stale version of an earlier incarnation never matches the new one.
    ASSERT_TRUE(Delete("r/k").ok());
    EXPECT_EQ(Put("r/k", "x", Precondition::IfMatch(*v)).code(), Code::kPreconditionFailed);
  }
}

TEST_F(FileStoreTest, EmptyAndLargeBodies) {
  Open();
  ASSERT_TRUE(Put("empty", "").ok());
  auto e = Get("empty");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->body, "");
  EXPECT_EQ(Head("empty")->size, 0u);
  std::string big(8 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 3);
  auto v = Put("big", big, Precondition::IfNoneMatchAny());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  auto b = Get("big");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->body == big);
  EXPECT_EQ(b->version, *v);
  EXPECT_EQ(Head("big")->size, big.size());
}

TEST_F(FileStoreTest, InvalidInputIsRefusedAndNothingIsWritten) {
  Open();
  EXPECT_EQ(Put("", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(Put(std::string(1025, 'k'), "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(Put("bad\nkey", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(Put(std::string("nul\0key", 7), "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(Put("bad\xff", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(Get("").code(), Code::kInvalidArgument);
  EXPECT_EQ(Head("a\x7f").code(), Code::kInvalidArgument);
  EXPECT_EQ(Delete("").code(), Code::kInvalidArgument);
  ListOptions bad;
  bad.page_size = 0;
  EXPECT_EQ(List(bad).code(), Code::kInvalidArgument);
  bad.page_size = 1001;
  EXPECT_EQ(List(bad).code(), Code::kInvalidArgument);
  bad.page_size = 10;
  bad.prefix = "a\tb";
  EXPECT_EQ(List(bad).code(), Code::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(dir_ + "/objects"));
  EXPECT_TRUE(fs::is_empty(dir_ + "/tmp"));
}

TEST_F(FileStoreTest, TrickyKeysRoundTripAndListInByteOrder) {
  FileStoreOptions options;
  options.fsync = false;  // the subject is ordering; 1025-level keys make fsyncs slow
  Open(options);
  std::vector<std::string> keys = TrickyKeys();
  std::map<std::string, Version> versions;
  for (const std::string& k : keys) {
    auto v = Put(k, "body of " + k);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    versions[k] = *v;
  }
  for (const std::string& k : keys) {
    auto g = Get(k);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->body, "body of " + k);
  }
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  for (int page : {1, 2, 1000}) EXPECT_EQ(ListAll("", page), sorted) << "page " << page;

  // Versions and sizes in a listing are the stored ones.
  ListOptions all;
  auto page = List(all);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->entries.size(), keys.size());
  EXPECT_FALSE(page->next_continuation.has_value());
  for (const ListEntry& e : page->entries) {
    EXPECT_EQ(e.version, versions[e.key]) << e.key;
    EXPECT_EQ(e.size, ("body of " + e.key).size());
  }

  // Prefixes (complete segments, partial ones, across a chunk boundary) and start-after.
  const std::string x200(fl::kSegmentChunkBytes, 'x');
  for (const std::string& prefix :
       {std::string("a"), std::string("a/"), std::string("a/b"), std::string("/"),
        std::string("//"), std::string("."), x200, x200 + "x", x200 + "/", std::string(300, 'x'),
        std::string("\xc3"), std::string("zzz"), std::string("a-")}) {
    std::vector<std::string> expected;
    for (auto& k : sorted)
      if (k.starts_with(prefix)) expected.push_back(k);
    EXPECT_EQ(ListAll(prefix, 2), expected) << "prefix " << prefix.substr(0, 40);
    EXPECT_EQ(ListAll(prefix, 1000), expected) << "prefix " << prefix.substr(0, 40);
  }
  for (const std::string& after : {std::string("a"), std::string("a/b"), std::string("a-"), x200,
                                   x200 + "/", std::string("\xff"), std::string("/")}) {
    std::vector<std::string> expected;
    for (auto& k : sorted)
      if (k > after) expected.push_back(k);
    EXPECT_EQ(ListAll("", 3, after), expected) << "after " << after.substr(0, 40);
  }
  // Internal files are never listed, whatever the prefix.
  EXPECT_EQ(ListAll("tmp/", 10), std::vector<std::string>{"tmp/x"});
}

// Random keys built from parts that hit every boundary of the layout (chunk size, '/',
// bytes on either side of '/'), random deletes, and listings checked against a sorted set.
TEST_F(FileStoreTest, ListMatchesAModelOnRandomKeys) {
  FileStoreOptions options;
  options.fsync = false;  // the subject is ordering and pruning
  Open(options);
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<std::string> parts = {"a",
                                          "b",
                                          "-",
                                          "/",
                                          "0",
                                          "\xc3\xbc",
                                          ".",
                                          std::string(199, 'x'),
                                          std::string(200, 'x'),
                                          std::string(201, 'x')};
  std::set<std::string> model;
  auto random_key = [&] {
    std::string k;
    int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) k += parts[rng() % parts.size()];
    return k.substr(0, kMaxKeyBytes);
  };
  for (int i = 0; i < 150; ++i) {
    std::string k = random_key();
    if (!ValidateKey(k).ok()) continue;
    ASSERT_TRUE(Put(k, k).ok()) << k;
    model.insert(k);
  }
  for (int i = 0; i < 40 && !model.empty(); ++i) {
    auto it = model.begin();
    std::advance(it, rng() % model.size());
    ASSERT_TRUE(Delete(*it).ok());
    model.erase(it);
  }
  auto random_cut = [&]() -> std::string {
    if (model.empty() || rng() % 5 == 0) return "";
    auto it = model.begin();
    std::advance(it, rng() % model.size());
    return it->substr(0, rng() % (it->size() + 1));
  };
  for (int q = 0; q < 40; ++q) {
    const std::string prefix = random_cut();
    const std::string after = rng() % 2 ? random_cut() : "";
    const int page = std::vector<int>{1, 2, 3, 7, 1000}[rng() % 5];
    std::vector<std::string> expected;
    for (auto& k : model)
      if (k.starts_with(prefix) && k > after) expected.push_back(k);
    ASSERT_EQ(ListAll(prefix, page, after), expected)
        << "prefix '" << prefix.substr(0, 30) << "' after '" << after.substr(0, 30) << "' page "
        << page;
  }
  // Deleting everything leaves no directory behind.
  for (auto& k : model) ASSERT_TRUE(Delete(k).ok());
  EXPECT_TRUE(fs::is_empty(dir_ + "/objects"));
  EXPECT_TRUE(ListAll("", 1000).empty());
}

TEST_F(FileStoreTest, CorruptObjectFilesAreFatalNamingTheFile) {
  Open();
  const std::string body(1000, 'b');
  ASSERT_TRUE(Put("k/garbage", body).ok());
  ASSERT_TRUE(Put("k/truncated", body).ok());
  ASSERT_TRUE(Put("k/flipped-body", body).ok());
  ASSERT_TRUE(Put("k/flipped-header", body).ok());
  ASSERT_TRUE(Put("k/other-key", body).ok());
  ASSERT_TRUE(Put("k/empty-file", body).ok());
  ASSERT_TRUE(Put("source", body).ok());
  WriteFile(ObjectFile("k/garbage"), "this is not an object file at all, not even close......");
  std::string file = ReadFile(ObjectFile("k/truncated"));
  WriteFile(ObjectFile("k/truncated"), file.substr(0, file.size() - 10));
  file = ReadFile(ObjectFile("k/flipped-body"));
  file[file.size() - 3] ^= 0x10;
  WriteFile(ObjectFile("k/flipped-body"), file);
  file = ReadFile(ObjectFile("k/flipped-header"));
  file[30] ^= 0x10;
  WriteFile(ObjectFile("k/flipped-header"), file);
  // A whole, valid object file, but of another key.
  WriteFile(ObjectFile("k/other-key"), ReadFile(ObjectFile("source")));
  WriteFile(ObjectFile("k/empty-file"), "");

  for (const std::string key :
       {"k/garbage", "k/truncated", "k/flipped-header", "k/other-key", "k/empty-file"}) {
    auto g = Get(key);
    EXPECT_EQ(g.code(), Code::kFatal) << key;
    EXPECT_NE(g.status().message().find(ObjectFile(key)), std::string::npos)
        << g.status().message();
    EXPECT_EQ(Head(key).code(), Code::kFatal) << key;
    auto v = Put(key, "x", Precondition::IfMatch(Version("00000000000000000000000000000000")));
    EXPECT_EQ(v.code(), Code::kFatal) << key;
  }
  auto g = Get("k/flipped-body");
  EXPECT_EQ(g.code(), Code::kFatal);
  EXPECT_NE(g.status().message().find("checksum"), std::string::npos) << g.status().message();
  EXPECT_TRUE(Head("k/flipped-body").ok());  // Head reads the header only
  auto other = Get("k/other-key");
  EXPECT_NE(other.status().message().find("holds key 'source'"), std::string::npos)
      << other.status().message();
  ListOptions list;
  list.prefix = "k/";
  auto page = List(list);
  EXPECT_EQ(page.code(), Code::kFatal);
  EXPECT_NE(page.status().message().find(ObjectFile("k/empty-file")), std::string::npos)
      << page.status().message();
  // An unconditional write or delete repairs a key.
  ASSERT_TRUE(Put("k/garbage", "fixed").ok());
  EXPECT_EQ(Get("k/garbage")->body, "fixed");
  ASSERT_TRUE(Delete("k/truncated").ok());
}

TEST_F(FileStoreTest, CrashLeftoverTempFilesAreInvisibleAndCleanedOnlyWhenSafe) {
  Open();
  ASSERT_TRUE(Put("real", "r").ok());
  store_.reset();
  const std::string tmp = dir_ + "/tmp/";
  WriteFile(tmp + "old.tmp", "left by a crashed writer");
  WriteFile(tmp + "held.tmp", "a live writer's, locked");
  WriteFile(tmp + "fresh.tmp", "just created, not yet locked");
  WriteFile(tmp + "unrelated", "not a temp name");
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(tmp + "old.tmp", old);
  fs::last_write_time(tmp + "held.tmp", old);
  fs::last_write_time(tmp + "unrelated", old);
  int held = ::open((tmp + "held.tmp").c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);

  Open();
  EXPECT_EQ(store_->stale_temps_removed(), 1u);
  EXPECT_FALSE(fs::exists(tmp + "old.tmp"));
  EXPECT_TRUE(fs::exists(tmp + "held.tmp"));
  EXPECT_TRUE(fs::exists(tmp + "fresh.tmp"));
  EXPECT_TRUE(fs::exists(tmp + "unrelated"));
  EXPECT_EQ(ListAll("", 1000), std::vector<std::string>{"real"});
  ::close(held);
}

// ---- Concurrency within one process.

TEST_F(FileStoreTest, SixteenConcurrentCreateOnlyPutsHaveOneWinner) {
  Open();
  constexpr int kWriters = 16;
  auto race = [](FileStore* store, Env* env, Precondition cond,
                 CallOptions call) -> Task<std::vector<Code>> {
    std::vector<Code> codes(kWriters, Code::kCancelled);
    std::vector<TaskHandle> handles;
    for (int i = 0; i < kWriters; ++i) {
      handles.push_back(env->Spawn(
          [](FileStore* s, int n, Code* out, Precondition c, CallOptions o) -> Task<void> {
            *out = (co_await s->Put("race", "writer " + std::to_string(n), c, o)).code();
          }(store, i, &codes[i], cond, call),
          "writer"));
    }
    for (auto& h : handles) (void)co_await h.Join();
    co_return codes;
  };
  auto codes = Run(race(store_.get(), &env_, Precondition::IfNoneMatchAny(), call_));
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kPreconditionFailed), kWriters - 1);

  auto base = Get("race");
  ASSERT_TRUE(base.ok());
  codes = Run(race(store_.get(), &env_, Precondition::IfMatch(base->version), call_));
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kPreconditionFailed), kWriters - 1);
}

// ---- Across processes: the races, the counter, torn reads and kill -9 run against file://
// and sqlite:// alike in store/multiprocess_test.cc.

using process_testing::ForkChild;
using process_testing::WaitChild;

// ENOSPC and a read-only mount, on a small tmpfs mounted in a private mount namespace of
// a child (root is needed to mount; skipped where it cannot).
TEST_F(FileStoreTest, DiskFullIsRetryableAndReadOnlyIsFatal) {
  constexpr int kSkip = 77;
  int messages[2];
  ASSERT_EQ(::pipe(messages), 0);
  pid_t pid = ForkChild([&]() -> int {
    ::close(messages[0]);
    auto say = [&](const std::string& m) {
      std::string line = m + "\n";
      (void)!::write(messages[1], line.data(), line.size());
    };
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return kSkip;
    }
    const std::string small = dir_ + "/small";
    const std::string ro = dir_ + "/ro";
    fs::create_directories(small);
    fs::create_directories(ro);
    if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=1m") != 0) return kSkip;
    if (::mount("tmpfs", ro.c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) return kSkip;
    RealEnv env;
    CallOptions call{std::chrono::seconds(20)};
    {
      auto store = FileStore::Open(env, small, {});
      if (!store.ok()) {
        say("open: " + store.status().ToString());
        return 1;
      }
      auto full = env.RunMain(
          (*store)->Put("wal/big", std::string(2 << 20, 'f'), Precondition::None(), call));
      say("disk full: " + full.status().ToString());
      if (full.code() != Code::kRetryable) return 2;
      if (full.status().message().find("'wal/big'") == std::string::npos) return 3;
      if (full.status().message().find("No space left on device") == std::string::npos) return 4;
      if (env.RunMain((*store)->Get("wal/big", call)).code() != Code::kNotFound) return 5;
      if (!fs::is_empty(small + "/tmp")) return 6;  // the partial temp file is removed
      if (!env.RunMain((*store)->Put("wal/small", "fits", Precondition::None(), call)).ok())
        return 7;
    }
    auto read_only = FileStore::Open(env, ro, {});
    say("read-only: " + read_only.status().ToString());
    if (read_only.code() != Code::kFatal) return 8;
    if (read_only.status().message().find(ro) == std::string::npos) return 9;
    if (read_only.status().message().find("Read-only file system") == std::string::npos) return 10;
    return 0;
  });
  ::close(messages[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = ::read(messages[0], buf, sizeof(buf))) > 0;) said.append(buf, n);
  ::close(messages[0]);
  const int code = WaitChild(pid);
  if (code == kSkip) GTEST_SKIP() << "cannot mount a tmpfs in a private namespace here";
  EXPECT_EQ(code, 0) << said;
  std::printf("%s", said.c_str());
}

// ---- Asynchrony: deadlines, cancellation, destruction, the loop never blocked.

// Holds every operation at the start of its I/O until opened.
class Gate {
 public:
  void Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_ >= n; });
  }
  auto Hook() {
    return [this](std::string_view, std::string_view) { Enter(); };
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool open_ = false;
};

using local_store_testing::GetEventually;

TEST_F(FileStoreTest, PastTheDeadlineIsUnknownOutcomeAndTheWriteMayStillLand) {
  Gate gate;
  FileStoreOptions options;
  options.before_io_for_test = gate.Hook();
  Open(options);
  CallOptions short_call{milliseconds(50)};
  auto start = env_.MonoNow();
  auto read = Run(store_->Get("late", short_call));
  EXPECT_EQ(read.code(), Code::kUnknownOutcome) << read.status().ToString();
  auto write = Run(store_->Put("late", "landed", Precondition::None(), short_call));
  EXPECT_EQ(write.code(), Code::kUnknownOutcome) << write.status().ToString();
  EXPECT_NE(write.status().message().find("may still land"), std::string::npos);
  EXPECT_LT(env_.MonoNow() - start, std::chrono::seconds(5));
  gate.Open();
  auto g = Run(GetEventually(env_, *store_, "late"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->body, "landed");
}

TEST_F(FileStoreTest, CancelledReadIsCancelledAndCancelledWriteIsUnknownOutcome) {
  Gate gate;
  FileStoreOptions options;
  options.before_io_for_test = gate.Hook();
  Open(options);
  auto main = [](Env& env, FileStore& store, Gate& g) -> Task<std::pair<Code, Code>> {
    Code read = Code::kOk, write = Code::kOk;
    CallOptions call{std::chrono::seconds(20)};
    TaskHandle reader = env.Spawn(
        [](FileStore& s, Code* out, CallOptions c) -> Task<void> {
          *out = (co_await s.Get("x", c)).code();
        }(store, &read, call),
        "reader");
    TaskHandle writer = env.Spawn(
        [](FileStore& s, Code* out, CallOptions c) -> Task<void> {
          *out = (co_await s.Put("x", "v", Precondition::None(), c)).code();
        }(store, &write, call),
        "writer");
    co_await env.SleepFor(milliseconds(1));
    g.WaitEntered(2);  // both are on workers now
    reader.Cancel();
    writer.Cancel();
    (void)co_await reader.Join();
    (void)co_await writer.Join();
    co_return std::pair{read, write};
  };
  auto [read, write] = Run(main(env_, *store_, gate));
  EXPECT_EQ(read, Code::kCancelled);
  EXPECT_EQ(write, Code::kUnknownOutcome);
  gate.Open();
  EXPECT_TRUE(Run(GetEventually(env_, *store_, "x")).ok());  // the cancelled write landed
}

TEST_F(FileStoreTest, TheLoopRunsWhileIoIsInFlight) {
  Gate gate;
  FileStoreOptions options;
  options.before_io_for_test = gate.Hook();
  Open(options);
  auto main = [](Env& env, FileStore& store, Gate& g) -> Task<bool> {
    bool put_done = false;
    TaskHandle writer = env.Spawn(
        [](FileStore& s, bool* done) -> Task<void> {
          (void)co_await s.Put("slow", "v", Precondition::None(), CallOptions{});
          *done = true;
        }(store, &put_done),
        "writer");
    co_await env.SleepFor(milliseconds(1));
    g.WaitEntered(1);
    // The put is stuck on a worker, yet timers and other tasks on the loop go on.
    const bool slept = co_await env.SleepFor(milliseconds(20));
    const bool ok = slept && !put_done;
    g.Open();
    (void)co_await writer.Join();
    co_return ok&& put_done;
  };
  EXPECT_TRUE(Run(main(env_, *store_, gate)));
}

TEST_F(FileStoreTest, DestroyingTheStoreWithOperationsInFlightIsSafe) {
  Gate gate;
  FileStoreOptions options;
  options.io_threads = 1;
  options.before_io_for_test = gate.Hook();
  Open(options);
  auto main = [](Env& env, std::unique_ptr<FileStore>& store, Gate& g) -> Task<std::vector<Code>> {
    std::vector<Code> codes(3, Code::kOk);
    std::vector<TaskHandle> handles;
    CallOptions call{std::chrono::seconds(20)};
    handles.push_back(env.Spawn(
        [](FileStore& s, Code* out, CallOptions c) -> Task<void> {
          *out = (co_await s.Put("running", "v", Precondition::None(), c)).code();
        }(*store, &codes[0], call),
        "running"));
    handles.push_back(env.Spawn(
        [](FileStore& s, Code* out, CallOptions c) -> Task<void> {
          *out = (co_await s.Put("queued", "v", Precondition::None(), c)).code();
        }(*store, &codes[1], call),
        "queued put"));
    handles.push_back(env.Spawn(
        [](FileStore& s, Code* out, CallOptions c) -> Task<void> {
          *out = (co_await s.Get("queued", c)).code();
        }(*store, &codes[2], call),
        "queued get"));
    co_await env.SleepFor(milliseconds(1));
    g.WaitEntered(1);
    std::thread opener([&g] {
      std::this_thread::sleep_for(milliseconds(50));
      g.Open();
    });
    store.reset();  // waits for the running put, drops the queued calls
    opener.join();
    for (auto& h : handles) (void)co_await h.Join();
    co_return codes;
  };
  auto codes = Run(main(env_, store_, gate));
  EXPECT_EQ(codes[0], Code::kOk);  // completed after the store was gone
  EXPECT_EQ(codes[1], Code::kRetryable);
  EXPECT_EQ(codes[2], Code::kRetryable);
  Open();
  EXPECT_TRUE(Get("running").ok());
  EXPECT_EQ(Get("queued").code(), Code::kNotFound);  // a dropped write was never applied
}

TEST_F(FileStoreTest, AFullQueueFailsFastAsRetryable) {
  Gate gate;
  FileStoreOptions options;
  options.io_threads = 1;
  options.max_queued_ops = 1;
  options.before_io_for_test = gate.Hook();
  Open(options);
  auto main = [](Env& env, FileStore& store, Gate& g) -> Task<std::vector<Code>> {
    std::vector<Code> codes(3, Code::kCancelled);
    std::vector<TaskHandle> handles;
    for (int i = 0; i < 2; ++i) {
      handles.push_back(env.Spawn(
          [](FileStore& s, Code* out, int n) -> Task<void> {
            *out =
                (co_await s.Put("q" + std::to_string(n), "v", Precondition::None(), CallOptions{}))
                    .code();
          }(store, &codes[i], i),
          "put"));
      co_await env.SleepFor(milliseconds(1));
      if (i == 0) g.WaitEntered(1);  // the first is on the worker, the queue empty
    }
    codes[2] = (co_await store.Put("q2", "v", Precondition::None(), CallOptions{})).code();
    g.Open();
    for (auto& h : handles) (void)co_await h.Join();
    co_return codes;
  };
  auto codes = Run(main(env_, *store_, gate));
  EXPECT_EQ(codes, (std::vector<Code>{Code::kOk, Code::kOk, Code::kRetryable}));
}

// ---- Figures (printed; the assertion is only a sanity bound).

TEST_F(FileStoreTest, PutLatencyFigures) {
  auto measure = [&](bool fsync, int concurrency, int per_writer) {
    FileStoreOptions options;
    options.fsync = fsync;
    Open(options);
    auto writer = [](FileStore& s, Env& env, int w, int n,
                     std::vector<double>* latencies_us) -> Task<void> {
      const std::string body(4096, 'p');
      for (int i = 0; i < n; ++i) {
        auto t0 = env.MonoNow();
        auto v = co_await s.Put("bench/" + std::to_string(w) + "/" + std::to_string(i), body,
                                Precondition::IfNoneMatchAny(), CallOptions{});
        WK_CHECK(v.ok(), v.status().ToString());
        latencies_us->push_back(
            std::chrono::duration<double, std::micro>(env.MonoNow() - t0).count());
      }
    };
    auto main = [&](int c, int n, std::vector<double>* lat) -> Task<void> {
      std::vector<TaskHandle> hs;
      for (int w = 0; w < c; ++w) hs.push_back(env_.Spawn(writer(*store_, env_, w, n, lat), "w"));
      for (auto& h : hs) (void)co_await h.Join();
    };
    std::vector<double> latencies;
    auto t0 = env_.MonoNow();
    Run(main(concurrency, per_writer, &latencies));
    const double seconds = ToSeconds(env_.MonoNow() - t0);
    std::sort(latencies.begin(), latencies.end());
    std::printf(
        "put 4 KiB, If-None-Match, fsync=%d, concurrency %2d, io_threads 4: "
        "p50 %7.0f us  p99 %7.0f us  %6.0f puts/s (%zu puts)\n",
        fsync, concurrency, latencies[latencies.size() / 2], latencies[latencies.size() * 99 / 100],
        latencies.size() / seconds, latencies.size());
    store_.reset();
    fs::remove_all(dir_ + "/objects");
    return latencies[latencies.size() / 2];
  };
  std::printf("setup: %s, build with %s\n", dir_.c_str(),
#if defined(__SANITIZE_ADDRESS__)
              "ASan/UBSan (debug preset)"
#else
              "no sanitizers"
#endif
  );
  const double p50 = measure(true, 1, 200);
  measure(true, 16, 25);
  measure(false, 1, 200);
  EXPECT_LT(p50, 1e6);  // a second per put means something is badly wrong
}

}  // namespace
}  // namespace wk
