// The ObjectStore conformance suite: one set of behaviours, run against every backend
// (mem://, file://, sqlite://, and s3:// against a real S3 implementation — the local Ceph RGW that
// scripts/test.sh starts). The cluster's safety rests on exactly these behaviours, so a
// backend that fails any of them must not be used.
//
// The S3 run needs WASMKEEP_S3_ENDPOINT, WASMKEEP_S3_BUCKET, AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY; without them it is skipped, unless WASMKEEP_REQUIRE_S3=1 (set by
// the test script) turns the skip into a failure so CI can never pass without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "store/open_store.h"

namespace wk {
namespace {

struct Backend {
  std::string name;
  // Returns the URL, or nullopt to skip (with the reason in skip_reason).
  std::function<std::optional<std::string>(std::string* skip_reason)> url;
};

// Test names and failure messages show the backend's name, not its bytes.
void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

std::string TempDir() {
  auto base = std::filesystem::temp_directory_path() / "wasmkeep-conformance";
  std::filesystem::create_directories(base);
  std::string tmpl = (base / "XXXXXX").string();
  WK_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
  return tmpl;
}

std::optional<std::string> S3UrlFromEnv(std::string* why) {
  auto endpoint = ProcessGetEnv("WASMKEEP_S3_ENDPOINT");
  auto bucket = ProcessGetEnv("WASMKEEP_S3_BUCKET");
  if (!endpoint || !bucket) {
    *why = "WASMKEEP_S3_ENDPOINT / WASMKEEP_S3_BUCKET not set (scripts/test.sh starts RGW)";
    return std::nullopt;
  }
  std::string region = ProcessGetEnv("WASMKEEP_S3_REGION").value_or("us-east-1");
  // RGW refuses a quoted ETag in If-Match (docs/storage-backends.md, "Ceph RGW quirks"); AWS
  // accepts both.
  return "s3://" + *bucket + "?endpoint=" + *endpoint + "&region=" + region +
         "&if_match_quoted=false";
}

const std::vector<Backend>& Backends() {
  static const std::vector<Backend> backends = {
      {"mem", [](std::string*) -> std::optional<std::string> { return "mem://"; }},
      {"file", [](std::string*) -> std::optional<std::string> { return "file://" + TempDir(); }},
      {"sqlite", [](std::string*) -> std::optional<std::string> { return "sqlite://" + TempDir(); }},
      {"s3", S3UrlFromEnv},
  };
  return backends;
}

class ConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string why;
    auto url = GetParam().url(&why);
    if (!url) {
      if (ProcessGetEnv("WASMKEEP_REQUIRE_S3").value_or("") == "1") {
        FAIL() << "backend " << GetParam().name << " is required but unavailable: " << why;
      }
      GTEST_SKIP() << why;
    }
    auto store = OpenStore(env_, *url);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    // Every test works under its own prefix, so the S3 bucket can be shared by runs.
    prefix_ = "conformance/" + env_.RandomHex(8) + "/";
  }

  template <typename T>
  T Run(Task<T> task) {
    return env_.RunMain(std::move(task));
  }
  std::string K(const std::string& name) const { return prefix_ + name; }

  Result<Version> Put(const std::string& key, std::string body, Precondition c) {
    return Run(store_->Put(key, std::move(body), std::move(c), call_));
  }
  Result<GetOutput> Get(const std::string& key) { return Run(store_->Get(key, call_)); }

  // Lists every key under prefix with the given page size, following continuations.
  std::vector<std::string> ListAll(const std::string& prefix, int page_size,
                                   const std::string& start_after = "") {
    std::vector<std::string> keys;
    ListOptions options;
    options.prefix = prefix;
    options.page_size = page_size;
    options.start_after = start_after;
    for (int pages = 0; pages < 10'000; ++pages) {
      auto page = Run(store_->List(options, call_));
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      EXPECT_LE(static_cast<int>(page->entries.size()), page_size);
      for (auto& e : page->entries) keys.push_back(e.key);
      if (!page->next_continuation) break;
      options.continuation = *page->next_continuation;
    }
    return keys;
  }

