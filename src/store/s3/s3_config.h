// S3Config: where an s3:// store lives and how to talk to it, and the parser of the
// s3:// URL that names it.
//
// URL grammar (everything but the bucket is optional):
//
//   s3://BUCKET?endpoint=URL&region=R&if_match_quoted=true|false
//              &conditional_delete=true|false&max_connections=N
//
//   endpoint    http(s)://host[:port]; else $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, the AWS
//               profile's endpoint_url (aws_profile.h); else, when a region is known from
//               anywhere, AWS S3 itself: https://s3.<region>.amazonaws.com. Otherwise an error.
//   region      SigV4 signing region; else $AWS_REGION, $AWS_DEFAULT_REGION, the AWS
//               profile's region; else us-east-1 (what RGW and MinIO expect).
//   if_match_quoted  send If-Match as "etag" (AWS, documented) or etag (Ceph RGW, which
//               fails every quoted If-Match; FACTS.md "RGW quirks").
//   conditional_delete  whether the server honours If-Match on DELETE (off by default:
//               several S3-compatible servers silently ignore it; Ceph RGW 16.2 does,
//               it deletes anyway, see s3_store_rgw_test.cc).
//   max_connections  bound on the keep-alive pool (1..1024).
//
// Credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// optional AWS_SESSION_TOKEN), else from the AWS profile (~/.aws/credentials, then
// ~/.aws/config; AWS_PROFILE), never from the URL: URLs end up in logs and shell history.
// Explicit settings win: the URL over the environment over the files. The environment and
// the files are read through functions so tests can inject them.
//
// Every parse error is kInvalidArgument with a one-line message naming the field.
//
// Threading: plain values and pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/time.h"
#include "net/http_endpoint.h"
#include "store/s3/aws_profile.h"

namespace wk {

struct S3Config {
  std::string bucket;
  std::string endpoint;  // http(s)://host[:port], no path
  std::string region = "us-east-1";
  std::string access_key, secret_key, session_token;
  bool if_match_quoted = true;
  bool path_style = true;  // only path-style is implemented (S3Store::Create checks)
  int max_connections = 64;
  bool conditional_delete = false;

  // Internal retries of 409 ConditionalRequestConflict / 503 (s3_store.h): full-jitter
  // exponential backoff starting at retry_base_delay, each sleep at most retry_max_delay.
  // Not settable from the URL; tests shorten them.
  Duration retry_base_delay = std::chrono::milliseconds(50);
  Duration retry_max_delay = std::chrono::seconds(2);

  // Where the region, endpoint and credentials came from ("region from AWS_REGION; ..."),
  // for the node's start-up log line. Never a secret.
  std::string settings_from;
};

// The S3 endpoint is an HTTP endpoint (net/http_endpoint.h).
using S3Endpoint = HttpEndpoint;

using GetenvFn = std::function<std::optional<std::string>(const char*)>;

// The process environment (std::getenv), for production callers.
GetenvFn SystemGetenv();

// Parses an endpoint URL (ParseHttpEndpoint's grammar and errors).
inline Result<S3Endpoint> ParseS3Endpoint(std::string_view url) { return ParseHttpEndpoint(url); }

// Parses an s3:// URL (grammar above), completing it from getenv and the AWS shared files
// (read through read_file).
Result<S3Config> ParseS3Url(std::string_view url, const GetenvFn& getenv,
                            const ReadFileFn& read_file = SystemReadFile());

// The URL of cfg without secrets, for logs (ObjectStore::Describe).
std::string DescribeS3Config(const S3Config& cfg);

}  // namespace wk
