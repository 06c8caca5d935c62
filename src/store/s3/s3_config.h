// S3Config: where an s3:// store lives and how to talk to it, and the parser of its URL,
// s3://BUCKET?endpoint=URL&region=R&if_match_quoted=&conditional_delete=&max_connections=
// (docs/storage-backends.md, "Where the S3 settings come from"). Guarantees: explicit
// settings win (URL, then environment, then AWS profile files); credentials never come from
// the URL; every parse error is kInvalidArgument naming the field. Threading: plain values
// and pure functions. Details (each field's fallbacks): docs/internals.md, "S3Config".
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
