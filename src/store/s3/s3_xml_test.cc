#include "store/s3/s3_xml.h"

#include <gtest/gtest.h>

namespace wk {
namespace {

// The shape RGW and AWS send (namespace, Owner and StorageClass included, ETags written
// with &quot; entities as RGW does).
constexpr std::string_view kPage = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>a</Prefix><MaxKeys>3</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>a&amp;c&lt;</NextContinuationToken>
  <Contents>
    <Key>a&amp;b</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;0123abcd&quot;</ETag><Size>12</Size>
    <Owner><ID>x</ID></Owner><StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents><Key>a&lt;&gt;&apos;&quot;&#x41;&#66;</Key><ETag>"e2"</ETag><Size>0</Size></Contents>
  <Contents><Key>a </Key><ETag>e3</ETag><Size>18446744073709551615</Size></Contents>
</ListBucketResult>)";

TEST(S3XmlTest, ParsesAPageWithEscapedKeys) {
  auto r = ParseListObjectsV2(kPage);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->is_truncated);
  ASSERT_TRUE(r->next_continuation_token.has_value());
  EXPECT_EQ(*r->next_continuation_token, "a&c<");
  ASSERT_EQ(r->entries.size(), 3u);
  EXPECT_EQ(r->entries[0].key, "a&b");
  EXPECT_EQ(r->entries[0].etag, "0123abcd");
  EXPECT_EQ(r->entries[0].size, 12u);
  EXPECT_EQ(r->entries[0].modified_ms, 1704067200000);
  EXPECT_EQ(r->entries[1].key, "a<>'\"AB");
  EXPECT_EQ(r->entries[1].etag, "e2");
  EXPECT_EQ(r->entries[2].key, "a ");  // trailing space kept
  EXPECT_EQ(r->entries[2].etag, "e3");
  EXPECT_EQ(r->entries[2].size, 18446744073709551615u);
  EXPECT_EQ(r->entries[1].modified_ms, 0);  // no LastModified
  EXPECT_EQ(r->entries[2].modified_ms, 0);
}

TEST(S3XmlTest, LastModifiedIsOptionalAndNeverFailsTheListing) {
  auto r = ParseListObjectsV2(
      "<ListBucketResult>"
      "<Contents><Key>a</Key><LastModified>2024-02-29T23:59:59.123Z</LastModified>"
      "<ETag>e</ETag><Size>1</Size></Contents>"
      "<Contents><Key>b</Key><LastModified>2024-01-01T00:00:01Z</LastModified>"
      "<ETag>e</ETag><Size>1</Size></Contents>"
      "<Contents><Key>c</Key><LastModified>2024-13-01T00:00:00.000Z</LastModified>"
      "<ETag>e</ETag><Size>1</Size></Contents>"
      "<Contents><Key>d</Key><LastModified></LastModified><ETag>e</ETag><Size>1</Size></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->entries.size(), 4u);
  EXPECT_EQ(r->entries[0].modified_ms, 1709251199123);
  EXPECT_EQ(r->entries[1].modified_ms, 1704067201000);  // whole seconds (no fraction)
  EXPECT_EQ(r->entries[2].modified_ms, 0);               // malformed: the bucket cannot tell
  EXPECT_EQ(r->entries[3].modified_ms, 0);
}

TEST(S3XmlTest, ParsesS3Timestamps) {
  EXPECT_EQ(ParseS3Timestamp("1970-01-01T00:00:00.000Z"), 0);
  EXPECT_EQ(ParseS3Timestamp("2024-01-01T00:00:00.000Z"), 1704067200000);
  EXPECT_EQ(ParseS3Timestamp("2024-01-01T00:00:00Z"), 1704067200000);
  EXPECT_EQ(ParseS3Timestamp("2024-01-01T00:00:00.5Z"), 1704067200500);
  EXPECT_EQ(ParseS3Timestamp("2024-01-01T00:00:00.05Z"), 1704067200050);
  EXPECT_EQ(ParseS3Timestamp("2024-01-01T00:00:00.123456789Z"), 1704067200123);  // cut, not rounded
  EXPECT_EQ(ParseS3Timestamp("2024-02-29T23:59:59.999Z"), 1709251199999);       // a leap day
  EXPECT_EQ(ParseS3Timestamp("2038-01-19T03:14:08.000Z"), 2147483648000);       // past 32 bits
  for (std::string_view bad : {
           "", "2024-01-01", "2024-01-01T00:00:00", "2024-01-01T00:00:00.000",
           "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00.000+00:00", "2024-01-01 00:00:00Z",
           "2024-01-01T00:00:00.000Zx", " 2024-01-01T00:00:00Z", "2024-1-01T00:00:00Z",
           "2023-02-29T00:00:00Z", "2024-00-01T00:00:00Z", "2024-01-32T00:00:00Z",
           "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z", "2024-01-01T00:00:60Z",
           "2024-01-01T00:00:0xZ", "+024-01-01T00:00:00Z", "Mon, 01 Jan 2024 00:00:00 GMT"}) {
    EXPECT_FALSE(ParseS3Timestamp(bad).has_value()) << bad;
  }
}

TEST(S3XmlTest, LastPageAndEmptyPage) {
  auto r = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key> </Key><ETag>\"x\"</ETag><Size>1</Size></Contents></ListBucketResult>");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->is_truncated);
  EXPECT_FALSE(r->next_continuation_token.has_value());
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0].key, " ");  // a whitespace-only key survives parsing

  auto empty = ParseListObjectsV2("<ListBucketResult><KeyCount>0</KeyCount></ListBucketResult>");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->entries.empty());
}

