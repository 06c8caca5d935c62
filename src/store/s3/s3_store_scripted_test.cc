// S3Store against the scripted HTTP server: the replies and faults a real server rarely
// or never produces (409 ConditionalRequestConflict, 503 SlowDown, lost replies, stalls,
// AWS's 404-for-If-Match), and the exact shape of every request (signing, headers).
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <map>

#include "env/real_env.h"
#include "net/testing/scripted_http_server.h"
#include "store/bucket_check.h"
#include "store/counting_store.h"
#include "store/s3/s3_store.h"
#include "store/s3/sigv4.h"

namespace wk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kAccessKey[] = "AKIDTEST";
constexpr char kSecretKey[] = "test/secret+key";

std::string PercentDecode(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

// What an S3 server does with a request: recompute the SigV4 signature from what arrived
// and compare. Also checks the payload hash against the body.
void ExpectValidSignature(const ReceivedRequest& r, const std::string& region = "us-east-1") {
  SCOPED_TRACE(r.method + " " + r.target);
  const std::string auth = r.Header("authorization");
  ASSERT_FALSE(auth.empty()) << "no Authorization header";
  const std::string date = r.Header("x-amz-date");
  ASSERT_EQ(date.size(), 16u) << "x-amz-date '" << date << "'";
  EXPECT_EQ(r.Header("x-amz-content-sha256"), Sha256Hex(r.body));
  const std::string scope = date.substr(0, 8) + "/" + region + "/s3/aws4_request";
  ASSERT_EQ(auth.rfind("AWS4-HMAC-SHA256 Credential=" + std::string(kAccessKey) + "/" + scope +
                           ",SignedHeaders=",
                       0),
            0u)
      << auth;
  const std::size_t sh = auth.find("SignedHeaders=") + 14;
  const std::size_t comma = auth.find(",Signature=", sh);
  ASSERT_NE(comma, std::string::npos) << auth;
  const std::string signed_names = auth.substr(sh, comma - sh);
  const std::string signature = auth.substr(comma + 11);

  SigV4Request req;
  req.method = r.method;
  req.canonical_uri = r.path;
  for (std::size_t start = 0; start < r.query.size();) {
    std::size_t amp = r.query.find('&', start);
    std::string pair = r.query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    std::size_t eq = pair.find('=');
    req.query.emplace_back(PercentDecode(pair.substr(0, eq)),
                           eq == std::string::npos ? "" : PercentDecode(pair.substr(eq + 1)));
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  for (std::size_t start = 0; start <= signed_names.size();) {
    std::size_t semi = signed_names.find(';', start);
    std::string name = signed_names.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
    EXPECT_TRUE(r.headers.count(name)) << "signed header " << name << " was not sent";
    req.headers.emplace_back(name, r.Header(name));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  const std::string payload_hash = r.Header("x-amz-content-sha256");
  req.payload_hash = payload_hash;
  auto sig = SignV4(req, {kAccessKey, kSecretKey, ""}, region, "s3", date);
  EXPECT_EQ(sig.signed_headers, signed_names);
  EXPECT_EQ(sig.signature, signature) << "the server would answer SignatureDoesNotMatch";
}

std::string ErrorXml(const std::string& code, const std::string& message) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + code + "</Code><Message>" +
         message + "</Message><RequestId>tx0</RequestId></Error>";
}

class S3StoreScriptedTest : public ::testing::Test {
 protected:
  // Every test: all requests signed correctly, every scripted request arrived.
  void TearDown() override {
    store_.reset();
    for (const auto& r : server_.received()) ExpectValidSignature(r, region_);
    server_.VerifyAllConsumed();
  }

  S3Store& Store(const std::function<void(S3Config&)>& tweak = {}) {
    S3Config cfg;
    cfg.bucket = "bkt";
    cfg.endpoint = server_.url();
    cfg.access_key = kAccessKey;
    cfg.secret_key = kSecretKey;
    // Short backoff keeps retry tests fast; the logic is the same.
    cfg.retry_base_delay = milliseconds(2);
    cfg.retry_max_delay = milliseconds(10);
    if (tweak) tweak(cfg);
    region_ = cfg.region;
    auto store = S3Store::Create(env_, cfg);
    WK_CHECK(store.ok(), store.status().ToString());
    store_ = std::move(store).value();
    return *store_;
  }

  template <typename T>
  T Run(Task<T> task) {
    return env_.RunMain(std::move(task));
  }

  // The calls the store made (method and path), in order.
  std::vector<std::string> Calls() const {
    std::vector<std::string> out;
    for (const auto& r : server_.received()) out.push_back(r.method + " " + r.path);
    return out;
  }

  RealEnv env_;
  ScriptedHttpServer server_{env_.context()};
  std::unique_ptr<S3Store> store_;
  std::string region_ = "us-east-1";
};

CallOptions Timeout(Duration d) {
  CallOptions o;
  o.timeout = d;
  return o;
}

TEST_F(S3StoreScriptedTest, PutSendsASignedPathStyleRequest) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/dir/a%20b%2Bc~").Respond(200, {{"ETag", "\"abc123\""}}).Check([](auto& r) {
    EXPECT_EQ(r.body, "hello");
    EXPECT_EQ(r.Header("if-none-match"), "*");
    EXPECT_EQ(r.Header("content-type"), "application/octet-stream");
    EXPECT_EQ(r.Header("x-amz-content-sha256"), Sha256Hex("hello"));
    const std::string auth = r.Header("authorization");
    EXPECT_NE(auth.find("SignedHeaders=content-type;host;if-none-match;x-amz-content-sha256;"
                        "x-amz-date,"),
              std::string::npos)
        << auth;
  });
  auto v = Run(store.Put("dir/a b+c~", "hello", Precondition::IfNoneMatchAny(), {}));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->token(), "abc123");  // the ETag without quotes
}

