/// @file
/// Work: the handle of an operation a process group runs asynchronously. wait() returns once it
/// finished, or raises the DistributedError it failed with; is_completed() asks without waiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace ember::dist {

/// The handle of an operation a process group runs asynchronously (see the file's description).
class Work {
 public:
  /// description names the operation in messages: "rank 0: all_reduce #3 of float32 (4, 3)".
  explicit Work(std::string description) : description_(std::move(description)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Blocks until the operation finished and rethrows its error. With a timeout, raises
  /// DistributedError when it passes first; the operation itself goes on under its own timeout.
  virtual void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  virtual bool is_completed() const;  ///< Whether the operation finished (successfully or not), without waiting.
  const std::string& description() const { return description_; }  ///< How messages name the operation.

  /// Called by the backend once: success (nullptr) or the error wait() rethrows.
  void finish(std::exception_ptr error = nullptr);

 private:
  const std::string description_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// The Work of several operations posted together (a batch of sends and receives): completed when
/// every part is; wait() waits for each in turn and raises the first failure.
class WorkList : public Work {
 public:
  /// The Work of `parts`.
  WorkList(std::string description, std::vector<std::shared_ptr<Work>> parts)
      : Work(std::move(description)), parts_(std::move(parts)) {}
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt) override;
  bool is_completed() const override;  ///< Whether every part finished.

 private:
  std::vector<std::shared_ptr<Work>> parts_;
};

}  // namespace ember::dist
