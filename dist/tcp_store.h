/// @file
/// TCPStore: the store served by rank 0 at host:port and reached by every rank over TCP. Requests
/// from one TCPStore object are serialised (one connection); each is bounded by a deadline.
#pragma once

#include <memory>
#include <mutex>

#include "dist/socket.h"
#include "dist/store.h"
#include "dist/tcp_store_server.h"

namespace ember::dist {

/// TCPStore's settings.
struct TCPStoreOptions {
  bool is_server = false;                  ///< rank 0: serve the store in a background thread of this process
  milliseconds timeout = kDefaultTimeout;  ///< bounds connecting and every wait
};

/// A Store served over TCP by rank 0 (see the file's description), as torch.distributed.TCPStore.
class TCPStore : public Store {
 public:
  /// Connects to host:port (serving it first when is_server; port 0 then picks a free port),
  /// retrying with backoff until the timeout; DistributedError naming host:port otherwise.
  TCPStore(std::string host, int port, TCPStoreOptions options = {});
  ~TCPStore() override;

  int port() const { return port_; }  ///< the port served, the kernel's choice when 0 was asked

  void set(const std::string& key, const std::string& value) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::string describe() const override;

 protected:
  std::string get_present(const std::string& key) override;

 private:
  // Sends one request and returns the reply's fields after the status; raises on a store error.
  // `reply_within` bounds the wait for the reply (a wait request's own timeout, plus a margin).
  std::vector<std::string> request(const std::vector<std::string>& fields, milliseconds reply_within);

  std::string host_;
  int port_;
  std::unique_ptr<TCPStoreServer> server_;
  std::mutex mutex_;  // one request at a time on socket_
  Socket socket_;     // closed after a failed request: the next one reconnects
};

}  // namespace ember::dist