TEST_F(S3StoreScriptedTest, SessionTokenIsSentAndSigned) {
  auto& store = Store([](S3Config& c) { c.session_token = "TOKEN/xyz"; });
  server_.Expect("GET", "/bkt/k").Respond(200, {{"ETag", "\"e\""}}, "v").Check([](auto& r) {
    EXPECT_EQ(r.Header("x-amz-security-token"), "TOKEN/xyz");
    EXPECT_NE(r.Header("authorization").find("x-amz-security-token"), std::string::npos);
  });
  auto got = Run(store.Get("k", {}));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->body, "v");
  EXPECT_EQ(got->version.token(), "e");
}

TEST_F(S3StoreScriptedTest, IfMatchIsQuotedByDefault) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Respond(200, {{"ETag", "\"v2\""}}).Check([](auto& r) {
    EXPECT_EQ(r.Header("if-match"), "\"v1\"");
    EXPECT_NE(r.Header("authorization").find("if-match"), std::string::npos);
  });
  auto v = Run(store.Put("k", "x", Precondition::IfMatch(Version("v1")), {}));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->token(), "v2");
}

TEST_F(S3StoreScriptedTest, IfMatchIsUnquotedForRgw) {
  auto& store = Store([](S3Config& c) { c.if_match_quoted = false; });
  server_.Expect("PUT", "/bkt/k").Respond(200, {{"ETag", "\"v2\""}}).Check([](auto& r) {
    EXPECT_EQ(r.Header("if-match"), "v1");
  });
  EXPECT_TRUE(Run(store.Put("k", "x", Precondition::IfMatch(Version("v1")), {})).ok());
}

TEST_F(S3StoreScriptedTest, ConditionalRequestConflictIsRetriedInside) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Respond(
      409, {}, ErrorXml("ConditionalRequestConflict", "A conflicting operation is in progress"));
  server_.Expect("PUT", "/bkt/k").Respond(200, {{"ETag", "\"e1\""}});
  auto v = Run(store.Put("k", "x", Precondition::IfNoneMatchAny(), {}));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->token(), "e1");
  EXPECT_EQ(server_.received().size(), 2u);
}

TEST_F(S3StoreScriptedTest, SlowDownTwiceThenOk) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Respond(503, {}, ErrorXml("SlowDown", "Please reduce your request rate.")).Times(2);
  server_.Expect("PUT", "/bkt/k").Respond(200, {{"ETag", "\"e1\""}});
  auto v = Run(store.Put("k", "x", Precondition::None(), {}));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(server_.received().size(), 3u);
  // The retries reused the one keep-alive connection.
  EXPECT_EQ(server_.connections_accepted(), 1);
}

TEST_F(S3StoreScriptedTest, ServiceUnavailableForeverIsRetryableAfterBoundedAttempts) {
  auto& store = Store();
  server_.Expect("GET", "/bkt/k").Respond(503, {}, ErrorXml("SlowDown", "Reduce your rate")).Repeatedly();
  const MonoTime start = env_.MonoNow();
  auto got = Run(store.Get("k", Timeout(seconds(10))));
  EXPECT_EQ(got.code(), Code::kRetryable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("SlowDown"), std::string::npos);
  EXPECT_NE(got.status().message().find("after 6 attempts"), std::string::npos)
      << got.status().message();
  EXPECT_EQ(server_.received().size(), static_cast<std::size_t>(kS3MaxAttempts));
  EXPECT_LT(env_.MonoNow() - start, seconds(2));
}

TEST_F(S3StoreScriptedTest, RetriesStopAtTheDeadline) {
  // Backoff far longer than the deadline: after the first 503 there is no time for a
  // second attempt, and the call ends before its deadline rather than sleeping past it.
  auto& store = Store([](S3Config& c) {
    c.retry_base_delay = seconds(2);
    c.retry_max_delay = seconds(2);
  });
  server_.Expect("PUT", "/bkt/k").Respond(503).Repeatedly();
  const MonoTime start = env_.MonoNow();
  auto v = Run(store.Put("k", "x", Precondition::None(), Timeout(milliseconds(500))));
  EXPECT_EQ(v.code(), Code::kRetryable) << v.status().ToString();
  EXPECT_EQ(server_.received().size(), 1u);
  EXPECT_LT(env_.MonoNow() - start, milliseconds(500));
}

