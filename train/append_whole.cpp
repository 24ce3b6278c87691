#include "train/append_whole.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensor/atomic_file.h"
#include "tensor/printable.h"

namespace ember::train {

void append_whole(int fd, std::string_view bytes, int64_t& size, const char* kind, const std::string& path) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n >= 0) {
      done += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      const std::string why = std::strerror(errno);
      [[maybe_unused]] const int cut = ::ftruncate(fd, size);
      throw IOError(std::string("cannot append to the ") + kind + " " + printable_path(path) + ": " + why);
    }
  }
  size += static_cast<int64_t>(bytes.size());
}

}  // namespace ember::train
