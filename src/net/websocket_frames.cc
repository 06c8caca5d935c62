#include "net/websocket_frames.h"

#include <openssl/evp.h>

#include <algorithm>
#include <utility>

#include "base/utf8.h"
#include "net/websocket.h"

namespace wk {

namespace {

constexpr std::uint8_t kFinBit = 0x80;
constexpr std::uint8_t kRsvBits = 0x70;
constexpr std::uint8_t kOpcodeBits = 0x0F;
constexpr std::uint8_t kMaskBit = 0x80;
constexpr std::uint8_t kLengthBits = 0x7F;
constexpr std::uint8_t kLength16 = 126;
constexpr std::uint8_t kLength64 = 127;
constexpr std::uint8_t kMaxControlPayload = 125;
// The close code a close frame without one stands for (RFC 6455 section 7.1.5).
constexpr int kNoCodeReceived = 1005;

bool IsControl(std::uint8_t opcode) { return (opcode & 0x08) != 0; }

bool IsKnownOpcode(std::uint8_t opcode) {
  switch (static_cast<WebSocketOpcode>(opcode)) {
    case WebSocketOpcode::kContinuation:
    case WebSocketOpcode::kText:
    case WebSocketOpcode::kBinary:
    case WebSocketOpcode::kClose:
    case WebSocketOpcode::kPing:
    case WebSocketOpcode::kPong:
      return true;
  }
  return false;
}

// The whole header's length, from its second byte: 2, the extended length, the mask key
// (when the mask bit is set).
std::size_t HeaderLength(std::uint8_t second_byte) {
  const std::uint8_t length = second_byte & kLengthBits;
  const std::size_t extended = length == kLength16 ? 2 : length == kLength64 ? 8 : 0;
  return 2 + extended + ((second_byte & kMaskBit) != 0 ? 4 : 0);
}

WebSocketEvent ErrorEvent(int code, std::string why) {
  WebSocketEvent event;
  event.kind = WebSocketEvent::Kind::kError;
  event.code = code;
  event.data = std::move(why);
  return event;
}

}  // namespace

WebSocketEvent WebSocketFrameParser::Fail(int code, std::string why) {
  Release();
  return ErrorEvent(code, std::move(why));
}

void WebSocketFrameParser::Release() {
  stage_ = Stage::kDone;
  std::string().swap(message_);
  std::string().swap(control_);
}

std::optional<WebSocketEvent> WebSocketFrameParser::CheckStart() const {
  const std::uint8_t first = header_[0];
  const std::uint8_t second = header_[1];
  const std::uint8_t opcode = first & kOpcodeBits;
  if ((first & kRsvBits) != 0) return ErrorEvent(kCloseProtocolError, "RSV bits set without an extension");
  if (!IsKnownOpcode(opcode)) {
    return ErrorEvent(kCloseProtocolError, "unknown opcode " + std::to_string(opcode));
  }
  // RFC 6455 section 5.1: a server closes on an unmasked frame, a client on a masked one.
  const bool masked = (second & kMaskBit) != 0;
  if (role_ == WebSocketRole::kServer && !masked) return ErrorEvent(kCloseProtocolError, "a client frame must be masked");
  if (role_ == WebSocketRole::kClient && masked) return ErrorEvent(kCloseProtocolError, "a server frame must not be masked");
  if (IsControl(opcode)) {
    if ((first & kFinBit) == 0) return ErrorEvent(kCloseProtocolError, "a fragmented control frame");
    if ((second & kLengthBits) > kMaxControlPayload) {
      return ErrorEvent(kCloseProtocolError, "a control frame over 125 bytes");
    }
  } else if (static_cast<WebSocketOpcode>(opcode) == WebSocketOpcode::kContinuation) {
    if (!in_message_) return ErrorEvent(kCloseProtocolError, "a continuation frame without a message to continue");
  } else if (in_message_) {
    return ErrorEvent(kCloseProtocolError, "a new message inside a fragmented one");
  }
  return std::nullopt;
}

std::optional<WebSocketEvent> WebSocketFrameParser::StartPayload() {
  const std::uint8_t first = header_[0];
  const std::uint8_t length7 = header_[1] & kLengthBits;
  std::uint64_t length = length7;
  std::size_t at = 2;
  if (length7 == kLength16 || length7 == kLength64) {
    const std::size_t bytes = length7 == kLength16 ? 2 : 8;
    length = 0;
    for (std::size_t i = 0; i < bytes; ++i) length = (length << 8) | header_[at + i];
    at += bytes;
    if (length7 == kLength64 && (length >> 63) != 0) {
      return Fail(kCloseProtocolError, "a 64-bit payload length with its top bit set");
    }
  }
  masked_ = (header_[1] & kMaskBit) != 0;
  if (masked_) std::copy_n(header_.begin() + static_cast<std::ptrdiff_t>(at), 4, mask_.begin());
  mask_at_ = 0;
  opcode_ = static_cast<WebSocketOpcode>(first & kOpcodeBits);
  fin_ = (first & kFinBit) != 0;
  remaining_ = length;
  if (IsControl(static_cast<std::uint8_t>(opcode_))) {
    control_.clear();
    control_.reserve(static_cast<std::size_t>(length));
  } else {
    const std::size_t held = in_message_ ? message_.size() : 0;
    if (length > max_message_bytes_ - held) {
      return Fail(kCloseTooBig, "a message over " + std::to_string(max_message_bytes_) + " bytes");
    }
    if (opcode_ != WebSocketOpcode::kContinuation) {
      in_message_ = true;
      message_binary_ = opcode_ == WebSocketOpcode::kBinary;
      message_.clear();
    }
  }
  header_have_ = 0;
  if (remaining_ == 0) return EndFrame();
  stage_ = Stage::kPayload;
  return std::nullopt;
}

std::optional<WebSocketEvent> WebSocketFrameParser::EndFrame() {
  stage_ = Stage::kHeader;
  WebSocketEvent event;
  switch (opcode_) {
    case WebSocketOpcode::kPing:
    case WebSocketOpcode::kPong:
      event.kind = opcode_ == WebSocketOpcode::kPing ? WebSocketEvent::Kind::kPing : WebSocketEvent::Kind::kPong;
      event.data = std::move(control_);
      control_ = std::string();
      return event;
    case WebSocketOpcode::kClose: {
      std::string payload = std::move(control_);
      control_ = std::string();
      if (payload.size() == 1) return Fail(kCloseProtocolError, "a close frame with a 1-byte payload");
      event.kind = WebSocketEvent::Kind::kClose;
      event.code = kNoCodeReceived;
      if (payload.size() >= 2) {
        const int code = (static_cast<std::uint8_t>(payload[0]) << 8) | static_cast<std::uint8_t>(payload[1]);
        if (!IsSendableCloseCode(code)) {
          return Fail(kCloseProtocolError, "close code " + std::to_string(code) + " is not valid in a frame");
        }
        std::string_view reason = std::string_view(payload).substr(2);
        if (!IsValidUtf8(reason)) return Fail(kCloseInvalidData, "a close reason that is not UTF-8");
        event.code = code;
        event.data.assign(reason);
      }
      stage_ = Stage::kDone;
      std::string().swap(message_);
      return event;
    }
    case WebSocketOpcode::kContinuation:
    case WebSocketOpcode::kText:
    case WebSocketOpcode::kBinary:
      break;
  }
  if (!fin_) return std::nullopt;
  in_message_ = false;
  if (!message_binary_ && !IsValidUtf8(message_)) return Fail(kCloseInvalidData, "a text message that is not UTF-8");
  event.kind = WebSocketEvent::Kind::kMessage;
  event.binary = message_binary_;
  event.data = std::move(message_);
  message_ = std::string();
  return event;
}

WebSocketFrameParser::Step WebSocketFrameParser::Feed(std::string_view input) {
  Step step;
  std::size_t at = 0;
  while (stage_ != Stage::kDone && at < input.size()) {
    if (stage_ == Stage::kHeader) {
      header_[header_have_++] = static_cast<std::uint8_t>(input[at++]);
      if (header_have_ == 2) {
        if (std::optional<WebSocketEvent> error = CheckStart()) {
          step.consumed = at;
          step.event = Fail(error->code, std::move(error->data));
          return step;
        }
      }
      if (header_have_ >= 2 && header_have_ == HeaderLength(header_[1])) {
        if (std::optional<WebSocketEvent> event = StartPayload()) {
          step.consumed = at;
          step.event = std::move(event);
          return step;
        }
      }
      continue;
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, input.size() - at));
    std::string& target = IsControl(static_cast<std::uint8_t>(opcode_)) ? control_ : message_;
    const std::size_t old_size = target.size();
    target.append(input.data() + at, n);
    if (masked_) {
      for (std::size_t i = 0; i < n; ++i) {
        target[old_size + i] = static_cast<char>(target[old_size + i] ^ mask_[(mask_at_ + i) & 3]);
      }
      mask_at_ = static_cast<std::uint8_t>((mask_at_ + n) & 3);
    }
    at += n;
    remaining_ -= n;
    if (remaining_ == 0) {
      if (std::optional<WebSocketEvent> event = EndFrame()) {
        step.consumed = at;
        step.event = std::move(event);
        return step;
      }
    }
  }
  step.consumed = at;
  return step;
}