TEST_F(S3StoreScriptedTest, LostReplyOnPutIsUnknownAndNotRetried) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").DropAfterRequest();
  auto v = Run(store.Put("k", "x", Precondition::IfNoneMatchAny(), {}));
  EXPECT_EQ(v.code(), Code::kUnknownOutcome) << v.status().ToString();
  EXPECT_EQ(Calls(), std::vector<std::string>{"PUT /bkt/k"});  // exactly one PUT
}

TEST_F(S3StoreScriptedTest, TimeoutAfterSendingIsUnknownForWritesAndReads) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Hang();
  server_.Expect("GET", "/bkt/k").Delay(seconds(5)).Respond(200, {{"ETag", "\"e\""}}, "late");
  const MonoTime start = env_.MonoNow();
  auto v = Run(store.Put("k", "x", Precondition::None(), Timeout(milliseconds(200))));
  EXPECT_EQ(v.code(), Code::kUnknownOutcome) << v.status().ToString();
  EXPECT_NE(v.status().message().find("may have been applied"), std::string::npos);
  const Duration put_took = env_.MonoNow() - start;
  EXPECT_GE(put_took, milliseconds(190));
  EXPECT_LT(put_took, seconds(2));
  auto got = Run(store.Get("k", Timeout(milliseconds(200))));
  EXPECT_EQ(got.code(), Code::kUnknownOutcome) << got.status().ToString();
  EXPECT_EQ(Calls(), (std::vector<std::string>{"PUT /bkt/k", "GET /bkt/k"}));
}

TEST_F(S3StoreScriptedTest, RetryThenAmbiguousFailureIsUnknown) {
  // A 503 says "not applied"; the retry's lost reply does not: the outcome is unknown.
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Respond(503);
  server_.Expect("PUT", "/bkt/k").DropAfterRequest();
  auto v = Run(store.Put("k", "x", Precondition::IfMatch(Version("a")), {}));
  EXPECT_EQ(v.code(), Code::kUnknownOutcome) << v.status().ToString();
  EXPECT_EQ(server_.received().size(), 2u);
}

TEST_F(S3StoreScriptedTest, NotFoundOnIfMatchWriteIsPreconditionFailed) {
  auto& store = Store([](S3Config& c) { c.conditional_delete = true; });
  server_.Expect("PUT", "/bkt/k").Respond(404, {}, ErrorXml("NoSuchKey", "The specified key does not exist."));
  server_.Expect("PUT", "/bkt/k").Respond(412, {}, ErrorXml("PreconditionFailed", "At least one of the pre-conditions you specified did not hold"));
  server_.Expect("DELETE", "/bkt/k").Respond(404, {}, ErrorXml("NoSuchKey", "gone"));
  server_.Expect("DELETE", "/bkt/k").Respond(412);
  auto a = Run(store.Put("k", "x", Precondition::IfMatch(Version("v")), {}));
  EXPECT_EQ(a.code(), Code::kPreconditionFailed) << a.status().ToString();
  auto b = Run(store.Put("k", "x", Precondition::IfNoneMatchAny(), {}));
  EXPECT_EQ(b.code(), Code::kPreconditionFailed) << b.status().ToString();
  EXPECT_EQ(Run(store.Delete("k", Precondition::IfMatch(Version("v")), {})).code(),
            Code::kPreconditionFailed);
  EXPECT_EQ(Run(store.Delete("k", Precondition::IfMatch(Version("v")), {})).code(),
            Code::kPreconditionFailed);
}

TEST_F(S3StoreScriptedTest, NotFoundOnReadsAndUnconditionalDelete) {
  auto& store = Store();
  server_.Expect("GET", "/bkt/k").Respond(404, {}, ErrorXml("NoSuchKey", "missing"));
  server_.Expect("HEAD", "/bkt/k").Respond(404);
  server_.Expect("DELETE", "/bkt/k").Respond(404, {}, ErrorXml("NoSuchKey", "missing"));
  server_.Expect("DELETE", "/bkt/k").Respond(204);
  EXPECT_EQ(Run(store.Get("k", {})).code(), Code::kNotFound);
  EXPECT_EQ(Run(store.Head("k", {})).code(), Code::kNotFound);
  EXPECT_TRUE(Run(store.Delete("k", Precondition::None(), {})).ok());
  EXPECT_TRUE(Run(store.Delete("k", Precondition::None(), {})).ok());
  EXPECT_EQ(server_.connections_accepted(), 1);  // 404s with bodies keep the connection
}

