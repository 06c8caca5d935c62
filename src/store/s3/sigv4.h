// AWS Signature Version 4 for S3 requests (header-based, single-chunk payload): the
// canonical request, string to sign, signing key and Authorization header, with S3's
// differences (the path encoded once; x-amz-content-sha256 sent and signed). Every header
// handed to SignV4 is signed. REQUIRES: the request sent uses exactly the canonical URI and
// query computed here (else 403 SignatureDoesNotMatch). Threading: pure functions.
// Details: docs/internals.md, "SigV4".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/digest.h"  // Sha256Hex, HmacSha256: the payload hash and the signing chain
#include "base/time.h"

namespace wk {

struct SigV4Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // sent (and signed) as x-amz-security-token when non-empty
};

using HttpParams = std::vector<std::pair<std::string, std::string>>;

// The views must stay valid for the SignV4 call (nothing is kept after it).
struct SigV4Request {
  std::string_view method;         // "GET", "PUT", ...
  std::string_view canonical_uri;  // the encoded path as sent, from UriEncodePath
  HttpParams query;                // decoded names and values; encoded and sorted here
  HttpParams headers;              // every one is signed; names in any case
  std::string_view payload_hash;   // hex SHA-256 of the body (x-amz-content-sha256)
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;x-amz-content-sha256;x-amz-date"
  std::string signature;       // 64 lowercase hex digits
  std::string authorization;   // the Authorization header value
};

// amz_date: "YYYYMMDDTHHMMSSZ" (AmzDate); service: "s3".
SigV4Signature SignV4(const SigV4Request& request, const SigV4Credentials& credentials,
                      std::string_view region, std::string_view service,
                      std::string_view amz_date);

// AWS URI encoding: A-Z a-z 0-9 - _ . ~ unchanged, everything else %XX with uppercase hex
// (UTF-8 bytes one by one). '/' is kept when keep_slash (object key paths) and encoded as
// %2F otherwise (query names and values).
std::string UriEncode(std::string_view text, bool keep_slash);
// "/" + each segment encoded: the canonical URI and the path of the request target.
std::string UriEncodePath(std::string_view decoded_path);
// Names and values encoded, sorted by name (then value), joined as a=1&b=2. Also the query
// string of the request target, so what is signed is exactly what is sent.
std::string CanonicalQueryString(const HttpParams& query);

// The derived signing key (raw 32 bytes): HMAC chain over "AWS4"+secret, the date
// (YYYYMMDD), region, service and "aws4_request".
std::string SigV4SigningKey(std::string_view secret_key, std::string_view date,
                            std::string_view region, std::string_view service);

// "YYYYMMDDTHHMMSSZ" in UTC.
std::string AmzDate(WallTime t);

}  // namespace wk
