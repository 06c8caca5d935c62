// counter: a durable counter per actor.
//
//   POST /increment  adds 1 and answers the new value ("3\n")
//   GET  (any path)  answers the current value ("0\n" before the first increment)
//   anything else    405 (other methods) or 404 (POST to another path)
//
// The value lives under one key as decimal text. Each request is one event, and the
// increment's read and write are in that event's atomic batch, so concurrent increments
// of one actor never lose an update: the node runs one event of an actor at a time.
#include <string>

#include "wasmkeep.hpp"

namespace {

constexpr std::string_view kCountKey = "count";

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.method() == "GET") {
    int64_t count = wasmkeep::storage::get_int64(kCountKey).value_or(0);
    res.text(200, std::to_string(count) + "\n");
    return;
  }
  if (req.method() == "POST") {
    if (req.path() != "/increment") {
      res.text(404, "POST /increment adds one; GET shows the count\n");
      return;
    }
    int64_t count = wasmkeep::storage::get_int64(kCountKey).value_or(0) + 1;
    wasmkeep::storage::put_int64(kCountKey, count);
    res.text(200, std::to_string(count) + "\n");
    return;
  }
  res.header("Allow", "GET, POST");
  res.text(405, "method not allowed: use GET or POST /increment\n");
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
