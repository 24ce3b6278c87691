// The server of the TCP store: one background thread, run by rank 0, that holds the keys and
// answers any number of clients over poll(2). A wait is parked until its keys appear or its
// deadline passes, so no client ever blocks another.
#pragma once

#include <memory>
#include <thread>

#include "dist/socket.h"

namespace ember::dist {

class TCPStoreServer {
 public:
  // Listens on every interface at port (0: a free port the kernel picks; see port()).
  explicit TCPStoreServer(int port);
  // Stops the thread and closes every connection; clients then see "closed the connection".
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  int port() const { return port_; }

 private:
  struct State;
  void run();

  Socket listener_;
  Socket wake_;  // an eventfd: written by the destructor to end the poll loop
  int port_;
  std::unique_ptr<State> state_;  // touched only by the thread
  std::thread thread_;
};

}  // namespace ember::dist
