// AWS Signature Version 4 for S3 requests (header-based, single-chunk payload).
//
// What it computes (AWS "Signature Calculations for the Authorization Header:
// Transferring Payload in a Single Chunk"):
//   canonical request = METHOD \n canonical URI \n canonical query \n canonical headers \n
//                       signed header names \n payload hash
//   string to sign    = "AWS4-HMAC-SHA256" \n amz-date \n date/region/s3/aws4_request \n
//                       hex(sha256(canonical request))
//   signing key       = HMAC chain over "AWS4"+secret, date, region, service, "aws4_request"
//   Authorization     = AWS4-HMAC-SHA256 Credential=AKID/scope, SignedHeaders=..., Signature=...
//
// S3 differs from the other AWS services in two ways that matter here: the URI path is
// encoded once (not twice), and the payload hash is sent in x-amz-content-sha256 and
// must be signed. The caller chooses which headers to sign (S3Store signs host,
// x-amz-content-sha256, x-amz-date and, when present, if-match, if-none-match,
// content-type and x-amz-security-token); every header handed to SignV4 is signed.
//
// The request actually sent must use exactly the canonical URI and query computed here
// (S3Store builds its request target from UriEncodePath and CanonicalQueryString), or
// the server's recomputation differs and it answers 403 SignatureDoesNotMatch.
//
// Threading: pure functions; safe from any thread.
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
