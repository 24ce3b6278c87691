/// @file
/// FileStore: a store in one file on a filesystem every rank shares (NFS, Lustre, a local /tmp).
/// Each write appends a record under an exclusive flock(2); readers re-read what was appended since
/// their last look, so the last record of a key is its value (or its deletion). Waits poll the file,
/// which only grows: it is for a job's rendezvous, not a database.
#pragma once

#include <mutex>
#include <unordered_map>

#include "dist/store.h"

namespace ember::dist {

/// A Store in a shared file (see the file's description).
class FileStore : public Store {
 public:
  /// Opens (creating it if needed) the store file at path.
  explicit FileStore(std::string path, milliseconds timeout = kDefaultTimeout);
  ~FileStore() override;

  void set(const std::string& key, const std::string& value) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::string describe() const override { return "file store " + path_; }

 protected:
  std::string get_present(const std::string& key) override;

 private:
  class Lock;
  // Reads the records appended since the last refresh into values_ (under a lock held by the caller).
  void refresh();
  // Appends key's record: its value, or its deletion when value is null.
  void append(const std::string& key, const std::string* value);
  std::vector<std::string> missing(const std::vector<std::string>& keys);

  std::string path_;
  int fd_;
  std::mutex mutex_;  // threads of this process; flock orders the processes
  std::unordered_map<std::string, std::string> values_;
  off_t read_up_to_ = 0;
};

}  // namespace ember::dist