TEST(S3XmlTest, RejectsMalformedPages) {
  struct Case {
    std::string_view xml, needle;
  } cases[] = {
      {"<html>oops", "not XML"},
      {"<Error><Code>x</Code></Error>", "no ListBucketResult"},
      {"<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>", "IsTruncated"},
      {"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
       "without NextContinuationToken"},
      {"<ListBucketResult><Contents><Key>k</Key><Size>1</Size></Contents></ListBucketResult>",
       "lacks Key, ETag or Size"},
      {"<ListBucketResult><Contents><Key>k</Key><ETag>e</ETag><Size>-1</Size></Contents>"
       "</ListBucketResult>",
       "Size '-1'"},
      {"<ListBucketResult><Contents><Key></Key><ETag>e</ETag><Size>1</Size></Contents>"
       "</ListBucketResult>",
       "empty Key"},
  };
  for (const auto& c : cases) {
    auto r = ParseListObjectsV2(c.xml);
    ASSERT_FALSE(r.ok()) << c.xml;
    EXPECT_EQ(r.code(), Code::kFatal);
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
}

TEST(S3XmlTest, ParsesErrors) {
  auto e = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SignatureDoesNotMatch</Code>"
      "<Message>The request signature we calculated does not match</Message>"
      "<RequestId>tx1</RequestId></Error>");
  EXPECT_EQ(e.code, "SignatureDoesNotMatch");
  EXPECT_EQ(e.message, "The request signature we calculated does not match");

  auto html = ParseS3Error("<html>\n<body>Bad Gateway</body></html>");
  EXPECT_EQ(html.code, "");
  EXPECT_EQ(html.message, "<html> <body>Bad Gateway</body></html>");

  auto empty = ParseS3Error("");
  EXPECT_EQ(empty.code, "");
  EXPECT_EQ(empty.message, "");
}

TEST(S3XmlTest, UnquoteETag) {
  EXPECT_EQ(UnquoteETag("\"abc\""), "abc");
  EXPECT_EQ(UnquoteETag("abc"), "abc");
  EXPECT_EQ(UnquoteETag("\""), "\"");
  EXPECT_EQ(UnquoteETag(""), "");
}

}  // namespace
}  // namespace wk
