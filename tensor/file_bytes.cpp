#include "tensor/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "tensor/printable.h"
#include "tensor/storage.h"

namespace ember {

namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

}  // namespace

std::vector<uint8_t> read_regular_file(const std::string& path) {
  const std::string shown = printable_path(path);  // a path from a listing or a flag may hold any bytes
  // open() would read the path only up to the NUL: another file than the one named.
  if (path.find('\0') != std::string::npos) throw IOError(shown + ": the path holds a NUL byte");
  // Non-blocking, so that a FIFO is refused below instead of waiting for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IOError(shown + ": cannot open: " + std::strerror(errno));
  const Fd closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw IOError(shown + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw IOError(shown + ": not a regular file");
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const auto size = static_cast<uint64_t>(st.st_size);
  const size_t memory = backend::host_memory_total();
  std::vector<uint8_t> bytes;
  try {
    if (memory > 0 && size > memory) throw std::bad_alloc();
    bytes.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    throw IOError(shown + ": " + std::to_string(size) + " bytes, more than this machine's memory");
  }
  for (size_t got = 0; got < bytes.size();) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)  // an error, or the file shrank while it was read
      throw IOError(shown + ": cannot read byte " + std::to_string(got) + " of " + std::to_string(size) + ": " +
                    (n < 0 ? std::strerror(errno) : "the file shrank while it was read"));
    got += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace ember
