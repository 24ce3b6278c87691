#include "dist/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "dist/error.h"

namespace ember::dist {

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}

int Socket::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string host_port(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

int remaining_ms(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

namespace {

// Errors worth another attempt: the server is not listening yet, or the network is still coming up.
bool retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNRESET ||
         err == EAGAIN || err == EINTR;
}

// One non-blocking connect bounded by the deadline; returns 0 or the errno of the failure.
int try_connect(const addrinfo& ai, Deadline deadline, Socket* out) {
  Socket s(::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol));
  if (!s.valid()) return errno;
  if (::connect(s.fd(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno;
    pollfd p{s.fd(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready == 0) return ETIMEDOUT;
    if (ready < 0) return errno;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return err;
  }
  const int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // small request/response messages
  *out = std::move(s);
  return 0;
}

}  // namespace

Socket connect_with_retry(const std::string& host, int port, Deadline deadline) {
  const std::string where = host_port(host, port);
  const auto started = std::chrono::steady_clock::now();
  auto pause = std::chrono::milliseconds(10);
  int last_error = 0;
  for (int attempt = 1;; ++attempt) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc == 0) {
      for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        Socket s;
        last_error = try_connect(*ai, deadline, &s);
        if (last_error == 0) {
          ::freeaddrinfo(found);
          return s;
        }
      }
      ::freeaddrinfo(found);
      if (!retryable(last_error))
        throw DistributedError("cannot connect to " + where + ": " + std::strerror(last_error));
    } else if (rc != EAI_AGAIN) {
      throw DistributedError("cannot resolve the host of " + where + ": " + ::gai_strerror(rc));
    }
    if (std::chrono::steady_clock::now() + pause >= deadline) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
      const std::string cause = rc == 0 ? std::strerror(last_error) : ::gai_strerror(rc);
      throw DistributedError("cannot connect to " + where + " after " + std::to_string(attempt) + " attempts in " +
                             std::to_string(waited.count()) + " ms: " + cause +
                             " (is the process serving it, rank 0, running and listening on that port?)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

Socket listen_on(int port) {
  Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  bool ipv6 = s.valid();
  if (!ipv6) s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw DistributedError(std::string("cannot create a listening socket: ") + std::strerror(errno));
  const int one = 1, zero = 0;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // restart on a port in TIME_WAIT
  int rc;
  if (ipv6) {
    ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));  // IPv4 clients too
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  if (rc != 0 || ::listen(s.fd(), SOMAXCONN) != 0)
    throw DistributedError("cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno) +
                           (errno == EADDRINUSE ? " (another program, or torchrun's agent, holds it)" : ""));
  return s;
}

int local_port(const Socket& socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

std::string local_address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return "";
  std::string address;
  for (addrinfo* ai = found; ai != nullptr && address.empty(); ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.valid() || ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {};
    if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    const void* raw = local.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                                                  : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) address = text;
  }
  ::freeaddrinfo(found);
  return address;
}

namespace {

// Waits until the socket is ready for `events`, raising when the deadline passes first.
void await(const Socket& socket, short events, Deadline deadline, const std::string& peer, const char* doing) {
  pollfd p{socket.fd(), events, 0};
  for (;;) {
    const int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready > 0) return;
    if (ready == 0) throw DistributedError(std::string("timed out ") + doing + " " + peer);
    if (errno != EINTR) throw DistributedError(std::string("poll failed ") + doing + " " + peer + ": " + std::strerror(errno));
  }
}

}  // namespace

void send_all(const Socket& socket, const std::string& bytes, Deadline deadline, const std::string& peer) {
  size_t done = 0;
  while (done < bytes.size()) {
    await(socket, POLLOUT, deadline, peer, "sending to");
    const ssize_t n = ::send(socket.fd(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) throw DistributedError("lost the connection to " + peer + " while sending: " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

std::string recv_exact(const Socket& socket, size_t n, Deadline deadline, const std::string& peer) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    await(socket, POLLIN, deadline, peer, "waiting for a reply from");
    const ssize_t got = ::recv(socket.fd(), out.data() + done, n - done, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got == 0) throw DistributedError(peer + " closed the connection (has the process serving it exited?)");
    if (got < 0) throw DistributedError("lost the connection to " + peer + ": " + std::strerror(errno));
    done += static_cast<size_t>(got);
  }
  return out;
}

}  // namespace ember::dist
