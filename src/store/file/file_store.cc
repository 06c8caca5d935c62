#include "store/file/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "base/crc32c.h"
#include "store/file/file_layout.h"
#include "store/local/local_text.h"
#include "store/local/random_bytes.h"
#include "store/local/worker_pool.h"

namespace wk {

namespace fl = file_layout;

namespace {

// Limits, with their reasons.
// A rename finds its directory gone only when a concurrent Delete pruned it; each retry
// recreates it. Losing this many races in a row means something else is deleting our
// directories.
constexpr int kMaxRenameAttempts = 64;
// Open removes a crash-leftover temp file only if it is at least this old and unlocked.
// The lock is the real guard (a live writer holds it from creation to rename); the age
// only covers the microseconds between a writer's open and its flock.
constexpr auto kStaleTempAge = std::chrono::seconds(60);

using local_store::ErrnoText;
using local_store::Quote;
using local_store::RandomBytes;

// What an errno from a failed write or read means to the caller (status.h): retry after a
// backoff when the condition can clear by itself, otherwise it needs an operator.
Code CodeForErrno(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EAGAIN:
    case EINTR:
    case EBUSY:
      return Code::kRetryable;
    default:
      return Code::kFatal;  // EIO, EACCES, EPERM, EROFS, EFBIG, ENOTDIR, ...
  }
}

// A file's mtime as Unix milliseconds.
std::int64_t ModifiedMs(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership (to fdopendir, whose closedir closes it).
  int Release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

int FlockRetrying(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// Reads exactly n bytes at offset. Returns 0, an errno, or -1 on an early end of file.
int PreadAll(int fd, char* out, std::size_t n, off_t offset) {
  while (n > 0) {
    ssize_t got = ::pread(fd, out, n, offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return -1;
    out += got;
    n -= static_cast<std::size_t>(got);
    offset += got;
  }
  return 0;
}

// Writes the two buffers in full. Returns 0 or an errno.
int WriteAll(int fd, std::string_view a, std::string_view b) {
  struct iovec iov[2] = {{const_cast<char*>(a.data()), a.size()},
                         {const_cast<char*>(b.data()), b.size()}};
  int first = 0;
  while (first < 2) {
    ssize_t wrote = ::writev(fd, iov + first, 2 - first);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (wrote == 0) return EIO;  // a regular file never accepts nothing
    auto left = static_cast<std::size_t>(wrote);
    while (first < 2 && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (first < 2) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return 0;
}

std::string RandomName(int* err) {
  fl::VersionBytes bytes;
  *err = RandomBytes(bytes.data(), bytes.size());
  return fl::VersionToken(bytes);
}

// The directory part of a relative path ("objects/da/ob" -> "objects/da").
std::string_view ParentOf(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Core: the blocking operations. Immutable after Open, so any number of workers use it at
// once; the only shared mutable state is on disk, guarded by the stripe locks.

struct FileStore::Core {
  std::string dir;  // absolute
  Fd root;          // DIR, opened O_DIRECTORY; every path below is relative to it
  bool fsync = true;
  std::function<void(std::string_view, std::string_view)> before_io;

  std::string Where(std::string_view op, std::string_view key) const {
    return "file://" + dir + ": " + std::string(op) + " " + Quote(key);
  }
  std::string FilePath(std::string_view rel) const { return dir + "/" + std::string(rel); }
  Status ErrnoStatus(int err, std::string_view op, std::string_view key,
                     std::string_view doing) const {
    return Status(CodeForErrno(err),
                  Where(op, key) + ": " + std::string(doing) + ": " + ErrnoText(err));
  }

  struct Loaded {
    fl::ObjectHeader header;
    std::string body;  // only when asked for
    // The file's mtime, Unix ms: the object's write time (object files are written to tmp/
    // and renamed, never modified).
    std::int64_t modified_ms = 0;
  };
  // Reads the object file at rel (which must hold key): kNotFound if there is none.
  Result<Loaded> ReadObject(std::string_view op, const std::string& key, const std::string& rel,
                            bool want_body) const;
  // Syncs the directory rel (skipped without fsync). ENOENT counts as done: a directory
  // that is gone was emptied and pruned by a later Delete. Returns 0 or an errno.
  int SyncDir(const std::string& rel) const;
  // Takes the exclusive lock of key's stripe. Returns the locked fd or an error.
  Result<Fd> LockKey(std::string_view op, const std::string& key) const;
  // Creates the missing directories of an object path (components from KeyComponents).
  // Returns 0, or an errno (ENOENT when a concurrent prune removed a level: retry).
  int MakeParents(const std::vector<std::string>& components) const;

  Result<GetOutput> Get(const std::string& key) const;
  Result<ObjectMeta> Head(const std::string& key) const;
  Result<Version> Put(const std::string& key, const std::string& body,
                      const Precondition& condition) const;
  Status Delete(const std::string& key, const Precondition& condition) const;
  Result<ListPage> List(const ListOptions& options) const;
};

Result<FileStore::Core::Loaded> FileStore::Core::ReadObject(std::string_view op,
                                                            const std::string& key,
                                                            const std::string& rel,
                                                            bool want_body) const {
  Fd fd(::openat(root.get(), rel.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOENT) return NotFound(Where(op, key) + ": no such object");
    return ErrnoStatus(err, op, key, "opening " + FilePath(rel));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    const int e = errno;
    return ErrnoStatus(e, op, key, "stat " + FilePath(rel));
  }
  auto corrupt = [&](const std::string& what) {
    return Fatal(Where(op, key) + ": corrupt object file " + FilePath(rel) + ": " + what);
  };
  if (!S_ISREG(st.st_mode)) return corrupt("not a regular file");
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  std::string prefix(std::min<std::uint64_t>(file_size, fl::kMaxHeaderBytes), '\0');
  if (int err = PreadAll(fd.get(), prefix.data(), prefix.size(), 0); err != 0) {
    if (err < 0) return corrupt("shorter than its size");
    return ErrnoStatus(err, op, key, "reading " + FilePath(rel));
  }
  auto header = fl::DecodeHeader(prefix, file_size);
  if (!header.ok()) return corrupt(header.status().message());
  if (header->key != key) return corrupt("it holds key " + Quote(header->key));
  Loaded out{std::move(header).value(), {}, ModifiedMs(st)};
  if (want_body) {
    out.body.resize(out.header.body_size);
    int err = PreadAll(fd.get(), out.body.data(), out.body.size(),
                       static_cast<off_t>(out.header.header_bytes));
    if (err < 0) return corrupt("shorter than its header says");
    if (err != 0) return ErrnoStatus(err, op, key, "reading " + FilePath(rel));
    if (Crc32c(out.body) != out.header.body_crc) return corrupt("body checksum mismatch");
  }
  return out;
}

int FileStore::Core::SyncDir(const std::string& rel) const {
  if (!fsync) return 0;
  Fd fd(::openat(root.get(), rel.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno == ENOENT ? 0 : errno;
  if (::fsync(fd.get()) != 0) return errno;
  return 0;
}

Result<Fd> FileStore::Core::LockKey(std::string_view op, const std::string& key) const {
  const std::string rel = fl::LockPath(fl::LockStripe(key));
  Fd fd(::openat(root.get(), rel.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) {
    const int e = errno;
    return ErrnoStatus(e, op, key, "opening lock file " + FilePath(rel));
  }
  if (FlockRetrying(fd.get(), LOCK_EX) != 0) {
    const int e = errno;
    return ErrnoStatus(e, op, key, "locking " + FilePath(rel));
  }
  return fd;  // closing it releases the lock
}

int FileStore::Core::MakeParents(const std::vector<std::string>& components) const {
  std::string path(fl::kObjectsDir);
  for (std::size_t i = 0; i + 1 < components.size(); ++i) {
    path += '/';
    path += components[i];
    if (::mkdirat(root.get(), path.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  }
  return 0;
}

Result<GetOutput> FileStore::Core::Get(const std::string& key) const {
  auto loaded = ReadObject("get", key, fl::ObjectPath(key), /*want_body=*/true);
  if (!loaded.ok()) return loaded.status();
  return GetOutput{std::move(loaded->body), loaded->header.version};
}

Result<ObjectMeta> FileStore::Core::Head(const std::string& key) const {
  auto loaded = ReadObject("head", key, fl::ObjectPath(key), /*want_body=*/false);
  if (!loaded.ok()) return loaded.status();
  return ObjectMeta{loaded->header.version, loaded->header.body_size};
}

Result<Version> FileStore::Core::Put(const std::string& key, const std::string& body,
                                     const Precondition& condition) const {
  const std::vector<std::string> components = fl::KeyComponents(key);
  const std::string rel = fl::ObjectPath(key);

  // The condition, checked against the current object. Called once before the temp file
  // is written (a write that must fail skips writing and syncing its body; refusing on an
  // observation made during the call is linearizable) and again under the stripe lock.
  auto check = [&]() -> Status {
    switch (condition.kind()) {
      case Precondition::Kind::kNone:
        return Status::Ok();
      case Precondition::Kind::kIfNoneMatchAny: {
        struct stat st;
        if (::fstatat(root.get(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
          return PreconditionFailed(Where("put", key) + ": exists (If-None-Match: *)");
        }
        const int e = errno;
        if (e == ENOENT) return Status::Ok();
        return ErrnoStatus(e, "put", key, "stat " + FilePath(rel));
      }
      case Precondition::Kind::kIfMatch: {
        auto current = ReadObject("put", key, rel, /*want_body=*/false);
        if (current.code() == Code::kNotFound) {
          return PreconditionFailed(Where("put", key) +
                                    ": missing (If-Match: " + condition.version().token() + ")");
        }
        if (!current.ok()) return current.status();
        if (current->header.version != condition.version()) {
          return PreconditionFailed(Where("put", key) + ": at version " +
                                    current->header.version.token() + ", not " +
                                    condition.version().token());
        }
        return Status::Ok();
      }
    }
    return InvalidArgument(Where("put", key) + ": unknown precondition");
  };
  if (Status s = check(); !s.ok()) return s;

  // 1. The new object file, complete and synced, under a temp name. Its flock tells
  // Open's cleanup that a live writer owns it.
  fl::VersionBytes version;
  if (int err = RandomBytes(version.data(), version.size()); err != 0) {
    return ErrnoStatus(err, "put", key, "getrandom");
  }
  int err = 0;
  const std::string tmp = std::string(fl::kTmpDir) + "/" + RandomName(&err) + ".tmp";
  if (err != 0) return ErrnoStatus(err, "put", key, "getrandom");
  Fd tmp_fd(::openat(root.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!tmp_fd.valid()) {
    const int e = errno;
    return ErrnoStatus(e, "put", key, "creating " + FilePath(tmp));
  }
  bool renamed = false;
  struct TmpGuard {  // removes the temp file on every path that does not rename it
    const Core& core;
    const std::string& tmp;
    const bool& renamed;
    ~TmpGuard() {
      if (!renamed) ::unlinkat(core.root.get(), tmp.c_str(), 0);
    }
  } guard{*this, tmp, renamed};
  if (FlockRetrying(tmp_fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    return ErrnoStatus(e, "put", key, "locking " + FilePath(tmp));
  }
  const std::string header = fl::EncodeHeader(key, version, body);
  if (int e = WriteAll(tmp_fd.get(), header, body); e != 0) {
    return ErrnoStatus(e, "put", key, "writing " + FilePath(tmp));
  }
  if (fsync && ::fdatasync(tmp_fd.get()) != 0) {
    const int e = errno;
    return ErrnoStatus(e, "put", key, "fsync " + FilePath(tmp));
  }

  // 2. Check and rename under the stripe lock.
  bool made_parents = false;
  {
    auto lock = LockKey("put", key);
    if (!lock.ok()) return lock.status();
    if (Status s = check(); !s.ok()) return s;
    for (int attempt = 1;; ++attempt) {
      if (::renameat(root.get(), tmp.c_str(), root.get(), rel.c_str()) == 0) break;
      const int rename_err = errno;
      if (rename_err != ENOENT) {
        return ErrnoStatus(rename_err, "put", key, "renaming to " + FilePath(rel));
      }
      if (attempt == kMaxRenameAttempts) {
        return Retryable(Where("put", key) + ": its directory vanished " + std::to_string(attempt) +
                         " times (concurrent deletes)");
      }
      made_parents = true;
      if (int e = MakeParents(components); e != 0 && e != ENOENT) {
        return ErrnoStatus(e, "put", key, "creating the directories of " + FilePath(rel));
      }
    }
    renamed = true;
  }  // the lock is released here; what follows only makes the write durable

  // 3. Durability: the object's directory, and if this write had to create directories,
  // every directory up to objects/ (a created directory is durable only once its parent
  // is synced).
  std::string dir_rel(ParentOf(rel));
  while (true) {
    if (int e = SyncDir(dir_rel); e != 0) {
      return UnknownOutcome(Where("put", key) + ": written, but fsync of " + FilePath(dir_rel) +
                            " failed (" + ErrnoText(e) + "); it may not survive a crash");
    }
    if (!made_parents || dir_rel == fl::kObjectsDir) break;
    dir_rel = std::string(ParentOf(dir_rel));
  }
  return Version(fl::VersionToken(version));
}

Status FileStore::Core::Delete(const std::string& key, const Precondition& condition) const {
  const std::string rel = fl::ObjectPath(key);
  bool removed = false;
  {
    auto lock = LockKey("delete", key);
    if (!lock.ok()) return lock.status();
    if (condition.kind() == Precondition::Kind::kIfMatch) {
      auto current = ReadObject("delete", key, rel, /*want_body=*/false);
      if (current.code() == Code::kNotFound) {
        return PreconditionFailed(Where("delete", key) +
                                  ": missing (If-Match: " + condition.version().token() + ")");
      }
      if (!current.ok()) return current.status();
      if (current->header.version != condition.version()) {
        return PreconditionFailed(Where("delete", key) + ": at version " +
                                  current->header.version.token() + ", not " +
                                  condition.version().token());
      }
    }
    if (::unlinkat(root.get(), rel.c_str(), 0) == 0) {
      removed = true;
    } else if (const int e = errno; e != ENOENT) {
      return ErrnoStatus(e, "delete", key, "removing " + FilePath(rel));
    }
  }
  if (!removed) return Status::Ok();  // unconditional delete of a missing key
  std::string dir_rel(ParentOf(rel));
  if (int e = SyncDir(dir_rel); e != 0) {
    return UnknownOutcome(Where("delete", key) + ": removed, but fsync of " + FilePath(dir_rel) +
                          " failed (" + ErrnoText(e) + "); it may reappear after a crash");
  }
  // Prune the directories this delete emptied, bottom up, stopping at the first that is
  // not empty. Best effort and not synced: an empty directory that reappears after a crash
  // is harmless. A writer racing into a pruned directory recreates it (Put's retry).
  while (dir_rel != fl::kObjectsDir) {
    if (::unlinkat(root.get(), dir_rel.c_str(), AT_REMOVEDIR) != 0) break;
    dir_rel = std::string(ParentOf(dir_rel));
  }
  return Status::Ok();
}

// List: a lazy merge of the object tree in byte order of full keys.
//
// Every heap item is an object (its key) or a directory not yet read, with the least key
// its subtree can hold (its "floor": every key below it starts with the floor). Popping
// the smallest item and emitting objects / expanding directories yields keys in byte
// order whatever the directory structure: a key is emitted only when no floor is smaller.
// That matters because S3 order is not directory order: "a-c" < "a/b" < "a0", and a
// chunk directory's keys interleave with a sibling directory of the same bytes.
// Subtrees that cannot hold a key under the prefix and after start_after are never read.
Result<ListPage> FileStore::Core::List(const ListOptions& options) const {
  const std::string& prefix = options.prefix;
  const std::string& after =
      options.continuation.empty() ? options.start_after : options.continuation;
  const std::string_view op = "list";

  struct Item {
    std::string floor;  // the key itself for an object
    bool is_object;
    std::string rel;
  };
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      if (a.floor != b.floor) return a.floor > b.floor;
      return !a.is_object && b.is_object;  // an object before a subtree of the same floor
    }
  };
  // Whether a subtree whose keys all start with floor can hold a wanted key.
  auto subtree_wanted = [&](std::string_view floor) {
    if (!floor.starts_with(prefix) && !std::string_view(prefix).starts_with(floor)) return false;
    // Every key under floor is below after if floor sorts before after and is not a
    // prefix of it (they differ at a byte inside floor).
    if (!after.empty() && floor < after && !std::string_view(after).starts_with(floor))
      return false;
    return true;
  };
  auto key_wanted = [&](std::string_view key) {
    return key.starts_with(prefix) && (after.empty() || key > after);
  };

  // Start in the deepest directory the prefix names: its complete segments, then the
  // complete chunks of its last, partial segment.
  std::string floor;
  std::string start(fl::kObjectsDir);
  std::string_view rest = prefix;
  auto descend_chunks = [&](std::string_view& segment) {
    while (segment.size() > fl::kSegmentChunkBytes) {
      std::string_view chunk = segment.substr(0, fl::kSegmentChunkBytes);
      start += '/';
      start += fl::kChunkTag;
      start += chunk;
      floor += chunk;
      segment.remove_prefix(fl::kSegmentChunkBytes);
    }
  };
  for (auto slash = rest.find('/'); slash != std::string_view::npos; slash = rest.find('/')) {
    std::string_view segment = rest.substr(0, slash);
    descend_chunks(segment);
    start += '/';
    start += fl::kDirTag;
    start += segment;
    floor += segment;
    floor += '/';
    rest.remove_prefix(slash + 1);
  }
  descend_chunks(rest);

  std::priority_queue<Item, std::vector<Item>, Later> heap;
  heap.push(Item{floor, false, start});
  ListPage page;
  while (!heap.empty()) {
    Item item = heap.top();
    heap.pop();
    if (item.is_object) {
      // Only canonical paths: a stray file whose key maps elsewhere is not an object.
      if (!ValidateKey(item.floor).ok() || fl::ObjectPath(item.floor) != item.rel) continue;
      auto loaded = ReadObject(op, item.floor, item.rel, /*want_body=*/false);
      if (loaded.code() == Code::kNotFound) continue;  // deleted since the directory read
      if (!loaded.ok()) return loaded.status();
      if (static_cast<int>(page.entries.size()) == options.page_size) {
        page.next_continuation = page.entries.back().key;
        break;
      }
      page.entries.push_back(ListEntry{std::move(item.floor), loaded->header.version,
                                       loaded->header.body_size, loaded->modified_ms});
      continue;
    }
    Fd fd(::openat(root.get(), item.rel.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) {
      const int e = errno;
      if (e == ENOENT || e == ENOTDIR) continue;  // pruned since, or a stray file
      return ErrnoStatus(e, op, prefix, "opening " + FilePath(item.rel));
    }
    DIR* d = ::fdopendir(fd.get());
    if (d == nullptr) {
      const int e = errno;
      return ErrnoStatus(e, op, prefix, "reading " + FilePath(item.rel));
    }
    fd.Release();  // closedir closes it
    struct DirCloser {
      DIR* d;
      ~DirCloser() { ::closedir(d); }
    } closer{d};
    while (true) {
      errno = 0;
      struct dirent* entry = ::readdir(d);
      if (entry == nullptr) {
        if (errno != 0) {
          const int e = errno;
          return ErrnoStatus(e, op, prefix, "reading " + FilePath(item.rel));
        }
        break;
      }
      std::string_view name(entry->d_name);
      if (name.empty() || name == "." || name == "..") continue;
      const char tag = name[0];
      std::string_view bytes = name.substr(1);
      if (bytes.size() > fl::kSegmentChunkBytes) continue;  // not ours
      std::string child_rel = item.rel + "/" + std::string(name);
      if (tag == fl::kObjectTag) {
        std::string key = item.floor + std::string(bytes);
        if (key_wanted(key)) heap.push(Item{std::move(key), true, std::move(child_rel)});
      } else if (tag == fl::kDirTag) {
        std::string child = item.floor + std::string(bytes) + "/";
        if (subtree_wanted(child)) heap.push(Item{std::move(child), false, std::move(child_rel)});
      } else if (tag == fl::kChunkTag && bytes.size() == fl::kSegmentChunkBytes) {
        std::string child = item.floor + std::string(bytes);
        if (subtree_wanted(child)) heap.push(Item{std::move(child), false, std::move(child_rel)});
      }
    }
  }
  return page;
}

// ---------------------------------------------------------------------------------------
// Open.

namespace {

// Removes crash-leftover temp files (see kStaleTempAge). Returns how many.
std::size_t CleanStaleTemps(int root) {
  Fd fd(::openat(root, std::string(fl::kTmpDir).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return 0;
  DIR* d = ::fdopendir(fd.get());
  if (d == nullptr) return 0;
  fd.Release();
  std::vector<std::string> names;
  while (struct dirent* entry = ::readdir(d)) {
    std::string_view name(entry->d_name);
    if (name.ends_with(".tmp")) names.emplace_back(name);
  }
  ::closedir(d);
  const auto now = std::chrono::system_clock::now();
  std::size_t removed = 0;
  for (const std::string& name : names) {
    const std::string rel = std::string(fl::kTmpDir) + "/" + name;
    Fd file(::openat(root, rel.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!file.valid()) continue;
    struct stat st;
    if (::fstat(file.get(), &st) != 0) continue;
    const auto mtime = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(st.st_mtim.tv_sec) +
            std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    if (now - mtime < kStaleTempAge) continue;
    if (FlockRetrying(file.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live writer's
    if (::unlinkat(root, rel.c_str(), 0) == 0) ++removed;
  }
  return removed;
}

// Checks DIR/FORMAT, or writes it into a directory that holds nothing but what a crashed
// first Open may have left. Several processes may open a new bucket at once: FORMAT is
// published with link(2), which never replaces a FORMAT another process wrote meanwhile.
Status CheckOrWriteFormat(int root, const std::string& abs, bool sync) {
  auto fatal = [&](const std::string& what, int err) {
    return Fatal("file://" + abs + ": " + what + ": " + ErrnoText(err));
  };
  const std::string format_file(fl::kFormatFile);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Fd format(::openat(root, format_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (format.valid()) {
      std::string content(256, '\0');
      ssize_t got = ::pread(format.get(), content.data(), content.size(), 0);
      if (got < 0) {
        const int e = errno;
        return fatal("cannot read " + abs + "/FORMAT", e);
      }
      content.resize(static_cast<std::size_t>(got));
      if (content == fl::kFormatLine) return Status::Ok();
      return Fatal("file://" + abs + ": FORMAT says '" + content.substr(0, content.find('\n')) +
                   "'; this build reads '" +
                   std::string(fl::kFormatLine.substr(0, fl::kFormatLine.size() - 1)) + "'");
    }
    if (const int e = errno; e != ENOENT) return fatal("cannot open " + abs + "/FORMAT", e);

    // No FORMAT: the directory must not hold anyone's files (a mistyped path must never
    // turn them into a bucket). What a concurrent first Open creates is allowed, FORMAT
    // included: it may appear after the check above, and the link below then finds it.
    Fd listing(::openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* d = listing.valid() ? ::fdopendir(listing.get()) : nullptr;
    if (d == nullptr) {
      const int e = errno;
      return fatal("cannot list the bucket directory", e);
    }
    listing.Release();
    std::string foreign;
    while (struct dirent* entry = ::readdir(d)) {
      std::string_view name(entry->d_name);
      if (name == "." || name == ".." || name == fl::kObjectsDir || name == fl::kLocksDir ||
          name == fl::kTmpDir || name == fl::kFormatFile || name == "lost+found") {
        continue;
      }
      foreign = name;
      break;
    }
    ::closedir(d);
    if (!foreign.empty()) {
      return Fatal("file://" + abs + ": the directory is not empty and is not a WasmKeep bucket " +
                   "(no FORMAT file; it holds '" + foreign + "'); use a new or empty directory");
    }
    if (::mkdirat(root, std::string(fl::kTmpDir).c_str(), 0755) != 0 && errno != EEXIST) {
      const int e = errno;
      return fatal("cannot create " + abs + "/tmp", e);
    }
    int err = 0;
    const std::string tmp = std::string(fl::kTmpDir) + "/" + RandomName(&err) + ".tmp";
    if (err != 0) return fatal("getrandom", err);
    Fd fd(::openat(root, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      const int e = errno;
      return fatal("cannot create " + abs + "/" + tmp, e);
    }
    err = WriteAll(fd.get(), fl::kFormatLine, {});
    if (err == 0 && sync && ::fdatasync(fd.get()) != 0) err = errno;
    if (err == 0 && ::linkat(root, tmp.c_str(), root, format_file.c_str(), 0) != 0) err = errno;
    ::unlinkat(root, tmp.c_str(), 0);
    if (err == 0) return Status::Ok();  // the caller syncs the directory
    if (err != EEXIST) return fatal("cannot write " + abs + "/FORMAT", err);
    // Another process published FORMAT first: check what it wrote.
  }
  return Fatal("file://" + abs + ": FORMAT keeps changing");
}

}  // namespace

Status FileStore::CheckExists(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return NotFound("file://" + dir + ": no bucket there: the directory does not exist");
  }
  if (!std::filesystem::exists(std::filesystem::path(dir) / std::string(fl::kFormatFile), ec)) {
    return NotFound("file://" + dir + ": no bucket there: the directory holds no WasmKeep bucket (no FORMAT file)");
  }
  return Status::Ok();
}

Result<std::unique_ptr<FileStore>> FileStore::Open(Env& env, std::string dir,
                                                   FileStoreOptions options) {
  if (dir.empty()) return InvalidArgument("file:// needs a directory");
  if (options.io_threads < 1 || options.io_threads > kMaxFileStoreIoThreads) {
    return InvalidArgument("file://" + dir + ": io_threads " + std::to_string(options.io_threads) +
                           " is outside 1.." + std::to_string(kMaxFileStoreIoThreads));
  }
  if (options.max_queued_ops < 1) {
    return InvalidArgument("file://" + dir + ": max_queued_ops must be at least 1");
  }
  auto fatal = [&](const std::string& where, const std::string& what, int err) {
    return Fatal("file://" + where + ": " + what + ": " + ErrnoText(err));
  };

  // mkdir -p, remembering which levels it creates: each is durable only once its parent
  // is synced, and acknowledged objects below it depend on it.
  std::error_code ec;
  std::vector<std::filesystem::path> created;
  for (auto p = std::filesystem::absolute(dir, ec).lexically_normal(); !ec && p.has_relative_path();
       p = p.parent_path()) {
    if (std::filesystem::exists(std::filesystem::symlink_status(p, ec))) break;
    if (p.filename().empty()) continue;  // a trailing '/'
    created.push_back(p);
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fatal("file://" + dir + ": cannot create the bucket directory: " + ec.message());
  if (options.fsync) {
    for (const auto& level : created) {
      Fd parent(::open(level.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!parent.valid() || ::fsync(parent.get()) != 0) {
        const int e = errno;
        return fatal(dir, "fsync of " + level.parent_path().string(), e);
      }
    }
  }
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) {
    const int e = errno;
    return fatal(dir, "cannot resolve the bucket directory", e);
  }
  auto core = std::make_shared<Core>();
  core->dir = resolved;
  core->fsync = options.fsync;
  core->before_io = options.before_io_for_test;
  core->root = Fd(::open(core->dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!core->root.valid()) {
    const int e = errno;
    return fatal(dir, "cannot open the bucket directory", e);
  }
  const int root = core->root.get();
  const std::string& abs = core->dir;

  if (Status s = CheckOrWriteFormat(root, abs, options.fsync); !s.ok()) return s;
  for (std::string_view sub : {fl::kObjectsDir, fl::kLocksDir, fl::kTmpDir}) {
    if (::mkdirat(root, std::string(sub).c_str(), 0755) != 0 && errno != EEXIST) {
      const int e = errno;
      return fatal(abs, "cannot create " + abs + "/" + std::string(sub), e);
    }
  }
  if (options.fsync && ::fsync(root) != 0) {
    const int e = errno;
    return fatal(abs, "fsync of the bucket directory", e);
  }

  // Writability (as this user, on this mount; root ignores modes but not a read-only
  // mount) and case sensitivity, with a probe file that is a temp file like any other.
  int err = 0;
  const std::string probe_name = RandomName(&err);
  if (err != 0) return fatal(abs, "getrandom", err);
  const std::string probe = std::string(fl::kTmpDir) + "/" + probe_name + "-a.tmp";
  const std::string probe_upper = std::string(fl::kTmpDir) + "/" + probe_name + "-A.tmp";
  {
    Fd fd(::openat(root, probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      const int e = errno;
      return fatal(abs, "the directory is not writable (creating " + probe + ")", e);
    }
    err = WriteAll(fd.get(), "probe", {});
    if (err == 0 && options.fsync && ::fdatasync(fd.get()) != 0) err = errno;
    struct stat st;
    const bool case_insensitive =
        ::fstatat(root, probe_upper.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    ::unlinkat(root, probe.c_str(), 0);
    if (err != 0) return fatal(abs, "the directory is not writable (writing " + probe + ")", err);
    if (case_insensitive) {
      return Fatal("file://" + abs + ": the file system is case-insensitive, so keys 'A' and " +
                   "'a' would collide");
    }
  }
  {
    const std::string lock = fl::LockPath(0);
    Fd fd(::openat(root, lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd.valid()) {
      const int e = errno;
      return fatal(abs, "cannot create lock file " + abs + "/" + lock, e);
    }
  }
  const std::size_t removed = CleanStaleTemps(root);
  return std::unique_ptr<FileStore>(new FileStore(env, std::move(core), options, removed));
}

// The worker threads: no context of their own (each job carries the Core).
class FileStore::Pool : public local_store::WorkerPool<local_store::NoContext> {
 public:
  using WorkerPool::WorkerPool;
};

FileStore::FileStore(Env& env, std::shared_ptr<Core> core, const FileStoreOptions& options,
                     std::size_t stale_temps_removed)
    : env_(env),
      core_(std::move(core)),
      stale_temps_removed_(stale_temps_removed),
      pool_(std::make_unique<Pool>(options.io_threads, options.max_queued_ops)) {}

FileStore::~FileStore() { pool_.reset(); }

std::string FileStore::Describe() const { return "file://" + core_->dir; }
const std::string& FileStore::dir() const { return core_->dir; }

// ---------------------------------------------------------------------------------------
// The asynchronous calls.

template <typename R>
Task<R> FileStore::Run(const char* op, std::string key, bool is_write, CallOptions options,
                       std::function<R(Core&)> work) {
  // After the co_await below this frame touches only locals: the store may be gone by
  // then (the caller destroyed it with this call in flight), the Env may not.
  Env& env = env_;
  const std::string where = core_->Where(op, key);
  Latch<R> latch(env, [is_write, where]() -> R {
    if (is_write) return R(UnknownOutcome(where + ": cancelled in flight; it may still land"));
    return R(Cancelled(where + ": cancelled"));
  });

  Pool::Job job;
  job.run = [core = core_, work = std::move(work), latch, &env, op, key](local_store::NoContext&) mutable {
    if (core->before_io) core->before_io(op, key);
    R result = work(*core);
    core.reset();
    // Only the Latch crosses back to the loop; its state is shared, so this is safe
    // whether or not the caller still waits, or the store still exists.
    local_store::DeliverToLoop<R>(env, std::move(latch), std::move(result));
  };
  job.abandon = [latch, &env, where]() mutable {
    local_store::DeliverToLoop<R>(
        env, std::move(latch), R(Retryable(where + ": the file store closed before the operation started")));
  };
  if (!pool_->Submit(std::move(job))) {
    co_return R(Retryable(where + ": too many operations queued for the file store's workers"));
  }
  co_return co_await local_store::AwaitOnLoop<R>(env, std::move(latch), options.timeout, where, is_write);
}

// Each operation builds its work as a named local before awaiting Run (GCC 12 mishandles
// some temporaries inside a co_await operand; see mem_store.cc).

Task<Result<GetOutput>> FileStore::Get(std::string key, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  std::function<Result<GetOutput>(Core&)> work = [key](Core& core) { return core.Get(key); };
  co_return co_await Run<Result<GetOutput>>("get", key, false, options, std::move(work));
}

Task<Result<ObjectMeta>> FileStore::Head(std::string key, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  std::function<Result<ObjectMeta>(Core&)> work = [key](Core& core) { return core.Head(key); };
  co_return co_await Run<Result<ObjectMeta>>("head", key, false, options, std::move(work));
}

Task<Result<Version>> FileStore::Put(std::string key, std::string body, Precondition condition,
                                     CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  std::function<Result<Version>(Core&)> work = [key, body = std::move(body),
                                                condition](Core& core) {
    return core.Put(key, body, condition);
  };
  co_return co_await Run<Result<Version>>("put", key, true, options, std::move(work));
}

Task<Status> FileStore::Delete(std::string key, Precondition condition, CallOptions options) {
  if (Status s = ValidateKey(key); !s.ok()) co_return s;
  if (condition.kind() == Precondition::Kind::kIfNoneMatchAny) {
    co_return InvalidArgument("a delete takes no condition or If-Match");
  }
  std::function<Status(Core&)> work = [key, condition](Core& core) {
    return core.Delete(key, condition);
  };
  co_return co_await Run<Status>("delete", key, true, options, std::move(work));
}

Task<Result<ListPage>> FileStore::List(ListOptions options, CallOptions call) {
  if (Status s = ValidateListOptions(options); !s.ok()) co_return s;
  std::function<Result<ListPage>(Core&)> work = [options](Core& core) {
    return core.List(options);
  };
  co_return co_await Run<Result<ListPage>>("list", options.prefix, false, call, std::move(work));
}

Task<Result<BucketClock>> FileStore::BucketTime(CallOptions) {
  const WallTime now = env_.WallNow();
  co_return BucketClock{now, now};
}

}  // namespace wk
