#include "net/websocket_session.h"

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace wk {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// Limits of a session, with their reasons (the configurable ones are in WebSocketLimits).
// After failing a connection (a bound, a broken frame) the other end may still be sending:
// closing with unread data makes the kernel send a reset, which can destroy our close frame
// before it is read. So the session stops sending and reads and discards for a while first,
// bounded in bytes (and in time by close_timeout); Shutdown waits at most kLingerTimeout.
constexpr Duration kLingerTimeout = std::chrono::seconds(2);
constexpr std::size_t kMaxLingerBytes = 64 * 1024;
// A plain connection reads into a buffer of this size while bytes are arriving and frees it
// when the socket has nothing more (it waits for the next bytes without a buffer), so an idle
// connection holds no read buffer.
constexpr std::size_t kWsPlainReadBytes = 16 * 1024;
// A TLS connection must hand its read a buffer while it waits: a small one while idle, a
// larger one once a read fills it (a big message arriving); back to small when a read does not.
constexpr std::size_t kWsTlsIdleReadBytes = 1024;
constexpr std::size_t kWsTlsBusyReadBytes = 16 * 1024;
// Synchronous reads of a plain socket in one turn of the loop before waiting for it again,
// so a client sending without pause cannot keep the loop to itself.
constexpr int kWsReadsPerTurn = 4;
// Frames gathered into one write.
constexpr std::size_t kWsFramesPerWrite = 64;
// Asio's TLS stream keeps two buffers of a TLS record each (17 KiB) for its whole life.
constexpr std::size_t kWsTlsRecordBufferBytes = 2 * 17 * 1024;
// Beast's stream state (the socket and its timers), counted by its parts.
constexpr std::size_t kWsStreamStateBytes = sizeof(tcp::socket) + 3 * sizeof(net::steady_timer) + 64;

std::string FormatRate(double rate) {
  std::array<char, 32> text{};
  const auto [end, ec] = std::to_chars(text.data(), text.data() + text.size(), rate);
  return ec == std::errc() ? std::string(text.data(), end) : std::to_string(rate);
}

// One open connection: this end of a WebSocket (WebSocketPeer) and the loop that runs it.
// Reading: frames are parsed as bytes arrive; a complete message goes to the handler's
// OnMessage as its own task on the Env, and nothing more is read until that Task ends. Writing: one write at a time of the queued frames (a pong or ping first), under
// write_timeout. Phases: open -> closing (our close frame queued, see CloseMode) -> ended
// (socket closed). OnClosed is due once (the first cause sets its code) and delivered
// through Env::Post, never inside a handler's own call, after any running OnMessage. A
// client masks every frame it sends. Owned by shared_ptr: its pending Asio handlers, a
// running OnMessage task and the handler (the peer it keeps) each hold one.
template <typename Stream>
class Session final : public WebSocketSession, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Session(RealEnv& env, Stream stream, WebSocketSessionSetup setup)
      : env_(env),
        stream_(std::move(stream)),
        role_(setup.role),
        remote_(std::move(setup.remote)),
        limits_(setup.limits),
        write_timeout_(setup.write_timeout),
        on_end_(std::move(setup.on_end)),
        on_socket_closed_(std::move(setup.on_socket_closed)),
        keep_alive_(std::move(setup.keep_alive)),
        parser_(setup.limits.max_message_bytes, setup.role),
        timer_(env.context()) {
    const std::string_view leftover = setup.leftover;
    if (!leftover.empty()) {
      AllocateReadBuffer(std::max(leftover.size(), kTls ? kWsTlsIdleReadBytes : kWsPlainReadBytes));
      std::copy(leftover.begin(), leftover.end(), read_buf_.get());
      read_end_ = leftover.size();
    }
    if constexpr (kTls) {
      // OpenSSL frees its own record buffers while the connection is idle.
      SSL_set_mode(stream_.native_handle(), SSL_MODE_RELEASE_BUFFERS);
    } else {
      // Reads are synchronous once the socket is readable (ReadLoop): never blocking.
      error_code ignored;
      Lowest().socket().non_blocking(true, ignored);
    }
  }

  ~Session() override { ReportSocketClosed(); }

  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

  void Start(const WebSocketAttach& attach) override {
    const auto now = std::chrono::steady_clock::now();
    last_rx_ = now;
    tokens_at_ = now;
    tokens_ = Burst();
    ArmTimerBy(now + limits_.ping_interval);
    attaching_ = true;
    std::shared_ptr<WebSocketHandler> handler;
    if (attach) handler = attach(shared_from_this());
    attaching_ = false;
    handler_ = std::move(handler);
    if (!handler_ && phase_ == Phase::kOpen) {
      StartClose(kCloseInternal, "the connection was not taken", CloseMode::kAwaitReply, WebSocketEnd::kNode);
    }
    MaybeDeliverClosed();
    ContinueReading();
  }

  bool Send(bool binary, std::string data) override {
    if (phase_ != Phase::kOpen) return false;
    if (data.size() > limits_.max_send_queue_bytes - queued_bytes_) {
      StartClose(kClosePolicy,
                 "send queue over " + std::to_string(limits_.max_send_queue_bytes) +
                     " bytes (websockets.max_send_queue_bytes)",
                 CloseMode::kLinger, WebSocketEnd::kSlowReader);
      return false;
    }
    queued_bytes_ += data.size();
    Enqueue(binary ? WebSocketOpcode::kBinary : WebSocketOpcode::kText, std::move(data));
    Pump();
    return true;
  }

  void Close(int code, std::string reason) override {
    if (phase_ != Phase::kOpen) return;
    // The contract asks for a sendable code; one that is not would make the client fail
    // the connection, so it goes out as an internal error.
    if (!IsSendableCloseCode(code)) code = kCloseInternal;
    StartClose(code, reason, CloseMode::kAwaitReply, WebSocketEnd::kNode);
  }

  std::size_t memory_bytes() const override {
    std::size_t bytes = sizeof(*this) + kWsStreamStateBytes + read_cap_ + parser_.memory_bytes() +
                        (queue_.capacity() + writing_frames_.capacity()) * sizeof(OutFrame) + queued_bytes_ +
                        HeapBytes(control_out_) + (pong_ ? HeapBytes(*pong_) : 0) + HeapBytes(close_reason_) +
                        HeapBytes(remote_);
    if constexpr (kTls) bytes += kWsTlsRecordBufferBytes;
    return bytes;
  }

  const std::string& remote() const override { return remote_; }

  std::size_t queued_bytes() const override { return phase_ == Phase::kEnded ? 0 : queued_bytes_; }

  void WhenQueueAtMost(std::size_t bytes, std::function<void()> ready) override {
    if (room_ready_) env_.Post(std::exchange(room_ready_, nullptr));
    room_bytes_ = bytes;
    room_ready_ = std::move(ready);
    CheckRoom();
  }

  void Cut() override { End(WebSocketEnd::kNode); }

  void Shutdown() override {
    if (phase_ == Phase::kEnded) return;
    CountEnd(WebSocketEnd::kStopped);
    DueClosed(1006, {});
    if (!close_queued_) {
      DropQueue();
      QueueClose(kCloseGoingAway, "the node is stopping");
    }
    const bool was_closing = phase_ == Phase::kClosing;
    phase_ = Phase::kClosing;
    mode_ = CloseMode::kCut;
    if (close_written_) {
      End(WebSocketEnd::kStopped);
    } else {
      // The close frame goes out if the socket takes it now; cut regardless soon after.
      const auto cut = std::chrono::steady_clock::now() + std::min(limits_.close_timeout, kLingerTimeout);
      close_deadline_ = was_closing ? std::min(close_deadline_, cut) : cut;
      ArmTimerBy(close_deadline_);
      Pump();
    }
    DeliverClosedNow();
  }

 private:
  enum class Phase : std::uint8_t { kOpen, kClosing, kEnded };
  // After our close frame is written: wait for the client's (WebSocketPeer::Close), discard
  // what it still sends until it hangs up (we failed the connection: a bound or an error),
  // or close at once (the client closed first, or Stop).
  enum class CloseMode : std::uint8_t { kAwaitReply, kLinger, kCut };

  struct OutFrame {
    std::array<char, kMaxWebSocketFrameHeaderBytes> header{};
    std::uint8_t header_bytes = 0;
    bool close = false;
    std::string payload;
  };

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }
  static std::size_t HeapBytes(const std::string& s) { return WebSocketFrameParser::HeapBytes(s); }
  double Burst() const { return std::max(1.0, 2 * limits_.max_messages_per_second); }

  // ---- Reading.

  void AllocateReadBuffer(std::size_t bytes) {
    read_buf_ = std::make_unique_for_overwrite<char[]>(bytes);
    read_cap_ = bytes;
  }
  void ReleaseReadBuffer() {
    read_buf_.reset();
    read_cap_ = 0;
    read_begin_ = read_end_ = 0;
  }

  bool WantsRead() const {
    return phase_ == Phase::kOpen || (phase_ == Phase::kClosing && mode_ != CloseMode::kCut);
  }

  // Goes on with the buffered bytes, then reads, unless something stops it (a message being
  // handled, the end).
  void ContinueReading() {
    if (reading_ || delivering_ || attaching_ || !WantsRead()) return;
    if (!ProcessBuffered()) return;
    ReadLoop();
  }

  // True when every buffered byte was used and reading should go on.
  bool ProcessBuffered() {
    while (read_begin_ < read_end_) {
      if (!WantsRead() || delivering_) return false;
      if (parser_.done()) discarding_ = true;  // after an error or a close frame: nothing to parse
      if (discarding_) {
        lingered_bytes_ += read_end_ - read_begin_;
        read_begin_ = read_end_;
        if (lingered_bytes_ > kMaxLingerBytes) {
          End(WebSocketEnd::kClient);
          return false;
        }
        break;
      }
      const std::string_view bytes(read_buf_.get() + read_begin_, read_end_ - read_begin_);
      WebSocketFrameParser::Step step = parser_.Feed(bytes);
      read_begin_ += step.consumed;
      if (step.event) HandleEvent(std::move(*step.event));
    }
    read_begin_ = read_end_ = 0;
    return WantsRead() && !delivering_;
  }

  void ReadLoop() {
    if constexpr (kTls) {
      // Everything buffered was used: the buffer may change size.
      if (last_read_filled_ && read_cap_ < kWsTlsBusyReadBytes) {
        AllocateReadBuffer(kWsTlsBusyReadBytes);
      } else if ((!last_read_filled_ && read_cap_ > kWsTlsIdleReadBytes) || read_cap_ == 0) {
        AllocateReadBuffer(kWsTlsIdleReadBytes);
      }
      reading_ = true;
      stream_.async_read_some(net::buffer(read_buf_.get(), read_cap_),
                              [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                self->reading_ = false;
                                self->last_read_filled_ = !ec && n == self->read_cap_;
                                if (self->OnBytes(ec, n)) self->ReadLoop();
                              });
    } else {
      for (int i = 0; i < kWsReadsPerTurn; ++i) {
        if (read_buf_ == nullptr) AllocateReadBuffer(kWsPlainReadBytes);
        error_code ec;
        const std::size_t n = Lowest().socket().read_some(net::buffer(read_buf_.get(), read_cap_), ec);
        if (ec == net::error::would_block || ec == net::error::try_again) break;
        if (!OnBytes(ec, n)) return;
      }
      // Nothing more now (or enough for one turn): wait without holding a buffer.
      ReleaseReadBuffer();
      reading_ = true;
      Lowest().socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
        self->reading_ = false;
        if (self->phase_ == Phase::kEnded) return;
        if (ec) {
          self->End(WebSocketEnd::kClient);
          return;
        }
        self->ContinueReading();
      });
    }
  }

  // n bytes read into the buffer (or ec). True when reading should go on.
  bool OnBytes(const error_code& ec, std::size_t n) {
    if (phase_ == Phase::kEnded) {
      ReleaseReadBuffer();
      return false;
    }
    if (ec) {
      // The client hung up or the socket failed: no close frame (OnClosed gets 1006).
      End(WebSocketEnd::kClient);
      return false;
    }
    last_rx_ = std::chrono::steady_clock::now();
    read_begin_ = 0;
    read_end_ = n;
    return ProcessBuffered();
  }

  void HandleEvent(WebSocketEvent event) {
    using Kind = WebSocketEvent::Kind;
    switch (event.kind) {
      case Kind::kMessage:
        if (phase_ != Phase::kOpen) return;  // closing: what still arrives is dropped
        if (!TakeToken()) {
          StartClose(kClosePolicy,
                     "over " + FormatRate(limits_.max_messages_per_second) +
                         " messages a second (websockets.max_messages_per_second)",
                     CloseMode::kLinger, WebSocketEnd::kRate);
          return;
        }
        Deliver(event.binary, std::move(event.data));
        return;
      case Kind::kPing:
        if (phase_ != Phase::kOpen) return;
        pong_ = std::move(event.data);  // only the latest ping is answered (RFC 6455 5.5.3)
        Pump();
        return;
      case Kind::kPong:
        return;  // its arrival counted as activity (last_rx_)
      case Kind::kClose:
        OnCloseFrame(event.code, std::move(event.data));
        return;
      case Kind::kError:
        if (phase_ != Phase::kOpen) {
          discarding_ = true;
          return;
        }
        if (event.code == kCloseTooBig) {
          event.data = "message over " + std::to_string(limits_.max_message_bytes) +
                       " bytes (websockets.max_message_bytes)";
        }
        StartClose(event.code, event.data, CloseMode::kLinger,
                   event.code == kCloseTooBig ? WebSocketEnd::kTooBig : WebSocketEnd::kProtocol);
        return;
    }
  }

  void OnCloseFrame(int code, std::string reason) {
    if (phase_ == Phase::kOpen) {
      // The client closes: echo its code (1000 when it gave none) after what is queued.
      CountEnd(WebSocketEnd::kClient);
      DueClosed(code, reason);
      StartClose(code == 1005 ? kCloseNormal : code, {}, CloseMode::kCut, WebSocketEnd::kClient);
    } else if (mode_ == CloseMode::kAwaitReply) {
      DueClosed(code, std::move(reason));
      if (close_written_) {
        End(WebSocketEnd::kNode);
      } else {
        mode_ = CloseMode::kCut;  // ended once our close frame is out
      }
    } else if (mode_ == CloseMode::kLinger) {
      // The client answered (or crossed) our close: nothing more to wait for once ours is out.
      if (close_written_) {
        End(WebSocketEnd::kClient);
      } else {
        mode_ = CloseMode::kCut;
      }
    }
    MaybeDeliverClosed();
  }

  bool TakeToken() {
    const double rate = limits_.max_messages_per_second;
    if (rate <= 0) return true;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - tokens_at_).count();
    tokens_ = std::min(Burst(), tokens_ + elapsed * rate);
    tokens_at_ = now;
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

  void Deliver(bool binary, std::string data) {
    delivering_ = true;
    env_.Spawn(RunOnMessage(handler_, shared_from_this(), binary, std::move(data)), "websocket message");
  }

  // A spawned task starts on a later turn of the loop: the connection may have ended by
  // then, and OnMessage is never called once OnClosed is due.
  static Task<void> RunOnMessage(std::shared_ptr<WebSocketHandler> handler, std::shared_ptr<Session> session,
                                 bool binary, std::string data) {
    if (!session->closed_due_ && handler != nullptr) {
      Task<void> call = handler->OnMessage(binary, std::move(data));
      co_await std::move(call);
    }
    session->OnDelivered();
  }

  void OnDelivered() {
    delivering_ = false;
    // Liveness counts from here: nothing was read while the handler ran.
    last_rx_ = std::chrono::steady_clock::now();
    MaybeDeliverClosed();
    if (phase_ == Phase::kEnded) {
      ReleaseReadBuffer();
      return;
    }
    ContinueReading();
  }

  // ---- Writing.

  void Enqueue(WebSocketOpcode opcode, std::string payload) {
    OutFrame& frame = queue_.emplace_back();
    const WebSocketMask* mask = NextMask();
    const std::size_t header_bytes = EncodeWebSocketFrameHeader(opcode, payload.size(), true, frame.header, mask);
    frame.header_bytes = static_cast<std::uint8_t>(header_bytes);
    frame.close = opcode == WebSocketOpcode::kClose;
    frame.payload = std::move(payload);
    if (mask != nullptr) ApplyWebSocketMask(*mask, frame.payload.data(), frame.payload.size());
  }

  // A client's next frame's mask (from a pool of random bytes refilled from OpenSSL's
  // generator); null for a server, which does not mask.
  const WebSocketMask* NextMask() {
    if (role_ != WebSocketRole::kClient) return nullptr;
    if (mask_pool_at_ + mask_.size() > mask_pool_.size()) {
      if (RAND_bytes(mask_pool_.data(), static_cast<int>(mask_pool_.size())) != 1) {
        // OpenSSL's generator failed (it could not seed): the loop's generator instead. A
        // mask only keeps a client's bytes from being chosen by a script (RFC 6455 10.3);
        // what crosses this connection is not secret because of it.
        ERR_clear_error();
        for (std::size_t i = 0; i < mask_pool_.size(); i += 8) {
          const std::uint64_t r = env_.RandomU64();
          std::memcpy(mask_pool_.data() + i, &r, 8);
        }
      }
      mask_pool_at_ = 0;
    }
    std::copy_n(mask_pool_.begin() + static_cast<std::ptrdiff_t>(mask_pool_at_), mask_.size(), mask_.begin());
    mask_pool_at_ += mask_.size();
    return &mask_;
  }

  // Calls the room waiter (WhenQueueAtMost) once its condition holds.
  void CheckRoom() {
    if (room_ready_ && (phase_ == Phase::kEnded || queued_bytes_ <= room_bytes_)) {
      env_.Post(std::exchange(room_ready_, nullptr));
    }
  }

  // Our close frame, last in the queue.
  void QueueClose(int code, std::string_view reason) {
    close_queued_ = true;
    Enqueue(WebSocketOpcode::kClose, EncodeWebSocketClosePayload(code, reason));
  }

  // The frames not yet being written are dropped (a bound, Stop).
  void DropQueue() {
    for (std::size_t i = queue_head_; i < queue_.size(); ++i) {
      if (!queue_[i].close) queued_bytes_ -= queue_[i].payload.size();
    }
    std::vector<OutFrame>().swap(queue_);
    queue_head_ = 0;
    pong_.reset();
    ping_due_ = false;
    CheckRoom();
  }

  // Starts the close handshake from our side: close frame (code, reason) after what is
  // queued (all of it for Close and the client's close; nothing for a failure), then
  // mode. why: the reason counted, unless one was already.
  void StartClose(int code, std::string_view reason, CloseMode mode, WebSocketEnd why) {
    if (phase_ != Phase::kOpen) return;
    CountEnd(why);
    phase_ = Phase::kClosing;
    mode_ = mode;
    if (mode == CloseMode::kLinger) {
      DueClosed(1006, {});
      DropQueue();
    }
    pong_.reset();
    ping_due_ = false;
    QueueClose(code, reason);
    close_deadline_ = std::chrono::steady_clock::now() + limits_.close_timeout;
    ArmTimerBy(close_deadline_);
    Pump();
    MaybeDeliverClosed();
  }

  void Pump() {
    if (writing_ || phase_ == Phase::kEnded) return;
    std::vector<net::const_buffer> buffers;
    if (!close_written_) {
      if (pong_) {
        control_out_ += EncodeWebSocketFrame(WebSocketOpcode::kPong, *pong_, true, NextMask());
        pong_.reset();
      }
      if (ping_due_) {
        control_out_ += EncodeWebSocketFrame(WebSocketOpcode::kPing, {}, true, NextMask());
        ping_due_ = false;
      }
    }
    if (!control_out_.empty()) buffers.push_back(net::buffer(control_out_));
    const std::size_t take = std::min(kWsFramesPerWrite, queue_.size() - queue_head_);
    for (std::size_t i = 0; i < take; ++i) writing_frames_.push_back(std::move(queue_[queue_head_ + i]));
    queue_head_ += take;
    if (queue_head_ == queue_.size()) {
      std::vector<OutFrame>().swap(queue_);  // an idle connection holds no queue
      queue_head_ = 0;
    } else if (queue_head_ >= kWsFramesPerWrite * 16 && queue_head_ * 2 >= queue_.size()) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));
      queue_head_ = 0;
    }
    for (const OutFrame& frame : writing_frames_) {
      buffers.push_back(net::buffer(frame.header.data(), frame.header_bytes));
      if (!frame.payload.empty()) buffers.push_back(net::buffer(frame.payload));
    }
    if (buffers.empty()) return;
    writing_ = true;
    write_deadline_ = std::chrono::steady_clock::now() + write_timeout_;
    ArmTimerBy(write_deadline_);
    net::async_write(stream_, buffers, [self = shared_from_this()](const error_code& ec, std::size_t) {
      self->OnWritten(ec);
    });
  }

  void OnWritten(const error_code& ec) {
    writing_ = false;
    bool wrote_close = false;
    for (const OutFrame& frame : writing_frames_) {
      if (frame.close) {
        wrote_close = true;
      } else {
        queued_bytes_ -= frame.payload.size();
      }
    }
    std::vector<OutFrame>().swap(writing_frames_);
    std::string().swap(control_out_);
    CheckRoom();
    if (phase_ == Phase::kEnded) return;
    if (ec) {
      End(WebSocketEnd::kClient);
      return;
    }
    if (wrote_close) {
      close_written_ = true;
      switch (mode_) {
        case CloseMode::kCut:
          End(WebSocketEnd::kClient);
          return;
        case CloseMode::kLinger: {
          // We are done sending: the client sees our close, then the end of the stream, and
          // hangs up; until then what it sends is read and dropped, so closing with unread
          // bytes does not reset the connection under our close frame.
          discarding_ = true;
          error_code ignored;
          Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
          ContinueReading();
          return;
        }
        case CloseMode::kAwaitReply:
          ContinueReading();
          return;
      }
    }
    Pump();
  }

  // ---- Time: one timer for the next deadline (a ping, the ping's answer, the close
  // handshake, the write in flight); it re-arms itself when it fires early.

  void ArmTimerBy(std::chrono::steady_clock::time_point at) {
    if (phase_ == Phase::kEnded || (timer_armed_ && timer_at_ <= at)) return;
    timer_armed_ = true;
    timer_at_ = at;
    const std::uint64_t generation = ++timer_generation_;
    timer_.expires_at(at);
    timer_.async_wait([self = shared_from_this(), generation](const error_code& ec) {
      if (ec || generation != self->timer_generation_) return;
      self->timer_armed_ = false;
      self->OnTimer();
    });
  }

  void OnTimer() {
    if (phase_ == Phase::kEnded) return;
    const auto now = std::chrono::steady_clock::now();
    if (writing_ && now >= write_deadline_) {
      // The client has not read what we sent for write_timeout.
      End(WebSocketEnd::kSlowReader);
      return;
    }
    std::chrono::steady_clock::time_point next;
    if (phase_ == Phase::kClosing) {
      if (now >= close_deadline_) {
        End(WebSocketEnd::kTimeout);
        return;
      }
      next = close_deadline_;
    } else if (delivering_) {
      next = now + limits_.ping_interval;  // not reading while the handler runs
    } else {
      if (ping_outstanding_ && last_rx_ > ping_sent_) ping_outstanding_ = false;
      if (ping_outstanding_) {
        if (now - ping_sent_ >= limits_.ping_interval) {
          End(WebSocketEnd::kTimeout);  // the peer is gone: no close frame
          return;
        }
        next = ping_sent_ + limits_.ping_interval;
      } else if (now - last_rx_ >= limits_.ping_interval) {
        ping_due_ = true;
        ping_outstanding_ = true;
        ping_sent_ = now;
        next = now + limits_.ping_interval;
        Pump();
      } else {
        next = last_rx_ + limits_.ping_interval;
      }
    }
    if (writing_) next = std::min(next, write_deadline_);
    ArmTimerBy(next);
  }

  // ---- The end.

  void CountEnd(WebSocketEnd why) {
    if (end_counted_) return;
    end_counted_ = true;
    if (on_end_) on_end_(why);
  }

  void ReportSocketClosed() {
    if (socket_closed_reported_) return;
    socket_closed_reported_ = true;
    if (on_socket_closed_) on_socket_closed_();
  }

  void DueClosed(int code, std::string reason) {
    if (closed_due_) return;
    closed_due_ = true;
    closed_code_ = code;
    close_reason_ = std::move(reason);
  }

  // Closes the socket now. why: counted unless a reason was already. OnClosed(1006) unless
  // another code is due already.
  void End(WebSocketEnd why) {
    if (phase_ == Phase::kEnded) return;
    CountEnd(why);
    DueClosed(1006, {});
    phase_ = Phase::kEnded;
    ++timer_generation_;
    timer_armed_ = false;
    timer_.cancel();
    error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
    ReportSocketClosed();
    DropQueue();
    std::string().swap(control_out_);
    parser_.Release();
    if (!reading_ && !delivering_) ReleaseReadBuffer();
    MaybeDeliverClosed();
  }

  // OnClosed when due, once no OnMessage runs and attach has returned; on a later turn of
  // the loop, so a handler's Send or Close never sees its own OnClosed inside it.
  void MaybeDeliverClosed() {
    if (!closed_due_ || closed_delivered_ || delivering_ || attaching_ || deliver_posted_) return;
    deliver_posted_ = true;
    env_.Post([self = shared_from_this()] {
      self->deliver_posted_ = false;
      self->DeliverClosedNow();
    });
  }

  void DeliverClosedNow() {
    if (!closed_due_ || closed_delivered_ || delivering_ || attaching_) return;
    closed_delivered_ = true;
    std::shared_ptr<WebSocketHandler> handler = std::move(handler_);
    handler_.reset();
    if (handler != nullptr) handler->OnClosed(closed_code_, std::move(close_reason_));
    std::string().swap(close_reason_);
  }

  RealEnv& env_;
  Stream stream_;
  const WebSocketRole role_;
  const std::string remote_;
  const WebSocketLimits limits_;
  const Duration write_timeout_;
  const std::function<void(WebSocketEnd)> on_end_;
  const std::function<void()> on_socket_closed_;
  const std::shared_ptr<const void> keep_alive_;
  std::shared_ptr<WebSocketHandler> handler_;  // until OnClosed returns
  WebSocketFrameParser parser_;
  net::steady_timer timer_;

  Phase phase_ = Phase::kOpen;
  CloseMode mode_ = CloseMode::kAwaitReply;
  bool attaching_ = false;
  bool reading_ = false;     // a read or a wait for readability is pending
  bool delivering_ = false;  // an OnMessage task is spawned and has not ended
  bool discarding_ = false;  // bytes read are dropped unparsed (after a failure)
  bool last_read_filled_ = false;
  bool writing_ = false;
  bool close_queued_ = false;
  bool close_written_ = false;
  bool ping_due_ = false;
  bool ping_outstanding_ = false;
  bool timer_armed_ = false;
  bool end_counted_ = false;
  bool closed_due_ = false;
  bool closed_delivered_ = false;
  bool deliver_posted_ = false;
  bool socket_closed_reported_ = false;
  int closed_code_ = 1006;
  std::string close_reason_;

  // Bytes read and not yet parsed: read_buf_[read_begin_, read_end_).
  std::unique_ptr<char[]> read_buf_;
  std::size_t read_cap_ = 0;
  std::size_t read_begin_ = 0;
  std::size_t read_end_ = 0;
  std::size_t lingered_bytes_ = 0;

  // Frames to send (from queue_head_), the ones being written, and the control frames
  // (pong, ping) written ahead of them.
  std::vector<OutFrame> queue_;
  std::size_t queue_head_ = 0;
  std::vector<OutFrame> writing_frames_;
  std::string control_out_;
  std::optional<std::string> pong_;
  std::size_t queued_bytes_ = 0;  // message payloads queued or being written
  // WhenQueueAtMost's waiter and its bound.
  std::function<void()> room_ready_;
  std::size_t room_bytes_ = 0;
  // A client's masks: the current frame's, and random bytes for the next ones.
  WebSocketMask mask_{};
  std::array<std::uint8_t, 64> mask_pool_{};
  std::size_t mask_pool_at_ = 64;

  std::chrono::steady_clock::time_point last_rx_{};
  std::chrono::steady_clock::time_point ping_sent_{};
  std::chrono::steady_clock::time_point close_deadline_{};
  std::chrono::steady_clock::time_point write_deadline_{};
  std::chrono::steady_clock::time_point timer_at_{};
  std::uint64_t timer_generation_ = 0;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point tokens_at_{};
};

}  // namespace

std::shared_ptr<WebSocketSession> MakeWebSocketSession(RealEnv& env, beast::tcp_stream stream,
                                                       WebSocketSessionSetup setup) {
  return std::make_shared<Session<beast::tcp_stream>>(env, std::move(stream), std::move(setup));
}

std::shared_ptr<WebSocketSession> MakeWebSocketSession(RealEnv& env, beast::ssl_stream<beast::tcp_stream> stream,
                                                       WebSocketSessionSetup setup) {
  return std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(env, std::move(stream), std::move(setup));
}

}  // namespace wk