TEST_F(S3StoreScriptedTest, HeadReturnsVersionAndSize) {
  auto& store = Store();
  server_.Expect("HEAD", "/bkt/k").Respond(200, {{"ETag", "\"h1\""}, {"Content-Length", "1234"}});
  server_.Expect("GET", "/bkt/k").Respond(200, {{"ETag", "\"h1\""}}, "after head");
  auto meta = Run(store.Head("k", {}));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->version.token(), "h1");
  EXPECT_EQ(meta->size, 1234u);
  // The bodiless HEAD reply left the connection in step.
  auto got = Run(store.Get("k", {}));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->body, "after head");
  EXPECT_EQ(server_.connections_accepted(), 1);
}

TEST_F(S3StoreScriptedTest, SignatureDoesNotMatchIsFatalWithTheServersWords) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Respond(
      403, {}, ErrorXml("SignatureDoesNotMatch", "The request signature we calculated does not match"));
  auto v = Run(store.Put("k", "x", Precondition::None(), {}));
  EXPECT_EQ(v.code(), Code::kFatal);
  EXPECT_NE(v.status().message().find("SignatureDoesNotMatch"), std::string::npos)
      << v.status().message();
  EXPECT_NE(v.status().message().find("we calculated does not match"), std::string::npos);
  EXPECT_EQ(server_.received().size(), 1u);  // not retried
}

TEST_F(S3StoreScriptedTest, OtherFatalAndInvalidReplies) {
  auto& store = Store();
  server_.Expect("GET", "/bkt").Respond(404, {}, ErrorXml("NoSuchBucket", "The specified bucket does not exist"));
  server_.Expect("GET", "/bkt/k").Respond(403, {}, ErrorXml("InvalidAccessKeyId", "unknown key"));
  server_.Expect("PUT", "/bkt/k").Respond(400, {}, ErrorXml("InvalidArgument", "bad header"));
  server_.Expect("PUT", "/bkt/k").Respond(501, {}, ErrorXml("NotImplemented", "If-None-Match"));
  server_.Expect("PUT", "/bkt/k").Respond(301, {}, ErrorXml("PermanentRedirect", "use another endpoint"));
  auto l = Run(store.List({}, {}));
  EXPECT_EQ(l.code(), Code::kFatal);
  EXPECT_NE(l.status().message().find("NoSuchBucket"), std::string::npos);
  auto g = Run(store.Get("k", {}));
  EXPECT_EQ(g.code(), Code::kFatal);
  EXPECT_NE(g.status().message().find("InvalidAccessKeyId"), std::string::npos);
  EXPECT_EQ(Run(store.Put("k", "x", Precondition::None(), {})).code(), Code::kInvalidArgument);
  EXPECT_EQ(Run(store.Put("k", "x", Precondition::IfNoneMatchAny(), {})).code(), Code::kFatal);
  EXPECT_EQ(Run(store.Put("k", "x", Precondition::None(), {})).code(), Code::kFatal);
}

TEST_F(S3StoreScriptedTest, ServerErrorsAreRetryableForReadsUnknownForWrites) {
  auto& store = Store();
  server_.Expect("GET", "/bkt/k").Respond(500, {}, ErrorXml("InternalError", "oops"));
  server_.Expect("GET", "/bkt/k").Respond(502, {}, "<html>Bad Gateway</html>");
  server_.Expect("PUT", "/bkt/k").Respond(500, {}, ErrorXml("InternalError", "oops"));
  server_.Expect("DELETE", "/bkt/k").Respond(504);
  EXPECT_EQ(Run(store.Get("k", {})).code(), Code::kRetryable);
  auto g = Run(store.Get("k", {}));
  EXPECT_EQ(g.code(), Code::kRetryable);
  EXPECT_NE(g.status().message().find("Bad Gateway"), std::string::npos) << g.status().message();
  EXPECT_EQ(Run(store.Put("k", "x", Precondition::None(), {})).code(), Code::kUnknownOutcome);
  EXPECT_EQ(Run(store.Delete("k", Precondition::None(), {})).code(), Code::kUnknownOutcome);
  EXPECT_EQ(server_.received().size(), 4u);  // none retried
}

TEST_F(S3StoreScriptedTest, PutReplyWithoutETagIsUnknown) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Respond(200);
  auto v = Run(store.Put("k", "x", Precondition::None(), {}));
  EXPECT_EQ(v.code(), Code::kUnknownOutcome) << v.status().ToString();
}

TEST_F(S3StoreScriptedTest, KeepAliveReuse) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/a").Respond(200, {{"ETag", "\"1\""}});
  server_.Expect("GET", "/bkt/a").Respond(200, {{"ETag", "\"1\""}}, "x");
  EXPECT_TRUE(Run(store.Put("a", "x", Precondition::None(), {})).ok());
  EXPECT_TRUE(Run(store.Get("a", {})).ok());
  EXPECT_EQ(server_.connections_accepted(), 1);
  EXPECT_EQ(store.http_stats().connections_opened, 1u);
  ASSERT_EQ(server_.received().size(), 2u);
  EXPECT_EQ(server_.received()[1].connection, server_.received()[0].connection);
}

