#include "store/s3/s3_config.h"

#include <gtest/gtest.h>

#include <map>

namespace wk {
namespace {

// A fake environment: only the variables a test sets exist.
GetenvFn FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

GetenvFn WithKeys(std::map<std::string, std::string> extra = {}) {
  extra.emplace("AWS_ACCESS_KEY_ID", "AKID");
  extra.emplace("AWS_SECRET_ACCESS_KEY", "SECRET");
  return FakeEnv(std::move(extra));
}

// Asserts that parsing fails with kInvalidArgument and a message containing `needle`.
void ExpectError(std::string_view url, const GetenvFn& env, std::string_view needle) {
  auto r = ParseS3Url(url, env);
  ASSERT_FALSE(r.ok()) << url;
  EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message '" << r.status().message() << "' lacks '" << needle << "'";
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "message must be one line";
}

TEST(S3ConfigTest, ParsesEveryParameter) {
  auto r = ParseS3Url(
      "s3://my-bucket?endpoint=http://127.0.0.1:7480&region=eu-west-3&if_match_quoted=false"
      "&conditional_delete=true&max_connections=8",
      WithKeys({{"AWS_SESSION_TOKEN", "TOKEN"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bucket, "my-bucket");
  EXPECT_EQ(r->endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(r->region, "eu-west-3");
  EXPECT_FALSE(r->if_match_quoted);
  EXPECT_TRUE(r->conditional_delete);
  EXPECT_EQ(r->max_connections, 8);
  EXPECT_EQ(r->access_key, "AKID");
  EXPECT_EQ(r->secret_key, "SECRET");
  EXPECT_EQ(r->session_token, "TOKEN");
  EXPECT_TRUE(r->path_style);
}

TEST(S3ConfigTest, DefaultsAndEndpointFromEnvironment) {
  auto r = ParseS3Url("s3://b1/", WithKeys({{"AWS_ENDPOINT_URL", "https://s3.example.com/"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bucket, "b1");
  EXPECT_EQ(r->endpoint, "https://s3.example.com");  // trailing '/' dropped
  EXPECT_EQ(r->region, "us-east-1");
  EXPECT_TRUE(r->if_match_quoted);
  EXPECT_FALSE(r->conditional_delete);
  EXPECT_EQ(r->max_connections, 64);
  EXPECT_TRUE(r->session_token.empty());
}

TEST(S3ConfigTest, QueryParameterBeatsEnvironmentAndIsPercentDecoded) {
  auto r = ParseS3Url("s3://b?endpoint=http%3A%2F%2Flocalhost%3A9000",
                      WithKeys({{"AWS_ENDPOINT_URL", "http://other:1"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->endpoint, "http://localhost:9000");
}

TEST(S3ConfigTest, MissingBucket) {
  ExpectError("s3://?endpoint=http://h", WithKeys(), "missing bucket");
  ExpectError("s3://", WithKeys(), "missing bucket");
}

TEST(S3ConfigTest, BadBucketAndPath) {
  ExpectError("s3://bad%bucket?endpoint=http://h", WithKeys(), "bad bucket name");
  ExpectError("s3://b/some/prefix?endpoint=http://h", WithKeys(), "prefixes are not supported");
  ExpectError("http://b?endpoint=http://h", WithKeys(), "must start with s3://");
}

TEST(S3ConfigTest, MissingEndpoint) { ExpectError("s3://b", WithKeys(), "missing endpoint"); }

TEST(S3ConfigTest, BadEndpoints) {
  ExpectError("s3://b?endpoint=ftp://h", WithKeys(), "scheme must be http or https");
  ExpectError("s3://b?endpoint=h:80", WithKeys(), "scheme must be http or https");
  ExpectError("s3://b?endpoint=http://", WithKeys(), "host required");
  ExpectError("s3://b?endpoint=http://:80", WithKeys(), "host required");
  ExpectError("s3://b?endpoint=http://h:port", WithKeys(), "port must be a number");
  ExpectError("s3://b?endpoint=http://h:99999", WithKeys(), "port must be a number");
  ExpectError("s3://b?endpoint=http://h:", WithKeys(), "empty port");
  ExpectError("s3://b?endpoint=http://h/bucket", WithKeys(), "must not have a path");
  ExpectError("s3://b?endpoint=http://u:p@h", WithKeys(), "user info");
  // From the environment too, and the message says it is the endpoint.
  ExpectError("s3://b", WithKeys({{"AWS_ENDPOINT_URL", "gopher://x"}}), "bad endpoint URL");
}

TEST(S3ConfigTest, EndpointParts) {
  auto a = ParseS3Endpoint("http://127.0.0.1:7480");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->tls);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7480);
  EXPECT_EQ(a->host_header, "127.0.0.1:7480");
  auto b = ParseS3Endpoint("https://s3.example.com");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->tls);
  EXPECT_EQ(b->port, 443);
  EXPECT_EQ(b->host_header, "s3.example.com");  // default port is not in Host
  auto c = ParseS3Endpoint("http://[::1]:9000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->host_header, "[::1]:9000");
}

TEST(S3ConfigTest, UnknownParameter) {
  ExpectError("s3://b?endpoint=http://h&colour=blue", WithKeys(), "unknown query parameter 'colour'");
  ExpectError("s3://b?endpoint=http://h&region=a&region=b", WithKeys(), "duplicate query parameter");
  ExpectError("s3://b?endpoint=http://h&region=", WithKeys(), "region is empty");
  ExpectError("s3://b?endpoint=http://h&max_connections=0", WithKeys(), "max_connections");
  ExpectError("s3://b?endpoint=%zz", WithKeys(), "bad percent-encoding");
}

TEST(S3ConfigTest, MissingCredentials) {
  ExpectError("s3://b?endpoint=http://h", FakeEnv({}), "AWS_ACCESS_KEY_ID");
  ExpectError("s3://b?endpoint=http://h", FakeEnv({{"AWS_ACCESS_KEY_ID", "A"}}),
              "AWS_SECRET_ACCESS_KEY");
  ExpectError("s3://b?endpoint=http://h", FakeEnv({{"AWS_ACCESS_KEY_ID", ""},
                                                   {"AWS_SECRET_ACCESS_KEY", "S"}}),
              "missing credentials");
}

TEST(S3ConfigTest, BadBoolean) {
  ExpectError("s3://b?endpoint=http://h&if_match_quoted=yes", WithKeys(),
              "bad boolean for if_match_quoted");
  ExpectError("s3://b?endpoint=http://h&conditional_delete", WithKeys(),
              "bad boolean for conditional_delete");
}

TEST(S3ConfigTest, DescribeHasNoSecrets) {
  auto r = ParseS3Url("s3://b?endpoint=http://h:1&if_match_quoted=false",
                      WithKeys({{"AWS_SESSION_TOKEN", "TOKEN"}}));
  ASSERT_TRUE(r.ok());
  std::string d = DescribeS3Config(*r);
  EXPECT_EQ(d, "s3://b?endpoint=http://h:1&region=us-east-1&if_match_quoted=false");
  EXPECT_EQ(d.find("SECRET"), std::string::npos);
  EXPECT_EQ(d.find("AKID"), std::string::npos);
  EXPECT_EQ(d.find("TOKEN"), std::string::npos);
}

}  // namespace
}  // namespace wk
