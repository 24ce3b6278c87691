/// @file
/// dist::NoSync: the guard of PyTorch's no_sync(), which DistributedDataParallel::no_sync() and
/// ZeroPartition::no_sync() return: while it lives, the wrapper does not average each backward's
/// gradients over the ranks but keeps them for the next backward (gradient accumulation).
#pragma once

#include <memory>

namespace ember::dist {

/// Sets a data-parallel wrapper's `sync` flag to false while alive and restores it at destruction
/// (see the file's description). Keeps the wrapper's state alive with it.
class NoSync {
 public:
  /// Turns `*sync`, a flag inside `owner`, off.
  NoSync(std::shared_ptr<void> owner, bool* sync) : owner_(std::move(owner)), sync_(sync), previous_(*sync) {
    *sync_ = false;
  }
  ~NoSync() {
    if (owner_) *sync_ = previous_;
  }
  NoSync(NoSync&& other) noexcept  ///< Moves the guard (the one moved from does nothing at destruction).
      : owner_(std::move(other.owner_)), sync_(other.sync_), previous_(other.previous_) {}
  NoSync(const NoSync&) = delete;
  NoSync& operator=(const NoSync&) = delete;
  NoSync& operator=(NoSync&&) = delete;

 private:
  std::shared_ptr<void> owner_;  // null once moved from
  bool* sync_;
  bool previous_;
};

}  // namespace ember::dist