constexpr char kListPage1[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Name>bkt</Name><Prefix>p/</Prefix><MaxKeys>2</MaxKeys><KeyCount>2</KeyCount>
<IsTruncated>true</IsTruncated><NextContinuationToken>p/b&amp;c</NextContinuationToken>
<Contents><Key>p/a&amp;b</Key><LastModified>2024-02-29T23:59:59.123Z</LastModified><ETag>&quot;e1&quot;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>p/b&amp;c</Key><LastModified>yesterday</LastModified><ETag>&quot;e2&quot;</ETag><Size>4</Size><StorageClass>STANDARD</StorageClass></Contents>
</ListBucketResult>)";
constexpr char kListPage2[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Name>bkt</Name><IsTruncated>false</IsTruncated>
<Contents><Key>p/&lt;c&gt; d</Key><ETag>"e3"</ETag><Size>0</Size></Contents>
</ListBucketResult>)";

TEST_F(S3StoreScriptedTest, ListPaginatesAndDecodesKeys) {
  auto& store = Store();
  server_.Expect("GET", "/bkt").Respond(200, {{"Content-Type", "application/xml"}}, kListPage1).Check([](auto& r) {
    EXPECT_EQ(r.query, "list-type=2&max-keys=2&prefix=p%2F&start-after=p%2F0");
  });
  server_.Expect("GET", "/bkt").Respond(200, {}, kListPage2).Check([](auto& r) {
    // The token is a plain key on RGW: '&' and '/' must be encoded; start-after dropped.
    EXPECT_EQ(r.query, "continuation-token=p%2Fb%26c&list-type=2&max-keys=2&prefix=p%2F");
  });
  ListOptions options;
  options.prefix = "p/";
  options.start_after = "p/0";
  options.page_size = 2;
  auto page1 = Run(store.List(options, {}));
  ASSERT_TRUE(page1.ok()) << page1.status().ToString();
  ASSERT_EQ(page1->entries.size(), 2u);
  EXPECT_EQ(page1->entries[0].key, "p/a&b");
  EXPECT_EQ(page1->entries[0].version.token(), "e1");
  EXPECT_EQ(page1->entries[0].size, 3u);
  EXPECT_EQ(page1->entries[0].modified_ms, 1709251199123);
  EXPECT_EQ(page1->entries[1].key, "p/b&c");
  EXPECT_EQ(page1->entries[1].modified_ms, 0);  // a malformed date: the bucket cannot tell
  ASSERT_TRUE(page1->next_continuation.has_value());
  EXPECT_EQ(*page1->next_continuation, "p/b&c");

  options.continuation = *page1->next_continuation;
  auto page2 = Run(store.List(options, {}));
  ASSERT_TRUE(page2.ok()) << page2.status().ToString();
  ASSERT_EQ(page2->entries.size(), 1u);
  EXPECT_EQ(page2->entries[0].key, "p/<c> d");
  EXPECT_EQ(page2->entries[0].version.token(), "e3");
  EXPECT_EQ(page2->entries[0].modified_ms, 0);  // none given
  EXPECT_FALSE(page2->next_continuation.has_value());
}

TEST_F(S3StoreScriptedTest, MalformedListingIsFatal) {
  auto& store = Store();
  server_.Expect("GET", "/bkt").Respond(200, {}, "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>");
  auto page = Run(store.List({}, {}));
  EXPECT_EQ(page.code(), Code::kFatal);
  EXPECT_NE(page.status().message().find("LIST s3://bkt"), std::string::npos) << page.status().message();
}

TEST_F(S3StoreScriptedTest, BadArgumentsSendNothing) {
  auto& store = Store();  // conditional_delete off
  EXPECT_EQ(Run(store.Get("", {})).code(), Code::kInvalidArgument);
  EXPECT_EQ(Run(store.Put(std::string(1025, 'k'), "x", Precondition::None(), {})).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Run(store.Put("k", "x", Precondition::IfMatch(Version()), {})).code(),
            Code::kInvalidArgument);
  // A token that would break the header (or inject another) never reaches the wire.
  EXPECT_EQ(Run(store.Put("k", "x", Precondition::IfMatch(Version("v\r\nX-Evil: 1")), {})).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Run(store.Put("k", "x", Precondition::IfMatch(Version("\"v\"")), {})).code(),
            Code::kInvalidArgument);
  Status del = Run(store.Delete("k", Precondition::IfMatch(Version("v")), {}));
  EXPECT_EQ(del.code(), Code::kInvalidArgument);
  EXPECT_EQ(del.message(), "this store does not support conditional deletes");
  EXPECT_FALSE(store.SupportsConditionalDelete());
  ListOptions bad;
  bad.page_size = 0;
  EXPECT_EQ(Run(store.List(bad, {})).code(), Code::kInvalidArgument);
  EXPECT_TRUE(server_.received().empty());
}

