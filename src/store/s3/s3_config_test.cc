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


// ---- Where the settings come from: the URL, then the AWS variables, then the AWS shared
// files (aws_profile.h), then the defaults.

// Files by path, for ReadFileFn.
ReadFileFn FakeFiles(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

constexpr char kConfig[] = R"(# ~/.aws/config
[default]
region = eu-central-1

[profile r2]
region = auto
s3 =
  endpoint_url = https://acct.r2.cloudflarestorage.com
  addressing_style = path
endpoint_url = https://ignored-for-s3.example.com

[profile minio]
region = us-east-1
endpoint_url = http://minio.local:9000
aws_access_key_id = FROMCONFIG
aws_secret_access_key = CONFIGSECRET
)";

constexpr char kCredentials[] = R"([default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key = DEFAULTSECRET

; the R2 token
[r2]
aws_access_key_id = R2KEY
aws_secret_access_key = R2SECRET
aws_session_token = R2TOKEN
)";

ReadFileFn AwsFiles() { return FakeFiles({{"/home/u/.aws/config", kConfig}, {"/home/u/.aws/credentials", kCredentials}}); }

TEST(AwsProfileTest, TheIniFormatWithNestedBlocksAndComments) {
  AwsIni ini = ParseAwsIni(kConfig);
  EXPECT_EQ(ini["default"]["region"], "eu-central-1");
  EXPECT_EQ(ini["profile r2"]["s3.endpoint_url"], "https://acct.r2.cloudflarestorage.com");
  EXPECT_EQ(ini["profile r2"]["s3.addressing_style"], "path");
  EXPECT_EQ(ini["profile r2"]["endpoint_url"], "https://ignored-for-s3.example.com") << "the block ends at an unindented line";
  EXPECT_EQ(ini["profile minio"]["aws_access_key_id"], "FROMCONFIG");
  EXPECT_EQ(ParseAwsIni("Region = x\n[a]\nREGION=y\r\n#c\n")["a"]["region"], "y") << "keys outside a section ignored";
}

TEST(S3ConfigTest, TheDefaultProfileGivesRegionCredentialsAndTheAwsEndpoint) {
  auto r = ParseS3Url("s3://b", FakeEnv({{"HOME", "/home/u"}}), AwsFiles());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->region, "eu-central-1");
  EXPECT_EQ(r->endpoint, "https://s3.eu-central-1.amazonaws.com") << "a region and no endpoint: AWS S3";
  EXPECT_EQ(r->access_key, "DEFAULTKEY");
  EXPECT_EQ(r->secret_key, "DEFAULTSECRET");
  EXPECT_NE(r->settings_from.find("region from /home/u/.aws/config [default]"), std::string::npos) << r->settings_from;
  EXPECT_NE(r->settings_from.find("credentials from /home/u/.aws/credentials [default]"), std::string::npos);
}

TEST(S3ConfigTest, AwsProfileSelectsTheS3EndpointAndTheCredentialsFileWins) {
  auto r = ParseS3Url("s3://b", FakeEnv({{"HOME", "/home/u"}, {"AWS_PROFILE", "r2"}}), AwsFiles());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->region, "auto");
  EXPECT_EQ(r->endpoint, "https://acct.r2.cloudflarestorage.com") << "the s3 block's endpoint_url wins";
  EXPECT_EQ(r->access_key, "R2KEY");
  EXPECT_EQ(r->session_token, "R2TOKEN");
  auto minio = ParseS3Url("s3://b", FakeEnv({{"HOME", "/home/u"}, {"AWS_PROFILE", "minio"}}), AwsFiles());
  ASSERT_TRUE(minio.ok()) << minio.status().ToString();
  EXPECT_EQ(minio->endpoint, "http://minio.local:9000");
  EXPECT_EQ(minio->access_key, "FROMCONFIG") << "keys in the config file when the credentials file has none";
}

TEST(S3ConfigTest, ExplicitSettingsWinOverTheEnvironmentWhichWinsOverTheFiles) {
  auto env = FakeEnv({{"HOME", "/home/u"},
                      {"AWS_PROFILE", "r2"},
                      {"AWS_REGION", "us-west-2"},
                      {"AWS_DEFAULT_REGION", "ignored"},
                      {"AWS_ENDPOINT_URL", "http://generic:1"},
                      {"AWS_ENDPOINT_URL_S3", "http://s3-only:2"},
                      {"AWS_ACCESS_KEY_ID", "ENVKEY"},
                      {"AWS_SECRET_ACCESS_KEY", "ENVSECRET"}});
  auto r = ParseS3Url("s3://b", env, AwsFiles());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->region, "us-west-2");
  EXPECT_EQ(r->endpoint, "http://s3-only:2") << "AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL";
  EXPECT_EQ(r->access_key, "ENVKEY");
  EXPECT_TRUE(r->session_token.empty()) << "key and secret from one place: the profile's token is not mixed in";
  auto url = ParseS3Url("s3://b?endpoint=http://url:3&region=ap-south-1", env, AwsFiles());
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->endpoint, "http://url:3");
  EXPECT_EQ(url->region, "ap-south-1");
  EXPECT_NE(url->settings_from.find("region from the URL"), std::string::npos);
  auto default_region = ParseS3Url("s3://b", FakeEnv({{"AWS_DEFAULT_REGION", "sa-east-1"}, {"AWS_ACCESS_KEY_ID", "k"},
                                                      {"AWS_SECRET_ACCESS_KEY", "s"}}));
  ASSERT_TRUE(default_region.ok());
  EXPECT_EQ(default_region->endpoint, "https://s3.sa-east-1.amazonaws.com");
}

TEST(S3ConfigTest, FilesComeFromTheirVariablesAndAMissingNamedProfileIsAnError) {
  auto files = FakeFiles({{"/etc/wk/aws-config", "[profile p]\nregion = eu-north-1\n"},
                          {"/etc/wk/aws-creds", "[p]\naws_access_key_id = K\naws_secret_access_key = S\n"}});
  auto r = ParseS3Url("s3://b", FakeEnv({{"AWS_CONFIG_FILE", "/etc/wk/aws-config"},
                                         {"AWS_SHARED_CREDENTIALS_FILE", "/etc/wk/aws-creds"},
                                         {"AWS_PROFILE", "p"}}),
                      files);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->region, "eu-north-1");
  EXPECT_EQ(r->access_key, "K");
  ExpectError("s3://b?endpoint=http://h", FakeEnv({{"HOME", "/home/u"}, {"AWS_PROFILE", "nope"}}),
              "AWS profile 'nope' (from AWS_PROFILE) is in neither");
  // Nothing anywhere: the error lists every place an endpoint may come from.
  ExpectError("s3://b", WithKeys(), "AWS_ENDPOINT_URL_S3");
}

}  // namespace
}  // namespace wk
