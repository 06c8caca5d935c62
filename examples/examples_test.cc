// The example actors (examples/*/), built to WK_ACTORS_DIR by the wk_actors target, run
// through the host's test harness (actor/testing.h): each test deploys one example and
// checks the HTTP behaviour its README promises, bad requests included.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "actor/testing.h"

#ifndef WK_ACTORS_DIR
#error "WK_ACTORS_DIR must name the directory of the built actors (examples/CMakeLists.txt)"
#endif

namespace wk {
namespace {

using actor::testing::Harness;
using actor::testing::MakeRequest;
using actor::testing::TestRequest;
using actor::testing::TestResponse;

std::string ActorWasm(const std::string& name) { return std::string(WK_ACTORS_DIR) + "/" + name + ".wasm"; }


// Calls the actor; a failed call (the event failed, or the harness did) fails the test and
// returns status 0, which the caller's next expectation reports too.
TestResponse Send(Harness& harness, const std::string& actor, TestRequest req) {
  std::string what = actor + " " + req.method + " " + req.path + (req.query.empty() ? "" : "?" + req.query);
  Result<TestResponse> result = harness.Call(actor, std::move(req));
  EXPECT_TRUE(result.ok()) << what << ": " << result.status().ToString();
  if (!result.ok()) return TestResponse{};
  return std::move(result).value();
}

// ---- counter ----

class CounterTest : public ::testing::Test {
 protected:
  void SetUp() override { harness_.Deploy("counter", ActorWasm("counter")); }
  TestResponse Do(const std::string& actor, const std::string& method, const std::string& path) {
    return Send(harness_, actor, MakeRequest(method, path));
  }
  Harness harness_;
};

TEST_F(CounterTest, StartsAtZero) {
  TestResponse res = Do("acme/counter/a", "GET", "/");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "0\n");
}

TEST_F(CounterTest, IncrementsAnswerTheNewValueAndGetShowsIt) {
  for (int expected = 1; expected <= 3; ++expected) {
    TestResponse res = Do("acme/counter/a", "POST", "/increment");
    EXPECT_EQ(res.status, 200);
    EXPECT_EQ(res.body, std::to_string(expected) + "\n");
  }
  EXPECT_EQ(Do("acme/counter/a", "GET", "/").body, "3\n");
  EXPECT_EQ(Do("acme/counter/a", "GET", "").body, "3\n");           // any GET
  EXPECT_EQ(Do("acme/counter/a", "GET", "/whatever").body, "3\n");  // any GET
}

TEST_F(CounterTest, TwoCountersAreIndependent) {
  for (int i = 0; i < 3; ++i) Do("acme/counter/a", "POST", "/increment");
  EXPECT_EQ(Do("acme/counter/b", "GET", "/").body, "0\n");
  EXPECT_EQ(Do("acme/counter/b", "POST", "/increment").body, "1\n");
  EXPECT_EQ(Do("acme/counter/a", "GET", "/").body, "3\n");
  EXPECT_EQ(Do("acme/counter/b", "GET", "/").body, "1\n");
}

TEST_F(CounterTest, OtherMethodsAre405AndOtherPostPaths404) {
  TestResponse put = Do("acme/counter/a", "PUT", "/increment");
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.header("Allow"), "GET, POST");
  EXPECT_EQ(Do("acme/counter/a", "DELETE", "/").status, 405);
  EXPECT_EQ(Do("acme/counter/a", "POST", "/decrement").status, 404);
  EXPECT_EQ(Do("acme/counter/a", "GET", "/").body, "0\n");  // none of them counted
}

// ---- kv ----

class KvTest : public ::testing::Test {
 protected:
  void SetUp() override { harness_.Deploy("kv", ActorWasm("kv")); }
  TestResponse Do(const std::string& method, const std::string& path, const std::string& body = "",
                  const std::string& query = "") {
    return Send(harness_, "acme/kv/store", MakeRequest(method, path, query, body));
  }
  Harness harness_;
};

TEST_F(KvTest, PutThenGet) {
  EXPECT_EQ(Do("PUT", "/color", "blue").status, 200);
  TestResponse res = Do("GET", "/color");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "blue");
  EXPECT_EQ(Do("PUT", "/color", "green").status, 200);  // overwrite
  EXPECT_EQ(Do("GET", "/color").body, "green");
}

TEST_F(KvTest, ValuesAreBinarySafeAndMayBeEmpty) {
  const std::string binary("a\0b\xff\n", 5);
  Do("PUT", "/bin", binary);
  EXPECT_EQ(Do("GET", "/bin").body, binary);
  Do("PUT", "/empty", "");
  TestResponse res = Do("GET", "/empty");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "");
}

