// WebSockets on the server side: the frame parser and encoder (websocket_frames.h), and
// HttpServer's upgraded connections end to end (http_server.h, websocket.h) against a small
// blocking client written here (raw socket or OpenSSL: the handshake, masked frames), run
// on a thread of its own while the server runs on the test's RealEnv loop.
#include "net/websocket_frames.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <csignal>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "env/real_env.h"
#include "net/http_server.h"
#include "net/tls_identity.h"
#include "net/websocket.h"

namespace wk {
namespace {

// ---- A client's frames, built by hand.

struct FrameSpec {
  std::uint8_t opcode = 0x1;
  std::string payload;
  bool fin = true;
  bool masked = true;
  std::uint8_t rsv = 0;     // the RSV bits, already in place (0x40, 0x20, 0x10)
  int length_bytes = -1;    // -1: the minimal encoding; 0, 2 or 8 to force one
  std::uint64_t declared = 0;  // with force_length: the length written instead of the payload's
  bool force_length = false;
  std::array<std::uint8_t, 4> mask{0x37, 0xfa, 0x21, 0x3d};
};

std::string ClientFrame(const FrameSpec& f) {
  std::string out;
  out.push_back(static_cast<char>((f.fin ? 0x80 : 0) | f.rsv | f.opcode));
  const std::uint64_t length = f.force_length ? f.declared : f.payload.size();
  int extended = f.length_bytes;
  if (extended < 0) extended = length < 126 ? 0 : length <= 0xFFFF ? 2 : 8;
  const std::uint8_t mask_bit = f.masked ? 0x80 : 0;
  if (extended == 0) {
    out.push_back(static_cast<char>(mask_bit | length));
  } else {
    out.push_back(static_cast<char>(mask_bit | (extended == 2 ? 126 : 127)));
    for (int i = extended - 1; i >= 0; --i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  }
  if (f.masked) {
    for (std::uint8_t b : f.mask) out.push_back(static_cast<char>(b));
  }
  for (std::size_t i = 0; i < f.payload.size(); ++i) {
    out.push_back(static_cast<char>(f.masked ? f.payload[i] ^ f.mask[i % 4] : f.payload[i]));
  }
  return out;
}

std::string Frame(std::uint8_t opcode, std::string payload, bool fin = true) {
  FrameSpec f;
  f.opcode = opcode;
  f.payload = std::move(payload);
  f.fin = fin;
  return ClientFrame(f);
}

std::string ClosePayload(int code, std::string reason = {}) {
  std::string p;
  p.push_back(static_cast<char>(code >> 8));
  p.push_back(static_cast<char>(code & 0xFF));
  return p + reason;
}

// Feeds bytes in pieces of `chunk` (0: all at once) and collects the events; stops after
// a kClose or kError.
std::vector<WebSocketEvent> ParseAll(std::string_view bytes, std::size_t max_message = 1 << 20,
                                     std::size_t chunk = 0) {
  WebSocketFrameParser parser(max_message);
  std::vector<WebSocketEvent> events;
  std::size_t at = 0;
  while (at < bytes.size() && !parser.done()) {
    const std::size_t n = chunk == 0 ? bytes.size() - at : std::min(chunk, bytes.size() - at);
    std::string_view piece = bytes.substr(at, n);
    while (!piece.empty() && !parser.done()) {
      WebSocketFrameParser::Step step = parser.Feed(piece);
      if (step.event) events.push_back(std::move(*step.event));
      piece.remove_prefix(step.consumed);
      if (step.consumed == 0 && !step.event) break;
    }
    at += n;
  }
  return events;
}

using Kind = WebSocketEvent::Kind;

// The one event of bytes, which must be an error with this code.
void ExpectError(std::string_view bytes, int code, std::size_t max_message = 1 << 20) {
  std::vector<WebSocketEvent> events = ParseAll(bytes, max_message);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, Kind::kError) << events.back().data;
  EXPECT_EQ(events.back().code, code) << events.back().data;
  EXPECT_LE(events.back().data.size(), kMaxCloseReasonBytes);
}

TEST(WebSocketFrameParserTest, AMaskedTextAndBinaryMessageAreUnmasked) {
  const std::string bytes = Frame(0x1, "hello") + Frame(0x2, std::string("\x00\xff\x10", 3));
  for (std::size_t chunk : {0, 1, 3, 7}) {
    std::vector<WebSocketEvent> events = ParseAll(bytes, 1 << 20, chunk);
    ASSERT_EQ(events.size(), 2u) << "chunk " << chunk;
    EXPECT_EQ(events[0].kind, Kind::kMessage);
    EXPECT_FALSE(events[0].binary);
    EXPECT_EQ(events[0].data, "hello");
    EXPECT_TRUE(events[1].binary);
    EXPECT_EQ(events[1].data, std::string("\x00\xff\x10", 3));
  }
}

TEST(WebSocketFrameParserTest, FeedStopsAfterTheFrameThatCompletesAnEvent) {
  const std::string first = Frame(0x1, "a");
  const std::string bytes = first + Frame(0x1, "b");
  WebSocketFrameParser parser(100);
  WebSocketFrameParser::Step step = parser.Feed(bytes);
  ASSERT_TRUE(step.event);
  EXPECT_EQ(step.consumed, first.size());
  EXPECT_TRUE(parser.idle());
  step = parser.Feed(std::string_view(bytes).substr(first.size()));
  ASSERT_TRUE(step.event);
  EXPECT_EQ(step.event->data, "b");
}

TEST(WebSocketFrameParserTest, LengthsAtEveryEncodingBoundary) {
  for (std::size_t size : {0, 1, 125, 126, 127, 65535, 65536, 70000}) {
    std::string payload(size, 'x');
    for (std::size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + i % 26);
    std::vector<WebSocketEvent> events = ParseAll(Frame(0x2, payload), 1 << 20, 4096);
    ASSERT_EQ(events.size(), 1u) << size;
    EXPECT_EQ(events[0].kind, Kind::kMessage);
    EXPECT_EQ(events[0].data, payload) << size;
  }
}

TEST(WebSocketFrameParserTest, NonMinimalLengthsAreAccepted) {
  FrameSpec f;
  f.payload = "abc";
  f.length_bytes = 2;
  std::vector<WebSocketEvent> events = ParseAll(ClientFrame(f));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "abc");
  f.length_bytes = 8;
  events = ParseAll(ClientFrame(f));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "abc");
}