TEST_F(S3StoreScriptedTest, CancelledReadIsCancelledAndCancelledWriteIsUnknown) {
  auto& store = Store();
  server_.Expect("GET", "/bkt/k").Hang();
  server_.Expect("PUT", "/bkt/k").Hang();
  auto main = [](RealEnv& env, S3Store& s, ScriptedHttpServer& server) -> Task<std::pair<Code, Code>> {
    std::function<bool()> read_sent = [&server] { return server.received().size() == 1; };
    std::function<bool()> write_sent = [&server] { return server.received().size() == 2; };
    auto read = std::make_shared<Code>(Code::kOk);
    auto write = std::make_shared<Code>(Code::kOk);
    TaskHandle r = env.Spawn(
        [](Task<Result<GetOutput>> t, std::shared_ptr<Code> out) -> Task<void> {
          *out = (co_await std::move(t)).code();
        }(s.Get("k", {}), read),
        "read");
    EXPECT_TRUE(co_await WaitUntil(env, read_sent));
    TaskHandle w = env.Spawn(
        [](Task<Result<Version>> t, std::shared_ptr<Code> out) -> Task<void> {
          *out = (co_await std::move(t)).code();
        }(s.Put("k", "x", Precondition::None(), {}), write),
        "write");
    EXPECT_TRUE(co_await WaitUntil(env, write_sent));
    r.Cancel();
    w.Cancel();
    co_await r.Join();
    co_await w.Join();
    co_return std::make_pair(*read, *write);
  };
  auto [read, write] = Run(main(env_, store, server_));
  EXPECT_EQ(read, Code::kCancelled);
  EXPECT_EQ(write, Code::kUnknownOutcome);
  EXPECT_EQ(store.http_stats().in_use, 0);
  EXPECT_EQ(store.http_stats().idle, 0);
}

TEST_F(S3StoreScriptedTest, CancelledWhileBackingOff) {
  auto& store = Store([](S3Config& c) {
    c.retry_base_delay = seconds(5);
    c.retry_max_delay = seconds(5);
  });
  server_.Expect("GET", "/bkt/k").Respond(503);
  auto main = [](RealEnv& env, S3Store& s, ScriptedHttpServer& server) -> Task<Code> {
    std::function<bool()> answered = [&server] { return server.received().size() == 1; };
    auto code = std::make_shared<Code>(Code::kOk);
    TaskHandle r = env.Spawn(
        [](Task<Result<GetOutput>> t, std::shared_ptr<Code> out) -> Task<void> {
          *out = (co_await std::move(t)).code();
        }(s.Get("k", Timeout(seconds(30))), code),
        "read");
    // Let the 503 arrive so the call is in its 5 s backoff sleep.
    EXPECT_TRUE(co_await WaitUntil(env, answered));
    co_await env.SleepFor(milliseconds(20));
    r.Cancel();
    co_await r.Join();
    co_return *code;
  };
  const MonoTime start = env_.MonoNow();
  EXPECT_EQ(Run(main(env_, store, server_)), Code::kCancelled);
  EXPECT_LT(env_.MonoNow() - start, seconds(2));
}

// The urgent lane end to end: with the bulk share of the pool taken by a segment upload the
// bucket does not answer, a second upload waits for a connection and times out unsent, while
// the routing read (purpose owner, through the counting view as in `serve`) is answered.
TEST_F(S3StoreScriptedTest, AnOwnerReadIsNotQueuedBehindSegmentUploads) {
  auto& store = Store([](S3Config& c) { c.max_connections = 2; });
  ASSERT_EQ(ReservedUrgentConnections(2), 1);
  server_.Expect("PUT", "/bkt/wal/a-1").Hang();
  server_.Expect("GET", "/bkt/owners/a").Respond(200, {{"ETag", "\"v1\""}}, "record");
  CountingStore counting(store);
  auto main = [](RealEnv& env, CountingStore& c, ScriptedHttpServer& server) -> Task<std::pair<Code, Code>> {
    ObjectStore& segments = c.ForPurpose(BucketPurpose::kSegment);
    ObjectStore& owners = c.ForPurpose(BucketPurpose::kOwner);
    std::function<bool()> upload_sent = [&server] { return server.received().size() == 1; };
    auto hung = std::make_shared<Code>(Code::kOk);
    TaskHandle w = env.Spawn(
        [](Task<Result<Version>> t, std::shared_ptr<Code> out) -> Task<void> {
          *out = (co_await std::move(t)).code();
        }(segments.Put("wal/a-1", "x", Precondition::IfNoneMatchAny(), Timeout(seconds(30))), hung),
        "upload");
    EXPECT_TRUE(co_await WaitUntil(env, upload_sent));
    auto second = co_await segments.Put("wal/a-2", "y", Precondition::IfNoneMatchAny(), Timeout(milliseconds(100)));
    auto read = co_await owners.Get("owners/a", Timeout(seconds(5)));
    EXPECT_TRUE(read.ok()) << read.status().ToString();
    w.Cancel();
    co_await w.Join();
    co_return std::make_pair(second.code(), read.code());
  };
  auto [second, read] = Run(main(env_, counting, server_));
  EXPECT_EQ(second, Code::kRetryable) << "timed out waiting for a connection: never sent";
  EXPECT_EQ(read, Code::kOk);
  EXPECT_EQ(store.http_stats().other_wait_timeouts, 1u);
  EXPECT_EQ(store.http_stats().urgent_waits, 0u);
  EXPECT_EQ(Calls(), (std::vector<std::string>{"PUT /bkt/wal/a-1", "GET /bkt/owners/a"}));
}

