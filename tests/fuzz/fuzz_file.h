// What every fuzz target shares: the input as a file the readers open by path (a memfd, so no disk
// is touched), and the rule that a reader may only fail with one of ember's typed errors.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensor/error.h"

namespace ember::fuzz {

// One in-memory file, refilled with each input; `path` opens it like any other file.
class InputFile {
 public:
  InputFile() : fd_(::memfd_create("ember-fuzz-input", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& fill(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 || (size > 0 && ::pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size))) {
      std::perror("memfd write");
      std::abort();
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// Runs `read`; ember's typed errors are the expected answer to a bad file. Any other exception
// escapes to libFuzzer, which reports it as a crash with the input that caused it.
template <class F>
void expect_clean(F&& read) {
  try {
    read();
  } catch (const ember::Error&) {
  }
}

}  // namespace ember::fuzz