TEST(WebSocketFrameParserTest, A64BitLengthWithTheTopBitSetIsAProtocolError) {
  FrameSpec f;
  f.opcode = 0x2;
  f.length_bytes = 8;
  f.force_length = true;
  f.declared = std::uint64_t{1} << 63;
  ExpectError(ClientFrame(f), kCloseProtocolError);
}

TEST(WebSocketFrameParserTest, FragmentsAreReassembledWithControlFramesBetween) {
  const std::string bytes = Frame(0x1, "he", false) + Frame(0x9, "p1") + Frame(0x0, "ll", false) +
                            Frame(0xA, "") + Frame(0x0, "o", true);
  for (std::size_t chunk : {0, 1, 5}) {
    std::vector<WebSocketEvent> events = ParseAll(bytes, 1 << 20, chunk);
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0].kind, Kind::kPing);
    EXPECT_EQ(events[0].data, "p1");
    EXPECT_EQ(events[1].kind, Kind::kPong);
    EXPECT_EQ(events[2].kind, Kind::kMessage);
    EXPECT_EQ(events[2].data, "hello");
  }
}

TEST(WebSocketFrameParserTest, FragmentSequencingErrors) {
  ExpectError(Frame(0x0, "x"), kCloseProtocolError);                          // nothing to continue
  ExpectError(Frame(0x1, "a", false) + Frame(0x1, "b"), kCloseProtocolError);  // a new message inside one
  ExpectError(Frame(0x2, "a", false) + Frame(0x2, "b"), kCloseProtocolError);
}

TEST(WebSocketFrameParserTest, AnUnmaskedFrameIsAProtocolError) {
  FrameSpec f;
  f.payload = "hi";
  f.masked = false;
  ExpectError(ClientFrame(f), kCloseProtocolError);
}

TEST(WebSocketFrameParserTest, AClientReadsUnmaskedFramesAndRefusesMaskedOnes) {
  const std::string server_frames = EncodeWebSocketFrame(WebSocketOpcode::kText, "he", false) +
                                    EncodeWebSocketFrame(WebSocketOpcode::kPing, "p") +
                                    EncodeWebSocketFrame(WebSocketOpcode::kContinuation, "llo") +
                                    EncodeWebSocketFrame(WebSocketOpcode::kClose, "");
  for (std::size_t chunk : {0, 1, 3}) {
    WebSocketFrameParser parser(100, WebSocketRole::kClient);
    std::vector<WebSocketEvent> events;
    std::string_view rest = server_frames;
    while (!rest.empty() && !parser.done()) {
      const std::string_view piece = rest.substr(0, chunk == 0 ? rest.size() : std::min(chunk, rest.size()));
      WebSocketFrameParser::Step step = parser.Feed(piece);
      if (step.event) events.push_back(std::move(*step.event));
      rest.remove_prefix(step.consumed);
    }
    ASSERT_EQ(events.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(events[0].kind, Kind::kPing);
    EXPECT_EQ(events[1].kind, Kind::kMessage);
    EXPECT_EQ(events[1].data, "hello");
    EXPECT_EQ(events[2].kind, Kind::kClose);
    EXPECT_EQ(events[2].code, 1005);
  }
  WebSocketFrameParser parser(100, WebSocketRole::kClient);
  WebSocketFrameParser::Step step = parser.Feed(Frame(0x1, "masked"));
  ASSERT_TRUE(step.event);
  EXPECT_EQ(step.event->kind, Kind::kError);
  EXPECT_EQ(step.event->code, kCloseProtocolError);
  EXPECT_NE(step.event->data.find("must not be masked"), std::string::npos);
}

TEST(WebSocketFrameParserTest, RsvBitsAndUnknownOpcodesAreProtocolErrors) {
  for (std::uint8_t rsv : {0x40, 0x20, 0x10}) {
    FrameSpec f;
    f.payload = "x";
    f.rsv = rsv;
    ExpectError(ClientFrame(f), kCloseProtocolError);
  }
  for (std::uint8_t opcode : {0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF}) {
    ExpectError(Frame(opcode, "x"), kCloseProtocolError);
  }
}

TEST(WebSocketFrameParserTest, ControlFramesAreShortAndWhole) {
  std::vector<WebSocketEvent> events = ParseAll(Frame(0x9, std::string(125, 'p')));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kPing);
  EXPECT_EQ(events[0].data.size(), 125u);
  ExpectError(Frame(0x9, std::string(126, 'p')), kCloseProtocolError);
  ExpectError(Frame(0xA, std::string(126, 'p')), kCloseProtocolError);
  ExpectError(Frame(0x8, ClosePayload(1000, std::string(124, 'r'))), kCloseProtocolError);
  ExpectError(Frame(0x9, "p", false), kCloseProtocolError);  // fragmented
  ExpectError(Frame(0x8, "", false), kCloseProtocolError);
}

TEST(WebSocketFrameParserTest, CloseFramesCarryAValidCodeAndAUtf8Reason) {
  std::vector<WebSocketEvent> events = ParseAll(Frame(0x8, ""));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kClose);
  EXPECT_EQ(events[0].code, 1005);
  EXPECT_EQ(events[0].data, "");

  events = ParseAll(Frame(0x8, ClosePayload(1000, "bye \xc3\xa9")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kClose);
  EXPECT_EQ(events[0].code, 1000);
  EXPECT_EQ(events[0].data, "bye \xc3\xa9");

  for (int code : {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4999}) {
    events = ParseAll(Frame(0x8, ClosePayload(code)));
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, Kind::kClose) << code;
    EXPECT_EQ(events[0].code, code);
  }
  for (int code : {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535}) {
    ExpectError(Frame(0x8, ClosePayload(code)), kCloseProtocolError);
  }
  ExpectError(Frame(0x8, std::string(1, '\x03')), kCloseProtocolError);  // a 1-byte payload
  ExpectError(Frame(0x8, ClosePayload(1000, "\xff")), kCloseInvalidData);
}

TEST(WebSocketFrameParserTest, NothingIsConsumedAfterACloseOrAnError) {
  WebSocketFrameParser parser(100);
  const std::string bytes = Frame(0x8, ClosePayload(1000)) + Frame(0x1, "late");
  WebSocketFrameParser::Step step = parser.Feed(bytes);
  ASSERT_TRUE(step.event);
  EXPECT_EQ(step.event->kind, Kind::kClose);
  EXPECT_TRUE(parser.done());
  step = parser.Feed(std::string_view(bytes).substr(step.consumed));
  EXPECT_EQ(step.consumed, 0u);
  EXPECT_FALSE(step.event);
}

