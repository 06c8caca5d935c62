// The small HTTP helpers of the node's JSON routes (server/actor_admin.h and its history
// routes): the target's path, query and segments, query values, bounded integers, and JSON
// answers and errors (a failed call's Status mapped to 400/404/503/500). Threading: pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "net/http_types.h"
#include "server/json_writer.h"

namespace wk::admin_http {

std::string_view PathOf(std::string_view target);
std::string_view QueryOf(std::string_view target);
// application/x-www-form-urlencoded: '+' is a space, %XX a byte. A bad escape is kept as is.
std::string Unescape(std::string_view s);
std::map<std::string, std::string> ParseQuery(std::string_view query);
// The path's non-empty segments.
std::vector<std::string_view> Segments(std::string_view path);
// A decimal in [lo, hi], nothing else.
bool ParseInt(const std::string& s, std::int64_t lo, std::int64_t hi, std::int64_t* out);
ServerResponse Json(int status, std::string body);
// {"error": message}; retry adds Retry-After: 1; 401 adds WWW-Authenticate.
ServerResponse Error(int status, std::string_view message, bool retry = false);
// The answer for a failed bucket or control call.
ServerResponse ErrorFor(const Status& s, std::string_view what);
// The same answer with the status's own message.
ServerResponse ErrorOf(const Status& s);
// bytes as text when they are (or format says "text"), else hex, with name_encoding.
void WriteBytes(JsonWriter& w, std::string_view name, std::string_view bytes, std::string_view format);

}  // namespace wk::admin_http
