#include "server/running_events.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "base/check.h"
#include "base/log.h"

namespace wk {
namespace {

constexpr std::string_view kHeader = "wasmkeep-running-events 1\n";
static_assert(kHeader.size() < RunningEvents::kSlotBytes);

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

Result<RunningEvents::Opened> RunningEvents::Open(const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return Fatal("cannot create the directory of " + path + ": " + ec.message());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Fatal(Errno("cannot open", path));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string why = errno == EWOULDBLOCK ? "another process holds it (a second node with the same id and data_dir?)"
                                                 : std::string(std::strerror(errno));
    ::close(fd);
    return Fatal("cannot lock " + path + ": " + why);
  }
  Opened out;
  out.journal.reset(new RunningEvents(fd, path));

  // What a previous process left: the header slot, then one slot per worker.
  std::string content((kMaxWorkers + 1) * kSlotBytes, '\0');
  std::size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::pread(fd, content.data() + got, content.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fatal(Errno("cannot read", path));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  content.resize(got);
  if (!content.empty()) {
    if (!std::string_view(content).starts_with(kHeader)) {
      out.unreadable = 1;  // not ours, or torn before its header: nothing in it is trusted
    } else {
      for (std::size_t off = kSlotBytes; off < content.size(); off += kSlotBytes) {
        std::string_view slot = std::string_view(content).substr(off, kSlotBytes);
        if (slot.empty() || slot[0] == '\0') continue;
        const auto nl = slot.find('\n');
        auto id = nl == std::string_view::npos ? Result<ActorId>(InvalidArgument("no newline"))
                                               : ParseActorId(slot.substr(0, nl));
        if (!id.ok()) {
          ++out.unreadable;
          continue;
        }
        bool seen = false;
        for (const ActorId& a : out.left_behind) seen = seen || a == *id;
        if (!seen) out.left_behind.push_back(std::move(*id));
      }
    }
  }
  // Emptied: the header alone.
  if (::ftruncate(fd, 0) != 0) return Fatal(Errno("cannot truncate", path));
  if (::pwrite(fd, kHeader.data(), kHeader.size(), 0) != static_cast<ssize_t>(kHeader.size())) {
    return Fatal(Errno("cannot write", path));
  }
  return out;
}

RunningEvents::~RunningEvents() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

void RunningEvents::Write(const char* data, std::size_t n, std::size_t worker) {
  const auto offset = static_cast<off_t>((worker + 1) * kSlotBytes);
  ssize_t w;
  do {
    w = ::pwrite(fd_, data, n, offset);
  } while (w < 0 && errno == EINTR);
  if (w != static_cast<ssize_t>(n)) {
    if (write_failures_.fetch_add(1, std::memory_order_relaxed) == 0) {
      WK_LOG_WARN("cannot write the running-events journal; a crash during an event may not be counted as a strike",
                  {{"path", path_}, {"error", w < 0 ? std::string(std::strerror(errno)) : std::string("short write")}});
    }
  }
}

void RunningEvents::Started(std::size_t worker, const ActorId& actor) {
  if (worker >= kMaxWorkers) return;
  char slot[kSlotBytes];
  std::size_t n = 0;
  auto put = [&](std::string_view part) {
    WK_CHECK(n + part.size() < kSlotBytes, "actor id longer than a journal slot");
    std::memcpy(slot + n, part.data(), part.size());
    n += part.size();
  };
  put(actor.tenant);
  put("/");
  put(actor.class_name);
  put("/");
  put(actor.name);
  slot[n++] = '\n';
  Write(slot, n, worker);
}

void RunningEvents::Ended(std::size_t worker) {
  if (worker >= kMaxWorkers) return;
  const char empty = '\0';
  Write(&empty, 1, worker);
}

}  // namespace wk
