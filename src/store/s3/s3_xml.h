// Parsers for the XML bodies S3 answers with: a ListObjectsV2 page and an error.
//
// Both are strict where it protects correctness and lenient where servers differ:
//   - ListObjectsV2: Key, ETag and Size are required in every Contents entry (a listing
//     that silently drops entries would make the caller skip objects); unknown elements
//     (Owner, StorageClass, ChecksumAlgorithm, ...) are ignored. Entity references
//     (&amp; &lt; &#x41; ...) in keys are decoded. ETags are returned without quotes,
//     which is how S3Store spells a Version. LastModified is optional: a missing or
//     malformed one gives 0 ("cannot tell"), never a failed listing.
//   - Error: any missing part is left empty; a body that is not XML (a proxy's HTML
//     page) gives an empty code and the start of the text as the message.
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace wk {

struct S3ListEntry {
  std::string key;
  std::string etag;  // without quotes
  std::uint64_t size = 0;
  std::int64_t modified_ms = 0;  // LastModified (ParseS3Timestamp), 0 if absent or malformed
};

struct S3ListResult {
  std::vector<S3ListEntry> entries;
  bool is_truncated = false;
  std::optional<std::string> next_continuation_token;
};

// A malformed page (not XML, no ListBucketResult, an entry without Key/ETag/Size, a bad
// number, IsTruncated without NextContinuationToken) is kFatal naming what is wrong: the
// same request would give the same page, and the server needs a person's attention.
Result<S3ListResult> ParseListObjectsV2(std::string_view xml);

struct S3Error {
  std::string code;     // "NoSuchKey", "SlowDown", ... or empty
  std::string message;  // the server's text, or the start of a non-XML body
};

S3Error ParseS3Error(std::string_view body);

// An S3 timestamp, ISO 8601 in UTC as ListObjectsV2 writes LastModified
// ("2024-01-01T00:00:00.000Z", the fraction optional and cut to milliseconds), as Unix
// milliseconds; nullopt for anything else.
std::optional<std::int64_t> ParseS3Timestamp(std::string_view text);

// Strips one pair of surrounding double quotes from an ETag ("\"abc\"" -> "abc").
std::string UnquoteETag(std::string_view etag);

}  // namespace wk
