#include "net/http_types.h"

#include "base/ascii.h"

namespace wk {

std::optional<std::string_view> ServerRequest::Header(std::string_view name) const {
  for (const auto& [header_name, value] : headers) {
    if (EqualsIgnoreAsciiCase(header_name, name)) return std::string_view(value);
  }
  return std::nullopt;
}

void ForEachHeaderListItem(std::string_view list, const std::function<void(std::string_view)>& fn) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

bool HeaderListHasToken(std::string_view list, std::string_view token) {
  bool found = false;
  ForEachHeaderListItem(list, [&](std::string_view item) { found = found || EqualsIgnoreAsciiCase(item, token); });
  return found;
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
