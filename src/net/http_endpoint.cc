#include "net/http_endpoint.h"

#include <charconv>

namespace wk {
namespace {

Status EndpointError(std::string_view url, std::string_view why) {
  return InvalidArgument("bad endpoint URL '" + std::string(url) + "': " + std::string(why));
}

}  // namespace

Result<HttpEndpoint> ParseHttpEndpoint(std::string_view url) {
  HttpEndpoint ep;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    ep.tls = true;
    rest = url.substr(8);
  } else {
    return EndpointError(url, "scheme must be http or https");
  }
  // Only an optional trailing "/" may follow the authority: the bucket goes in the path.
  std::size_t slash = rest.find_first_of("/?#");
  if (slash != std::string_view::npos) {
    if (rest.substr(slash) != "/") return EndpointError(url, "must not have a path, query or fragment");
    rest = rest.substr(0, slash);
  }
  if (rest.find('@') != std::string_view::npos) {
    return EndpointError(url, "must not carry user info (credentials come from the environment)");
  }
  std::string_view host, port_text;
  if (rest.starts_with("[")) {  // IPv6 literal
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return EndpointError(url, "unclosed '[' in host");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return EndpointError(url, "junk after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) return EndpointError(url, "empty port");
    }
  } else {
    std::size_t colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port_text = rest.substr(colon + 1);
      if (port_text.empty()) return EndpointError(url, "empty port");
    } else {
      host = rest;
    }
  }
  if (host.empty()) return EndpointError(url, "host required");
  for (char c : host) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == '/' || c == '\\' || c == 0x7f) {
      return EndpointError(url, "host contains an invalid character");
    }
  }
  ep.host = std::string(host);
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      return EndpointError(url, "port must be a number in 1..65535");
    }
    ep.port = static_cast<std::uint16_t>(value);
  }
  const std::uint16_t default_port = ep.tls ? 443 : 80;
  if (ep.port == 0) ep.port = default_port;
  const bool v6 = ep.host.find(':') != std::string::npos;
  ep.host_header = v6 ? "[" + ep.host + "]" : ep.host;
  if (ep.port != default_port) ep.host_header += ":" + std::to_string(ep.port);
  return ep;
}

}  // namespace wk