std::size_t EncodeWebSocketFrameHeader(WebSocketOpcode opcode, std::uint64_t payload_bytes, bool fin,
                                       std::array<char, kMaxWebSocketFrameHeaderBytes>& out,
                                       const WebSocketMask* mask) {
  out[0] = static_cast<char>((fin ? kFinBit : 0) | static_cast<std::uint8_t>(opcode));
  const std::uint8_t mask_bit = mask != nullptr ? kMaskBit : 0;
  std::size_t at = 2;
  if (payload_bytes < kLength16) {
    out[1] = static_cast<char>(mask_bit | payload_bytes);
  } else {
    const std::size_t bytes = payload_bytes <= 0xFFFF ? 2 : 8;
    out[1] = static_cast<char>(mask_bit | (bytes == 2 ? kLength16 : kLength64));
    for (std::size_t i = 0; i < bytes; ++i) {
      out[2 + i] = static_cast<char>((payload_bytes >> (8 * (bytes - 1 - i))) & 0xFF);
    }
    at += bytes;
  }
  if (mask != nullptr) {
    for (std::uint8_t b : *mask) out[at++] = static_cast<char>(b);
  }
  return at;
}

std::string EncodeWebSocketFrame(WebSocketOpcode opcode, std::string_view payload, bool fin, const WebSocketMask* mask) {
  std::array<char, kMaxWebSocketFrameHeaderBytes> header{};
  const std::size_t header_bytes = EncodeWebSocketFrameHeader(opcode, payload.size(), fin, header, mask);
  std::string frame;
  frame.reserve(header_bytes + payload.size());
  frame.append(header.data(), header_bytes);
  frame.append(payload);
  if (mask != nullptr) ApplyWebSocketMask(*mask, frame.data() + header_bytes, payload.size());
  return frame;
}