TEST(S3StoreLanesTest, AnEighthOfThePoolIsKeptForUrgentRequests) {
  EXPECT_EQ(ReservedUrgentConnections(1), 0);
  EXPECT_EQ(ReservedUrgentConnections(2), 1);
  EXPECT_EQ(ReservedUrgentConnections(15), 1);
  EXPECT_EQ(ReservedUrgentConnections(64), 8);
  EXPECT_EQ(ReservedUrgentConnections(1024), 128);
}

TEST_F(S3StoreScriptedTest, DestroyingTheStoreWithACallInFlight) {
  auto& store = Store();
  server_.Expect("PUT", "/bkt/k").Hang();
  auto main = [](RealEnv& env, std::unique_ptr<S3Store>& s, ScriptedHttpServer& server) -> Task<Code> {
    std::function<bool()> sent = [&server] { return server.received().size() == 1; };
    auto code = std::make_shared<Code>(Code::kOk);
    TaskHandle w = env.Spawn(
        [](Task<Result<Version>> t, std::shared_ptr<Code> out) -> Task<void> {
          *out = (co_await std::move(t)).code();
        }(s->Put("k", "x", Precondition::None(), Timeout(seconds(30))), code),
        "write");
    EXPECT_TRUE(co_await WaitUntil(env, sent));
    s.reset();
    co_await w.Join();
    co_return *code;
  };
  (void)store;
  EXPECT_EQ(Run(main(env_, store_, server_)), Code::kUnknownOutcome);
}

TEST_F(S3StoreScriptedTest, CreateBucket) {
  auto& store = Store([](S3Config& c) { c.region = "eu-west-3"; });
  server_.Expect("PUT", "/bkt").Respond(200).Check([](auto& r) {
    EXPECT_NE(r.body.find("<LocationConstraint>eu-west-3</LocationConstraint>"), std::string::npos);
  });
  server_.Expect("PUT", "/bkt").Respond(409, {}, ErrorXml("BucketAlreadyOwnedByYou", "yours"));
  server_.Expect("PUT", "/bkt").Respond(409, {}, ErrorXml("BucketAlreadyExists", "taken"));
  EXPECT_TRUE(Run(store.CreateBucket()).ok());
  EXPECT_TRUE(Run(store.CreateBucket()).ok());
  EXPECT_EQ(Run(store.CreateBucket()).code(), Code::kFatal);
}

TEST(S3StoreTransportTest, ConnectionRefusedIsRetryableAndUnknownHostFatal) {
  RealEnv env;
  std::uint16_t dead_port;
  {
    boost::asio::ip::tcp::acceptor a(env.context(), {boost::asio::ip::make_address("127.0.0.1"), 0});
    dead_port = a.local_endpoint().port();
  }
  S3Config cfg;
  cfg.bucket = "b";
  cfg.endpoint = "http://127.0.0.1:" + std::to_string(dead_port);
  cfg.access_key = kAccessKey;
  cfg.secret_key = kSecretKey;
  auto store = S3Store::Create(env, cfg);
  ASSERT_TRUE(store.ok());
  auto v = env.RunMain((*store)->Put("k", "x", Precondition::IfNoneMatchAny(), {}));
  EXPECT_EQ(v.code(), Code::kRetryable) << v.status().ToString();
  EXPECT_NE(v.status().message().find("nothing was sent"), std::string::npos);

  cfg.endpoint = "http://no-such-host.invalid";
  auto store2 = S3Store::Create(env, cfg);
  ASSERT_TRUE(store2.ok());
  auto g = env.RunMain((*store2)->Get("k", {}));
  // kFatal where DNS answers NXDOMAIN; kRetryable where there is no resolver at all.
  EXPECT_TRUE(g.code() == Code::kFatal || g.code() == Code::kRetryable) << g.status().ToString();
}