TEST(WebSocketFrameParserTest, TextMustBeUtf8AsAWhole) {
  ExpectError(Frame(0x1, "\xc3\x28"), kCloseInvalidData);
  ExpectError(Frame(0x1, "\xed\xa0\x80"), kCloseInvalidData);  // a surrogate
  // A code point split across fragments is fine.
  std::vector<WebSocketEvent> events = ParseAll(Frame(0x1, "\xe2\x82", false) + Frame(0x0, "\xac"));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kMessage);
  EXPECT_EQ(events[0].data, "\xe2\x82\xac");
  // Binary messages are not checked.
  events = ParseAll(Frame(0x2, "\xc3\x28"));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kMessage);
}

TEST(WebSocketFrameParserTest, AMessageOverTheBoundIsRefusedByItsHeader) {
  // Exactly the bound passes; one byte more, in one frame or across fragments, does not.
  std::vector<WebSocketEvent> events = ParseAll(Frame(0x2, std::string(100, 'x')), 100);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kMessage);
  ExpectError(Frame(0x2, std::string(101, 'x')), kCloseTooBig, 100);
  ExpectError(Frame(0x2, std::string(60, 'x'), false) + Frame(0x0, std::string(41, 'x')), kCloseTooBig, 100);
  // Refused from the header alone, with no payload buffered.
  FrameSpec f;
  f.opcode = 0x2;
  f.force_length = true;
  f.declared = 1u << 30;
  WebSocketFrameParser parser(100);
  const std::string header = ClientFrame(f);
  WebSocketFrameParser::Step step = parser.Feed(header);
  ASSERT_TRUE(step.event);
  EXPECT_EQ(step.event->code, kCloseTooBig);
  EXPECT_EQ(parser.memory_bytes(), 0u);
}

