// PlainOrTlsSocket: one TCP connection that speaks either plain HTTP or TLS, decided when
// it is made. HttpClient's connections (http_client.cc) and the scripted test server's
// sessions (scripted_http_server.cc) hold one each, and write their Beast operations once
// for both kinds through WithStream.
//
// Invariant: exactly one of plain and tls is set, for the object's whole life.
//
// Threading: none of its own; used on the io_context's thread like the socket it holds.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <optional>
#include <utility>

namespace wk {

struct PlainOrTlsSocket {
  // TLS over socket with tls_context's settings when tls_context is set, else plain.
  // REQUIRES: tls_context, when set, outlives this object.
  PlainOrTlsSocket(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls_context) {
    if (tls_context != nullptr) {
      tls.emplace(std::move(socket), *tls_context);
    } else {
      plain.emplace(std::move(socket));
    }
  }

  // The TCP socket under either kind.
  boost::asio::ip::tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }

  // Runs op(stream) on whichever stream this is (op is generic over the stream type).
  template <typename Op>
  void WithStream(Op&& op) {
    if (tls) {
      op(*tls);
    } else {
      op(*plain);
    }
  }

  std::optional<boost::asio::ip::tcp::socket> plain;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tls;
};

}  // namespace wk
