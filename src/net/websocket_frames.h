// WebSocket framing (RFC 6455 section 5), for either end of a connection: an incremental
// parser of the frames the other end sends (a client's are masked, a server's are not), which
// checks every rule of the protocol and reassembles fragmented messages under a size bound, an
// encoder of frames (masked when a client sends them), and the opening handshake's
// Sec-WebSocket-Accept. The WebSocket session (websocket_session.h) runs a connection on them,
// for HttpServer (the server's end) and the WebSocket client (websocket_client.h).
//
// Guarantees: the parser never buffers more than max_message_bytes of one message (a frame
// that would take it past is refused by its header, before its payload is read), and
// consumes every byte it is given up to the frame that completes an event, so the caller
// keeps no partial frame of its own.
//
// Threading: pure functions and plain objects; no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wk {

// Which end of a connection: a client masks the frames it sends, a server never does.
enum class WebSocketRole : std::uint8_t { kServer, kClient };

enum class WebSocketOpcode : std::uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

// What the parser found: a whole message, a control frame, or a broken rule.
struct WebSocketEvent {
  enum class Kind : std::uint8_t { kMessage, kPing, kPong, kClose, kError };
  Kind kind = Kind::kMessage;
  bool binary = false;  // kMessage: binary (true) or text (valid UTF-8)
  // kMessage: the message (all fragments); kPing, kPong: the payload; kClose: the reason
  // (UTF-8); kError: what is wrong, short enough for a close frame's reason.
  std::string data;
  // kClose: the code received (1005 when the frame had none). kError: the code to close
  // with: kCloseProtocolError, kCloseInvalidData (UTF-8) or kCloseTooBig (websocket.h).
  int code = 0;
};

// Parses the frames the other end sends to `role`: a server reads a client's frames, which
// must be masked, and a client a server's, which must not be (either is otherwise an error).
// RSV bits 0, the opcodes above only, control frames of at most 125 bytes and never
// fragmented, a 64-bit length without its top bit. Lengths need not be minimal. A text
// message must be UTF-8 (checked once it is whole), a close frame's payload empty or a
// received-valid code (IsSendableCloseCode) and a UTF-8 reason.
class WebSocketFrameParser {
 public:
  explicit WebSocketFrameParser(std::size_t max_message_bytes, WebSocketRole role = WebSocketRole::kServer)
      : max_message_bytes_(max_message_bytes), role_(role) {}

  struct Step {
    std::size_t consumed = 0;             // bytes of the input used (all of it when no event)
    std::optional<WebSocketEvent> event;  // set when a frame completed one
  };
  // Consumes bytes from the front of input until an event completes (the rest is left for
  // the next call) or input ends. After a kClose or kError event the parser is done: Feed
  // consumes nothing more.
  Step Feed(std::string_view input);

  bool done() const { return stage_ == Stage::kDone; }
  // Frees the buffers and makes the parser done (the connection is over).
  void Release();
  // No frame or message partly received: the next byte starts a new message or control frame.
  bool idle() const { return stage_ == Stage::kHeader && header_have_ == 0 && !in_message_; }
  // Heap bytes held (a partial message's and control frame's buffers).
  std::size_t memory_bytes() const { return HeapBytes(message_) + HeapBytes(control_); }
  // The bytes a string holds on the heap: none while it fits its own short buffer.
  static std::size_t HeapBytes(const std::string& s) {
    return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
  }

 private:
  enum class Stage : std::uint8_t { kHeader, kPayload, kDone };

  // The header so far: an error event when its first two bytes or its length break a rule.
  std::optional<WebSocketEvent> CheckStart() const;
  std::optional<WebSocketEvent> StartPayload();
  std::optional<WebSocketEvent> EndFrame();
  WebSocketEvent Fail(int code, std::string why);

  const std::size_t max_message_bytes_;
  const WebSocketRole role_;
  Stage stage_ = Stage::kHeader;
  // The frame's header as it arrives (2 + 8 + 4 bytes at most).
  std::array<std::uint8_t, 14> header_{};
  std::uint8_t header_have_ = 0;
  // The frame being read.
  WebSocketOpcode opcode_ = WebSocketOpcode::kContinuation;
  bool fin_ = false;
  std::uint64_t remaining_ = 0;
  bool masked_ = false;
  std::array<std::uint8_t, 4> mask_{};
  std::uint8_t mask_at_ = 0;
  // The data message being reassembled, and a control frame's payload.
  bool in_message_ = false;
  bool message_binary_ = false;
  std::string message_;
  std::string control_;
};

// The longest frame header: 2 bytes, a 64-bit length and a mask.
inline constexpr std::size_t kMaxWebSocketFrameHeaderBytes = 14;

// A client's masking key (RFC 6455 section 5.3): 4 random bytes per frame.
using WebSocketMask = std::array<std::uint8_t, 4>;

// Writes the header of one frame into out, with mask when given (a client's frame); returns
// its length (2, 4 or 10, and 4 more with a mask). The payload that follows a masked header
// must be masked with ApplyWebSocketMask.
std::size_t EncodeWebSocketFrameHeader(WebSocketOpcode opcode, std::uint64_t payload_bytes, bool fin,
                                       std::array<char, kMaxWebSocketFrameHeaderBytes>& out,
                                       const WebSocketMask* mask = nullptr);
// A whole frame: header and payload, masked with mask when given.
std::string EncodeWebSocketFrame(WebSocketOpcode opcode, std::string_view payload, bool fin = true,
                                 const WebSocketMask* mask = nullptr);
// XORs data with mask, its first byte with the mask's first (masking and unmasking alike).
void ApplyWebSocketMask(const WebSocketMask& mask, char* data, std::size_t bytes);
// A close frame's payload: code (big-endian) and reason cut to kMaxCloseReasonBytes on a
// UTF-8 boundary (an invalid UTF-8 tail is dropped).
std::string EncodeWebSocketClosePayload(int code, std::string_view reason);
// The longest prefix of text of at most max_bytes that is whole UTF-8 code points.
std::string_view Utf8Prefix(std::string_view text, std::size_t max_bytes);

// Sec-WebSocket-Accept for a request's Sec-WebSocket-Key: base64 of the SHA-1 of the key and
// the protocol's GUID (RFC 6455 section 4.2.2).
std::string WebSocketAcceptKey(std::string_view key);

}  // namespace wk