  RealEnv env_;
  std::unique_ptr<ObjectStore> store_;
  std::string prefix_;
  CallOptions call_{std::chrono::seconds(20)};
};

TEST_P(ConformanceTest, PutGetHeadRoundTrip) {
  auto v = Put(K("a"), "hello", Precondition::None());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_FALSE(v->empty());
  auto g = Get(K("a"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->body, "hello");
  EXPECT_EQ(g->version, *v);
  auto h = Run(store_->Head(K("a"), call_));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->version, *v);
  EXPECT_EQ(h->size, 5u);
}

TEST_P(ConformanceTest, MissingKeyIsNotFound) {
  EXPECT_EQ(Get(K("nope")).code(), Code::kNotFound);
  EXPECT_EQ(Run(store_->Head(K("nope"), call_)).code(), Code::kNotFound);
}

TEST_P(ConformanceTest, CreateOnlyRefusesAnExistingKey) {
  ASSERT_TRUE(Put(K("c"), "first", Precondition::IfNoneMatchAny()).ok());
  auto second = Put(K("c"), "second", Precondition::IfNoneMatchAny());
  EXPECT_EQ(second.code(), Code::kPreconditionFailed) << second.status().ToString();
  EXPECT_EQ(Get(K("c"))->body, "first");
}

TEST_P(ConformanceTest, IfMatchCurrentStaleAndMissing) {
  auto v1 = Put(K("m"), "one", Precondition::IfNoneMatchAny());
  ASSERT_TRUE(v1.ok());
  auto v2 = Put(K("m"), "two", Precondition::IfMatch(*v1));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_NE(*v1, *v2);
  // A stale version is refused and changes nothing.
  auto stale = Put(K("m"), "three", Precondition::IfMatch(*v1));
  EXPECT_EQ(stale.code(), Code::kPreconditionFailed) << stale.status().ToString();
  EXPECT_EQ(Get(K("m"))->body, "two");
  // If-Match on a missing key is a failed precondition on every backend (AWS says 404,
  // RGW 412).
  auto missing = Put(K("never"), "x", Precondition::IfMatch(*v2));
  EXPECT_EQ(missing.code(), Code::kPreconditionFailed) << missing.status().ToString();
  EXPECT_EQ(Get(K("never")).code(), Code::kNotFound);
}

TEST_P(ConformanceTest, UnconditionalOverwriteMovesTheVersion) {
  // Different bodies: on S3 the version (ETag) is the body's MD5, so only a write of
  // different bytes is guaranteed a new version (see object_store.h).
  auto v1 = Put(K("o"), "a", Precondition::None());
  auto v2 = Put(K("o"), "b", Precondition::None());
  ASSERT_TRUE(v1.ok() && v2.ok());
  EXPECT_NE(*v1, *v2);
}

// N writers race to create one key: exactly one wins.
TEST_P(ConformanceTest, ConcurrentCreateOnlyHasExactlyOneWinner) {
  constexpr int kWriters = 16;
  auto race = [](ObjectStore* store, std::string key, CallOptions call, Env* env) -> Task<std::vector<Code>> {
    std::vector<Code> codes(kWriters, Code::kCancelled);
    std::vector<TaskHandle> handles;
    for (int i = 0; i < kWriters; ++i) {
      handles.push_back(env->Spawn([](ObjectStore* s, std::string k, int n, Code* out, CallOptions c) -> Task<void> {
        *out = (co_await s->Put(k, "writer " + std::to_string(n), Precondition::IfNoneMatchAny(), c)).code();
      }(store, key, i, &codes[i], call), "writer"));
    }
    for (auto& h : handles) (void)co_await h.Join();
    co_return codes;
  };
  auto codes = Run(race(store_.get(), K("race"), call_, &env_));
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), Code::kPreconditionFailed), kWriters - 1);
  auto g = Get(K("race"));
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->body.starts_with("writer "));
}

