/// @file
/// train::WorkDirLock: one run at a time in a work dir. An exclusive flock on "<work_dir>/.lock", which
/// holds the holder's pid for the message of a run refused. The kernel drops the lock when its process
/// dies, so a run killed with SIGKILL leaves no stale lock behind.
#pragma once

#include <string>

#include "tensor/atomic_file.h"

namespace ember::train {

/// Another process holds the work dir.
class WorkDirInUse : public IOError {
  using IOError::IOError;
};

/// Holds a work dir for one run while alive.
class WorkDirLock {
 public:
  /// Locks `work_dir` (an existing directory) without waiting: WorkDirInUse when another process
  /// holds it (this one's other locks included), IOError when the lock file cannot be made.
  explicit WorkDirLock(const std::string& work_dir);
  /// Removes the lock file, then releases the lock.
  ~WorkDirLock();
  WorkDirLock(const WorkDirLock&) = delete;
  WorkDirLock& operator=(const WorkDirLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace ember::train
