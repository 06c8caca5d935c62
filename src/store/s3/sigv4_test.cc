#include "store/s3/sigv4.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

// The example credentials and request context of AWS's S3 SigV4 documentation
// ("Signature Calculations for the Authorization Header: Transferring Payload in a Single
// Chunk"). The expected signatures below are the ones published there.
const SigV4Credentials kExampleCreds{"AKIAIOSFODNN7EXAMPLE",
                                     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr std::string_view kHost = "examplebucket.s3.amazonaws.com";
constexpr std::string_view kDate = "20130524T000000Z";
constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(S3SigV4Test, Sha256OfKnownInputs) {
  EXPECT_EQ(Sha256Hex(""), kEmptySha256);
  // The body of the AWS PUT example; its hash is printed in the documentation.
  EXPECT_EQ(Sha256Hex("Welcome to Amazon S3."),
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(S3SigV4Test, HmacRfc4231Case2) {
  // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
  std::string mac = HmacSha256("Jefe", "what do ya want for nothing?");
  ASSERT_EQ(mac.size(), 32u);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : mac) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 0xf]);
  }
  EXPECT_EQ(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(S3SigV4Test, AwsExampleGetObjectWithRange) {
  SigV4Request req{"GET", "/test.txt", {},
                   {{"Host", std::string(kHost)},
                    {"Range", "bytes=0-9"},
                    {"x-amz-content-sha256", std::string(kEmptySha256)},
                    {"x-amz-date", std::string(kDate)}},
                   kEmptySha256};
  auto sig = SignV4(req, kExampleCreds, "us-east-1", "s3", kDate);
  EXPECT_EQ(sig.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sig.string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(sig.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(sig.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3SigV4Test, AwsExamplePutObject) {
  // Key "test$file.text": '$' must be encoded in the canonical URI.
  const std::string body = "Welcome to Amazon S3.";
  const std::string hash = Sha256Hex(body);
  const std::string uri = UriEncodePath("/test$file.text");
  EXPECT_EQ(uri, "/test%24file.text");
  SigV4Request req{"PUT", uri, {},
                   {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                    {"Host", std::string(kHost)},
                    {"x-amz-date", std::string(kDate)},
                    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                    {"x-amz-content-sha256", hash}},
                   hash};
  auto sig = SignV4(req, kExampleCreds, "us-east-1", "s3", kDate);
  EXPECT_EQ(sig.signed_headers, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  EXPECT_EQ(sig.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(S3SigV4Test, AwsExampleGetBucketLifecycle) {
  SigV4Request req{"GET", "/", {{"lifecycle", ""}},
                   {{"Host", std::string(kHost)},
                    {"x-amz-date", std::string(kDate)},
                    {"x-amz-content-sha256", std::string(kEmptySha256)}},
                   kEmptySha256};
  auto sig = SignV4(req, kExampleCreds, "us-east-1", "s3", kDate);
  EXPECT_NE(sig.canonical_request.find("\nlifecycle=\n"), std::string::npos);
  EXPECT_EQ(sig.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(S3SigV4Test, AwsExampleListObjects) {
  // Query given out of order: the canonical form sorts it.
  SigV4Request req{"GET", "/", {{"prefix", "J"}, {"max-keys", "2"}},
                   {{"Host", std::string(kHost)},
                    {"x-amz-date", std::string(kDate)},
                    {"x-amz-content-sha256", std::string(kEmptySha256)}},
                   kEmptySha256};
  auto sig = SignV4(req, kExampleCreds, "us-east-1", "s3", kDate);
  EXPECT_NE(sig.canonical_request.find("\nmax-keys=2&prefix=J\n"), std::string::npos);
  EXPECT_EQ(sig.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(S3SigV4Test, SigningKeyChangesWithEveryScopePart) {
  const std::string base = SigV4SigningKey("secret", "20240101", "us-east-1", "s3");
  EXPECT_EQ(base.size(), 32u);
  EXPECT_EQ(base, SigV4SigningKey("secret", "20240101", "us-east-1", "s3"));
  EXPECT_NE(base, SigV4SigningKey("secret2", "20240101", "us-east-1", "s3"));
  EXPECT_NE(base, SigV4SigningKey("secret", "20240102", "us-east-1", "s3"));
  EXPECT_NE(base, SigV4SigningKey("secret", "20240101", "eu-west-1", "s3"));
  EXPECT_NE(base, SigV4SigningKey("secret", "20240101", "us-east-1", "iam"));
}

TEST(S3SigV4Test, UriEncodingRules) {
  EXPECT_EQ(UriEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("a b+c*d", false), "a%20b%2Bc%2Ad");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriEncode("a/b", true), "a/b");
  EXPECT_EQ(UriEncode("\xC3\xA9", false), "%C3%A9");  // é, uppercase hex per byte
  EXPECT_EQ(UriEncode("%=&?", false), "%25%3D%26%3F");
  EXPECT_EQ(UriEncodePath("bucket/dir/key with space"), "/bucket/dir/key%20with%20space");
  EXPECT_EQ(UriEncodePath("/b/a//c"), "/b/a//c");  // empty segments kept: keys may have them
}

TEST(S3SigV4Test, CanonicalQuerySortsAndEncodes) {
  HttpParams q{{"prefix", "a/b c"}, {"list-type", "2"}, {"continuation-token", "k&1=2"}};
  EXPECT_EQ(CanonicalQueryString(q),
            "continuation-token=k%261%3D2&list-type=2&prefix=a%2Fb%20c");
  EXPECT_EQ(CanonicalQueryString({}), "");
}

TEST(S3SigV4Test, HeaderValuesTrimmedAndNamesLowercased) {
  SigV4Request req{"GET", "/", {}, {{"X-Amz-Date", std::string(kDate)}, {"HOST", "  h   x  "}},
                   kEmptySha256};
  auto sig = SignV4(req, kExampleCreds, "us-east-1", "s3", kDate);
  EXPECT_EQ(sig.signed_headers, "host;x-amz-date");
  EXPECT_NE(sig.canonical_request.find("\nhost:h x\n"), std::string::npos) << sig.canonical_request;
}

TEST(S3SigV4Test, SignatureCoversBodyHashAndSecret) {
  const std::string hash_one = Sha256Hex("one"), hash_two = Sha256Hex("two");
  SigV4Request req{"PUT", "/b/k", {}, {{"host", "h"}, {"x-amz-date", std::string(kDate)}},
                   hash_one};
  auto a = SignV4(req, kExampleCreds, "us-east-1", "s3", kDate);
  req.payload_hash = hash_two;
  auto b = SignV4(req, kExampleCreds, "us-east-1", "s3", kDate);
  EXPECT_NE(a.signature, b.signature);
  SigV4Credentials other = kExampleCreds;
  other.secret_key += "x";
  auto c = SignV4(req, other, "us-east-1", "s3", kDate);
  EXPECT_NE(b.signature, c.signature);
}

TEST(S3SigV4Test, AmzDateFormat) {
  // 2013-05-24T00:00:00Z is 1369353600 seconds after the epoch.
  EXPECT_EQ(AmzDate(FromUnixMs(1369353600'000)), "20130524T000000Z");
  EXPECT_EQ(AmzDate(FromUnixMs(1369353600'000 + 3723'999)), "20130524T010203Z");
}

}  // namespace
}  // namespace wk
