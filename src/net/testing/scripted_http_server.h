// ScriptedHttpServer: an HTTP/1.1 (optionally TLS) server on 127.0.0.1 that answers from a
// script, for tests of the S3 client against answers a real server rarely or never gives
// (409 ConditionalRequestConflict, 503 SlowDown, lost replies, stalls). A test queues
// expectations in order; each request is matched against the first unconsumed one (method
// and path; the query is read from received()). A request that does not match, or arrives
// when the script is empty, fails the running test (ADD_FAILURE) and is answered 500.
//
// Threading: its handlers run on the io_context it is given (the test's RealEnv loop), so
// script and checks need no locking; call every method on that thread (or before the loop
// runs). Destroying the server closes the listener and every connection.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/time.h"
#include "env/env.h"

namespace wk {

struct ReceivedRequest {
  std::string method;  // "GET"
  std::string target;  // "/bucket/key?x=1", as sent
  std::string path;    // "/bucket/key"
  std::string query;   // "x=1"
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  int connection = 0;  // 1, 2, ... in accept order
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class ScriptedExpectation {
 public:
  // An ordinary reply (Content-Length set from the body, or taken from the headers for a
  // HEAD reply).
  ScriptedExpectation& Respond(int status, std::vector<std::pair<std::string, std::string>> headers = {},
                               std::string body = {});
  // Read the request, close without replying (a reply lost).
  ScriptedExpectation& DropAfterRequest();
  // Read the request, never reply (until the client gives up).
  ScriptedExpectation& Hang();
  // The next time a connection waits for a request, close it without reading (the server
  // closed an idle keep-alive connection, or a fresh one at accept).
  ScriptedExpectation& CloseBeforeRead();
  // Wait d before the reply or the drop.
  ScriptedExpectation& Delay(Duration d);
  // Match n requests / every later request.
  ScriptedExpectation& Times(int n);
  ScriptedExpectation& Repeatedly();
  // Runs on each matching request (put EXPECT_* checks here).
  ScriptedExpectation& Check(std::function<void(const ReceivedRequest&)> check);

  enum class Action : std::uint8_t { kRespond, kDrop, kHang, kCloseBeforeRead };
  std::string method, path;
  Action action = Action::kRespond;
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  Duration delay{0};
  int remaining = 1;  // -1: any number
  std::function<void(const ReceivedRequest&)> check;
};

class ScriptedHttpServer {
 public:
  struct Options {
    // PEM certificate chain and private key: serve https instead of http.
    std::string tls_cert_pem, tls_key_pem;
  };

  explicit ScriptedHttpServer(boost::asio::io_context& io);
  ScriptedHttpServer(boost::asio::io_context& io, Options options);
  // Handlers still queued hold the shared state and find it stopped.
  ~ScriptedHttpServer();
  ScriptedHttpServer(const ScriptedHttpServer&) = delete;
  ScriptedHttpServer& operator=(const ScriptedHttpServer&) = delete;

  std::uint16_t port() const;
  // "http://127.0.0.1:PORT" (or https).
  std::string url() const;

  // Appends an expectation: the next request must be `method path`.
  ScriptedExpectation& Expect(std::string method, std::string path);
  // A CloseBeforeRead fault (it matches no request).
  void ExpectCloseBeforeRead();

  const std::vector<ReceivedRequest>& received() const;
  int connections_accepted() const;
  int open_connections() const;
  int unexpected_requests() const;
  // ADD_FAILURE for every expectation with matches left (Repeatedly ones excepted).
  void VerifyAllConsumed() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Test helper: polls done() every few milliseconds until it holds (true) or `limit`
// passes (false). For "wait until the server has seen the request" in tests that must not
// depend on how fast a loaded machine runs.
Task<bool> WaitUntil(Env& env, std::function<bool()> done, Duration limit = std::chrono::seconds(10));

// A self-signed certificate (and its key) for ip_or_host, valid for a day, for TLS tests.
struct TestCertificate {
  std::string cert_pem, key_pem;
};
TestCertificate MakeSelfSignedCertificate(const std::string& ip_or_host);

}  // namespace wk
