// kv: a small key-value store per actor, over HTTP.
//
//   PUT    /<key>         stores the request body under key (200; 400 for an empty key)
//   GET    /<key>         the value (404 if absent)
//   DELETE /<key>         removes it (204; 404 if absent)
//   GET    /?prefix=P     the keys that begin with P, one per line, in byte order
//                         (no prefix, or an empty one: every key); the path may also be empty
//
// The key is the request path after its leading '/', byte for byte as the actor receives
// it (so "/a/b" is the key "a/b"). Keys longer than the node's max_key_bytes (2048 by
// default) and values over max_value_bytes (128 KiB) fail the request: the node answers
// with an error naming the limit, and nothing is stored.
#include <string>
#include <string_view>

#include "wasmkeep.hpp"

namespace {

// Entries fetched per storage_list call while listing. A listing carries values too, so
// the page bounds the memory a listing takes: 32 values of at most 128 KiB is 4 MiB, well
// inside the 16 MiB an actor built by scripts/build-actor.sh may use.
constexpr int32_t kListPageEntries = 32;

void ListKeys(const wasmkeep::Request& req, wasmkeep::Response& res) {
  wasmkeep::storage::ListOptions options;
  options.prefix = req.query_param("prefix").value_or("");
  res.status(200).header("Content-Type", "text/plain; charset=utf-8");
  std::string page;
  wasmkeep::storage::for_each(
      options,
      [&](std::string_view key, std::string_view /*value*/) {
        page.append(key);
        page.push_back('\n');
      },
      kListPageEntries);
  res.write(page);
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::string_view path = req.path();
  std::string_view key = path.empty() ? path : path.substr(1);  // without the leading '/'
  const std::string& method = req.method();

  if (key.empty()) {
    if (method == "GET") return ListKeys(req, res);
    if (method == "PUT" || method == "DELETE") {
      res.text(400, "empty key: use " + method + " /<key>\n");
      return;
    }
  } else if (method == "GET") {
    std::optional<std::string> value = wasmkeep::storage::get(key);
    if (!value) {
      res.text(404, "no such key\n");
      return;
    }
    res.status(200).header("Content-Type", "application/octet-stream").write(*value);
    return;
  } else if (method == "PUT") {
    wasmkeep::storage::put(key, req.body());
    res.text(200, "stored\n");
    return;
  } else if (method == "DELETE") {
    if (!wasmkeep::storage::del(key)) {
      res.text(404, "no such key\n");
      return;
    }
    res.status(204);
    return;
  }
  res.header("Allow", "GET, PUT, DELETE");
  res.text(405, "method not allowed\n");
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
