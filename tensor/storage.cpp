#include "tensor/storage.h"

namespace ember {

Storage::Storage(size_t nbytes, Device device)
    : data_(nbytes ? backend::allocate(device, nbytes) : nullptr), nbytes_(nbytes), device_(device) {}

// Allocates even for 0 bytes, so that asking for pinned memory without a GPU always fails.
Storage::Storage(size_t nbytes, Pinned)
    : data_(backend::allocate_pinned(nbytes)), nbytes_(nbytes), device_(kCPU), pinned_(true) {}

Storage::~Storage() {
  if (!data_) return;
  if (pinned_)
    backend::deallocate_pinned(data_);
  else
    backend::deallocate(device_, data_, nbytes_);
}

}  // namespace ember