TEST(WebSocketFrameEncoderTest, ServerFramesAreUnmaskedWithMinimalLengths) {
  EXPECT_EQ(EncodeWebSocketFrame(WebSocketOpcode::kText, "hi"), std::string("\x81\x02hi", 4));
  EXPECT_EQ(EncodeWebSocketFrame(WebSocketOpcode::kPing, ""), std::string("\x89\x00", 2));
  std::string f = EncodeWebSocketFrame(WebSocketOpcode::kBinary, std::string(126, 'x'));
  EXPECT_EQ(f.substr(0, 4), std::string("\x82\x7e\x00\x7e", 4));
  EXPECT_EQ(f.size(), 4u + 126);
  f = EncodeWebSocketFrame(WebSocketOpcode::kBinary, std::string(65535, 'x'));
  EXPECT_EQ(f.substr(0, 4), std::string("\x82\x7e\xff\xff", 4));
  f = EncodeWebSocketFrame(WebSocketOpcode::kBinary, std::string(65536, 'x'));
  EXPECT_EQ(f.substr(0, 10), std::string("\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10));
  EXPECT_EQ(f.size(), 10u + 65536);
  f = EncodeWebSocketFrame(WebSocketOpcode::kText, "x", /*fin=*/false);
  EXPECT_EQ(static_cast<std::uint8_t>(f[0]), 0x01);
}

TEST(WebSocketFrameEncoderTest, AClientsFramesCarryTheirMaskAndAMaskedPayload) {
  const WebSocketMask mask{0x37, 0xfa, 0x21, 0x3d};
  // The frame a client builds by hand (the test's ClientFrame) is the encoder's.
  for (std::size_t size : {0, 5, 125, 126, 70000}) {
    std::string payload(size, 'x');
    for (std::size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + i % 26);
    FrameSpec f;
    f.opcode = 0x2;
    f.payload = payload;
    f.mask = mask;
    EXPECT_EQ(EncodeWebSocketFrame(WebSocketOpcode::kBinary, payload, true, &mask), ClientFrame(f)) << size;
    std::array<char, kMaxWebSocketFrameHeaderBytes> header{};
    const std::size_t header_bytes = EncodeWebSocketFrameHeader(WebSocketOpcode::kBinary, size, true, header, &mask);
    EXPECT_EQ(header_bytes, (size < 126 ? 2u : size <= 0xFFFF ? 4u : 10u) + 4) << size;
  }
  std::string data = "abcdef";
  ApplyWebSocketMask(mask, data.data(), data.size());
  EXPECT_NE(data, "abcdef");
  ApplyWebSocketMask(mask, data.data(), data.size());
  EXPECT_EQ(data, "abcdef");
}

TEST(WebSocketFrameEncoderTest, AClosePayloadCutsItsReasonOnACodePoint) {
  EXPECT_EQ(EncodeWebSocketClosePayload(1000, "ok"), std::string("\x03\xe8ok", 4));
  // 122 ASCII bytes and a 2-byte character: 124 bytes, cut before the character.
  const std::string reason = std::string(122, 'r') + "\xc3\xa9";
  const std::string payload = EncodeWebSocketClosePayload(1001, reason);
  EXPECT_EQ(payload.size(), 2u + 122);
  EXPECT_EQ(Utf8Prefix("ab\xff" "cd", 10), "ab");
}

TEST(WebSocketAcceptKeyTest, TheRfcExample) {
  // RFC 6455 section 1.3.
  EXPECT_EQ(WebSocketAcceptKey("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

// ---- End to end: a real HttpServer on 127.0.0.1:0 and blocking clients on another thread.

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Duration kClientTimeout = seconds(5);
constexpr std::string_view kKey = "dGhlIHNhbXBsZSBub25jZQ==";
constexpr std::string_view kAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";  // RFC 6455 section 1.3

struct HttpHead {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string Get(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
          })) {
        return v;
      }
    }
    return {};
  }
};

struct ServerFrame {
  std::uint8_t opcode = 0;
  bool fin = true;
  std::string payload;
  int CloseCode() const {
    return payload.size() >= 2 ? (static_cast<std::uint8_t>(payload[0]) << 8) | static_cast<std::uint8_t>(payload[1])
                               : 1005;
  }
  std::string CloseReason() const { return payload.size() > 2 ? payload.substr(2) : std::string(); }
};

// A blocking WebSocket client over a raw socket, or over TLS (OpenSSL, no verification):
// every read gives up after a timeout, so a server bug fails the test instead of hanging it.
class BlockingClient {
 public:
  BlockingClient() = default;
  BlockingClient(const BlockingClient&) = delete;
  BlockingClient& operator=(const BlockingClient&) = delete;
  ~BlockingClient() { Close(); }

  bool Connect(std::uint16_t port, SSL_CTX* tls = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    SetTimeout(kClientTimeout);
    if (tls != nullptr) {
      ssl_ = SSL_new(tls);
      SSL_set_fd(ssl_, fd_);
      if (SSL_connect(ssl_) != 1) return false;
    }
    return true;
  }

  void SetTimeout(Duration d) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(us / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  bool Write(std::string_view bytes) {
    while (!bytes.empty()) {
      const long n = ssl_ != nullptr ? SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()))
                                     : ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // The opening handshake; first_frames go in the same write as the request.
  std::optional<HttpHead> Handshake(std::string target = "/ws", std::string extra = {}, std::string first_frames = {}) {
    const std::string request = "GET " + target +
                                " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                "Sec-WebSocket-Key: " + std::string(kKey) +
                                "\r\nSec-WebSocket-Version: 13\r\n" + extra + "\r\n" + first_frames;
    if (!Write(request)) return std::nullopt;
    return ReadHead();
  }

  // A response's status line and fields (its body, if any, stays unread).
  std::optional<HttpHead> ReadHead() {
    std::size_t end;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    HttpHead head;
    std::string_view text = std::string_view(in_).substr(0, end);
    std::size_t line_end = text.find("\r\n");
    const std::string_view status_line = text.substr(0, line_end);
    if (status_line.size() >= 12) head.status = std::stoi(std::string(status_line.substr(9, 3)));
    while (line_end != std::string_view::npos) {
      text.remove_prefix(line_end + 2);
      line_end = text.find("\r\n");
      const std::string_view line = text.substr(0, line_end);
      const std::size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      head.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
    }
    in_.erase(0, end + 4);
    return head;
  }

  void SendFrame(std::uint8_t opcode, std::string payload, bool fin = true) {
    EXPECT_TRUE(Write(Frame(opcode, std::move(payload), fin)));
  }
  void SendText(std::string text) { SendFrame(0x1, std::move(text)); }
  void SendClose(int code, std::string reason = {}) { SendFrame(0x8, ClosePayload(code, std::move(reason))); }

  // One server frame (unmasked: a masked one fails the test); nullopt on EOF or timeout.
  std::optional<ServerFrame> ReadFrame() {
    if (!Need(2)) return std::nullopt;
    const auto b0 = static_cast<std::uint8_t>(in_[0]);
    const auto b1 = static_cast<std::uint8_t>(in_[1]);
    EXPECT_EQ(b1 & 0x80, 0) << "a server frame must not be masked";
    std::uint64_t length = b1 & 0x7F;
    std::size_t header = 2;
    if (length >= 126) {
      const std::size_t extended = length == 126 ? 2 : 8;
      if (!Need(2 + extended)) return std::nullopt;
      length = 0;
      for (std::size_t i = 0; i < extended; ++i) length = (length << 8) | static_cast<std::uint8_t>(in_[2 + i]);
      header += extended;
    }
    if (!Need(header + length)) return std::nullopt;
    ServerFrame frame;
    frame.opcode = b0 & 0x0F;
    frame.fin = (b0 & 0x80) != 0;
    frame.payload = in_.substr(header, length);
    in_.erase(0, header + length);
    return frame;
  }

  // The next frame that is not a ping (pings are answered).
  std::optional<ServerFrame> ReadNonPing() {
    while (true) {
      std::optional<ServerFrame> frame = ReadFrame();
      if (!frame || frame->opcode != 0x9) return frame;
      SendFrame(0xA, frame->payload);
    }
  }

  // Frames until a close frame (data frames are counted); nullopt if none came.
  std::optional<ServerFrame> ReadUntilClose(int* data_frames = nullptr) {
    while (true) {
      std::optional<ServerFrame> frame = ReadFrame();
      if (!frame) return std::nullopt;
      if (frame->opcode == 0x8) return frame;
      if (data_frames != nullptr && frame->opcode != 0x9 && frame->opcode != 0xA) ++*data_frames;
    }
  }

  // True when the server closes the connection (EOF or reset) within `within` with no more bytes.
  bool SeesEnd(Duration within = kClientTimeout) {
    SetTimeout(within);
    const bool ended = in_.empty() && !Fill() && (eof_ || reset_);
    SetTimeout(kClientTimeout);
    return ended;
  }

  void Close() {
    if (ssl_ != nullptr) {
      SSL_free(ssl_);
      ssl_ = nullptr;
    }
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  bool Need(std::size_t bytes) {
    while (in_.size() < bytes) {
      if (!Fill()) return false;
    }
    return true;
  }

  bool Fill() {
    char buffer[64 * 1024];
    long n;
    if (ssl_ != nullptr) {
      n = SSL_read(ssl_, buffer, sizeof buffer);
      if (n <= 0) {
        const int error = SSL_get_error(ssl_, static_cast<int>(n));
        eof_ = error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && errno == 0);
        reset_ = error == SSL_ERROR_SYSCALL && errno == ECONNRESET;
        ERR_clear_error();
        return false;
      }
    } else {
      n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        eof_ = n == 0;
        reset_ = n < 0 && errno == ECONNRESET;
        return false;
      }
    }
    in_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string in_;
  bool eof_ = false;
  bool reset_ = false;
};

// What the handlers saw, written on the loop thread and read by the client's (locked).
class Recorder {
 public:
  void Add(std::string event) {
    std::lock_guard lock(mu_);
    log_.push_back(std::move(event));
  }
  void Begin() {
    std::lock_guard lock(mu_);
    max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
  }
  void End() {
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  void Closed(int code, std::string reason) {
    std::lock_guard lock(mu_);
    closed_.emplace_back(code, std::move(reason));
  }
  std::vector<std::string> Log() const {
    std::lock_guard lock(mu_);
    return log_;
  }
  std::vector<std::pair<int, std::string>> ClosedCalls() const {
    std::lock_guard lock(mu_);
    return closed_;
  }
  int MaxInFlight() const {
    std::lock_guard lock(mu_);
    return max_in_flight_;
  }
  bool Logged(std::string_view event) const {
    std::lock_guard lock(mu_);
    return std::find(log_.begin(), log_.end(), event) != log_.end();
  }
  // Polls cond every 5 ms for up to `within`.
  static bool WaitUntil(const std::function<bool()>& cond, Duration within = kClientTimeout) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (!cond()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return true;
  }
  bool WaitClosed(std::size_t calls) const {
    return WaitUntil([&] { return ClosedCalls().size() >= calls; });
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> log_;
  std::vector<std::pair<int, std::string>> closed_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
};

// Sends 64 KiB binary messages, one a millisecond, until Send refuses one.
Task<void> Flood(Env* env, Recorder* rec, std::shared_ptr<WebSocketPeer> peer) {
  const std::string chunk(64 * 1024, 'f');
  while (true) {
    if (!peer->Send(true, chunk)) {
      rec->Add("send refused");
      co_return;
    }
    const bool slept = co_await env->SleepFor(milliseconds(1));
    if (!slept) co_return;
  }
}

// A message: "flood" starts Flood; "close" sends one message then closes with 4000 "bye";
// anything else is echoed after `delay`.
Task<void> HandleMessage(Env* env, Recorder* rec, std::shared_ptr<WebSocketPeer> peer, Duration delay, bool binary,
                         std::string data) {
  rec->Begin();
  rec->Add("start " + data);
  if (delay > Duration::zero()) co_await env->SleepFor(delay);
  if (data == "flood") {
    env->Spawn(Flood(env, rec, peer), "flood");
  } else if (data == "close") {
    peer->Send(false, "before close");
    peer->Close(4000, "bye");
  } else if (!peer->Send(binary, data)) {
    rec->Add("echo refused");
  }
  rec->Add("end " + data);
  rec->End();
}

class TestHandler final : public WebSocketHandler {
 public:
  TestHandler(Env* env, Recorder* rec, std::shared_ptr<WebSocketPeer> peer, Duration delay)
      : env_(env), rec_(rec), peer_(std::move(peer)), delay_(delay) {}
  Task<void> OnMessage(bool binary, std::string data) override {
    return HandleMessage(env_, rec_, peer_, delay_, binary, std::move(data));
  }
  void OnClosed(int code, std::string reason) override {
    rec_->Closed(code, std::move(reason));
    peer_.reset();
  }

 private:
  Env* env_;
  Recorder* rec_;
  std::shared_ptr<WebSocketPeer> peer_;
  Duration delay_;
};

// One test's server and what its handlers saw. The handler upgrades every valid handshake
// (with a Sec-WebSocket-Protocol header) but for the misuse targets: /bad101 (101 without an
// upgrade), /upgrade200 (an upgrade on a 200), /null (attach gives no handler); a request
// that is not a handshake gets 200 "plain", unless its target is /force (an upgrade anyway).
class WsFixture {
 public:
  WsFixture() {
    limits.max_message_bytes = 4096;
    limits.max_send_queue_bytes = 256 * 1024;
    limits.max_messages_per_second = 0;
    limits.ping_interval = seconds(10);
    limits.close_timeout = milliseconds(500);
    http.write_timeout = seconds(3);
  }

  // Runs client(port) on a thread of its own while the server serves on the loop; then
  // stops the server.
  void Run(const std::function<void(std::uint16_t)>& client) {
    env.RunMain(Main(this, &client));
    // A WebSocket that ended just before the stop (its client hung up) has its OnClosed
    // posted, not run, and is no longer one Stop reaches; so has one whose OnMessage the end
    // of RunMain cancelled. One more turn of the loop runs them; destroyed unrun, the
    // handler (holding its peer) and the session would stay a cycle (LeakSanitizer).
    env.RunMain(Settle(&env));
    peers.clear();
  }

  // Runs f on the loop thread and returns its value (from the client's thread).
  template <typename F>
  auto OnLoop(F f) -> decltype(f()) {
    std::promise<decltype(f())> promise;
    std::future<decltype(f())> result = promise.get_future();
    env.PostFromAnyThread([&] { promise.set_value(f()); });
    return result.get();
  }

  std::size_t OpenWebSockets() { return OnLoop([this] { return server->open_websockets(); }); }
  std::size_t OpenConnections() { return OnLoop([this] { return server->open_connections(); }); }
  std::uint64_t Ended(WebSocketEnd why) { return OnLoop([this, why] { return server->websockets_closed(why); }); }

  RealEnv env;
  Recorder rec;
  WebSocketLimits limits;
  HttpServerLimits http;
  Duration delay{0};
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::unique_ptr<HttpServer> server;                // loop thread only
  std::vector<std::shared_ptr<WebSocketPeer>> peers;  // loop thread only, in attach order
  int abandoned = 0;                                 // loop thread only

 private:
  ServerHandler Handler() {
    return [this](ServerRequest request) {
      const std::optional<std::string> check = CheckWebSocketHandshake(request);
      const std::string path = request.target;
      if (path == "/bad101") {
        ServerResponse response;
        response.status = 101;
        return ReadyResponse(std::move(response));
      }
      if ((!check || !check->empty()) && path != "/force") {
        return ReadyResponse(TextResponse(check ? 400 : 200, check ? *check : "plain"));
      }
      auto upgrade = std::make_shared<WebSocketUpgrade>();
      upgrade->limits = limits;
      upgrade->headers = {{"Sec-WebSocket-Protocol", "chat"}, {"Connection", "ignored"}};
      upgrade->abandoned = [this] { ++abandoned; };
      const bool null_handler = path == "/null";
      upgrade->attach = [this, null_handler](std::shared_ptr<WebSocketPeer> peer) -> std::shared_ptr<WebSocketHandler> {
        peers.push_back(peer);
        if (null_handler) return nullptr;
        return std::make_shared<TestHandler>(&env, &rec, std::move(peer), delay);
      };
      ServerResponse response;
      response.status = path == "/upgrade200" ? 200 : 101;
      response.upgrade = std::move(upgrade);
      return ReadyResponse(std::move(response));
    };
  }

  static Task<void> Settle(Env* env) { co_await env->SleepFor(milliseconds(20)); }

  static Task<void> Main(WsFixture* t, const std::function<void(std::uint16_t)>* client) {
    auto started = HttpServer::Start(t->env, "127.0.0.1:0", t->Handler(), t->http, {}, t->tls);
    if (!started.ok()) {
      ADD_FAILURE() << started.status().ToString();
      co_return;
    }
    t->server = std::move(started).value();
    const std::uint16_t port = t->server->bound_port();
    std::atomic<bool> done{false};
    std::thread thread([&] {
      (*client)(port);
      done = true;
    });
    while (!done) co_await t->env.SleepFor(milliseconds(2));
    thread.join();
    t->server->Stop();
    t->server.reset();
  }
};

// Connects and upgrades; the 101 must be right.
void Open(BlockingClient& c, std::uint16_t port, SSL_CTX* tls = nullptr, std::string first_frames = {}) {
  ASSERT_TRUE(c.Connect(port, tls));
  std::optional<HttpHead> head = c.Handshake("/ws", {}, std::move(first_frames));
  ASSERT_TRUE(head);
  ASSERT_EQ(head->status, 101);
  EXPECT_EQ(head->Get("Upgrade"), "websocket");
  EXPECT_EQ(head->Get("Connection"), "Upgrade");
  EXPECT_EQ(head->Get("Sec-WebSocket-Accept"), kAccept);
  EXPECT_EQ(head->Get("Sec-WebSocket-Protocol"), "chat");
}

// Echo and the client's close, on a plain or a TLS connection.
void EchoThenClientClose(WsFixture& t, std::uint16_t port, SSL_CTX* tls) {
  BlockingClient c;
  Open(c, port, tls);
  c.SendText("hello");
  std::optional<ServerFrame> f = c.ReadFrame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->opcode, 0x1);
  EXPECT_EQ(f->payload, "hello");
  c.SendFrame(0x2, std::string("\x00\x01\x02", 3));
  f = c.ReadFrame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->opcode, 0x2);
  EXPECT_EQ(f->payload, std::string("\x00\x01\x02", 3));
  // A fragmented message comes back whole; a big one too.
  c.SendFrame(0x1, "frag", false);
  c.SendFrame(0x0, "mented", true);
  f = c.ReadFrame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->payload, "fragmented");
  const std::string big(4000, 'b');
  c.SendText(big);
  f = c.ReadFrame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->payload, big);

  EXPECT_TRUE(Recorder::WaitUntil([&] { return t.OpenWebSockets() == 1; }));
  EXPECT_EQ(t.OpenConnections(), 0u) << "a WebSocket holds no HTTP slot";

  c.SendClose(1000, "done");
  f = c.ReadFrame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->opcode, 0x8);
  EXPECT_EQ(f->CloseCode(), 1000);
  EXPECT_TRUE(c.SeesEnd());
  ASSERT_TRUE(t.rec.WaitClosed(1));
  EXPECT_EQ(t.rec.ClosedCalls()[0], std::make_pair(1000, std::string("done")));
  EXPECT_TRUE(Recorder::WaitUntil([&] { return t.OpenWebSockets() == 0; }));
  EXPECT_EQ(t.Ended(WebSocketEnd::kClient), 1u);
}

