// TLS between nodes (docs/security.md, "Between nodes"): a process's fresh, never-stored
// EC P-256 identity, its pin (hex SHA-256 of the public key, published in its node record),
// and the TLS contexts that accept a peer iff its pin is the expected one (names, issuer and
// dates are not looked at: the bucket is the authority). Threading: a TlsIdentity is
// immutable and shareable; pin checks run inside the handshake on the thread driving it.
// Details (the contexts): docs/internals.md, "TLS identities".
#pragma once

#include <openssl/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace boost::asio::ssl {
class context;
}

namespace wk {

// Hex characters in a pin (SHA-256).
inline constexpr std::size_t kPinHexChars = 64;

// Whether text has the form of a pin: 64 lowercase hex digits.
bool IsPin(std::string_view text);

// The pin of a certificate's public key: lowercase hex SHA-256 of its DER
// SubjectPublicKeyInfo. Empty if the certificate has no public key it can encode.
std::string SpkiPin(const X509* certificate);

class TlsIdentity {
 public:
  // A fresh EC P-256 key and a self-signed certificate naming common_name (for people
  // reading a handshake; nothing checks it). kFatal if OpenSSL fails.
  static Result<std::unique_ptr<TlsIdentity>> Generate(std::string_view common_name);
  // The same around an existing private key in PEM (tests: a key the test made, so a test
  // client can present the node's identity). kInvalidArgument if it does not parse.
  static Result<std::unique_ptr<TlsIdentity>> FromPrivateKeyPem(std::string_view key_pem,
                                                                std::string_view common_name);
  ~TlsIdentity();
  TlsIdentity(const TlsIdentity&) = delete;
  TlsIdentity& operator=(const TlsIdentity&) = delete;

  // The pin of this identity's key (see above).
  const std::string& pin() const { return pin_; }
  // The certificate in PEM (tests; the key is never exported).
  std::string CertificatePem() const;
  // Makes ctx present this certificate and key. kFatal if OpenSSL refuses them.
  Status UseIn(boost::asio::ssl::context& ctx) const;

 private:
  TlsIdentity(EVP_PKEY* key, X509* certificate, std::string pin)
      : key_(key), certificate_(certificate), pin_(std::move(pin)) {}
  static Result<std::unique_ptr<TlsIdentity>> Wrap(EVP_PKEY* key, std::string_view common_name);

  EVP_PKEY* key_;      // owned
  X509* certificate_;  // owned
  std::string pin_;
};

// A client context for one peer whose pin must be expected_pin (see above).
// REQUIRES: IsPin(expected_pin).
Result<std::shared_ptr<boost::asio::ssl::context>> MakePinnedClientContext(const TlsIdentity& identity,
                                                                           std::string expected_pin);

// The peer listener's context (see above). accept_pin is kept by the context.
Result<std::shared_ptr<boost::asio::ssl::context>> MakePeerServerContext(
    const TlsIdentity& identity, std::function<bool(std::string_view pin)> accept_pin);

// The client API's context from PEM files. kInvalidArgument names the file that does not
// load (missing, unreadable, not PEM, or a key that does not match the certificate).
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerContextFromFiles(const std::string& cert_chain_file,
                                                                              const std::string& key_file);

}  // namespace wk
