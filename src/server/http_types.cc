#include "server/http_types.h"

#include <boost/beast/core/string.hpp>

namespace wk {

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [header_name, value] : headers) {
    if (boost::beast::iequals(header_name, name)) return std::string_view(value);
  }
  return std::nullopt;
}

HttpResponse TextResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  response.body = std::move(body);
  return response;
}

Task<HttpResponse> ReadyResponse(HttpResponse response) { co_return std::move(response); }

}  // namespace wk