TEST(S3StoreCreateTest, RejectsUnusableConfigs) {
  RealEnv env;
  S3Config good;
  good.bucket = "b";
  good.endpoint = "http://127.0.0.1:1";
  good.access_key = "a";
  good.secret_key = "s";
  EXPECT_TRUE(S3Store::Create(env, good).ok());
  auto with = [&](const std::function<void(S3Config&)>& f) {
    S3Config c = good;
    f(c);
    return S3Store::Create(env, c).code();
  };
  EXPECT_EQ(with([](S3Config& c) { c.bucket.clear(); }), Code::kInvalidArgument);
  EXPECT_EQ(with([](S3Config& c) { c.path_style = false; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](S3Config& c) { c.secret_key.clear(); }), Code::kInvalidArgument);
  EXPECT_EQ(with([](S3Config& c) { c.endpoint = "ftp://x"; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](S3Config& c) { c.max_connections = 0; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](S3Config& c) { c.retry_base_delay = Duration::zero(); }), Code::kInvalidArgument);
  auto store = S3Store::Create(env, good);
  EXPECT_EQ((*store)->Describe(), "s3://b?endpoint=http://127.0.0.1:1&region=us-east-1");
}

TEST(S3StoreEnvTest, ConfigFromEnvironment) {
  std::map<std::string, std::string> vars = {{"WASMKEEP_S3_ENDPOINT", "http://127.0.0.1:7480"},
                                             {"WASMKEEP_S3_BUCKET", "wasmkeep-test"},
                                             {"AWS_ACCESS_KEY_ID", "a"},
                                             {"AWS_SECRET_ACCESS_KEY", "s"}};
  auto getenv = [&vars](const char* n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  auto cfg = S3ConfigFromEnv(getenv);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(cfg->bucket, "wasmkeep-test");
  EXPECT_EQ(cfg->region, "us-east-1");
  EXPECT_FALSE(cfg->if_match_quoted);  // RGW
  vars["WASMKEEP_S3_REGION"] = "default";
  vars["WASMKEEP_S3_IF_MATCH_QUOTED"] = "true";
  cfg = S3ConfigFromEnv(getenv);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->region, "default");
  EXPECT_TRUE(cfg->if_match_quoted);
  vars.erase("WASMKEEP_S3_BUCKET");
  auto missing = S3ConfigFromEnv(getenv);
  EXPECT_EQ(missing.code(), Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("WASMKEEP_S3_BUCKET"), std::string::npos);
}


// The bucket check (store/bucket_check.h) against a server that, like Ceph RGW, refuses
// every quoted If-Match: found at the start's one probe, and the message names the setting
// to change instead of the node failing later with what looks like lost races.
TEST_F(S3StoreScriptedTest, TheBucketCheckFindsAQuotedIfMatchRefusalAndNamesTheSetting) {
  auto& store = Store();  // if_match_quoted = true, the default (AWS's documented form)
  const std::string key = "control/bucket-check/a";
  const std::string body1 = "wasmkeep-bucket-check 1\nnonce n1\nstep 1\n";
  server_.Expect("PUT", "/bkt/" + key).Respond(200, {{"ETag", "\"e1\""}}).Check([&](auto& r) {
    EXPECT_EQ(r.body, body1);
    EXPECT_EQ(r.Header("if-match"), "");
  });
  server_.Expect("PUT", "/bkt/" + key)
      .Respond(412, {}, ErrorXml("PreconditionFailed", "At least one of the pre-conditions you specified did not hold"))
      .Check([](auto& r) { EXPECT_EQ(r.Header("if-match"), "\"e1\""); });
  server_.Expect("GET", "/bkt/" + key).Respond(200, {{"ETag", "\"e1\""}}, body1);
  Status s = Run(CheckBucketOnce(store, key, "n1", Timeout(seconds(5))));
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("add if_match_quoted=false to the s3:// URL"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
}

// The same probe passing on a server that takes the unquoted form: four writes, the last
// two refused as they must be.
TEST_F(S3StoreScriptedTest, TheBucketCheckPassesWhenConditionsHold) {
  auto& store = Store([](S3Config& c) { c.if_match_quoted = false; });
  const std::string key = "control/bucket-check/a";
  server_.Expect("PUT", "/bkt/" + key).Respond(200, {{"ETag", "\"e1\""}});
  server_.Expect("PUT", "/bkt/" + key).Respond(200, {{"ETag", "\"e2\""}}).Check([](auto& r) {
    EXPECT_EQ(r.Header("if-match"), "e1");
  });
  server_.Expect("PUT", "/bkt/" + key).Respond(412, {}, ErrorXml("PreconditionFailed", "no")).Check([](auto& r) {
    EXPECT_EQ(r.Header("if-match"), "e1");
  });
  server_.Expect("PUT", "/bkt/" + key).Respond(412, {}, ErrorXml("PreconditionFailed", "no")).Check([](auto& r) {
    EXPECT_EQ(r.Header("if-none-match"), "*");
  });
  Status s = Run(CheckBucketOnce(store, key, "n1", Timeout(seconds(5))));
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace wk