void ApplyWebSocketMask(const WebSocketMask& mask, char* data, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(data[i] ^ mask[i & 3]);
}

std::string_view Utf8Prefix(std::string_view text, std::size_t max_bytes) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t n = Utf8SequenceLength(text.substr(at));
    if (n == 0 || at + n > max_bytes) break;
    at += n;
  }
  return text.substr(0, at);
}

std::string EncodeWebSocketClosePayload(int code, std::string_view reason) {
  std::string payload;
  const std::string_view cut = Utf8Prefix(reason, kMaxCloseReasonBytes);
  payload.reserve(2 + cut.size());
  payload.push_back(static_cast<char>((code >> 8) & 0xFF));
  payload.push_back(static_cast<char>(code & 0xFF));
  payload.append(cut);
  return payload;
}

std::string WebSocketAcceptKey(std::string_view key) {
  static constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  std::string input;
  input.reserve(key.size() + kGuid.size());
  input.append(key);
  input.append(kGuid);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_bytes = 0;
  const int ok = EVP_Digest(input.data(), input.size(), digest, &digest_bytes, EVP_sha1(), nullptr);
  if (ok != 1 || digest_bytes != 20) return {};  // OpenSSL cannot hash: the handshake then fails
  // 20 bytes are 28 characters of base64, and EVP_EncodeBlock adds a NUL.
  unsigned char encoded[29];
  const int n = EVP_EncodeBlock(encoded, digest, static_cast<int>(digest_bytes));
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<std::size_t>(n));
}

}  // namespace wk
