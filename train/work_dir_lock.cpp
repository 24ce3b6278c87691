#include "train/work_dir_lock.h"
#include "tensor/printable.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace ember::train {

namespace {

// The pid the holder wrote into the lock file, or "" when there is none yet.
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) pid += buf[i];
  return pid;
}

// Whether `fd` is still the file at `path`: a holder that released the lock may have removed it
// after this process opened it, and a lock on the removed file would lock nothing.
bool still_at(int fd, const std::string& path) {
  struct stat opened, current;
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &current) == 0 && opened.st_dev == current.st_dev &&
         opened.st_ino == current.st_ino;
}

}  // namespace

WorkDirLock::WorkDirLock(const std::string& work_dir) : path_((std::filesystem::path(work_dir) / ".lock").string()) {
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IOError("cannot open the lock file " + printable_path(path_) + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string pid = holder_pid(fd_);
      ::close(fd_);
      if (err != EWOULDBLOCK) throw IOError("cannot lock " + printable_path(path_) + ": " + std::strerror(err));
      throw WorkDirInUse("work dir " + work_dir + " is in use by another run" + (pid.empty() ? "" : " (pid " + pid + ")") +
                         "; wait for it to end or choose another work dir");
    }
    if (still_at(fd_, path_)) break;
    ::close(fd_);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  const ssize_t written = ::ftruncate(fd_, 0) == 0 ? ::pwrite(fd_, pid.data(), pid.size(), 0) : -1;
  if (written != static_cast<ssize_t>(pid.size())) {
    const std::string why = written < 0 ? std::strerror(errno) : "short write";
    ::unlink(path_.c_str());
    ::close(fd_);
    throw IOError("cannot write the lock file " + printable_path(path_) + ": " + why);
  }
}

WorkDirLock::~WorkDirLock() {
  // Removed while still held: a process that opened it meanwhile finds it gone (still_at) and opens anew.
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace ember::train