// N writers race to replace one version: exactly one wins, and no loser's write lands.
// A loser may hear kUnknownOutcome instead of kPreconditionFailed: Ceph RGW answers some
// of the losers of a concurrent If-Match race with a 5xx, which a write must treat as
// "may have been applied" (object_store.h). So the final body is checked to be the
// winner's: an unknown that had landed would show there.
TEST_P(ConformanceTest, ConcurrentIfMatchHasExactlyOneWinner) {
  constexpr int kWriters = 16;
  auto base = Put(K("cas"), "base", Precondition::IfNoneMatchAny());
  ASSERT_TRUE(base.ok());
  auto race = [](ObjectStore* store, std::string key, Version v, CallOptions call, Env* env) -> Task<std::vector<Status>> {
    std::vector<Status> results(kWriters, Cancelled("not run"));
    std::vector<TaskHandle> handles;
    for (int i = 0; i < kWriters; ++i) {
      handles.push_back(env->Spawn([](ObjectStore* s, std::string k, Version ver, int n, Status* out, CallOptions c) -> Task<void> {
        std::string body = "writer " + std::to_string(n);
        auto r = co_await s->Put(std::move(k), std::move(body), Precondition::IfMatch(std::move(ver)), c);
        *out = r.ok() ? Status::Ok() : r.status();
      }(store, key, v, i, &results[i], call), "writer"));
    }
    for (auto& h : handles) (void)co_await h.Join();
    co_return results;
  };
  auto results = Run(race(store_.get(), K("cas"), *base, call_, &env_));
  std::string seen;
  int ok = 0, refused = 0, unknown = 0, winner = -1;
  for (int i = 0; i < kWriters; ++i) {
    const Status& st = results[static_cast<std::size_t>(i)];
    seen += st.ToString() + "\n";
    if (st.ok()) {
      ++ok;
      winner = i;
    } else if (st.code() == Code::kPreconditionFailed) {
      ++refused;
    } else if (st.code() == Code::kUnknownOutcome) {
      ++unknown;
    }
  }
  EXPECT_EQ(ok, 1) << seen;
  EXPECT_EQ(refused + unknown, kWriters - 1) << seen;
  if (GetParam().name != "s3") {
    EXPECT_EQ(unknown, 0) << "only S3 servers may answer a loser with a 5xx\n" << seen;
  }
  auto g = Get(K("cas"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->body, "writer " + std::to_string(winner)) << "a loser's write landed";
}

TEST_P(ConformanceTest, DeleteThenRecreateNeverReusesAVersion) {
  std::set<std::string> seen;
  for (int round = 0; round < 3; ++round) {
    auto v = Put(K("d"), "body " + std::to_string(round), Precondition::IfNoneMatchAny());
    ASSERT_TRUE(v.ok()) << "round " << round << ": " << v.status().ToString();
    EXPECT_TRUE(seen.insert(v->token()).second) << "version " << v->token() << " reused";
    ASSERT_TRUE(Run(store_->Delete(K("d"), Precondition::None(), call_)).ok());
    EXPECT_EQ(Get(K("d")).code(), Code::kNotFound);
  }
}

TEST_P(ConformanceTest, DeleteOfMissingKeyIsOk) {
  EXPECT_TRUE(Run(store_->Delete(K("ghost"), Precondition::None(), call_)).ok());
}

TEST_P(ConformanceTest, ConditionalDeleteWhereSupported) {
  if (!store_->SupportsConditionalDelete()) {
    auto v = Put(K("cd"), "x", Precondition::None());
    ASSERT_TRUE(v.ok());
    // Refused up front rather than silently applied unconditionally.
    EXPECT_EQ(Run(store_->Delete(K("cd"), Precondition::IfMatch(*v), call_)).code(),
              Code::kInvalidArgument);
    return;
  }
  auto v1 = Put(K("cd"), "x", Precondition::None());
  auto v2 = Put(K("cd"), "y", Precondition::None());
  ASSERT_TRUE(v1.ok() && v2.ok());
  EXPECT_EQ(Run(store_->Delete(K("cd"), Precondition::IfMatch(*v1), call_)).code(),
            Code::kPreconditionFailed);
  EXPECT_TRUE(Get(K("cd")).ok());
  EXPECT_TRUE(Run(store_->Delete(K("cd"), Precondition::IfMatch(*v2), call_)).ok());
  EXPECT_EQ(Get(K("cd")).code(), Code::kNotFound);
  EXPECT_EQ(Run(store_->Delete(K("cd"), Precondition::IfMatch(*v2), call_)).code(),
            Code::kPreconditionFailed);
}

TEST_P(ConformanceTest, EmptyAndLargeBodies) {
  ASSERT_TRUE(Put(K("empty"), "", Precondition::None()).ok());
  auto e = Get(K("empty"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->body, "");
  std::string big(8 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 3);
  ASSERT_TRUE(Put(K("big"), big, Precondition::IfNoneMatchAny()).ok());
  auto b = Get(K("big"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->body.size(), big.size());
  EXPECT_TRUE(b->body == big);
  EXPECT_EQ(Run(store_->Head(K("big"), call_))->size, big.size());
}

TEST_P(ConformanceTest, ListIsByteOrderedAndPaginates) {
  // Keys that catch a store ordering by path component instead of by bytes ("a-c" sorts
  // before "a/b"), or mangling unusual characters.
  std::vector<std::string> names = {
      "a/b",  "a-c",   "a/b/c", "a b",     "a%2Fb",   "a+b", "\xc3\xbc",  "..",
      "z",    "a/.",   "a//b",  "a&amp;", "a<b>",    "~t",  "a?x=1#f",  "0",
      "a/b-", "a/b0",  "A",     "a\"q'",  "a\\b",    "a*",  "a=b;c",   "a,b"};
  names.push_back(std::string(1024 - prefix_.size() - 5, 'L') + "/tail");  // a full-length key
  std::vector<std::string> keys;
  for (auto& n : names) keys.push_back(K(n));
  for (auto& k : keys) ASSERT_TRUE(Put(k, k, Precondition::None()).ok()) << k;
  std::vector<std::string> expected = keys;
  std::sort(expected.begin(), expected.end());
  for (int page : {1, 2, 7, 1000}) EXPECT_EQ(ListAll(prefix_, page), expected) << "page " << page;

  // The listed versions and sizes are the stored ones.
  ListOptions one;
  one.prefix = K("a/b");
  one.page_size = 1;
  auto first = Run(store_->List(one, call_));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->entries.size(), 1u);
  EXPECT_EQ(first->entries[0].key, K("a/b"));
  EXPECT_EQ(first->entries[0].size, K("a/b").size());
  EXPECT_EQ(first->entries[0].version, Get(K("a/b"))->version);
  EXPECT_TRUE(first->next_continuation.has_value());

  // Prefix and start-after.
  std::vector<std::string> under_a;
  for (auto& k : expected)
    if (k.starts_with(K("a/"))) under_a.push_back(k);
  EXPECT_EQ(ListAll(K("a/"), 2), under_a);
  std::vector<std::string> after;
  for (auto& k : expected)
    if (k > K("a/b")) after.push_back(k);
  EXPECT_EQ(ListAll(prefix_, 3, K("a/b")), after);
  EXPECT_TRUE(ListAll(K("nothing-here/"), 10).empty());
}

// A listing reports when each object was last written, by the bucket's clock: here the
// bucket is this machine (mem://, file://, sqlite://) or a server whose clock is close to it
// (2 s either way), and S3 may report whole seconds (1 s more below). An overwrite never
// reports an earlier time than the write before it.
TEST_P(ConformanceTest, ListingReportsWhenEachObjectWasWritten) {
  constexpr std::int64_t kSkewMs = 2000, kTruncationMs = 1000;
  auto modified = [&](const std::string& key) -> std::int64_t {
    ListOptions options;
    options.prefix = key;
    auto page = Run(store_->List(options, call_));
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok() || page->entries.empty() || page->entries[0].key != key) {
      ADD_FAILURE() << key << " is not listed";
      return 0;
    }
    return page->entries[0].modified_ms;
  };
  const std::int64_t before = ToUnixMs(env_.WallNow());
  ASSERT_TRUE(Put(K("t"), "first", Precondition::None()).ok());
  const std::int64_t after = ToUnixMs(env_.WallNow());
  const std::int64_t first = modified(K("t"));
  EXPECT_GE(first, before - kSkewMs - kTruncationMs);
  EXPECT_LE(first, after + kSkewMs);

  (void)Run(env_.SleepFor(std::chrono::milliseconds(20)));
  ASSERT_TRUE(Put(K("t"), "second", Precondition::None()).ok());
  const std::int64_t second = modified(K("t"));
  EXPECT_GE(second, first);
  EXPECT_LE(second, ToUnixMs(env_.WallNow()) + kSkewMs);
}

TEST_P(ConformanceTest, InvalidInputIsRefusedBeforeAnyRequest) {
  EXPECT_EQ(Put("", "x", Precondition::None()).code(), Code::kInvalidArgument);
  EXPECT_EQ(Put(std::string(1025, 'k'), "x", Precondition::None()).code(), Code::kInvalidArgument);
  EXPECT_EQ(Put(K("bad\nkey"), "x", Precondition::None()).code(), Code::kInvalidArgument);
  EXPECT_EQ(Put(K("bad\xff"), "x", Precondition::None()).code(), Code::kInvalidArgument);
  EXPECT_EQ(Get("").code(), Code::kInvalidArgument);
  ListOptions bad;
  bad.page_size = 0;
  EXPECT_EQ(Run(store_->List(bad, call_)).code(), Code::kInvalidArgument);
  bad.page_size = 1001;
  EXPECT_EQ(Run(store_->List(bad, call_)).code(), Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param.name; });

TEST(OpenStoreTest, BadUrlsGiveOneLineErrors) {
  RealEnv env;
  auto unknown = OpenStore(env, "ftp://x");
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("ftp"), std::string::npos);
  EXPECT_EQ(OpenStore(env, "file://").code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenStore(env, "sqlite://").code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenStore(env, "mem://x").code(), Code::kInvalidArgument);
  auto no_endpoint = OpenStore(env, "s3://bucket", [](const char*) { return std::nullopt; });
  EXPECT_EQ(no_endpoint.code(), Code::kInvalidArgument);
  EXPECT_NE(no_endpoint.status().message().find("endpoint"), std::string::npos)
      << no_endpoint.status().message();
  auto no_creds = OpenStore(env, "s3://bucket?endpoint=http://127.0.0.1:9", [](const char*) {
    return std::optional<std::string>();
  });
  EXPECT_EQ(no_creds.code(), Code::kInvalidArgument);
  EXPECT_NE(no_creds.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos)
      << no_creds.status().message();
  // A directory path under a regular file cannot be created, even by root.
  auto unwritable = OpenStore(env, "file:///etc/hostname/bucket");
  EXPECT_EQ(unwritable.code(), Code::kFatal) << unwritable.status().ToString();
  EXPECT_NE(unwritable.status().message().find("/etc/hostname/bucket"), std::string::npos);
  auto unwritable_sqlite = OpenStore(env, "sqlite:///etc/hostname/bucket");
  EXPECT_EQ(unwritable_sqlite.code(), Code::kFatal) << unwritable_sqlite.status().ToString();
}

}  // namespace
}  // namespace wk
