#include "net/tls_identity.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/context.hpp>
#include <cstring>

#include "base/digest.h"

namespace wk {

namespace ssl = boost::asio::ssl;

namespace {

// Validity of the self-signed certificate. Nothing checks it (peers check the pin only), but
// a well-formed certificate has dates: from an hour before now (clocks differ) to long after
// any process lives.
constexpr long kNotBeforeSeconds = -60L * 60;
constexpr long kNotAfterSeconds = 60L * 60 * 24 * 365 * 20;
// A random 128-bit serial, as RFC 5280 recommends for uniqueness.
constexpr int kSerialBytes = 16;

std::string OpenSslError(std::string_view what) {
  std::string out(what);
  const unsigned long e = ERR_get_error();
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += ": ";
    out += buf;
  }
  ERR_clear_error();
  return out;
}

// The pin of a key's public half: SHA-256 of i2d_PUBKEY (the DER SubjectPublicKeyInfo).
std::string KeyPin(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(key, &der);
  if (n <= 0) return {};
  std::string pin = Sha256Hex(std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n)));
  OPENSSL_free(der);
  return pin;
}

// The check a pinned context runs in place of certificate-chain verification: the leaf's
// pin against what the context's holder accepts.
struct PinCheck {
  std::function<bool(std::string_view)> accept;
};

int VerifyByPin(X509_STORE_CTX* store, void* arg) {
  const auto* check = static_cast<const PinCheck*>(arg);
  X509* leaf = X509_STORE_CTX_get0_cert(store);
  const std::string pin = leaf != nullptr ? SpkiPin(leaf) : std::string();
  if (!pin.empty() && check->accept(pin)) {
    X509_STORE_CTX_set_error(store, X509_V_OK);
    return 1;
  }
  X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
  return 0;
}

// A context and the pin check it points to, kept alive together.
struct PinnedContext {
  explicit PinnedContext(ssl::context::method method) : context(method) {}
  ssl::context context;
  PinCheck check;
};

Result<std::shared_ptr<ssl::context>> MakePinned(const TlsIdentity& identity, ssl::context::method method,
                                                 int verify_mode, std::function<bool(std::string_view)> accept) {
  auto holder = std::make_shared<PinnedContext>(method);
  holder->check.accept = std::move(accept);
  SSL_CTX* native = holder->context.native_handle();
  // Both ends are WasmKeep nodes of one version family: TLS 1.3 only.
  if (SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION) != 1) {
    return Fatal(OpenSslError("cannot require TLS 1.3"));
  }
  if (Status s = identity.UseIn(holder->context); !s.ok()) return s;
  SSL_CTX_set_verify(native, verify_mode, nullptr);
  SSL_CTX_set_cert_verify_callback(native, &VerifyByPin, &holder->check);
  // The aliasing constructor: the context pointer keeps its holder (and the check) alive.
  return std::shared_ptr<ssl::context>(holder, &holder->context);
}

}  // namespace

bool IsPin(std::string_view text) {
  if (text.size() != kPinHexChars) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string SpkiPin(const X509* certificate) {
  // X509_get_X509_PUBKEY takes a const certificate in OpenSSL 3.
  const X509_PUBKEY* spki = X509_get_X509_PUBKEY(certificate);
  if (spki == nullptr) return {};
  unsigned char* der = nullptr;
  const int n = i2d_X509_PUBKEY(spki, &der);
  if (n <= 0) return {};
  std::string pin = Sha256Hex(std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n)));
  OPENSSL_free(der);
  return pin;
}

Result<std::unique_ptr<TlsIdentity>> TlsIdentity::Generate(std::string_view common_name) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return Fatal(OpenSslError("cannot generate an EC P-256 key"));
  return Wrap(key, common_name);
}

Result<std::unique_ptr<TlsIdentity>> TlsIdentity::FromPrivateKeyPem(std::string_view key_pem,
                                                                    std::string_view common_name) {
  BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  if (bio == nullptr) return Fatal(OpenSslError("cannot read the key"));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) return InvalidArgument(OpenSslError("the private key does not parse as PEM"));
  return Wrap(key, common_name);
}

