#include "net/testing/scripted_http_server.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <deque>
#include <optional>

#include "base/check.h"
#include "net/plain_or_tls_socket.h"

namespace wk {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {
// Test requests are small; this only stops a runaway client.
constexpr std::uint64_t kMaxRequestBodyBytes = 64 * 1024 * 1024;
struct Session;
}  // namespace

struct ScriptedHttpServer::State : std::enable_shared_from_this<ScriptedHttpServer::State> {
  explicit State(net::io_context& ctx) : io(ctx), acceptor(ctx) {}

  // The first expectation with matches left, or null.
  std::shared_ptr<ScriptedExpectation> Head() {
    while (!script.empty() && script.front()->remaining == 0) script.pop_front();
    return script.empty() ? nullptr : script.front();
  }
  static void Consume(ScriptedExpectation& e) {
    if (e.remaining > 0) --e.remaining;
  }

  void Accept();
  void Stop();

  net::io_context& io;
  tcp::acceptor acceptor;
  std::unique_ptr<ssl::context> tls;
  std::deque<std::shared_ptr<ScriptedExpectation>> script;
  std::vector<ReceivedRequest> received;
  int accepted = 0;
  int unexpected = 0;
  bool stopped = false;
  std::map<int, std::shared_ptr<Session>> sessions;  // open connections, by number
};

namespace {

using ServerState = ScriptedHttpServer::State;

struct Session : PlainOrTlsSocket, std::enable_shared_from_this<Session> {
  Session(std::shared_ptr<ServerState> s, int number, tcp::socket socket)
      : PlainOrTlsSocket(std::move(socket), s->tls.get()), server(std::move(s)), id(number), timer(server->io) {}

  void Start() {
    if (!tls) {
      ReadNext();
      return;
    }
    tls->async_handshake(ssl::stream_base::server, [self = shared_from_this()](const error_code& ec) {
      if (ec) {
        self->Close();  // e.g. the client rejected our certificate
        return;
      }
      self->ReadNext();
    });
  }

  void ReadNext() {
    if (closed || server->stopped) return;
    if (auto head = server->Head(); head && head->action == ScriptedExpectation::Action::kCloseBeforeRead) {
      ServerState::Consume(*head);
      Close();
      return;
    }
    parser.emplace();
    parser->body_limit(kMaxRequestBodyBytes);
    WithStream([this](auto& stream) {
      http::async_read(stream, buffer, *parser,
                       [self = shared_from_this()](const error_code& ec, std::size_t) {
                         self->OnRead(ec);
                       });
    });
  }

  void OnRead(const error_code& ec) {
    if (ec || closed || server->stopped) {
      Close();  // the client closed, or we are stopping
      return;
    }
    auto& req = parser->get();
    ReceivedRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    std::size_t q = r.target.find('?');
    r.path = r.target.substr(0, q);
    r.query = q == std::string::npos ? "" : r.target.substr(q + 1);
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(field.value());
    }
    r.body = req.body();
    r.connection = id;
    const bool keep_alive = req.keep_alive();
    const bool is_head = req.method() == http::verb::head;
    server->received.push_back(r);

    auto head = server->Head();
    if (!head || head->action == ScriptedExpectation::Action::kCloseBeforeRead ||
        head->method != r.method || head->path != r.path) {
      ++server->unexpected;
      ADD_FAILURE() << "scripted server: unexpected request " << r.method << " " << r.target
                    << (head ? " (expected " + head->method + " " + head->path + ")"
                             : std::string(" (the script is empty)"));
      Reply(500, {}, "unexpected request", false, is_head);
      return;
    }
    ServerState::Consume(*head);
    if (head->check) head->check(r);
    if (head->delay > Duration::zero()) {
      timer.expires_after(head->delay);
      timer.async_wait([self = shared_from_this(), head, keep_alive, is_head](const error_code& wait_ec) {
        if (wait_ec || self->closed || self->server->stopped) return;
        self->Act(*head, keep_alive, is_head);
      });
      return;
    }
    Act(*head, keep_alive, is_head);
  }

  void Act(const ScriptedExpectation& e, bool keep_alive, bool is_head) {
    switch (e.action) {
      case ScriptedExpectation::Action::kRespond:
        Reply(e.status, e.headers, e.body, keep_alive, is_head);
        return;
      case ScriptedExpectation::Action::kDrop:
        Close();
        return;
      case ScriptedExpectation::Action::kHang:
      case ScriptedExpectation::Action::kCloseBeforeRead:
        return;  // stay open and silent; Close() or the server's Stop ends it
    }
  }

  void Reply(int status, const std::vector<std::pair<std::string, std::string>>& headers,
             const std::string& body, bool keep_alive, bool is_head) {
    response.emplace(static_cast<http::status>(status), 11);
    bool has_length = false;
    for (const auto& [name, value] : headers) {
      response->set(name, value);
      if (boost::beast::iequals(name, "content-length")) has_length = true;
    }
    if (is_head) {
      // A HEAD reply announces a length but sends no body.
      if (!has_length) response->content_length(body.size());
    } else {
      response->body() = body;
      response->prepare_payload();
    }
    response->keep_alive(keep_alive);
    WithStream([this, keep_alive](auto& stream) {
      http::async_write(stream, *response,
                        [self = shared_from_this(), keep_alive](const error_code& ec, std::size_t) {
                          if (ec || !keep_alive) {
                            self->Close();
                          } else {
                            self->ReadNext();
                          }
                        });
    });
  }

  void Close() {
    if (closed) return;
    closed = true;
    timer.cancel();
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
    server->sessions.erase(id);  // the caller's handler still holds a reference to us
  }