TEST_F(KvTest, SlashesBelongToTheKey) {
  Do("PUT", "/a/b", "nested");
  EXPECT_EQ(Do("GET", "/a/b").body, "nested");
  EXPECT_EQ(Do("GET", "/a").status, 404);
}

TEST_F(KvTest, MissingKeyIs404) { EXPECT_EQ(Do("GET", "/nope").status, 404); }

TEST_F(KvTest, DeleteIs204ThenTheKeyIsGone) {
  Do("PUT", "/k", "v");
  EXPECT_EQ(Do("DELETE", "/k").status, 204);
  EXPECT_EQ(Do("GET", "/k").status, 404);
  EXPECT_EQ(Do("DELETE", "/k").status, 404);
}

TEST_F(KvTest, EmptyKeyIs400ForPutAndDelete) {
  EXPECT_EQ(Do("PUT", "/", "v").status, 400);
  EXPECT_EQ(Do("PUT", "", "v").status, 400);
  EXPECT_EQ(Do("DELETE", "/").status, 400);
  EXPECT_EQ(Do("GET", "/").body, "");  // nothing was stored
}

TEST_F(KvTest, ListsKeysByPrefixInByteOrder) {
  for (const char* key : {"/b", "/ab", "/a", "/a/x", "/c"}) Do("PUT", key, "v");
  EXPECT_EQ(Do("GET", "/", "", "prefix=a").body, "a\na/x\nab\n");
  EXPECT_EQ(Do("GET", "/", "", "prefix=a%2F").body, "a/x\n");  // the prefix is URL-decoded
  EXPECT_EQ(Do("GET", "/", "", "prefix=zz").body, "");
  EXPECT_EQ(Do("GET", "/", "", "prefix=").body, "a\na/x\nab\nb\nc\n");
  EXPECT_EQ(Do("GET", "/").body, "a\na/x\nab\nb\nc\n");
  EXPECT_EQ(Do("GET", "", "", "prefix=a").body, "a\na/x\nab\n");  // empty path lists too
}

TEST_F(KvTest, ListsMoreKeysThanOnePageWithLargeValues) {
  // 100 keys with values up to 99 KiB: the listing pages through them (32 per host call).
  const std::string big(99 * 1024, 'v');
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    std::string key = "p" + std::string(i < 10 ? "00" : i < 100 ? "0" : "") + std::to_string(i);
    Do("PUT", "/" + key, big.substr(0, static_cast<size_t>(i) * 1024));
    expected += key + "\n";
  }
  Do("PUT", "/q", "after the prefix");
  TestResponse res = Do("GET", "/", "", "prefix=p");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, expected);
}

TEST_F(KvTest, OtherMethodsAre405) {
  TestResponse res = Do("POST", "/k", "v");
  EXPECT_EQ(res.status, 405);
  EXPECT_EQ(res.header("Allow"), "GET, PUT, DELETE");
}

// ---- chat ----

class ChatTest : public ::testing::Test {
 protected:
  void SetUp() override { harness_.Deploy("chat", ActorWasm("chat")); }
  TestResponse Do(const std::string& method, const std::string& query = "", const std::string& body = "",
                  const std::string& path = "/messages") {
    return Send(harness_, "acme/chat/lobby", MakeRequest(method, path, query, body));
  }
  Harness harness_;
};

TEST_F(ChatTest, AppendsNumberMessagesFromOne) {
  EXPECT_EQ(Do("POST", "", "hello").body, "1\n");
  EXPECT_EQ(Do("POST", "", "how are you").body, "2\n");
  EXPECT_EQ(Do("POST", "", "fine").body, "3\n");
}

TEST_F(ChatTest, SinceReturnsLaterMessagesInOrder) {
  Do("POST", "", "hello");
  Do("POST", "", "how are you");
  Do("POST", "", "fine");
  TestResponse res = Do("GET", "since=1");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "2\thow are you\n3\tfine\n");
  EXPECT_EQ(Do("GET").body, "1\thello\n2\thow are you\n3\tfine\n");  // since defaults to 0
  EXPECT_EQ(Do("GET", "since=3").body, "");
  EXPECT_EQ(Do("GET", "since=1000").body, "");
}

TEST_F(ChatTest, OrderHoldsPastNineMessages) {
  // Zero-padded keys: message 10 lists after 9, not after 1.
  for (int i = 1; i <= 12; ++i) Do("POST", "", "m" + std::to_string(i));
  EXPECT_EQ(Do("GET", "since=8").body, "9\tm9\n10\tm10\n11\tm11\n12\tm12\n");
}

