#include "tensor/storage.h"

namespace ember {

Storage::Storage(size_t nbytes, Device device)
    : data_(nbytes ? backend::allocate(device, nbytes) : nullptr), nbytes_(nbytes), device_(device) {}

Storage::~Storage() {
  if (data_) backend::deallocate(device_, data_);
}

}  // namespace ember
