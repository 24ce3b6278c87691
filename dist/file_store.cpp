#include "dist/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "dist/error.h"

namespace ember::dist {

// flock(2) on the store file for the scope: exclusive for writers, shared for readers.
class FileStore::Lock {
 public:
  Lock(const FileStore& store, int operation) : fd_(store.fd_) {
    while (::flock(fd_, operation) != 0)
      if (errno != EINTR) throw DistributedError(store.describe() + ": flock failed: " + std::strerror(errno));
  }
  ~Lock() { ::flock(fd_, LOCK_UN); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  int fd_;
};

namespace {

// A record: key length and value length (u32, host order: one machine family shares the file), key,
// value; a deletion's value length is kDeleted and no value follows.
constexpr uint32_t kDeleted = UINT32_MAX;

std::string record(const std::string& key, const std::string* value) {
  std::string out(8, '\0');
  const auto k = static_cast<uint32_t>(key.size()), v = value ? static_cast<uint32_t>(value->size()) : kDeleted;
  std::memcpy(out.data(), &k, 4);
  std::memcpy(out.data() + 4, &v, 4);
  return out + key + (value ? *value : "");
}

constexpr milliseconds kPollInterval(10);

}  // namespace

FileStore::FileStore(std::string path, milliseconds timeout)
    : path_(std::move(path)), fd_(::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw DistributedError(describe() + ": cannot open: " + std::strerror(errno));
  set_timeout(timeout);
}

FileStore::~FileStore() { ::close(fd_); }

void FileStore::refresh() {
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) throw DistributedError(describe() + ": cannot seek: " + std::strerror(errno));
  std::string bytes(static_cast<size_t>(end - read_up_to_), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done, read_up_to_ + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw DistributedError(describe() + ": cannot read: " + (n < 0 ? std::strerror(errno) : "file shrank"));
    done += static_cast<size_t>(n);
  }
  size_t at = 0;
  while (bytes.size() - at >= 8) {
    uint32_t k, v;
    std::memcpy(&k, bytes.data() + at, 4);
    std::memcpy(&v, bytes.data() + at + 4, 4);
    const size_t value_bytes = v == kDeleted ? 0 : v;
    if (bytes.size() - at - 8 < size_t{k} + value_bytes)
      throw DistributedError(describe() + ": truncated record at byte " + std::to_string(read_up_to_ + at) +
                             " (is another program writing the file?)");
    if (v == kDeleted) values_.erase(bytes.substr(at + 8, k));
    else values_[bytes.substr(at + 8, k)] = bytes.substr(at + 8 + k, v);
    at += 8 + size_t{k} + value_bytes;
  }
  if (at != bytes.size())
    throw DistributedError(describe() + ": truncated record at byte " + std::to_string(read_up_to_ + at));
  read_up_to_ = end;
}

void FileStore::append(const std::string& key, const std::string* value) {
  const std::string bytes = record(key, value);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DistributedError(describe() + ": cannot write: " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  if (value) values_[key] = *value;
  else values_.erase(key);
  read_up_to_ += static_cast<off_t>(bytes.size());
}

void FileStore::set(const std::string& key, const std::string& value) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, LOCK_EX);
  refresh();
  append(key, &value);
}

std::string FileStore::get_present(const std::string& key) {
  std::lock_guard guard(mutex_);
  return values_.at(key);
}

std::vector<std::string> FileStore::missing(const std::vector<std::string>& keys) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, LOCK_SH);
  refresh();
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!values_.count(k)) out.push_back(k);
  return out;
}

void FileStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto gone = missing(keys);
    if (gone.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) throw_wait_timeout(gone, timeout);
    std::this_thread::sleep_for(kPollInterval);
  }
}

bool FileStore::check(const std::vector<std::string>& keys) { return missing(keys).empty(); }

bool FileStore::delete_key(const std::string& key) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, LOCK_EX);
  refresh();
  if (!values_.count(key)) return false;
  append(key, nullptr);
  return true;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, LOCK_EX);
  refresh();
  const auto it = values_.find(key);
  const int64_t sum = added_value(key, it == values_.end() ? nullptr : &it->second, delta);
  const std::string text = std::to_string(sum);
  append(key, &text);
  return sum;
}

std::string FileStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, LOCK_EX);
  refresh();
  const auto it = values_.find(key);
  bool store_it = false;
  std::string now = compare_set_result(it == values_.end() ? nullptr : &it->second, expected, desired, &store_it);
  if (store_it) append(key, &now);
  return now;
}

}  // namespace ember::dist
