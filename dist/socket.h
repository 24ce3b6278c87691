// Blocking TCP sockets with deadlines, for the TCP store: connect with retry and backoff, send and
// receive whole buffers. Failures raise DistributedError sentences naming host:port.
#pragma once

#include <chrono>
#include <string>

namespace ember::dist {

using Deadline = std::chrono::steady_clock::time_point;

// An owned file descriptor, closed on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void close();

 private:
  int fd_ = -1;
};

// "host:port", with brackets around an IPv6 literal.
std::string host_port(const std::string& host, int port);

// Connects to host:port, retrying refused or unreachable attempts with growing pauses until the deadline.
Socket connect_with_retry(const std::string& host, int port, Deadline deadline);
// A listening socket on every interface at port (0: the kernel picks a free one).
Socket listen_on(int port);
// The local port a socket is bound to.
int local_port(const Socket& socket);

// Writes all of bytes, or raises naming `peer` when the connection fails or the deadline passes.
void send_all(const Socket& socket, const std::string& bytes, Deadline deadline, const std::string& peer);
// Reads exactly n bytes, or raises naming `peer` (closed connection, error, deadline).
std::string recv_exact(const Socket& socket, size_t n, Deadline deadline, const std::string& peer);

// The address of this host's interface that routes toward host (found with a UDP connect, which
// sends nothing); empty when host does not resolve or no route leads there.
std::string local_address_toward(const std::string& host);

// The milliseconds left until the deadline, at least 0.
int remaining_ms(Deadline deadline);

}  // namespace ember::dist