Result<std::unique_ptr<TlsIdentity>> TlsIdentity::Wrap(EVP_PKEY* key, std::string_view common_name) {
  X509* cert = X509_new();
  auto fail = [&](std::string_view what) -> Status {
    X509_free(cert);
    EVP_PKEY_free(key);
    return Fatal(OpenSslError(what));
  };
  if (cert == nullptr) return fail("cannot allocate a certificate");
  unsigned char serial_bytes[kSerialBytes];
  if (RAND_bytes(serial_bytes, sizeof serial_bytes) != 1) return fail("cannot draw a serial number");
  serial_bytes[0] &= 0x7f;  // a positive INTEGER
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  const bool serial_set = serial != nullptr && BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert)) != nullptr;
  BN_free(serial);
  if (!serial_set) return fail("cannot set the serial number");
  const std::string cn(common_name.empty() ? "wasmkeep node" : common_name);
  X509_NAME* name = X509_get_subject_name(cert);
  if (X509_set_version(cert, X509_VERSION_3) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(cert), kNotBeforeSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert), kNotAfterSeconds) == nullptr ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(cert, name) != 1 || X509_set_pubkey(cert, key) != 1 ||
      X509_sign(cert, key, EVP_sha256()) <= 0) {
    return fail("cannot make the self-signed certificate");
  }
  std::string pin = SpkiPin(cert);
  if (!IsPin(pin) || pin != KeyPin(key)) return fail("cannot compute the certificate's pin");
  return std::unique_ptr<TlsIdentity>(new TlsIdentity(key, cert, std::move(pin)));
}

TlsIdentity::~TlsIdentity() {
  X509_free(certificate_);
  EVP_PKEY_free(key_);
}

std::string TlsIdentity::CertificatePem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  std::string out;
  if (PEM_write_bio_X509(bio, certificate_) == 1) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    if (n > 0) out.assign(data, static_cast<std::size_t>(n));
  }
  BIO_free(bio);
  return out;
}

Status TlsIdentity::UseIn(ssl::context& ctx) const {
  SSL_CTX* native = ctx.native_handle();
  if (SSL_CTX_use_certificate(native, certificate_) != 1 || SSL_CTX_use_PrivateKey(native, key_) != 1 ||
      SSL_CTX_check_private_key(native) != 1) {
    return Fatal(OpenSslError("the TLS context refuses the node's certificate"));
  }
  return Status::Ok();
}

Result<std::shared_ptr<ssl::context>> MakePinnedClientContext(const TlsIdentity& identity, std::string expected_pin) {
  WK_CHECK(IsPin(expected_pin), "MakePinnedClientContext: not a pin: " + expected_pin);
  return MakePinned(identity, ssl::context::tls_client, SSL_VERIFY_PEER,
                    [expected = std::move(expected_pin)](std::string_view pin) {
                      return ConstantTimeEqual(pin, expected);
                    });
}

Result<std::shared_ptr<ssl::context>> MakePeerServerContext(const TlsIdentity& identity,
                                                            std::function<bool(std::string_view pin)> accept_pin) {
  WK_CHECK(static_cast<bool>(accept_pin), "MakePeerServerContext needs accept_pin");
  return MakePinned(identity, ssl::context::tls_server, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                    std::move(accept_pin));
}

Result<std::shared_ptr<ssl::context>> MakeServerContextFromFiles(const std::string& cert_chain_file,
                                                                 const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return Fatal(OpenSslError("cannot require TLS 1.2"));
  }
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_chain_file, ec);
  if (ec) return InvalidArgument("TLS certificate file " + cert_chain_file + " does not load: " + ec.message());
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) return InvalidArgument("TLS key file " + key_file + " does not load: " + ec.message());
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return InvalidArgument("TLS key file " + key_file + " does not match the certificate in " + cert_chain_file);
  }
  return ctx;
}

}  // namespace wk
