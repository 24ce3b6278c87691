#include "tensor/atomic_file.h"
#include "tensor/printable.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ember {
namespace {

constexpr const char* kTemporaryInfix = ".tmp.";  // then the writer's pid

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw IOError(what + " '" + printable_path(path) + "': " + errno_text(err));
}

class FdWriter final : public AtomicWriter {
 public:
  FdWriter(int fd, const std::string& path) : fd_(fd), path_(path) {}
  void write(const void* data, size_t size) override {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write_file_atomic: cannot write", path_, errno);
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  const std::string& path_;
};

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

void write_file_atomic(const std::string& named, const std::function<void(AtomicWriter&)>& fill) {
  // open() would take the path only up to the NUL and write another file than the one named.
  if (named.find('\0') != std::string::npos) throw IOError(printable_path(named) + ": the path holds a NUL byte");
  // A symbolic link is written through, as an open() for writing would; what is there must be a
  // regular file, which the rename replaces (a device or a FIFO would become one), and keeps its mode.
  std::string path = named;
  struct stat existing {};
  bool exists = ::lstat(path.c_str(), &existing) == 0;
  if (exists && S_ISLNK(existing.st_mode)) {
    char* resolved = ::realpath(named.c_str(), nullptr);
    if (resolved == nullptr) fail("write_file_atomic: cannot follow the symbolic link", named, errno);
    path = resolved;
    std::free(resolved);
    exists = ::stat(path.c_str(), &existing) == 0;
  }
  if (exists && !S_ISREG(existing.st_mode))
    throw IOError("write_file_atomic: '" + printable_path(path) + "' is not a regular file (a directory, device or "
                  "FIFO), which a file written whole would replace");
  // Created exclusively, never through a link planted at the (predictable) temporary name; a file left
  // there by a crashed writer of the same pid is removed first.
  const std::string tmp = path + kTemporaryInfix + std::to_string(::getpid());
  const auto create = [&] { return ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644); };
  int fd = create();
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) fd = create();
  if (fd < 0) fail("write_file_atomic: cannot create", tmp, errno);
  if (exists && ::fchmod(fd, existing.st_mode & 07777) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("write_file_atomic: cannot give the new file the mode of", path, err);
  }
  bool closed = false;
  try {
    // Errors name the target: the temporary file is removed by the time anyone reads them.
    FdWriter w(fd, path);
    fill(w);
    if (::fsync(fd) != 0) fail("write_file_atomic: cannot fsync", path, errno);
    closed = true;
    if (::close(fd) != 0) fail("write_file_atomic: cannot close", path, errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("write_file_atomic: cannot rename onto", path, errno);
  } catch (...) {
    if (!closed) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // The rename is done; make it durable. The file itself is already in place.
  const std::string dir = parent_dir(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail("write_file_atomic: cannot open directory", dir, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL && err != EROFS) fail("write_file_atomic: cannot fsync directory", dir, err);
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  write_file_atomic(path, [&](AtomicWriter& w) { w.write(data, size); });
}

bool is_atomic_temporary(const std::string& file_name) {
  const size_t at = file_name.rfind(kTemporaryInfix);
  if (at == std::string::npos || at == 0) return false;
  const std::string pid = file_name.substr(at + std::strlen(kTemporaryInfix));
  return !pid.empty() && std::all_of(pid.begin(), pid.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

}  // namespace ember