TEST_F(ChatTest, BadSinceIs400) {
  for (const char* query : {"since=abc", "since=-1", "since=", "since=1x", "since=99999999999999999999"}) {
    EXPECT_EQ(Do("GET", query).status, 400) << query;
  }
}

TEST_F(ChatTest, BadMessagesAre400AndStoreNothing) {
  EXPECT_EQ(Do("POST", "", "").status, 400);
  EXPECT_EQ(Do("POST", "", "two\nlines").status, 400);
  EXPECT_EQ(Do("POST", "", "ok").body, "1\n");
}

TEST_F(ChatTest, OtherPathsAre404AndMethods405) {
  EXPECT_EQ(Do("GET", "", "", "/other").status, 404);
  EXPECT_EQ(Do("DELETE").status, 405);
}

TEST_F(ChatTest, RoomsAreIndependent) {
  Do("POST", "", "in the lobby");
  TestResponse other = Send(harness_, "acme/chat/kitchen", MakeRequest("POST", "/messages", "", "in the kitchen"));
  EXPECT_EQ(other.body, "1\n");
  EXPECT_EQ(Do("GET").body, "1\tin the lobby\n");
}

// ---- ratelimit ----

class RateLimitTest : public ::testing::Test {
 protected:
  void SetUp() override { harness_.Deploy("ratelimit", ActorWasm("ratelimit")); }
  TestResponse Take(const std::string& actor = "acme/ratelimit/client-1") {
    return Send(harness_, actor, MakeRequest("POST", "/take"));
  }
  Harness harness_;
};

TEST_F(RateLimitTest, TenTakesThenRetryAfterThenRefill) {
  for (int left = 9; left >= 0; --left) {
    TestResponse res = Take();
    EXPECT_EQ(res.status, 200);
    EXPECT_EQ(res.body, std::to_string(left) + "\n");
  }
  TestResponse limited = Take();
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.header("Retry-After"), "1");

  harness_.AdvanceClock(2000);  // 1 token per second: two more
  EXPECT_EQ(Take().status, 200);
  EXPECT_EQ(Take().status, 200);
  EXPECT_EQ(Take().status, 429);
}

TEST_F(RateLimitTest, RefillStopsAtCapacity) {
  for (int i = 0; i < 10; ++i) Take();
  harness_.AdvanceClock(3'600'000);
  TestResponse now = Send(harness_, "acme/ratelimit/client-1", MakeRequest("GET", "/"));
  EXPECT_EQ(now.status, 200);
  EXPECT_EQ(now.body, "10\n");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Take().status, 200);
  EXPECT_EQ(Take().status, 429);
}

TEST_F(RateLimitTest, BucketsAreIndependent) {
  for (int i = 0; i < 11; ++i) Take("acme/ratelimit/client-1");
  EXPECT_EQ(Take("acme/ratelimit/client-2").body, "9\n");
}

TEST_F(RateLimitTest, ConfigSetsCapacityAndRefill) {
  const std::string actor = "acme/ratelimit/small";
  TestResponse config = Send(harness_, actor, MakeRequest("POST", "/config", "capacity=3&refill_per_sec=2"));
  EXPECT_EQ(config.status, 200);
  for (int left = 2; left >= 0; --left) EXPECT_EQ(Take(actor).body, std::to_string(left) + "\n");
  EXPECT_EQ(Take(actor).status, 429);
  harness_.AdvanceClock(500);  // 2 per second: one token back after 500 ms
  EXPECT_EQ(Take(actor).status, 200);
  EXPECT_EQ(Take(actor).status, 429);
}

TEST_F(RateLimitTest, BadConfigIs400) {
  for (const char* query : {"capacity=0&refill_per_sec=1", "capacity=3", "capacity=x&refill_per_sec=1",
                            "capacity=3&refill_per_sec=1000001"}) {
    EXPECT_EQ(Send(harness_, "acme/ratelimit/c", MakeRequest("POST", "/config", query)).status, 400) << query;
  }
}

TEST_F(RateLimitTest, WrongMethodIs405AndUnknownPath404) {
  EXPECT_EQ(Send(harness_, "acme/ratelimit/c", MakeRequest("GET", "/take")).status, 405);
  EXPECT_EQ(Send(harness_, "acme/ratelimit/c", MakeRequest("POST", "/give")).status, 404);
}

}  // namespace
}  // namespace wk