  std::shared_ptr<ServerState> server;
  const int id;
  boost::beast::flat_buffer buffer;
  std::optional<http::request_parser<http::string_body>> parser;
  std::optional<http::response<http::string_body>> response;
  net::steady_timer timer;
  bool closed = false;
};

}  // namespace

void ServerState::Accept() {
  acceptor.async_accept([self = shared_from_this()](const error_code& ec, tcp::socket socket) {
    if (ec || self->stopped) return;
    const int number = ++self->accepted;
    auto session = std::make_shared<Session>(self, number, std::move(socket));
    self->sessions[number] = session;
    session->Start();
    self->Accept();
  });
}

void ServerState::Stop() {
  if (stopped) return;
  stopped = true;
  error_code ignored;
  acceptor.close(ignored);
  auto open = std::move(sessions);
  sessions.clear();
  for (auto& [id, session] : open) session->Close();
}

// ---- ScriptedExpectation

ScriptedExpectation& ScriptedExpectation::Respond(
    int s, std::vector<std::pair<std::string, std::string>> h, std::string b) {
  action = Action::kRespond;
  status = s;
  headers = std::move(h);
  body = std::move(b);
  return *this;
}
ScriptedExpectation& ScriptedExpectation::DropAfterRequest() {
  action = Action::kDrop;
  return *this;
}
ScriptedExpectation& ScriptedExpectation::Hang() {
  action = Action::kHang;
  return *this;
}
ScriptedExpectation& ScriptedExpectation::CloseBeforeRead() {
  action = Action::kCloseBeforeRead;
  return *this;
}
ScriptedExpectation& ScriptedExpectation::Delay(Duration d) {
  delay = d;
  return *this;
}
ScriptedExpectation& ScriptedExpectation::Times(int n) {
  WK_CHECK(n >= 1, "Times(n) needs n >= 1");
  remaining = n;
  return *this;
}
ScriptedExpectation& ScriptedExpectation::Repeatedly() {
  remaining = -1;
  return *this;
}
ScriptedExpectation& ScriptedExpectation::Check(std::function<void(const ReceivedRequest&)> c) {
  check = std::move(c);
  return *this;
}

// ---- ScriptedHttpServer

ScriptedHttpServer::ScriptedHttpServer(net::io_context& io) : ScriptedHttpServer(io, Options{}) {}

ScriptedHttpServer::ScriptedHttpServer(net::io_context& io, Options options)
    : state_(std::make_shared<State>(io)) {
  if (!options.tls_cert_pem.empty()) {
    state_->tls = std::make_unique<ssl::context>(ssl::context::tls_server);
    state_->tls->use_certificate_chain(net::buffer(options.tls_cert_pem));
    state_->tls->use_private_key(net::buffer(options.tls_key_pem), ssl::context::pem);
  }
  tcp::endpoint local(net::ip::make_address("127.0.0.1"), 0);
  state_->acceptor.open(local.protocol());
  state_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  state_->acceptor.bind(local);
  state_->acceptor.listen();
  state_->Accept();
}

ScriptedHttpServer::~ScriptedHttpServer() { state_->Stop(); }

std::uint16_t ScriptedHttpServer::port() const { return state_->acceptor.local_endpoint().port(); }

std::string ScriptedHttpServer::url() const {
  return std::string(state_->tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port());
}

ScriptedExpectation& ScriptedHttpServer::Expect(std::string method, std::string path) {
  auto e = std::make_shared<ScriptedExpectation>();
  e->method = std::move(method);
  e->path = std::move(path);
  state_->script.push_back(e);
  return *e;
}

void ScriptedHttpServer::ExpectCloseBeforeRead() {
  auto e = std::make_shared<ScriptedExpectation>();
  e->CloseBeforeRead();
  state_->script.push_back(e);
}

const std::vector<ReceivedRequest>& ScriptedHttpServer::received() const { return state_->received; }
int ScriptedHttpServer::connections_accepted() const { return state_->accepted; }
int ScriptedHttpServer::open_connections() const { return static_cast<int>(state_->sessions.size()); }
int ScriptedHttpServer::unexpected_requests() const { return state_->unexpected; }

void ScriptedHttpServer::VerifyAllConsumed() const {
  for (const auto& e : state_->script) {
    if (e->remaining > 0) {
      ADD_FAILURE() << "scripted server: expected request never arrived: "
                    << (e->action == ScriptedExpectation::Action::kCloseBeforeRead
                            ? std::string("(close before read)")
                            : e->method + " " + e->path)
                    << " (" << e->remaining << " left)";
    }
  }
}

Task<bool> WaitUntil(Env& env, std::function<bool()> done, Duration limit) {
  const MonoTime deadline = env.MonoNow() + limit;
  while (!done()) {
    if (env.MonoNow() >= deadline) co_return false;
    if (!co_await env.SleepFor(std::chrono::milliseconds(2))) co_return false;
  }
  co_return true;
}

// ---- Test certificates

TestCertificate MakeSelfSignedCertificate(const std::string& ip_or_host) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  WK_CHECK(key != nullptr, "EC key generation failed");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(ip_or_host.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  error_code ec;
  net::ip::make_address(ip_or_host, ec);
  const std::string san = (ec ? "DNS:" : "IP:") + ip_or_host;
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san.c_str());
  WK_CHECK(ext != nullptr, "subjectAltName extension failed");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  WK_CHECK(X509_sign(cert, key, EVP_sha256()) > 0, "X509_sign failed");

  auto to_pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    WK_CHECK(write(bio) == 1, "PEM write failed");
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<std::size_t>(n));
    BIO_free(bio);
    return out;
  };
  TestCertificate out;
  out.cert_pem = to_pem([cert](BIO* b) { return PEM_write_bio_X509(b, cert); });
  out.key_pem = to_pem([key](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

}  // namespace wk
