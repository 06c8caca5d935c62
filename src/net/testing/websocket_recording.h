// Test-only: a WebSocketHandler (net/websocket.h) that records what one end of a connection
// saw, for the WebSocket client and relay tests.
//
// Threading: the loop thread (the handler's calls and the test's reads of Seen).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "env/task.h"
#include "net/websocket.h"

namespace wk::websocket_test {

// What one end's handler saw: each message (binary?, data) in order, and the close.
struct Seen {
  std::vector<std::pair<bool, std::string>> messages;
  std::optional<std::pair<int, std::string>> closed;
  int closed_calls = 0;  // OnClosed is called once per connection
};

class Recording final : public WebSocketHandler {
 public:
  explicit Recording(Seen* seen) : seen_(seen) {}
  Task<void> OnMessage(bool binary, std::string data) override { return Record(seen_, binary, std::move(data)); }
  void OnClosed(int code, std::string reason) override {
    seen_->closed.emplace(code, std::move(reason));
    ++seen_->closed_calls;
  }

 private:
  static Task<void> Record(Seen* seen, bool binary, std::string data) {
    seen->messages.emplace_back(binary, std::move(data));
    co_return;
  }
  Seen* seen_;
};

}  // namespace wk::websocket_test
