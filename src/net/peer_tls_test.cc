// TLS between nodes on real sockets in one process: the pin (a known answer, and the same
// whichever way it is computed), PeerTrust's rules, and HttpPeerTransport against an
// HttpServer peer listener: a matching pin both ways works, a wrong server pin or a client
// the listener does not trust is refused before the handler runs, and a peer dropped from
// the trust is not connected to again (its pooled connection included). The same between
// processes: tests/cluster/peer_tls_test.sh.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "base/digest.h"
#include "env/real_env.h"
#include "net/http_client.h"
#include "net/http_peer_transport.h"
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
  EXPECT_TRUE(trust.Update({{NodeId("a"), InstanceToken("ia"), "h:1", Pin('a')},
                            {NodeId("b"), InstanceToken("ib"), "h:2", "-"},              // no pin
                            {NodeId("c"), InstanceToken("ic"), "", Pin('c')},            // no address
                            {NodeId("d"), InstanceToken("id"), "h:4", Pin('d')},
                            {NodeId("e"), InstanceToken("ie"), "h:5", Pin('d')}}));      // d's pin again: neither
  EXPECT_EQ(trust.size(), 1u);
  ASSERT_NE(trust.Find(NodeId("a")), nullptr);
  EXPECT_EQ(trust.Find(NodeId("a"))->instance, InstanceToken("ia"));
  EXPECT_EQ(trust.FindByPin(Pin('a'))->node_id, NodeId("a"));
  EXPECT_EQ(trust.Find(NodeId("b")), nullptr);
  EXPECT_EQ(trust.Find(NodeId("d")), nullptr);
  EXPECT_EQ(trust.FindByPin(Pin('d')), nullptr);
  EXPECT_FALSE(trust.Update({{NodeId("a"), InstanceToken("ia"), "h:1", Pin('a')}})) << "the same set is no change";
  // a fenced (the caller leaves it out): its pin is no longer accepted.
  EXPECT_TRUE(trust.Update({}));
  EXPECT_EQ(trust.FindByPin(Pin('a')), nullptr);
  EXPECT_EQ(trust.changes(), 2u);
}

// ---- real sockets

struct Peer {
  std::unique_ptr<TlsIdentity> identity;
  PeerTrust trust;
  std::unique_ptr<HttpServer> server;
  std::vector<ServerRequest> seen;  // what its handler got
  std::string address() const { return "127.0.0.1:" + std::to_string(server->bound_port()); }
};

// Starts p's peer listener: TLS with p's identity, accepting the pins p trusts.
void Listen(RealEnv& env, Peer& p) {
  auto ctx = MakePeerServerContext(*p.identity, [&p](std::string_view pin) { return p.trust.FindByPin(pin) != nullptr; });
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto started = HttpServer::Start(
      env, "127.0.0.1:0",
      [&p](ServerRequest r) {
        p.seen.push_back(r);
        return ReadyResponse(TextResponse(200, "hello from the peer\n"));
      },
      {}, {}, *ctx);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  p.server = std::move(*started);
}

ServerRequest Get() {
  ServerRequest r;
  r.method = "GET";
  r.target = "/v1/actors/t/c/n";
  return r;
}

class PeerTransportTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_.identity = NewIdentity("a");
    b_.identity = NewIdentity("b");
    ASSERT_TRUE(a_.identity && b_.identity);
    Listen(env_, b_);
  }
  // a's view: b live at its listener under pin; b's view: a live under a's pin.
  void TrustEachOther() {
    a_.trust.Update({{NodeId("b"), InstanceToken("ib"), b_.address(), b_.identity->pin()}});
    b_.trust.Update({{NodeId("a"), InstanceToken("ia"), "127.0.0.1:1", a_.identity->pin()}});
  }
  Result<ServerResponse> Send(HttpPeerTransport& t, PeerTarget to) {
    return env_.RunMain(t.Send(std::move(to), Get(), std::chrono::seconds(5)));
  }
  PeerTarget ToB() { return PeerTarget{NodeId("b"), InstanceToken("ib"), b_.address()}; }

  RealEnv env_;
  Peer a_;
  Peer b_;
};

