/// @file
/// Store: the key-value rendezvous every rank of a job shares (set, get, wait, add, compare_set,
/// check). Keys and values are byte strings; every wait is bounded by a timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::dist {

using std::chrono::milliseconds;

/// The default bound of every store wait and every collective, as in PyTorch.
inline constexpr milliseconds kDefaultTimeout = std::chrono::minutes(10);

/// The key-value store the ranks of a job rendezvous through (torch.distributed.Store); TCPStore,
/// FileStore and PrefixStore implement it.
class Store {
 public:
  virtual ~Store() = default;

  /// Stores value under key, replacing any earlier value.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// The value of key, waiting for it up to timeout().
  std::string get(const std::string& key);
  /// Returns once every key exists; DistributedError naming the missing keys after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, milliseconds timeout) = 0;
  /// wait(keys, timeout()).
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  /// Adds delta to the decimal integer stored under key (0 when absent) and returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// Sets key to desired when its value is expected (or when it is absent and expected is empty);
  /// returns the value it holds afterwards (expected itself when absent and expected is not empty).
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  /// Whether every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Removes key; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;
  /// Where the store lives, for messages: "TCP store at 10.0.0.1:29501", "file store /shared/f".
  virtual std::string describe() const = 0;

  milliseconds timeout() const { return timeout_; }  ///< The bound of get() and of wait() without a timeout.
  void set_timeout(milliseconds timeout);            ///< Sets timeout(); ValueError unless positive.

 protected:
  /// The value of a key known to exist (get() waited for it).
  virtual std::string get_present(const std::string& key) = 0;
  /// The DistributedError of a wait that ran out: names the store, the keys still missing and the timeout.
  [[noreturn]] void throw_wait_timeout(const std::vector<std::string>& missing, milliseconds timeout) const;

 private:
  milliseconds timeout_ = kDefaultTimeout;
};

/// compare_set's rule, shared by the stores: the value key holds afterwards, given `current`
/// (nullptr when absent); sets *store_it when desired must be written.
std::string compare_set_result(const std::string* current, const std::string& expected, const std::string& desired,
                               bool* store_it);
/// add's rule: the decimal value stored under key after adding delta to `current` (nullptr when absent).
int64_t added_value(const std::string& key, const std::string* current, int64_t delta);

}  // namespace ember::dist
