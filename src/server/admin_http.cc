#include "server/admin_http.h"

#include <charconv>


namespace wk::admin_http {

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }
std::string_view QueryOf(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
}

std::string Unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size()) {
      std::string byte;
      if (FromHex(s.substr(i + 1, 2), &byte)) {
        out += byte;
        i += 2;
      } else {
        out.push_back('%');
      }
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    out[Unescape(part.substr(0, eq))] = eq == std::string_view::npos ? std::string() : Unescape(part.substr(eq + 1));
  }
  return out;
}

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    const auto slash = path.find('/');
    out.push_back(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  return out;
}

bool ParseInt(const std::string& s, std::int64_t lo, std::int64_t hi, std::int64_t* out) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

ServerResponse Json(int status, std::string body) {
  ServerResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("Cache-Control", "no-store");
  r.body = std::move(body);
  r.body.push_back('\n');
  return r;
}

ServerResponse Error(int status, std::string_view message, bool retry) {
  JsonWriter w;
  w.BeginObject().Member("error", message).EndObject();
  ServerResponse r = Json(status, std::move(w).Take());
  if (retry) r.headers.emplace_back("Retry-After", "1");
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

ServerResponse ErrorFor(const Status& s, std::string_view what) {
  return ErrorOf(Status(s.code(), std::string(what) + ": " + s.message()));
}

ServerResponse ErrorOf(const Status& s) {
  const std::string& message = s.message();
  switch (s.code()) {
    case Code::kInvalidArgument: return Error(400, message);
    case Code::kNotFound: return Error(404, message);
    case Code::kRetryable:
    case Code::kUnknownOutcome:
    case Code::kCancelled:
    case Code::kPreconditionFailed: return Error(503, message, true);
    default: return Error(500, message);
  }
}

void WriteBytes(JsonWriter& w, std::string_view name, std::string_view bytes, std::string_view format) {
  const bool text = format == "text" || (format != "hex" && IsText(bytes));
  w.Key(name).String(text ? std::string(bytes) : Hex(bytes));
  w.Key(std::string(name) + "_encoding").String(text ? "text" : "hex");
}

}  // namespace wk::admin_http
