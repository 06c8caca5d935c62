// ApiRequest / ApiResponse: one HTTP exchange as the actor API's front (front.h) and the
// forwarder (forwarder.h) see it, independent of the server and client that carry it.
//
// Threading: plain values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wk {

using ApiHeaders = std::vector<std::pair<std::string, std::string>>;

struct ApiRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // path and query as sent
  ApiHeaders headers;  // in order, names as sent
  std::string body;
  // The first header of that name (case-insensitive).
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct ApiResponse {
  int status = 200;
  ApiHeaders headers;  // Content-Length and Connection are the server's business
  std::string body;
};

// Case-insensitive ASCII comparison of header names.
bool HeaderNameEquals(std::string_view a, std::string_view b);

}  // namespace wk
