#include "dist/tcp_store_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "dist/error.h"
#include "dist/parse.h"
#include "dist/store.h"
#include "dist/tcp_store_protocol.h"

namespace ember::dist {

namespace {

struct Client {
  Socket socket;
  std::string in;   // received bytes not yet a whole message
  std::string out;  // reply bytes the socket did not take yet
};

// A wait request parked until its keys exist or its deadline passes.
struct Waiter {
  int fd;
  std::vector<std::string> keys;
  Deadline deadline;
};

std::string status(StoreStatus s) { return std::string(1, static_cast<char>(s)); }

}  // namespace

struct TCPStoreServer::State {
  std::unordered_map<std::string, std::string> values;
  std::map<int, Client> clients;
  std::vector<Waiter> waiters;

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys)
      if (!values.count(k)) out.push_back(k);
    return out;
  }

  void reply(int fd, const std::vector<std::string>& fields) {
    Client& c = clients.at(fd);
    c.out += encode_message(fields);
    flush(c);
  }

  // Sends what the socket takes now; the rest waits for POLLOUT.
  static bool flush(Client& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.socket.fd(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      c.out.erase(0, static_cast<size_t>(n));
    }
    return true;
  }

  void drop(int fd) {
    std::erase_if(waiters, [fd](const Waiter& w) { return w.fd == fd; });
    clients.erase(fd);
  }

  // Answers the waiters whose keys all exist now, and those whose deadline passed.
  void settle_waiters() {
    const auto now = std::chrono::steady_clock::now();
    std::vector<Waiter> still;
    for (auto& w : waiters) {
      const auto gone = missing(w.keys);
      if (gone.empty()) {
        reply(w.fd, {status(StoreStatus::ok)});
      } else if (now >= w.deadline) {
        std::vector<std::string> fields = {status(StoreStatus::timeout)};
        fields.insert(fields.end(), gone.begin(), gone.end());
        reply(w.fd, fields);
      } else {
        still.push_back(std::move(w));
      }
    }
    waiters = std::move(still);
  }

  void handle(int fd, const std::vector<std::string>& req) {
    const auto arity = [&](size_t n) { return req.size() == n; };
    const auto command = static_cast<StoreCommand>(req.empty() || req[0].size() != 1 ? '?' : req[0][0]);
    try {
      switch (command) {
        case StoreCommand::set:
          if (!arity(3)) break;
          values[req[1]] = req[2];
          reply(fd, {status(StoreStatus::ok)});
          return settle_waiters();
        case StoreCommand::get: {
          if (!arity(2)) break;
          const auto it = values.find(req[1]);
          if (it == values.end()) return reply(fd, {status(StoreStatus::missing)});
          return reply(fd, {status(StoreStatus::ok), it->second});
        }
        case StoreCommand::wait: {
          if (req.size() < 2) break;
          const int64_t ms = parse_integer("wait timeout", req[1], 0, INT32_MAX);
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
          waiters.push_back({fd, std::vector<std::string>(req.begin() + 2, req.end()), deadline});
          return settle_waiters();
        }
        case StoreCommand::add: {
          if (!arity(3)) break;
          const auto it = values.find(req[1]);
          const int64_t delta = parse_integer("add delta", req[2], INT64_MIN, INT64_MAX);
          const int64_t sum = added_value(req[1], it == values.end() ? nullptr : &it->second, delta);
          values[req[1]] = std::to_string(sum);
          reply(fd, {status(StoreStatus::ok), std::to_string(sum)});
          return settle_waiters();
        }
        case StoreCommand::compare_set: {
          if (!arity(4)) break;
          const auto it = values.find(req[1]);
          bool store_it = false;
          const std::string now = compare_set_result(it == values.end() ? nullptr : &it->second, req[2], req[3], &store_it);
          if (store_it) values[req[1]] = now;
          reply(fd, {status(StoreStatus::ok), now});
          return settle_waiters();
        }
        case StoreCommand::delete_key:
          if (!arity(2)) break;
          return reply(fd, {status(StoreStatus::ok), values.erase(req[1]) ? "1" : "0"});
        case StoreCommand::check:
          return reply(fd, {status(StoreStatus::ok), missing({req.begin() + 1, req.end()}).empty() ? "1" : "0"});
      }
      reply(fd, {status(StoreStatus::error), "malformed request"});
    } catch (const Error& e) {
      reply(fd, {status(StoreStatus::error), e.what()});
    }
  }

  // Takes what arrived on fd and handles each whole message; false when the client must be dropped.
  bool receive(int fd) {
    Client& c = clients.at(fd);
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    c.in.append(buf, static_cast<size_t>(n));
    while (c.in.size() >= 4) {
      const uint32_t len = decode_length(c.in);
      if (len > kMaxStoreMessageBytes) return false;
      if (c.in.size() < 4 + size_t{len}) break;
      const auto fields = decode_fields(c.in.substr(4, len));
      c.in.erase(0, 4 + size_t{len});
      if (!fields) return false;
      handle(fd, *fields);
    }
    return true;
  }
};

TCPStoreServer::TCPStoreServer(int port)
    : listener_(listen_on(port)), wake_(::eventfd(0, EFD_CLOEXEC)), port_(local_port(listener_)),
      state_(std::make_unique<State>()) {
  if (!wake_.valid()) throw DistributedError(std::string("TCP store server: eventfd failed: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  const uint64_t one = 1;
  if (::write(wake_.fd(), &one, sizeof(one)) < 0) std::perror("TCPStoreServer: waking the server thread");
  thread_.join();
}

void TCPStoreServer::run() {
  State& s = *state_;
  for (;;) {
    std::vector<pollfd> fds = {{wake_.fd(), POLLIN, 0}, {listener_.fd(), POLLIN, 0}};
    for (const auto& [fd, c] : s.clients)
      fds.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    int wait_ms = -1;
    for (const auto& w : s.waiters) wait_ms = wait_ms < 0 ? remaining_ms(w.deadline) : std::min(wait_ms, remaining_ms(w.deadline));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      std::perror("TCPStoreServer: poll");
      return;
    }
    if (fds[0].revents) return;  // the destructor asks to stop
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) s.clients[fd].socket = Socket(fd);
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      const int fd = fds[i].fd;
      bool keep = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) keep = s.receive(fd);
      if (keep && (fds[i].revents & POLLOUT)) keep = State::flush(s.clients.at(fd));
      if (!keep) s.drop(fd);
    }
    s.settle_waiters();
  }
}

}  // namespace ember::dist
