// ws_load: the WebSocket load generator of bench/ws_bench.sh. Many client connections on one
// thread over epoll and plain TCP, sending the same bytes to WasmKeep and to workerd, so its
// own cost is small next to what it measures and the same for both.
//
//   ws_load MODE --port P --path PATH --token TOKEN [options]
//
//   fanout      N members of one room (--conns, 1000); connection 0 sends a message
//               --rounds times (50), --pause-ms apart (200); a round's figure is the time
//               from the send to the last of the N deliveries (and to the sender's own copy)
//   throughput  N connections (--conns, 16), each sending its next message as soon as its own
//               previous one comes back (one in flight per connection: a WasmKeep node reads a
//               connection's next frame only once its last message's event is answered,
//               docs/websockets.md "Messages in", so a deeper window would only queue in TCP);
//               --warm-seconds (2) unmeasured, then --seconds (10): messages in per second
//               (own copies received), deliveries out per second (every copy received), and
//               send -> own copy
//   idle        opens N members (--conns, 2000), prints "WS_OPEN ..." and holds them
//               (answering pings) until SIGUSR1; then connection 0 sends one message, and the
//               time to its own copy and to the last of the N deliveries is the wake-up
//
// Other options: --host (127.0.0.1), --server-pid PID (the server's CPU time over the
// measured phase, from /proc/PID/stat), --open-timeout-ms (120000), --round-timeout-ms
// (10000). Progress goes to stderr; stdout gets one line "WS_RESULT key=value ..." (numbers
// only), and "WS_ERROR <why>" first when something failed, with exit status 1.
//
// What it checks: the handshake's Sec-WebSocket-Accept; that every connection receives the
// room's numbers ("<n>\t<text>", examples/chat/README.md) in order without a gap (gaps=);
// answers "error\t..." (errors=); connections the server closed (server_closes=).
//
// Frames: the client's are masked (RFC 6455 section 5.3) by AppendMaskedFrame below. The
// server's are unmasked, and parsed here: WebSocketFrameParser (src/net/websocket_frames.h)
// parses a client's frames and refuses unmasked ones. WebSocketAcceptKey comes from there.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "net/websocket_frames.h"

namespace wk {
namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// Handshakes in flight at once: below a WasmKeep listener's max_connections_per_client (64 by
// default, docs/configuration.md), which counts a connection until it is upgraded.
constexpr int kHandshakesInFlight = 32;
// A server frame larger than this is a protocol error here (the rooms send short lines).
constexpr std::uint64_t kMaxServerFrameBytes = 1 << 20;
// How long CloseAll waits for the servers' answers to our close frames.
constexpr auto kCloseWait = std::chrono::seconds(3);
// How long the throughput case waits, after its window, for the echoes still in flight.
constexpr auto kDrainWait = std::chrono::seconds(5);
// How long the idle case's wake-up message may take to reach every member.
constexpr auto kWakeTimeout = std::chrono::seconds(30);

struct Options {
  std::string mode;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path;
  std::string token;
  int conns = 0;
  int rounds = 50;
  int pause_ms = 200;
  double seconds = 10;
  double warm_seconds = 2;
  int server_pid = 0;
  int open_timeout_ms = 120000;
  int round_timeout_ms = 10000;
};

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The nearest-rank percentile p (0-100) of values; 0 when there are none.
double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  std::size_t rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(values.size()) + 0.999999);
  rank = std::clamp<std::size_t>(rank, 1, values.size());
  return values[rank - 1];
}

