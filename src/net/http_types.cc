#include "net/http_types.h"

#include "base/ascii.h"

namespace wk {

std::optional<std::string_view> ServerRequest::Header(std::string_view name) const {
  for (const auto& [header_name, value] : headers) {
    if (EqualsIgnoreAsciiCase(header_name, name)) return std::string_view(value);
  }
  return std::nullopt;
}

ServerResponse TextResponse(int status, std::string body) {
  ServerResponse response;
  response.status = status;
  response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  response.body = std::move(body);
  return response;
}

Task<ServerResponse> ReadyResponse(ServerResponse response) { co_return std::move(response); }

}  // namespace wk