TEST(WebSocketServerTest, EchoAndTheClientsClose) {
  WsFixture t;
  t.Run([&](std::uint16_t port) { EchoThenClientClose(t, port, nullptr); });
}

TEST(WebSocketServerTest, MetricsCountOpenAndEndedWebSockets) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    MetricsRegistry registry;
    t.OnLoop([&] {
      PublishHttpServerMetrics(registry, *t.server, "api");
      return 0;
    });
    BlockingClient c;
    Open(c, port);
    ASSERT_TRUE(Recorder::WaitUntil([&] { return t.OpenWebSockets() == 1; }));
    std::string text = t.OnLoop([&] { return registry.RenderText(); });
    EXPECT_NE(text.find("wasmkeep_websockets_open{listener=\"api\"} 1\n"), std::string::npos) << text;
    c.SendClose(1000);
    ASSERT_TRUE(c.ReadFrame());
    ASSERT_TRUE(Recorder::WaitUntil([&] { return t.OpenWebSockets() == 0; }));
    text = t.OnLoop([&] { return registry.RenderText(); });
    EXPECT_NE(text.find("wasmkeep_websockets_open{listener=\"api\"} 0\n"), std::string::npos) << text;
    EXPECT_NE(text.find("wasmkeep_websocket_closed_total{listener=\"api\",reason=\"client\"} 1\n"), std::string::npos)
        << text;
    for (std::string_view reason : {"node", "protocol", "too_big", "rate", "slow_reader", "timeout", "stopped"}) {
      const std::string line =
          "wasmkeep_websocket_closed_total{listener=\"api\",reason=\"" + std::string(reason) + "\"} 0\n";
      EXPECT_NE(text.find(line), std::string::npos) << reason;
    }
  });
}