// CPU time (user + system) of process pid so far, in ms; -1 if it cannot be read.
double ProcessCpuMs(int pid) {
  if (pid <= 0) return -1;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  // After "pid (comm)": field 3 (state) onwards; utime and stime are fields 14 and 15.
  std::istringstream rest(stat.substr(paren + 1));
  std::string field;
  long long utime = -1, stime = -1;
  for (int n = 3; n <= 15 && rest >> field; ++n) {
    if (n == 14) utime = std::stoll(field);
    if (n == 15) stime = std::stoll(field);
  }
  if (utime < 0 || stime < 0) return -1;
  return static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double OwnCpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

std::string Base64(const std::uint8_t* bytes, std::size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < n; i += 3) {
    const std::uint32_t v = (std::uint32_t{bytes[i]} << 16) | (i + 1 < n ? std::uint32_t{bytes[i + 1]} << 8 : 0) |
                            (i + 2 < n ? std::uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// One client frame: FIN, the opcode, the mask bit and key, the payload XORed with the key.
void AppendMaskedFrame(std::string& out, WebSocketOpcode opcode, std::string_view payload, std::uint32_t mask) {
  out.push_back(static_cast<char>(0x80 | static_cast<std::uint8_t>(opcode)));
  const std::uint64_t n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(0x80 | n));
  } else if (n <= 0xFFFF) {
    out.push_back(static_cast<char>(0x80 | 126));
    for (int shift = 8; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xFF));
  } else {
    out.push_back(static_cast<char>(0x80 | 127));
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xFF));
  }
  const char key[4] = {static_cast<char>(mask >> 24), static_cast<char>(mask >> 16), static_cast<char>(mask >> 8),
                       static_cast<char>(mask)};
  out.append(key, 4);
  for (std::size_t i = 0; i < payload.size(); ++i) out.push_back(static_cast<char>(payload[i] ^ key[i % 4]));
}

struct Conn {
  enum class State { kConnecting, kHandshake, kOpen, kClosing, kClosed };
  int index = 0;
  int fd = -1;
  State state = State::kConnecting;
  bool writable_wanted = false;  // EPOLLOUT is in the interest set
  std::string key;               // Sec-WebSocket-Key
  std::string out;               // bytes not yet written
  std::string in;                // bytes read and not yet parsed
  std::string message;           // the message being reassembled from its fragments
  std::int64_t last_number = -1;  // the room's last number this connection received
  // The modes' per-connection state.
  int round = -1;               // fanout, idle: the last round whose message arrived here
  std::uint64_t seq = 0;        // throughput: messages sent
  bool in_flight = false;       // throughput: a message sent, its copy not back yet
  std::string pending;          // throughput: that message's text
  TimePoint sent_at{};
};