TEST_F(PeerTransportTlsTest, PinsThatMatchBothWaysCarryTheRequestAndTheListenerLearnsTheClientsPin) {
  TrustEachOther();
  HttpPeerTransport transport(env_, *a_.identity, a_.trust);
  auto got = Send(transport, ToB());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, "hello from the peer\n");
  ASSERT_EQ(b_.seen.size(), 1u);
  EXPECT_EQ(b_.seen[0].peer_cert_pin, a_.identity->pin());
}

TEST_F(PeerTransportTlsTest, AServerWhosePinIsNotTheRecordsIsRefusedBeforeAnythingIsSent) {
  TrustEachOther();
  auto impostor = NewIdentity("impostor");
  ASSERT_TRUE(impostor);
  // a believes b's record names another key: whoever answers at b's address is not b.
  a_.trust.Update({{NodeId("b"), InstanceToken("ib"), b_.address(), impostor->pin()}});
  HttpPeerTransport transport(env_, *a_.identity, a_.trust);
  auto got = Send(transport, ToB());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.code(), Code::kRetryable) << "nothing was sent: " << got.status().ToString();
  EXPECT_NE(got.status().message().find("tls-verify-failed"), std::string::npos) << got.status().ToString();
  EXPECT_TRUE(b_.seen.empty());
}

TEST_F(PeerTransportTlsTest, AClientWhosePinTheListenerDoesNotTrustIsRefused) {
  TrustEachOther();
  b_.trust.Update({});  // b's listing no longer shows a live (a was fenced)
  HttpPeerTransport transport(env_, *a_.identity, a_.trust);
  auto got = Send(transport, ToB());
  ASSERT_FALSE(got.ok()) << "status " << got->status;
  // TLS 1.3: the client may finish its handshake and write before the server's refusal
  // arrives, so the outcome is retryable or unknown, never an answer.
  EXPECT_TRUE(got.code() == Code::kRetryable || got.code() == Code::kUnknownOutcome) << got.status().ToString();
  EXPECT_TRUE(b_.seen.empty()) << "the handler never runs for an untrusted client";
}

TEST_F(PeerTransportTlsTest, APeerDroppedFromTheTrustIsNotUsedAgainPooledConnectionsIncluded) {
  TrustEachOther();
  HttpPeerTransport transport(env_, *a_.identity, a_.trust);
  ASSERT_TRUE(Send(transport, ToB()).ok());
  EXPECT_EQ(transport.pools(), 1u) << "a keep-alive pool for b";
  // The next listing shows b fenced.
  a_.trust.Update({});
  transport.DropUntrusted();
  EXPECT_EQ(transport.pools(), 0u);
  EXPECT_EQ(transport.stats().pools_dropped, 1u);
  auto got = Send(transport, ToB());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.code(), Code::kRetryable);
  EXPECT_EQ(transport.stats().untrusted_sends, 1u);
  EXPECT_EQ(b_.seen.size(), 1u) << "nothing more reached b";
  // Another instance or another address than the trusted record's is refused too.
  a_.trust.Update({{NodeId("b"), InstanceToken("ib"), b_.address(), b_.identity->pin()}});
  EXPECT_FALSE(Send(transport, PeerTarget{NodeId("b"), InstanceToken("ib-before"), b_.address()}).ok());
  EXPECT_FALSE(Send(transport, PeerTarget{NodeId("b"), InstanceToken("ib"), "127.0.0.1:1"}).ok());
  EXPECT_EQ(b_.seen.size(), 1u);
}

TEST_F(PeerTransportTlsTest, ARestartedPeerIsANewPinAndANewPool) {
  TrustEachOther();
  HttpPeerTransport transport(env_, *a_.identity, a_.trust);
  ASSERT_TRUE(Send(transport, ToB()).ok());
  // b restarts: a new process, a new key, a new listener; its record names them.
  Peer b2;
  b2.identity = NewIdentity("b again");
  b2.trust.Update({{NodeId("a"), InstanceToken("ia"), "127.0.0.1:1", a_.identity->pin()}});
  Listen(env_, b2);
  a_.trust.Update({{NodeId("b"), InstanceToken("ib2"), b2.address(), b2.identity->pin()}});
  transport.DropUntrusted();
  auto got = Send(transport, PeerTarget{NodeId("b"), InstanceToken("ib2"), b2.address()});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(b2.seen.size(), 1u);
  EXPECT_EQ(transport.stats().pools_opened, 2u);
}

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
      {}, {}, *ctx);
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