TEST(WebSocketServerTest, FramesSentWithTheHandshakeAreRead) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port, nullptr, Frame(0x1, "early") + Frame(0x1, "bird"));
    std::optional<ServerFrame> f = c.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->payload, "early");
    f = c.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->payload, "bird");
  });
}

TEST(WebSocketServerTest, AClientCloseWithoutACodeIsEchoedAs1000AndReportedAs1005) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    c.SendFrame(0x8, "");
    std::optional<ServerFrame> f = c.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->opcode, 0x8);
    EXPECT_EQ(f->CloseCode(), 1000);
    EXPECT_TRUE(c.SeesEnd());
    ASSERT_TRUE(t.rec.WaitClosed(1));
    EXPECT_EQ(t.rec.ClosedCalls()[0].first, 1005);
  });
}

TEST(WebSocketServerTest, OneMessageAtATimeInOrder) {
  WsFixture t;
  t.delay = milliseconds(30);
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    std::string burst;
    for (int i = 0; i < 5; ++i) burst += Frame(0x1, "m" + std::to_string(i));
    ASSERT_TRUE(c.Write(burst));
    for (int i = 0; i < 5; ++i) {
      std::optional<ServerFrame> f = c.ReadFrame();
      ASSERT_TRUE(f);
      EXPECT_EQ(f->payload, "m" + std::to_string(i));
    }
    ASSERT_TRUE(Recorder::WaitUntil([&] { return t.rec.Log().size() == 10; }));  // the last "end" follows its echo
    EXPECT_EQ(t.rec.MaxInFlight(), 1);
    const std::vector<std::string> log = t.rec.Log();
    ASSERT_EQ(log.size(), 10u);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(log[2 * i], "start m" + std::to_string(i));
      EXPECT_EQ(log[2 * i + 1], "end m" + std::to_string(i));
    }
  });
}

TEST(WebSocketServerTest, APingIsAnsweredWithItsPayload) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    c.SendFrame(0x9, "are you there");
    std::optional<ServerFrame> f = c.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->opcode, 0xA);
    EXPECT_EQ(f->payload, "are you there");
  });
}

