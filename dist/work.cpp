#include "dist/work.h"

#include <algorithm>

#include "dist/error.h"

namespace ember::dist {

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mutex_);
  const auto finished = [this] { return done_; };
  if (!timeout) {
    done_cv_.wait(lock, finished);
  } else if (!done_cv_.wait_for(lock, *timeout, finished)) {
    throw DistributedError(description_ + ": not completed within the wait's " + std::to_string(timeout->count()) +
                           " ms (the operation goes on under its own timeout)");
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::is_completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

void WorkList::wait(std::optional<std::chrono::milliseconds> timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = timeout ? std::optional(clock::now() + *timeout) : std::nullopt;
  for (const auto& part : parts_) {
    if (!deadline) {
      part->wait();
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - clock::now());
    part->wait(std::max(left, std::chrono::milliseconds(0)));
  }
}

bool WorkList::is_completed() const {
  for (const auto& part : parts_)
    if (!part->is_completed()) return false;
  return true;
}

}  // namespace ember::dist
