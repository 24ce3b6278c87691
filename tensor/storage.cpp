#include "tensor/storage.h"

#include "tensor/error.h"

namespace ember {

Storage::Storage(size_t nbytes, Device device)
    : data_(nbytes ? backend::allocate(device, nbytes) : nullptr), nbytes_(nbytes), device_(device) {}

// Allocates even for 0 bytes, so that asking for pinned memory without a GPU always fails.
Storage::Storage(size_t nbytes, Pinned)
    : data_(backend::allocate_pinned(nbytes)), nbytes_(nbytes), device_(kCPU), pinned_(true) {}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), borrowed_(true), release_(std::move(release)) {}

Storage::~Storage() {
  if (borrowed_) {
    if (release_) release_();
    return;
  }
  if (!data_) return;
  if (pinned_)
    backend::deallocate_pinned(data_);
  else
    backend::deallocate(device_, data_, nbytes_);
}

void Storage::release_memory() {
  if (pinned_ || borrowed_)
    throw ValueError(std::string("Storage::release_memory: ") + (pinned_ ? "pinned" : "borrowed") +
                     " memory cannot be released");
  if (released_) return;
  if (data_) backend::deallocate(device_, data_, nbytes_);
  data_ = nullptr;
  released_ = true;
}

void Storage::restore_memory() {
  if (!released_) return;
  data_ = nbytes_ ? backend::allocate(device_, nbytes_) : nullptr;
  released_ = false;
}

void Storage::throw_released() {
  throw StateError("this tensor's memory was released (Storage::release_memory): a ZeRO stage 3 parameter is only "
                   "whole during its module's forward and backward, or under ZeroPartition::gathered()");
}

}  // namespace ember