TEST(WebSocketServerTest, AnIdleClientIsPingedAndCutWhenItDoesNotAnswer) {
  WsFixture t;
  // Intervals long enough that a loaded machine (the suite runs two tests at once beside
  // builds) still lets the answering client's pong arrive within one.
  t.limits.ping_interval = milliseconds(300);
  t.Run([&](std::uint16_t port) {
    BlockingClient answering;
    Open(answering, port);
    BlockingClient silent;
    Open(silent, port);
    // The answering client stays open over several intervals (its pongs count as frames).
    const auto until = std::chrono::steady_clock::now() + milliseconds(1100);
    int pings = 0;
    while (std::chrono::steady_clock::now() < until) {
      answering.SetTimeout(milliseconds(50));
      std::optional<ServerFrame> f = answering.ReadFrame();
      if (f && f->opcode == 0x9) {
        ++pings;
        answering.SendFrame(0xA, f->payload);
      }
    }
    answering.SetTimeout(kClientTimeout);
    EXPECT_GE(pings, 2);
    // The silent one got a ping and then the end, without a close frame.
    std::optional<ServerFrame> f = silent.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->opcode, 0x9);
    EXPECT_TRUE(silent.SeesEnd());
    ASSERT_TRUE(t.rec.WaitClosed(1));
    EXPECT_EQ(t.rec.ClosedCalls()[0].first, 1006);
    EXPECT_EQ(t.Ended(WebSocketEnd::kTimeout), 1u);
    answering.SendText("still here");
    f = answering.ReadNonPing();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->payload, "still here");
  });
}

TEST(WebSocketServerTest, ThePeersCloseSendsWhatIsQueuedThenItsCloseFrame) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    c.SendText("close");
    std::optional<ServerFrame> f = c.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->payload, "before close");
    f = c.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->opcode, 0x8);
    EXPECT_EQ(f->CloseCode(), 4000);
    EXPECT_EQ(f->CloseReason(), "bye");
    c.SendClose(4000, "ok");
    EXPECT_TRUE(c.SeesEnd());
    ASSERT_TRUE(t.rec.WaitClosed(1));
    EXPECT_EQ(t.rec.ClosedCalls()[0], std::make_pair(4000, std::string("ok")));
    EXPECT_EQ(t.Ended(WebSocketEnd::kNode), 1u);
  });
}

TEST(WebSocketServerTest, ThePeersCloseEndsAfterCloseTimeoutWithoutAnAnswer) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    const auto start = std::chrono::steady_clock::now();
    c.SendText("close");
    std::optional<ServerFrame> f = c.ReadUntilClose();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->CloseCode(), 4000);
    EXPECT_TRUE(c.SeesEnd());
    EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(450));
    ASSERT_TRUE(t.rec.WaitClosed(1));
    EXPECT_EQ(t.rec.ClosedCalls()[0].first, 1006);
  });
}

// The client's frame breaks a rule: a close frame with code and a reason naming it, then the end.
void ExpectFailedWith(WsFixture& t, std::uint16_t port, const std::string& frames, int code,
                      std::string_view reason_has, WebSocketEnd why) {
  BlockingClient c;
  Open(c, port);
  ASSERT_TRUE(c.Write(frames));
  std::optional<ServerFrame> f = c.ReadUntilClose();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->CloseCode(), code);
  EXPECT_NE(f->CloseReason().find(reason_has), std::string::npos) << f->CloseReason();
  EXPECT_TRUE(c.SeesEnd());
  ASSERT_TRUE(t.rec.WaitClosed(1));
  EXPECT_EQ(t.rec.ClosedCalls()[0].first, 1006);
  EXPECT_EQ(t.Ended(why), 1u);
}

TEST(WebSocketServerTest, AMessageTooBigIsClosedWith1009) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    ExpectFailedWith(t, port, Frame(0x2, std::string(5000, 'x')), kCloseTooBig, "websockets.max_message_bytes",
                     WebSocketEnd::kTooBig);
  });
}

TEST(WebSocketServerTest, TextThatIsNotUtf8IsClosedWith1007) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    ExpectFailedWith(t, port, Frame(0x1, "bad \xff text"), kCloseInvalidData, "UTF-8", WebSocketEnd::kProtocol);
  });
}

TEST(WebSocketServerTest, AnUnmaskedFrameIsClosedWith1002) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    FrameSpec spec;
    spec.payload = "naked";
    spec.masked = false;
    ExpectFailedWith(t, port, ClientFrame(spec), kCloseProtocolError, "masked", WebSocketEnd::kProtocol);
  });
}

TEST(WebSocketServerTest, TooManyMessagesASecondAreClosedWith1008) {
  WsFixture t;
  t.limits.max_messages_per_second = 5;  // a burst of 10
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    std::string burst;
    for (int i = 0; i < 30; ++i) burst += Frame(0x1, "r" + std::to_string(i));
    ASSERT_TRUE(c.Write(burst));
    int echoes = 0;
    std::optional<ServerFrame> f = c.ReadUntilClose(&echoes);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->CloseCode(), kClosePolicy);
    EXPECT_NE(f->CloseReason().find("websockets.max_messages_per_second"), std::string::npos) << f->CloseReason();
    EXPECT_GE(echoes, 10);
    EXPECT_LE(echoes, 12);
    EXPECT_TRUE(c.SeesEnd());
    ASSERT_TRUE(t.rec.WaitClosed(1));
    EXPECT_EQ(t.Ended(WebSocketEnd::kRate), 1u);
  });
}

TEST(WebSocketServerTest, AClientThatDoesNotReadIsClosedAtTheSendQueuesBound) {
  WsFixture t;
  t.limits.close_timeout = seconds(3);  // room for the client to start reading
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    c.SendText("flood");
    // Not reading: the kernel's buffers fill, then the queue, then Send refuses.
    ASSERT_TRUE(Recorder::WaitUntil([&] { return t.rec.Logged("send refused"); }));
    EXPECT_EQ(t.Ended(WebSocketEnd::kSlowReader), 1u);
    ASSERT_TRUE(t.rec.WaitClosed(1));
    EXPECT_EQ(t.rec.ClosedCalls()[0].first, 1006);
    // What was written before still arrives, then the close frame naming the bound.
    std::optional<ServerFrame> f = c.ReadUntilClose();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->CloseCode(), kClosePolicy);
    EXPECT_EQ(f->CloseReason(), "send queue over 262144 bytes (websockets.max_send_queue_bytes)");
    EXPECT_TRUE(c.SeesEnd());
  });
}

TEST(WebSocketServerTest, AClientThatDoesNotReadIsCutAfterTheWriteTimeout) {
  WsFixture t;
  t.http.write_timeout = milliseconds(300);
  t.limits.max_send_queue_bytes = 64 * 1024 * 1024;  // the write timeout comes first
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    c.SendText("flood");
    ASSERT_TRUE(t.rec.WaitClosed(1));
    EXPECT_EQ(t.rec.ClosedCalls()[0].first, 1006);
    EXPECT_EQ(t.Ended(WebSocketEnd::kSlowReader), 1u);
    EXPECT_TRUE(Recorder::WaitUntil([&] { return t.rec.Logged("send refused"); }));
  });
}