// The connections and the event loop. Mode code opens connections, sets on_line, sends, and
// runs the loop until its condition holds or a deadline passes.
class Client {
 public:
  explicit Client(Options options) : options_(std::move(options)), rng_(std::random_device{}()) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    signal_fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kSignalTag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev);
  }
  ~Client() {
    for (Conn& c : conns_) {
      if (c.fd >= 0) close(c.fd);
    }
    close(epoll_fd_);
    close(signal_fd_);
  }

  // Called for every "<n>\t<text>" line a connection receives, with the time it was read.
  std::function<void(Conn&, std::int64_t, std::string_view, TimePoint)> on_line;

  // Opens n connections, kHandshakesInFlight at a time; false (error() says why) if one
  // fails or they are not all open within --open-timeout-ms.
  bool OpenAll(int n) {
    conns_.resize(static_cast<std::size_t>(n));
    const TimePoint deadline = Clock::now() + std::chrono::milliseconds(options_.open_timeout_ms);
    int started = 0;
    while (opened_ < n) {
      while (started < n && started - opened_ < kHandshakesInFlight) {
        if (!Connect(conns_[static_cast<std::size_t>(started)], started)) return false;
        ++started;
      }
      if (!error_.empty()) return false;
      if (terminated_) return Failed("terminated while opening connections");
      if (Clock::now() >= deadline) {
        return Failed(std::to_string(opened_) + " of " + std::to_string(n) + " connections open after " +
                      std::to_string(options_.open_timeout_ms) + " ms");
      }
      Pump(deadline);
    }
    return error_.empty();
  }

  // Runs the loop until done() holds (true), or until the deadline passes or a SIGTERM or
  // SIGINT arrives (false).
  bool RunUntil(const std::function<bool()>& done, TimePoint deadline) {
    while (!done()) {
      if (terminated_ || Clock::now() >= deadline) return false;
      Pump(deadline);
    }
    return true;
  }
  // Runs the loop (answering pings, taking in messages) until the deadline.
  void RunFor(Clock::duration d) {
    RunUntil([] { return false; }, Clock::now() + d);
  }

  void SendText(Conn& c, std::string_view text) {
    if (c.state != Conn::State::kOpen) return;
    AppendMaskedFrame(c.out, WebSocketOpcode::kText, text, static_cast<std::uint32_t>(rng_()));
    Flush(c);
  }

  // Sends a close (1000) on every open connection and waits up to kCloseWait for the
  // server's answers, then closes every socket.
  void CloseAll() {
    for (Conn& c : conns_) {
      if (c.state != Conn::State::kOpen) continue;
      AppendMaskedFrame(c.out, WebSocketOpcode::kClose, EncodeWebSocketClosePayload(1000, ""),
                        static_cast<std::uint32_t>(rng_()));
      c.state = Conn::State::kClosing;
      ++closing_;
      Flush(c);
    }
    RunUntil([this] { return closing_ == 0; }, Clock::now() + kCloseWait);
    for (Conn& c : conns_) Drop(c);
  }

  Conn& conn(int i) { return conns_[static_cast<std::size_t>(i)]; }
  int open_count() const { return open_now_; }
  bool usr1() const { return usr1_; }
  bool terminated() const { return terminated_; }
  const std::string& error() const { return error_; }
  std::uint64_t gaps() const { return gaps_; }
  std::uint64_t errors() const { return errors_; }
  std::uint64_t server_closes() const { return server_closes_; }
  const std::string& last_close() const { return last_close_; }

 private:
  static constexpr std::uint64_t kSignalTag = 0;

  bool Failed(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  bool Connect(Conn& c, int index) {
    c.index = index;
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) return Failed(std::string("socket: ") + std::strerror(errno));
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(options_.port));
    if (inet_pton(AF_INET, options_.host.c_str(), &addr.sin_addr) != 1) return Failed("bad --host " + options_.host);
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
      return Failed(std::string("connect: ") + std::strerror(errno));
    }
    std::uint8_t raw[16];
    for (auto& b : raw) b = static_cast<std::uint8_t>(rng_());
    c.key = Base64(raw, sizeof(raw));
    c.out = "GET " + options_.path + " HTTP/1.1\r\nHost: " + options_.host + ":" + std::to_string(options_.port) +
            "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
            c.key + "\r\nAuthorization: Bearer " + options_.token + "\r\n\r\n";
    c.state = Conn::State::kConnecting;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u64 = static_cast<std::uint64_t>(index) + 1;
    c.writable_wanted = true;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
    return true;
  }

  void Pump(TimePoint deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const int timeout_ms = static_cast<int>(std::clamp<long long>(left + 1, 0, 1000));
    epoll_event events[256];
    const int n = epoll_wait(epoll_fd_, events, 256, timeout_ms);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kSignalTag) {
        signalfd_siginfo info;
        while (read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
          if (info.ssi_signo == SIGUSR1) usr1_ = true;
          else terminated_ = true;
        }
        continue;
      }
      Conn& c = conns_[static_cast<std::size_t>(events[i].data.u64 - 1)];
      if (c.fd < 0) continue;
      if (c.state == Conn::State::kConnecting && (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          Lost(c, std::string("connect: ") + std::strerror(err));
          continue;
        }
        c.state = Conn::State::kHandshake;
      }
      if (events[i].events & EPOLLOUT) Flush(c);
      if (c.fd >= 0 && (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) Read(c);
    }
  }

  void Flush(Conn& c) {
    if (c.fd < 0 || c.state == Conn::State::kConnecting) return;
    while (!c.out.empty()) {
      const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      Lost(c, std::string("send: ") + std::strerror(errno));
      return;
    }
    const bool want = !c.out.empty();
    if (want != c.writable_wanted) {
      epoll_event ev{};
      ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
      ev.data.u64 = static_cast<std::uint64_t>(c.index) + 1;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
      c.writable_wanted = want;
    }
  }

  void Read(Conn& c) {
    char buf[65536];
    bool eof = false;
    for (;;) {
      const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.append(buf, static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < sizeof(buf)) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true;  // the peer closed, or reset
      break;
    }
    const TimePoint at = Clock::now();
    if (c.state == Conn::State::kHandshake && !Handshake(c)) return;
    if (c.state == Conn::State::kOpen || c.state == Conn::State::kClosing) ParseFrames(c, at);
    if (eof && c.fd >= 0) {
      if (c.state == Conn::State::kOpen) {
        ++server_closes_;
        last_close_ = "connection ended without a close frame";
      }
      if (c.state == Conn::State::kHandshake || c.state == Conn::State::kConnecting) {
        Lost(c, "the server ended the connection before answering the handshake");
        return;
      }
      Drop(c);
    }
  }

  // The server's answer to the handshake, once whole: 101 with the right accept key.
  bool Handshake(Conn& c) {
    const std::size_t end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c.in.size() > 16384) Lost(c, "handshake answer over 16 KiB");
      return false;
    }
    const std::string head = c.in.substr(0, end + 2);
    const std::string status = head.substr(0, head.find("\r\n"));
    if (status.rfind("HTTP/1.1 101", 0) != 0) {
      Lost(c, "handshake answered \"" + status + "\": " + c.in.substr(end + 4, 200));
      return false;
    }
    std::string accept;
    for (std::size_t pos = head.find("\r\n") + 2; pos < head.size();) {
      const std::size_t eol = head.find("\r\n", pos);
      const std::string line = head.substr(pos, eol - pos);
      pos = eol + 2;
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (name == "sec-websocket-accept") {
        accept = line.substr(colon + 1);
        accept.erase(0, accept.find_first_not_of(' '));
        accept.erase(accept.find_last_not_of(" \t") + 1);
      }
    }
    if (accept != WebSocketAcceptKey(c.key)) {
      Lost(c, "handshake: Sec-WebSocket-Accept \"" + accept + "\" does not match the key");
      return false;
    }
    c.in.erase(0, end + 4);
    c.state = Conn::State::kOpen;
    ++opened_;
    ++open_now_;
    return true;
  }

  // Parses the whole frames at the front of c.in (the server's: unmasked).
  void ParseFrames(Conn& c, TimePoint at) {
    std::size_t pos = 0;
    while (c.fd >= 0) {
      const std::size_t have = c.in.size() - pos;
      if (have < 2) break;
      const auto* p = reinterpret_cast<const std::uint8_t*>(c.in.data() + pos);
      const bool fin = (p[0] & 0x80) != 0;
      const int opcode = p[0] & 0x0F;
      if ((p[1] & 0x80) != 0) return Lost(c, "the server sent a masked frame");
      std::uint64_t len = p[1] & 0x7F;
      std::size_t header = 2;
      if (len == 126) {
        if (have < 4) break;
        len = (std::uint64_t{p[2]} << 8) | p[3];
        header = 4;
      } else if (len == 127) {
        if (have < 10) break;
        len = 0;
        for (int i = 2; i < 10; ++i) len = (len << 8) | p[i];
        header = 10;
      }
      if (len > kMaxServerFrameBytes) return Lost(c, "a server frame over 1 MiB");
      if (have < header + len) break;
      const std::string_view payload(c.in.data() + pos + header, static_cast<std::size_t>(len));
      pos += header + static_cast<std::size_t>(len);
      switch (opcode) {
        case 0x0:  // continuation
        case 0x1:  // text
        case 0x2:  // binary
          if (opcode != 0x0) c.message.clear();
          c.message.append(payload);
          if (fin) Line(c, c.message, at);
          break;
        case 0x8: {  // close
          const int code = payload.size() >= 2 ? (static_cast<std::uint8_t>(payload[0]) << 8) |
                                                     static_cast<std::uint8_t>(payload[1])
                                               : 1005;
          if (c.state == Conn::State::kOpen) {
            ++server_closes_;
            last_close_ = "closed by the server with " + std::to_string(code) + " " +
                          std::string(payload.size() > 2 ? payload.substr(2) : std::string_view());
            AppendMaskedFrame(c.out, WebSocketOpcode::kClose, payload.substr(0, std::min<std::size_t>(2, payload.size())),
                              static_cast<std::uint32_t>(rng_()));
            Flush(c);
          }
          Drop(c);
          return;
        }
        case 0x9:  // ping: answer with its payload
          AppendMaskedFrame(c.out, WebSocketOpcode::kPong, payload, static_cast<std::uint32_t>(rng_()));
          Flush(c);
          break;
        case 0xA:  // pong
          break;
        default:
          return Lost(c, "the server sent opcode " + std::to_string(opcode));
      }
    }
    if (c.fd >= 0) c.in.erase(0, pos);
  }

  // A message: "<n>\t<text>" from the room, or "error\t<reason>".
  void Line(Conn& c, std::string_view line, TimePoint at) {
    const std::size_t tab = line.find('\t');
    std::int64_t number = 0;
    if (tab == std::string_view::npos ||
        std::from_chars(line.data(), line.data() + tab, number).ptr != line.data() + tab) {
      ++errors_;
      if (errors_ == 1) std::fprintf(stderr, "ws_load: connection %d got \"%.*s\"\n", c.index,
                                     static_cast<int>(std::min<std::size_t>(line.size(), 200)), line.data());
      return;
    }
    if (c.last_number >= 0 && number != c.last_number + 1) ++gaps_;
    c.last_number = number;
    if (on_line) on_line(c, number, line.substr(tab + 1), at);
  }

  // The connection is gone for a reason of ours or the network's: an error if it was not open yet.
  void Lost(Conn& c, std::string why) {
    if (c.state == Conn::State::kConnecting || c.state == Conn::State::kHandshake) {
      Failed("connection " + std::to_string(c.index) + ": " + why);
    } else if (c.state == Conn::State::kOpen) {
      ++server_closes_;
      last_close_ = why;
    }
    Drop(c);
  }

  void Drop(Conn& c) {
    if (c.fd < 0) return;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.fd = -1;
    if (c.state == Conn::State::kOpen || c.state == Conn::State::kClosing) --open_now_;
    if (c.state == Conn::State::kClosing) --closing_;
    c.state = Conn::State::kClosed;
    c.out.clear();
    c.in.clear();
  }

  Options options_;
  std::mt19937_64 rng_;
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  std::vector<Conn> conns_;
  int opened_ = 0;    // connections whose handshake succeeded, ever
  int open_now_ = 0;  // of those, not closed since
  int closing_ = 0;   // close sent by CloseAll, answer not yet in
  bool usr1_ = false;
  bool terminated_ = false;
  std::string error_;
  std::uint64_t gaps_ = 0;
  std::uint64_t errors_ = 0;
  std::uint64_t server_closes_ = 0;
  std::string last_close_;
};


