// HttpEndpoint: where an HTTP client connects (scheme, host, port), and the parser of the
// http(s)://host[:port] URL that names it. The S3 backend (store/s3/s3_config.h) and the
// node-to-node forwarder name their peers with it.
//
// Every parse error is kInvalidArgument with a one-line message quoting the URL.
//
// Threading: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace wk {

// The parts of an endpoint URL.
struct HttpEndpoint {
  bool tls = false;
  std::string host;       // without brackets for an IPv6 literal
  std::uint16_t port = 0;  // defaulted from the scheme when absent
  // host[:port] as the Host header must carry it (port omitted when it is the default;
  // brackets kept for IPv6), which is also what SigV4 signs.
  std::string host_header;
};

// Parses an endpoint URL: scheme http or https, a host, an optional numeric port, no path
// other than "/", no user info, query or fragment.
Result<HttpEndpoint> ParseHttpEndpoint(std::string_view url);

}  // namespace wk