TEST(WebSocketServerTest, StopClosesEveryWebSocketWith1001) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    std::vector<std::unique_ptr<BlockingClient>> clients;
    for (int i = 0; i < 3; ++i) {
      clients.push_back(std::make_unique<BlockingClient>());
      Open(*clients.back(), port);
    }
    ASSERT_TRUE(Recorder::WaitUntil([&] { return t.OpenWebSockets() == 3; }));
    t.OnLoop([&] {
      t.server->Stop();
      return 0;
    });
    EXPECT_EQ(t.rec.ClosedCalls().size(), 3u) << "OnClosed before Stop returns";
    for (const auto& c : t.rec.ClosedCalls()) EXPECT_EQ(c.first, 1006);
    for (auto& c : clients) {
      std::optional<ServerFrame> f = c->ReadFrame();
      ASSERT_TRUE(f);
      EXPECT_EQ(f->opcode, 0x8);
      EXPECT_EQ(f->CloseCode(), kCloseGoingAway);
      EXPECT_EQ(f->CloseReason(), "the node is stopping");
      EXPECT_TRUE(c->SeesEnd());
    }
    EXPECT_EQ(t.OpenWebSockets(), 0u);
    EXPECT_EQ(t.Ended(WebSocketEnd::kStopped), 3u);
  });
}

TEST(WebSocketServerTest, WebSocketsHoldNoHttpSlot) {
  WsFixture t;
  t.http.max_connections = 2;
  t.http.max_connections_per_client = 2;
  t.Run([&](std::uint16_t port) {
    std::vector<std::unique_ptr<BlockingClient>> sockets;
    for (int i = 0; i < 4; ++i) {
      sockets.push_back(std::make_unique<BlockingClient>());
      Open(*sockets.back(), port);
    }
    // (The server hands the connection over once its 101 is written, just after the client reads it.)
    EXPECT_TRUE(Recorder::WaitUntil([&] { return t.OpenWebSockets() == 4; }));
    EXPECT_EQ(t.OpenConnections(), 0u);
    BlockingClient plain;
    ASSERT_TRUE(plain.Connect(port));
    ASSERT_TRUE(plain.Write("GET /x HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::optional<HttpHead> head = plain.ReadHead();
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);
    for (auto& s : sockets) {
      s->SendText("alive");
      std::optional<ServerFrame> f = s->ReadFrame();
      ASSERT_TRUE(f);
      EXPECT_EQ(f->payload, "alive");
    }
  });
}

TEST(WebSocketServerTest, AnIdleConnectionIsSmall) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    Open(c, port);
    c.SendText(std::string(3000, 'm'));
    ASSERT_TRUE(c.ReadFrame());
    // Once the echo's write has completed, the read, message and queue buffers are given back.
    std::size_t bytes = 0;
    EXPECT_TRUE(Recorder::WaitUntil([&] {
      bytes = t.OnLoop([&] { return t.peers.at(0)->memory_bytes(); });
      return bytes < 2048;
    })) << "an idle plain WebSocket holds " << bytes << " bytes";
    EXPECT_GT(bytes, 0u);
    EXPECT_TRUE(t.OnLoop([&] { return t.peers.at(0)->remote().starts_with("127.0.0.1:"); }));
  });
}

TEST(WebSocketServerTest, MisusedUpgradesAre500AndAbandoned) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    const std::vector<std::pair<std::string, int>> cases = {{"/bad101", 0}, {"/upgrade200", 1}};
    for (const auto& [target, abandoned] : cases) {
      BlockingClient c;
      ASSERT_TRUE(c.Connect(port));
      std::optional<HttpHead> head = c.Handshake(target);
      ASSERT_TRUE(head) << target;
      EXPECT_EQ(head->status, 500) << target;
      EXPECT_EQ(t.OnLoop([&] { return t.abandoned; }), abandoned) << target;
    }
    // An upgrade answering a request that is not a handshake.
    BlockingClient c;
    ASSERT_TRUE(c.Connect(port));
    ASSERT_TRUE(c.Write("GET /force HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::optional<HttpHead> head = c.ReadHead();
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 500);
    EXPECT_EQ(t.OnLoop([&] { return t.abandoned; }), 2);
    EXPECT_EQ(t.OnLoop([&] { return t.peers.size(); }), 0u) << "attach is never called";
  });
}

TEST(WebSocketServerTest, ANullHandlerIsClosedWith1011) {
  WsFixture t;
  t.Run([&](std::uint16_t port) {
    BlockingClient c;
    ASSERT_TRUE(c.Connect(port));
    std::optional<HttpHead> head = c.Handshake("/null");
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 101);
    std::optional<ServerFrame> f = c.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->opcode, 0x8);
    EXPECT_EQ(f->CloseCode(), kCloseInternal);
    c.SendClose(kCloseInternal);
    EXPECT_TRUE(c.SeesEnd());
    EXPECT_EQ(t.Ended(WebSocketEnd::kNode), 1u);
  });
}

TEST(WebSocketServerTest, OverTls) {
  std::signal(SIGPIPE, SIG_IGN);  // OpenSSL writes to a socket the server may have closed
  WsFixture t;
  auto identity = TlsIdentity::Generate("websocket test");
  ASSERT_TRUE(identity.ok()) << identity.status().ToString();
  t.tls = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
  ASSERT_TRUE((*identity)->UseIn(*t.tls).ok());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  ASSERT_NE(client_ctx, nullptr);
  SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, nullptr);
  // The server ends a connection without TLS's close_notify, as HttpServer does: an EOF.
  SSL_CTX_set_options(client_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  t.Run([&](std::uint16_t port) {
    EchoThenClientClose(t, port, client_ctx);
    // The peer's close and a message too big, over TLS.
    BlockingClient c;
    Open(c, port, client_ctx);
    c.SendText("close");
    std::optional<ServerFrame> f = c.ReadUntilClose();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->CloseCode(), 4000);
    c.SendClose(4000);
    EXPECT_TRUE(c.SeesEnd());
    BlockingClient big;
    Open(big, port, client_ctx);
    ASSERT_TRUE(big.Write(Frame(0x2, std::string(5000, 'x'))));
    f = big.ReadUntilClose();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->CloseCode(), kCloseTooBig);
    EXPECT_TRUE(big.SeesEnd());
  });
  SSL_CTX_free(client_ctx);
}

}  // namespace
}  // namespace wk