// The figures of a run, printed as "WS_RESULT key=value ..." (numbers only) by Finish.
class Result {
 public:
  void Add(const std::string& key, double value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.0f", value);
    fields_ += " " + key + "=" + buf;
  }
  void Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  // Prints the result (and the error first, if any) with the client's counters; the exit status.
  int Finish(Client& client) {
    if (!client.error().empty()) Fail(client.error());
    if (client.server_closes() > 0) {
      Fail(std::to_string(client.server_closes()) + " connections closed by the server (last: " +
           client.last_close() + ")");
    }
    Add("gaps", static_cast<double>(client.gaps()));
    Add("errors", static_cast<double>(client.errors()));
    Add("server_closes", static_cast<double>(client.server_closes()));
    Add("client_cpu_ms", OwnCpuMs());
    if (!error_.empty()) std::printf("WS_ERROR %s\n", error_.c_str());
    std::printf("WS_RESULT ok=%d%s\n", error_.empty() ? 1 : 0, fields_.c_str());
    std::fflush(stdout);
    return error_.empty() ? 0 : 1;
  }

 private:
  std::string fields_;
  std::string error_;
};

double MsSince(TimePoint t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Opens the connections and lets what their open events send (the history of a room that has
// one) arrive before anything is measured.
bool Open(Client& client, const Options& o, Result& r) {
  const TimePoint start = Clock::now();
  const bool ok = client.OpenAll(o.conns);
  r.Add("conns", client.open_count());
  r.Add("open_ms", MsSince(start));
  if (!ok) return false;
  std::fprintf(stderr, "ws_load: %d connections open in %.0f ms\n", client.open_count(), MsSince(start));
  client.RunFor(std::chrono::milliseconds(500));
  return true;
}

// Counts, per round, the connections that received the round's message (fanout and idle).
struct Broadcast {
  int round = -1;
  std::string text;
  int delivered = 0;
  TimePoint sent{}, echo_at{}, last_at{};

  void Start(Client& client, int r, std::string t) {
    round = r;
    text = std::move(t);
    delivered = 0;
    client.on_line = [this](Conn& c, std::int64_t, std::string_view line, TimePoint at) {
      if (line != text || c.round == round) return;
      c.round = round;
      ++delivered;
      last_at = at;
      if (c.index == 0) echo_at = at;
    };
    sent = Clock::now();
    client.SendText(client.conn(0), text);
  }
};

int RunFanout(const Options& o) {
  Client client(o);
  Result r;
  if (!Open(client, o, r)) return r.Finish(client);
  const int members = client.open_count();
  std::vector<double> last_us, echo_us;
  int timeouts = 0;
  Broadcast b;
  const double server0 = ProcessCpuMs(o.server_pid), own0 = OwnCpuMs();
  const TimePoint start = Clock::now();
  int round = 0;
  for (; round < o.rounds && !client.terminated(); ++round) {
    b.Start(client, round, "fanout " + std::to_string(round));
    if (client.RunUntil([&] { return b.delivered >= members; },
                        b.sent + std::chrono::milliseconds(o.round_timeout_ms))) {
      last_us.push_back(Micros(b.last_at - b.sent));
      echo_us.push_back(Micros(b.echo_at - b.sent));
    } else if (!client.terminated()) {
      ++timeouts;
      std::fprintf(stderr, "ws_load: round %d: %d of %d deliveries within %d ms\n", round, b.delivered, members,
                   o.round_timeout_ms);
      // A member that is gone never receives: the next rounds could not complete either.
      if (client.open_count() < members) break;
    }
    client.RunFor(std::chrono::milliseconds(o.pause_ms));
  }
  const double server1 = ProcessCpuMs(o.server_pid);
  const double server_ms = server1 < 0 ? -1 : server1 - server0, own_ms = OwnCpuMs() - own0;
  r.Add("rounds", static_cast<double>(last_us.size()));
  r.Add("timeouts", timeouts);
  r.Add("measured_ms", MsSince(start));
  r.Add("p50_us", Percentile(last_us, 50));
  r.Add("p99_us", Percentile(last_us, 99));
  r.Add("max_us", Percentile(last_us, 100));
  r.Add("echo_p50_us", Percentile(echo_us, 50));
  r.Add("echo_p99_us", Percentile(echo_us, 99));
  // CPU per round: one message in, `members` deliveries out (the pauses cost next to nothing).
  if (server0 >= 0 && server_ms >= 0) r.Add("server_cpu_us_per_round", server_ms * 1e3 / std::max(1, round));
  r.Add("client_cpu_us_per_round", own_ms * 1e3 / std::max(1, round));
  if (timeouts > 0 || static_cast<int>(last_us.size()) < o.rounds) {
    r.Fail(std::to_string(last_us.size()) + " of " + std::to_string(o.rounds) + " rounds reached all " +
           std::to_string(members) + " members within " + std::to_string(o.round_timeout_ms) + " ms");
  }
  client.CloseAll();
  return r.Finish(client);
}

int RunThroughput(const Options& o) {
  Client client(o);
  Result r;
  if (!Open(client, o, r)) return r.Finish(client);
  const int members = client.open_count();
  const TimePoint warm_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(o.warm_seconds));
  const TimePoint end = warm_end + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::uint64_t in = 0, out = 0, sent = 0;
  std::vector<double> echo_us;
  auto send_next = [&](Conn& c) {
    c.pending = "m " + std::to_string(c.index) + " " + std::to_string(c.seq++);
    c.in_flight = true;
    c.sent_at = Clock::now();
    ++sent;
    client.SendText(c, c.pending);
  };
  client.on_line = [&](Conn& c, std::int64_t, std::string_view line, TimePoint at) {
    const bool in_window = at >= warm_end && at < end;
    if (in_window) ++out;
    if (!c.in_flight || line != c.pending) return;
    c.in_flight = false;
    if (in_window) ++in;
    if (c.sent_at >= warm_end && c.sent_at < end) echo_us.push_back(Micros(at - c.sent_at));
    if (at < end) send_next(c);
  };
  for (int i = 0; i < members; ++i) send_next(client.conn(i));
  client.RunUntil([] { return false; }, warm_end);
  const double server0 = ProcessCpuMs(o.server_pid), own0 = OwnCpuMs();
  client.RunUntil([] { return false; }, end);
  const double server1 = ProcessCpuMs(o.server_pid);
  const double server_ms = server1 < 0 ? -1 : server1 - server0, own_ms = OwnCpuMs() - own0;
  // The messages still in flight come back (or do not: unanswered=).
  client.RunUntil(
      [&] {
        for (int i = 0; i < members; ++i) {
          if (client.conn(i).in_flight && client.conn(i).fd >= 0) return false;
        }
        return true;
      },
      Clock::now() + kDrainWait);
  int unanswered = 0;
  for (int i = 0; i < members; ++i) unanswered += client.conn(i).in_flight ? 1 : 0;
  r.Add("seconds_x1000", o.seconds * 1000);
  r.Add("msgs_in", static_cast<double>(in));
  r.Add("deliveries", static_cast<double>(out));
  r.Add("msgs_per_s", static_cast<double>(in) / o.seconds);
  r.Add("deliveries_per_s", static_cast<double>(out) / o.seconds);
  r.Add("sent_total", static_cast<double>(sent));
  r.Add("unanswered", unanswered);
  r.Add("p50_us", Percentile(echo_us, 50));
  r.Add("p99_us", Percentile(echo_us, 99));
  r.Add("max_us", Percentile(echo_us, 100));
  if (server0 >= 0 && server_ms >= 0) r.Add("server_cpu_ms", server_ms);
  r.Add("client_cpu_window_ms", own_ms);
  if (unanswered > 0) r.Fail(std::to_string(unanswered) + " messages never came back to their sender");
  if (in == 0) r.Fail("no message came back within the window");
  client.CloseAll();
  return r.Finish(client);
}

int RunIdle(const Options& o) {
  Client client(o);
  Result r;
  if (!Open(client, o, r)) return r.Finish(client);
  std::printf("WS_OPEN conns=%d\n", client.open_count());
  std::fflush(stdout);
  const TimePoint hold_start = Clock::now();
  client.RunUntil([&] { return client.usr1(); }, hold_start + std::chrono::hours(24));
  r.Add("held_ms", MsSince(hold_start));
  const int held = client.open_count();
  r.Add("held", held);
  if (!client.usr1() || held == 0 || client.conn(0).fd < 0) {
    r.Fail(client.usr1() ? "connection 0 was closed during the hold" : "ended before SIGUSR1");
    client.CloseAll();
    return r.Finish(client);
  }
  Broadcast b;
  b.Start(client, 0, "wake");
  const bool all = client.RunUntil([&] { return b.delivered >= held; }, b.sent + kWakeTimeout);
  r.Add("wake_delivered", b.delivered);
  if (b.delivered > 0) r.Add("wake_echo_us", Micros(b.echo_at - b.sent));
  if (all) r.Add("wake_last_us", Micros(b.last_at - b.sent));
  if (!all) {
    r.Fail("the wake-up message reached " + std::to_string(b.delivered) + " of " + std::to_string(held) +
           " members within " + std::to_string(kWakeTimeout.count()) + " s");
  }
  client.CloseAll();
  return r.Finish(client);
}

int Usage() {
  std::fprintf(stderr,
               "usage: ws_load fanout|throughput|idle --port P --path PATH --token T [--host H] [--conns N]\n"
               "       [--rounds R] [--pause-ms MS] [--seconds S] [--warm-seconds W] [--server-pid PID]\n"
               "       [--open-timeout-ms MS] [--round-timeout-ms MS]\n");
  return 2;
}

}  // namespace
}  // namespace wk

