// TLS between nodes: the pin (a known answer, and the same whichever way it is computed),
// PeerTrust's rules, and the client API's TLS from files on a real socket.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "base/digest.h"
#include "env/real_env.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/peer_trust.h"
#include "net/tls_identity.h"

namespace wk {
namespace {

// An EC P-256 key made with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`,
// and its pin as `openssl pkey -pubout -outform DER | sha256sum` prints it.
constexpr std::string_view kKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg7FMj/MLKhAB7cFHM\n"
    "7NukLE2NaosZnly4qwwj2Vuarv+hRANCAASSCTmojTouhdn4Wa/G/nKMe0LbNWM9\n"
    "a84tVOJrIkoOw+q8B2KNB+Eb3M/xEMHD6oVaTQasrLSqMCwHIwkriIrX\n"
    "-----END PRIVATE KEY-----\n";
constexpr std::string_view kKeyPin = "2d31849c56b60eec86c97896392927819ae6af24b92495480f488fd25c1c55eb";

std::unique_ptr<TlsIdentity> NewIdentity(std::string_view name = "test node") {
  auto id = TlsIdentity::Generate(name);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? std::move(*id) : nullptr;
}

// The pin of a certificate in PEM, computed here without TlsIdentity.
std::string PinOfCertificatePem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return {};
  EVP_PKEY* key = X509_get0_pubkey(cert);
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(key, &der);
  std::string pin = n > 0 ? Sha256Hex(std::string_view(reinterpret_cast<char*>(der), static_cast<std::size_t>(n))) : "";
  OPENSSL_free(der);
  X509_free(cert);
  return pin;
}

TEST(TlsIdentityTest, ThePinIsTheSha256OfTheSubjectPublicKeyInfo) {
  auto known = TlsIdentity::FromPrivateKeyPem(kKeyPem, "known");
  ASSERT_TRUE(known.ok()) << known.status().ToString();
  EXPECT_EQ((*known)->pin(), kKeyPin) << "the pin openssl prints for this key";
  EXPECT_EQ(PinOfCertificatePem((*known)->CertificatePem()), kKeyPin) << "the certificate carries the key";
  auto again = TlsIdentity::FromPrivateKeyPem(kKeyPem, "another name");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->pin(), kKeyPin) << "the pin depends on the key only, not on the certificate's names";
}

TEST(TlsIdentityTest, EveryProcessGetsAFreshKey) {
  auto a = NewIdentity();
  auto b = NewIdentity();
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(IsPin(a->pin()));
  EXPECT_NE(a->pin(), b->pin());
  EXPECT_EQ(PinOfCertificatePem(a->CertificatePem()), a->pin());
}

TEST(TlsIdentityTest, IsPinAcceptsOnly64LowercaseHexDigits) {
  EXPECT_TRUE(IsPin(kKeyPin));
  EXPECT_FALSE(IsPin(""));
  EXPECT_FALSE(IsPin("-"));
  EXPECT_FALSE(IsPin(std::string(63, 'a')));
  EXPECT_FALSE(IsPin(std::string(65, 'a')));
  EXPECT_FALSE(IsPin(std::string(64, 'A')));
  EXPECT_FALSE(IsPin(std::string(64, 'g')));
}

TEST(TlsIdentityTest, AKeyThatDoesNotParseIsRefused) {
  auto bad = TlsIdentity::FromPrivateKeyPem("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
}

std::string Pin(char c) { return std::string(kPinHexChars, c); }

TEST(PeerTrustTest, OnlyWellFormedEntriesWithAPinOfTheirOwnAreTrusted) {
  PeerTrust trust;
  EXPECT_TRUE(trust.Update({{"a", "ia", "h:1", Pin('a')},
                            {"b", "ib", "h:2", "-"},              // no pin
                            {"c", "ic", "", Pin('c')},            // no address
                            {"d", "id", "h:4", Pin('d')},
                            {"e", "ie", "h:5", Pin('d')}}));      // d's pin again: neither
  EXPECT_EQ(trust.size(), 1u);
  ASSERT_NE(trust.Find("a"), nullptr);
  EXPECT_EQ(trust.Find("a")->instance, "ia");
  EXPECT_EQ(trust.FindByPin(Pin('a'))->node_id, "a");
  EXPECT_EQ(trust.Find("b"), nullptr);
  EXPECT_EQ(trust.Find("d"), nullptr);
  EXPECT_EQ(trust.FindByPin(Pin('d')), nullptr);
  EXPECT_FALSE(trust.Update({{"a", "ia", "h:1", Pin('a')}})) << "the same set is no change";
  // a fenced (the caller leaves it out): its pin is no longer accepted.
  EXPECT_TRUE(trust.Update({}));
  EXPECT_EQ(trust.FindByPin(Pin('a')), nullptr);
  EXPECT_EQ(trust.changes(), 2u);
}

// ---- real sockets

// ---- the client API's TLS from files

struct TempFile {
  explicit TempFile(std::string name, const std::string& content) : path(::testing::TempDir() + "/" + std::move(name)) {
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path.c_str()); }
  std::string path;
};

TEST(ClientApiTlsTest, TheListenerServesTheCertificateFromTheFilesAndRefusesBadFiles) {
  auto server_id = TlsIdentity::FromPrivateKeyPem(kKeyPem, "client api");
  ASSERT_TRUE(server_id.ok());
  TempFile cert("wk_tls_test.crt", (*server_id)->CertificatePem());
  TempFile key("wk_tls_test.key", std::string(kKeyPem));
  auto ctx = MakeServerContextFromFiles(cert.path, key.path);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();

  RealEnv env;
  auto server = HttpServer::Start(
      env, "127.0.0.1:0", [](ServerRequest r) { return ReadyResponse(TextResponse(200, "tls " + r.peer_cert_pin + "\n")); },
      {}, *ctx);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  // A client that checks the server by its pin (the certificate is self-signed).
  auto client_id = NewIdentity("some client");
  auto client_ctx = MakePinnedClientContext(*client_id, std::string(kKeyPin));
  ASSERT_TRUE(client_ctx.ok());
  auto endpoint = ParseHttpEndpoint("https://127.0.0.1:" + std::to_string((*server)->bound_port()));
  ASSERT_TRUE(endpoint.ok());
  HttpClientOptions o;
  o.tls_context = *client_ctx;
  auto client = HttpClient::Create(env, *endpoint, o);
  ASSERT_TRUE(client.ok());
  HttpRequest req;
  req.target = "/";
  HttpOutcome got = env.RunMain((*client)->Send(req, env.MonoNow() + std::chrono::seconds(5)));
  ASSERT_TRUE(got.ok()) << got.detail;
  EXPECT_EQ(got.response.status, 200);
  EXPECT_EQ(got.response.body, "tls \n") << "the client API asks for no client certificate";

  auto missing = MakeServerContextFromFiles(cert.path + ".missing", key.path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find(".missing"), std::string::npos);
  auto other_key_id = NewIdentity("other");
  TempFile other_cert("wk_tls_test_other.crt", other_key_id->CertificatePem());
  auto mismatch = MakeServerContextFromFiles(other_cert.path, key.path);
  ASSERT_FALSE(mismatch.ok()) << "a key that is not the certificate's";
  EXPECT_EQ(mismatch.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace wk
