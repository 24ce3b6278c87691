// A full disk for tests, preloaded into a program (LD_PRELOAD=fault_inject_write.so): once
// EMBER_FAULT_ENOSPC_AFTER_BYTES bytes have gone to regular files (only those whose path contains
// EMBER_FAULT_ENOSPC_PATH, when it is set), write and writev fail with ENOSPC. The write that
// reaches the limit is cut short there, as on a disk that fills up. Other files (pipes, the
// console) are untouched.
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::atomic<long long> g_written{0};  // bytes written to the files the fault applies to

// Whether the fault applies to `fd`.
bool faulted(int fd) {
  static const char* only = std::getenv("EMBER_FAULT_ENOSPC_PATH");
  struct stat st;
  if (std::getenv("EMBER_FAULT_ENOSPC_AFTER_BYTES") == nullptr || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  if (only == nullptr) return true;
  char path[4096];
  const ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), path, sizeof(path) - 1);
  if (n < 0) return false;
  path[n] = '\0';
  return std::strstr(path, only) != nullptr;
}

// The bytes of `count` that still fit under the limit.
size_t room(size_t count) {
  static const long long limit = std::atoll(std::getenv("EMBER_FAULT_ENOSPC_AFTER_BYTES"));
  const long long left = limit - g_written.load();
  return left <= 0 ? 0 : static_cast<size_t>(std::min<long long>(left, static_cast<long long>(count)));
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t count) {
  static const auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  if (count == 0 || !faulted(fd)) return real(fd, buf, count);
  const size_t allowed = room(count);
  if (allowed == 0) {
    errno = ENOSPC;
    return -1;
  }
  const ssize_t n = real(fd, buf, allowed);
  if (n > 0) g_written += n;
  return n;
}

extern "C" ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  static const auto real = next<ssize_t (*)(int, const struct iovec*, int)>("writev");
  if (!faulted(fd)) return real(fd, iov, iovcnt);
  std::string gathered;  // one write, cut as write cuts it
  for (int i = 0; i < iovcnt; ++i) gathered.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
  return write(fd, gathered.data(), gathered.size());
}