int main(int argc, char** argv) {
  using namespace wk;
  if (argc < 2) return Usage();
  Options o;
  o.mode = argv[1];
  try {
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) return Usage();
      const std::string v = argv[++i];
      if (a == "--host") o.host = v;
      else if (a == "--port") o.port = std::stoi(v);
      else if (a == "--path") o.path = v;
      else if (a == "--token") o.token = v;
      else if (a == "--conns") o.conns = std::stoi(v);
      else if (a == "--rounds") o.rounds = std::stoi(v);
      else if (a == "--pause-ms") o.pause_ms = std::stoi(v);
      else if (a == "--seconds") o.seconds = std::stod(v);
      else if (a == "--warm-seconds") o.warm_seconds = std::stod(v);
      else if (a == "--server-pid") o.server_pid = std::stoi(v);
      else if (a == "--open-timeout-ms") o.open_timeout_ms = std::stoi(v);
      else if (a == "--round-timeout-ms") o.round_timeout_ms = std::stoi(v);
      else return Usage();
    }
  } catch (const std::exception&) {
    return Usage();
  }
  if (o.port <= 0 || o.path.empty() || o.seconds <= 0) return Usage();
  // One descriptor a connection: take the hard limit.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  if (o.mode == "fanout") {
    if (o.conns == 0) o.conns = 1000;
    return RunFanout(o);
  }
  if (o.mode == "throughput") {
    if (o.conns == 0) o.conns = 16;
    return RunThroughput(o);
  }
  if (o.mode == "idle") {
    if (o.conns == 0) o.conns = 2000;
    return RunIdle(o);
  }
  return Usage();
}
